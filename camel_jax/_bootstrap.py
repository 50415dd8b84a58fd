"""Bootstrap: thousands of refits as one compiled program, vmapped (and sharded) over resample weights."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, ArrayLike, Float, Int

from ._fit import (
    _check_inits,
    _check_inputs,
    _check_law_inputs,
    _check_targets,
    check_solver_arguments,
    fit_targets,
    solver_options,
)
from .laws._base import count, n_free_parameters


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


class BootstrapResult(eqx.Module):
    """Result of `bootstrap`: one best fit per resample.

    **Fields**: `laws` (batched, leading axis B), `objectives` [B], `converged` [B] (the chosen start's),
    `n_failed` [B], `weights` [B, P] (the resample weights, reusable for other targets or laws so that derived
    quantities stay coherent).
    """

    laws: Any
    objectives: Float[Array, " B"]
    converged: Array
    n_failed: Int[Array, " B"]
    weights: Float[Array, "B P"]

    @property
    def n_resamples(self) -> int:
        return int(self.objectives.shape[0])

    def params(self) -> dict[str, Array]:
        """Constrained parameters, each with a leading resample axis [B, ...]."""
        return jax.vmap(lambda law: law.params())(self.laws)

    def interval(self, level: float = 0.95) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Percentile intervals of every parameter: {name: (low, high)} (non-finite resamples dropped)."""
        _check_level(level)
        q = 100 * np.array([(1 - level) / 2, (1 + level) / 2])
        ok = np.isfinite(np.asarray(self.objectives))
        return {
            name: tuple(np.percentile(np.asarray(v)[ok], q, axis=0))  # type: ignore[misc]
            for name, v in self.params().items()
        }

    def predict(self, *inputs: ArrayLike) -> Float[Array, "B P"]:
        arrays = tuple(jnp.asarray(x) for x in inputs)
        return jax.vmap(lambda law: law(*arrays))(self.laws)

    def prediction_interval(self, *inputs: ArrayLike, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Percentile band of the predictions across resamples: (low [P], high [P])."""
        _check_level(level)
        pred = np.asarray(self.predict(*inputs))
        pred = pred[np.isfinite(np.asarray(self.objectives))]
        low, high = np.percentile(pred, 100 * np.array([(1 - level) / 2, (1 + level) / 2]), axis=0)
        return low, high


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1); got {level}")


def bootstrap(
    law: eqx.Module,
    inputs: Sequence[ArrayLike],
    y: ArrayLike,
    *,
    key: Array,
    n_resamples: int = 1000,
    restarts: int = 8,
    inits: eqx.Module | None = None,
    groups: ArrayLike | None = None,
    strata: ArrayLike | None = None,
    weights: ArrayLike | None = None,
    base_weights: ArrayLike | None = None,
    chunk_size: int | None = None,
    devices: Sequence[jax.Device] | None = None,
    progress: bool = True,
    delta: float = 1e-3,
    log_residuals: bool = True,
    reduction: str = "sum",
    penalty: Callable[[Any], Array] | None = None,
    max_steps: int = 1000,
    tol: float | None = None,
) -> BootstrapResult:
    """Refit `law` on `n_resamples` bootstrap resamples of the points (or of `groups`, within `strata`).

    Every resample is a weight vector over the fixed table, so all resamples share one compiled program; the
    resample axis is vmapped, cut into chunks of `chunk_size` (default: as many as fit in `MEMORY_BUDGET_BYTES`,
    1 GiB; chunks bound memory, drive the progress bar, and Ctrl-C returns the chunks already finished),
    and sharded over `devices` (default: all local devices) with `jax.sharding`. Chunking or sharding changes
    no result beyond the last bits of arithmetic: objectives agree to ~1e-14 and, the objective being flat to
    second order at an optimum, parameters to ~sqrt(machine epsilon).

    **Arguments** beyond `fit`'s:
    - `inits`: a batched law used as the starts of every resample (e.g. `fit(...).laws` or its best few);
      warm starts make thousands of resamples cheap. Otherwise `restarts` random starts per resample.
    - `weights`: explicit resample weights [B, P] (e.g. `other_result.weights`), overriding the draw.
    - `base_weights`: per-point weights [P] multiplied into every resample (e.g. `data.weight`).
    - `key`: draws the resamples and the random starts.
    """
    check_solver_arguments(restarts, max_steps, tol, 0)
    arrays = _check_inputs(inputs)
    _check_law_inputs(law, arrays)
    if inits is not None:
        _check_inits(law, inits)
    n_points = arrays[0].shape[0]
    y_arr, _ = _check_targets(y, None, n_points, log_residuals)
    if y_arr.ndim != 1:
        raise ValueError(
            f"`y` must have shape (P,) for a bootstrap; got {y_arr.shape} "
            "(bootstrap each target with the same `weights`)"
        )
    key_weights, key_starts = jax.random.split(key)
    if weights is None:
        count(n_resamples, "n_resamples")
        if groups is not None and np.asarray(groups).shape != (n_points,):
            raise ValueError(f"`groups` must have shape ({n_points},); got {np.asarray(groups).shape}")
        if strata is not None and np.asarray(strata).shape != (n_points,):
            raise ValueError(f"`strata` must have shape ({n_points},); got {np.asarray(strata).shape}")
        W = resample_weights(key_weights, n_points, n_resamples, groups=groups, strata=strata).astype(y_arr.dtype)
    else:
        W = jnp.asarray(weights, dtype=y_arr.dtype)
        if W.ndim != 2 or W.shape[1] != n_points:
            raise ValueError(f"`weights` must have shape (B, {n_points}); got {W.shape}")
    if base_weights is not None:
        W = W * jnp.asarray(base_weights, dtype=y_arr.dtype)[None, :]
    _check_targets(jnp.broadcast_to(y_arr, W.shape), W, n_points, log_residuals)
    B = W.shape[0]
    devices = list(jax.local_devices() if devices is None else devices)
    n_starts = restarts if inits is None else jax.tree.leaves(eqx.filter(inits, eqx.is_array))[0].shape[0]
    if chunk_size is None:
        chunk = _chunk_from_memory(law, n_points, n_starts, y_arr.dtype.itemsize, B)
    elif isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise ValueError(f"`chunk_size` must be an integer >= 1 (or None: from a memory budget); got {chunk_size!r}")
    else:
        chunk = int(chunk_size)
    chunk = -(-chunk // len(devices)) * len(devices)  # a multiple of the device count
    n_chunks = -(-B // chunk)
    padded = n_chunks * chunk
    W_padded = jnp.concatenate([W, jnp.broadcast_to(W[:1], (padded - B, n_points))]) if padded > B else W
    keys = jax.random.split(key_starts, B)  # per resample, independent of chunking and padding
    if padded > B:
        keys = jnp.concatenate([keys, jnp.broadcast_to(keys[:1], (padded - B,))])
    mesh = Mesh(np.array(devices), ("resample",)) if len(devices) > 1 else None
    options = solver_options(
        y_arr.dtype,
        n_starts,
        delta=delta,
        log_residuals=log_residuals,
        reduction=reduction,
        penalty=penalty,
        max_steps=max_steps,
        tol=tol,
    )
    pieces = []
    try:
        _run_chunks(pieces, n_chunks, chunk, B, W_padded, keys, mesh, law, inits, arrays, y_arr, options, progress)
    except KeyboardInterrupt:
        if not pieces:
            raise
        done = min(len(pieces) * chunk, B)
        warnings.warn(f"bootstrap interrupted: returning the {done} of {B} resamples that finished", stacklevel=2)
        W = W[:done]
        B = done
    merged = jax.tree.map(lambda *leaves: np.concatenate(leaves)[:B], *pieces)
    return BootstrapResult(
        laws=jax.tree.map(jnp.asarray, merged["law"]),
        objectives=jnp.asarray(merged["objective"]),
        converged=jnp.asarray(merged["converged"]),
        n_failed=jnp.asarray(merged["n_failed"]),
        weights=W,
    )


def _run_chunks(pieces, n_chunks, chunk, B, W_padded, keys, mesh, law, inits, arrays, y_arr, options, progress):
    """Fit the resamples chunk by chunk, appending each finished chunk to `pieces` (kept if interrupted)."""
    for c in range(n_chunks):
        W_chunk = W_padded[c * chunk : (c + 1) * chunk]
        keys_chunk = keys[c * chunk : (c + 1) * chunk]
        if mesh is not None:
            sharding = NamedSharding(mesh, PartitionSpec("resample"))
            W_chunk = jax.device_put(W_chunk, sharding)
            keys_chunk = jax.device_put(keys_chunk, sharding)
        out = _bootstrap_chunk(law, keys_chunk, inits, arrays, y_arr, W_chunk, options)
        pieces.append(jax.device_get(out))
        if progress:
            _progress(c + 1, n_chunks, min((c + 1) * chunk, B), B)


@eqx.filter_jit
def _bootstrap_chunk(template, keys, inits, inputs, y, W, options):
    """One chunk of resamples: each row of W is a fit (own random starts unless `inits`), best start kept."""

    def one(key, w):
        out = fit_targets(template, key, inits, inputs, y[None], w[None], options)
        best = out["best"][0]  # the start `law` is: finite objective and status, lowest objective
        return {
            "law": jax.tree.map(lambda leaf: leaf[0], out["law"]),
            "objective": out["objective"][0],
            "converged": out["converged"][0][best],
            "n_failed": out["n_failed"][0],
        }

    return jax.vmap(one)(keys, W)


# Working memory a bootstrap chunk may take when `chunk_size=None`.
MEMORY_BUDGET_BYTES = 1 << 30


def _chunk_from_memory(law: Any, n_points: int, n_starts: int, itemsize: int, n_resamples: int) -> int:
    """Resamples per chunk within MEMORY_BUDGET_BYTES: each start of each resample holds a few per-point arrays
    (predictions, residuals and their cotangents) and the L-BFGS memory (10 pairs of parameter vectors)."""
    d = n_free_parameters(law)
    per_resample = 4 * n_starts * itemsize * (8 * n_points + 30 * d + d * d)
    return int(max(1, min(n_resamples, MEMORY_BUDGET_BYTES // per_resample)))


def _progress(done: int, total: int, resamples: int, n_resamples: int) -> None:
    width = 30
    filled = int(width * done / total)
    sys.stderr.write(f"\rbootstrap [{'#' * filled}{'.' * (width - filled)}] {resamples}/{n_resamples} resamples")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()
