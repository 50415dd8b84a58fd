"""Bootstrap resamples as weight vectors over a fixed table (below `_bootstrap` and `_calibrate`, which both draw
them)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Int


def resample_weights(
    key: Array,
    n_points: int,
    n_resamples: int,
    *,
    groups: ArrayLike | None = None,
    strata: ArrayLike | None = None,
) -> Int[Array, "B P"]:
    """Bootstrap resamples as integer counts per point (static shapes: one compile for any resample).

    Without `groups`, points are drawn with replacement; with `groups` (e.g. one code per training run or
    mixture) whole groups are drawn and every point of a drawn group counts once per draw. With `strata`
    (e.g. the model size of each point, constant within a group) the draws happen within each stratum, so
    each stratum keeps its number of units.

    **Arguments**:

    - `key`: a `jax.random` key; `n_points`: P; `n_resamples`: B.
    - `groups`: [P] a code per point; the unit drawn is the group (default: each point).
    - `strata`: [P] a stratum per point, constant within a group; draws happen within each stratum.

    **Returns**: integer counts [B, P], how often each point is drawn in each resample.
    """
    units = np.arange(n_points) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1]
    n_units = int(units.max()) + 1
    if strata is None:
        unit_stratum = np.zeros(n_units, dtype=int)
    else:
        strata_codes = np.unique(np.asarray(strata), return_inverse=True)[1]
        unit_stratum = np.zeros(n_units, dtype=int)
        for u in range(n_units):
            values = np.unique(strata_codes[units == u])
            if len(values) != 1:
                raise ValueError(
                    f"`strata` must be constant within each group; group {u} spans strata {values.tolist()}"
                )
            unit_stratum[u] = values[0]
    counts = jnp.zeros((n_resamples, n_units), dtype=jnp.int32)
    for s, k in zip(np.unique(unit_stratum), jax.random.split(key, len(np.unique(unit_stratum)))):
        members = np.flatnonzero(unit_stratum == s)
        draws = jax.random.randint(k, (n_resamples, len(members)), 0, len(members))
        picked = jnp.asarray(members)[draws]
        counts = counts + jax.vmap(lambda p: jnp.zeros(n_units, jnp.int32).at[p].add(1))(picked)
    return counts[:, jnp.asarray(units)]
