"""Checks of a law argument, on the host and before any compute: a law instance (not its class), starts of the
template's class and structure, and the shape of a law's output on given inputs (remembered per structure).

The data layer's checks (`camel_jax.data._checks`) call these; moved here from `solver/_checks.py` (issue 58: law
checks go with the laws)."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array


def output_shape(law: Any, arrays: tuple[Array, ...]) -> Any:
    """`jax.eval_shape(law, *arrays)`, remembered by the law's structure and the shapes and dtypes of its leaves and
    of the inputs: tracing a law to its shape took 3 ms of a 32-start Chinchilla fit's 18 (after compiling), and
    the same law is checked again at every fit of a bootstrap, a backtest or a notebook."""
    leaves, treedef = jax.tree.flatten(law)
    try:
        key = (treedef, tuple(map(_spec, leaves)), tuple(map(_spec, arrays)))
        hash(key)
    except TypeError:  # a leaf or static field that cannot be hashed: trace it every time
        return jax.eval_shape(law, *arrays)
    return _output_shape(key)


@functools.lru_cache(maxsize=512)
def _output_shape(key: tuple) -> Any:
    treedef, leaves, inputs = key
    return jax.eval_shape(lambda law, *arrays: law(*arrays), jax.tree.unflatten(treedef, leaves), *inputs)


def _spec(x: Any) -> Any:
    """An array's shape and dtype (what its output's shape can depend on); anything else as it is."""
    return jax.ShapeDtypeStruct(np.shape(x), jnp.result_type(x)) if hasattr(x, "shape") else x


def check_law(law: Any, name: str = "law") -> None:
    """A law instance, not its class."""
    if isinstance(law, type):
        raise TypeError(
            f"`{name}` must be a law instance, not the class {law.__name__}: pass an instance, e.g. "
            f"{law.__name__}.sample_init(jax.random.key(0), ...) or {law.__name__}.from_params(...)"
        )


def check_inits(law: Any, inits: Any) -> None:
    """Starts must be laws of the template's class and structure (only leading batch axes may differ, and the units
    a fit sets from the data, `AbstractLaw.UNITS`: warm starts from a fit carry that fit's units)."""
    units = set(getattr(law, "UNITS", ()))

    def shape_of(candidate: Any) -> dict:
        return {k: v for k, v in candidate.structure().items() if k not in units}

    if type(inits) is not type(law) or shape_of(inits) != shape_of(law):
        raise ValueError(
            f"`inits` must be laws of the same class and structure as `law` ({type(law).__name__} "
            f"{law.structure()}); got {type(inits).__name__} "
            f"{inits.structure() if hasattr(inits, 'structure') else ''}"
        )
    ndim = [np.ndim(leaf) for leaf in jax.tree.leaves(law)][:1]
    if ndim and np.ndim(jax.tree.leaves(inits)[0]) <= ndim[0]:
        raise ValueError(
            "`inits` must be a batch of starts, with a leading axis R on every array (e.g. "
            "`jax.tree.map(lambda a: a[None], law)` for one start, or `result.best_laws()`); got a single law"
        )
