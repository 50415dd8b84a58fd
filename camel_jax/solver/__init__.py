"""`camel_jax.solver`: the solver, standing alone. `minimise(fn, starts, args, options)` minimises a scalar function
of a pytree from a batch of starts (lockstep L-BFGS with its hand-off, the damped-Newton finish, each start until
it meets its own stopping rule) and returns a `Solution` with every start's status; its derivatives are implicit,
at each start's optimum. The layer also holds the options and result codes (`FitOptions`, `Status`)
and the implicit adjoint of a maximum on the simplex. It imports no law, data or fitting module
(tests/test_layers.py): `camel_jax.fitting` builds a law's objective on data and calls `minimise` once.

Names are imported on first use (`camel_jax._lazy`)."""

import typing as _typing

if _typing.TYPE_CHECKING:
    from ._minimise import Solution as Solution
    from ._minimise import minimise as minimise

# docs/api/solver.md has one entry per name (tests/test_docs.py)
__all__ = ["minimise", "Solution"]

# Hidden from mypy, which would otherwise accept any name of the package.
if not _typing.TYPE_CHECKING:
    from .._lazy import lazy_names as _lazy_names

    __getattr__, __dir__ = _lazy_names(__name__, __file__, globals(), {})
