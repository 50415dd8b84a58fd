"""The units a fit solves in: starts given in any units are re-expressed in the units `fit` sets from the data.

A law's static units (`AbstractLaw.UNITS`: `loss_scale`, `size_scale`, ...) are the scales of its internal
coordinates; `fit` sets them from the data (`data_template`, `AbstractLaw.with_data_scales`) so that the problem
it solves is the same whatever units the user measures loss, size and tokens in. Random starts are drawn in those
units; starts the caller gives (`inits`: a grid built with `from_params`, warm starts from another fit) carry their
own, and were solved in them: Hoffmann's grid for Epoch's Chinchilla data, built in raw parameters and tokens,
ended at an objective twice Epoch's with its best start at the step cap, where the same grid in the data's units
reaches Epoch's optimum (issue 56). `starts_in_data_units` moves them, as the same functions, into the data's units.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jaxtyping import ArrayLike


def data_units(law: Any, inputs: Sequence[ArrayLike], y: ArrayLike) -> dict[str, Any]:
    """The units a fit of `law` on these data solves in: `law`'s `UNITS` keywords, as `with_data_scales` sets them
    (the law's own where it sets none). {} for a law that declares no units, or when the data are traced.

    **Arguments**:

    - `law`: a law (one, or a batch); `inputs`: the tuple passed as `law(*inputs)`; `y`: the targets.

    **Returns**: {unit keyword: value}.
    """
    scales = getattr(law, "with_data_scales", None)
    names = tuple(getattr(law, "UNITS", ()))
    if scales is None or not names or any(isinstance(a, jax.core.Tracer) for a in (*inputs, y)):
        return {}
    structure = law.structure()
    found = scales(tuple(inputs), y)
    return {k: found.get(k, structure.get(k)) for k in names}


def starts_in_data_units(inits: Any, inputs: Sequence[ArrayLike], y: ArrayLike) -> Any:
    """`inits` (a batched law: starts) re-expressed as the same functions in the units a fit on these data sets
    (`data_units`), through the law's `in_units`, when they carry no units of their own: every unit at its class
    default (a grid built with `from_params` in raw parameters and tokens). Starts that carry units (warm starts
    from another fit, a grid built in chosen units) are solved in them, as given. They are also returned as given
    when they are already in the data's units, when the data or starts are traced, or when the law cannot
    re-express them: `in_units` raises `ValueError` (a start at an infinite limit has no finite parameters to
    rebuild from), returns another structure, or turns a finite start non-finite.

    **Arguments**:

    - `inits`: the starts, with leading batch axes ([R, ...] or [T, R, ...]).
    - `inputs`: the tuple passed as `law(*inputs)`; `y`: the targets ([P] or [T, P]).

    **Returns**: the starts, in the data's units where they could be moved.
    """
    if not hasattr(inits, "in_units") or any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(inits)):
        return inits
    structure = inits.structure()
    if not _default_units(inits, structure):
        return inits
    units = data_units(inits, inputs, y)
    changes = {k: v for k, v in units.items() if structure.get(k) != v}
    if not changes:
        return inits
    try:
        moved = inits.in_units(**changes)
    except (ValueError, FloatingPointError, OverflowError):
        return inits
    if type(moved) is not type(inits) or moved.structure() != {**structure, **changes}:
        return inits
    return moved if _finite(moved) >= _finite(inits) else inits


def _default_units(law: Any, structure: dict[str, Any]) -> bool:
    """Whether every unit of `law` (`UNITS`) is its class's default: starts that carry no units of their own. Units
    are static fields (numbers, tuples or None), compared as `structure` values are."""
    defaults = {f.name: f.default for f in dataclasses.fields(type(law))}
    names = [name for name in getattr(law, "UNITS", ()) if name in structure]
    return bool(names) and all(
        defaults.get(name, dataclasses.MISSING) is not dataclasses.MISSING and structure[name] == defaults[name]
        for name in names
    )


def _finite(laws: Any) -> int:
    """How many starts of a batch have finite parameters."""
    leaves = [np.asarray(leaf) for leaf in jax.tree.leaves(eqx.filter(laws, eqx.is_array))]
    batch = laws.batch_shape()
    ok = np.ones(batch, dtype=bool)
    for leaf in leaves:
        ok &= np.all(np.isfinite(leaf.reshape(batch + (-1,))), axis=-1)
    return int(ok.sum())
