"""`fit_arrays`, the public name of `_fit.fit_arrays`, as a plain function: `help(cj.fit_arrays)` and the API
pages then show its own signature and docstring (the jitted object is an `equinox` wrapper, whose `help` names
the wrapper class). It adds no work inside a trace. `tests/test_docs.py` checks the signatures agree."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jaxtyping import Array, ArrayLike

from ._fit import FitResult
from ._fit import fit_arrays as _jitted
from ._options import FitOptions


def fit_arrays(
    law: Any,
    inputs: Sequence[ArrayLike],
    y: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    key: Array,
    restarts: int = 64,
    inits: Any = None,
    options: FitOptions = FitOptions(),
) -> FitResult:
    """The traceable core of `fit`: the same fit, jit-compiled, usable inside the caller's `jax.jit` and
    `jax.vmap` (e.g. vmapped over datasets of one shape).

    Shapes are checked when traced (`ValueError`); values (non-finite inputs, negative weights, a non-positive
    target under log residuals) by `eqx.error_if` when run. It issues no warnings and never raises for a
    numerical failure (see `FitResult.status`): `fit` adds the host-side checks with messages that name rows,
    the design warnings and `throw`.

    **Arguments** (as `fit`'s):
    - `law`: the law template; `inputs`: the tuple passed as `law(*inputs)`; `y`: targets [P] or [T, P].
    - `weights`: per-point weights >= 0 ([P] or [T, P]), default all 1.
    - `key`: draws the `restarts` random starts; `inits`: explicit batched starts instead.
    - `options`: a `FitOptions` (not None).

    **Returns**: a `FitResult`.
    """
    return _jitted(law, inputs, y, weights, key=key, restarts=restarts, inits=inits, options=options)
