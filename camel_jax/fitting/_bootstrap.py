"""Bootstrap: thousands of refits as one compiled program, vmapped (and sharded) over resample weights."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, ArrayLike, Float, Int

from .._progress import progress_bar
from .._warn import user_stacklevel
from ..data._checks import check_inputs, check_key, check_law_inputs, check_names, check_targets
from ..laws._base import count, n_free_parameters
from ..laws._checks import check_inits
from ..solver._minimise import start_bytes, starts_side_by_side
from ..solver._options import FitOptions, Status
from ..solver._shard import LANE_AXIS, lane_mesh
from ._degenerate import limit_params
from ._fit import (
    FitResult,
    FitWarning,
    batch_axes,
    check_target_names,
    data_template,
    evaluate,
    fit,
    from_data,
    is_mixture_data,
    random_starts,
    resolve_options,
    solve_targets,
    warm_from_fit,
)
from ._identify import paper_params
from ._resample import resample_weights

if TYPE_CHECKING:  # a Calibration widens this module's bands; _calibrate itself never imports this module
    from ._calibrate import Calibration


# An infinite value stands in as this finite one while percentiles interpolate (numpy's interpolation between -inf
# and a finite value is nan); an end beyond INFINITE_END in absolute value touched it, and is infinite.
_STAND_IN = 1e300
INFINITE_END = 1e250


def _percentiles(values: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.nanpercentile(values, q, axis=0)` (two levels), exact where some values are infinite: an end that
    interpolates an infinite value is infinite (an interval that reaches a limit ends at it)."""
    clipped = np.clip(values, -_STAND_IN, _STAND_IN)  # nan (a dropped resample) stays nan
    ends = np.nanpercentile(clipped, q, axis=0)
    ends = np.where(np.abs(ends) > INFINITE_END, np.copysign(np.inf, ends), ends)
    return ends[0], ends[1]


class BootstrapResult(eqx.Module):
    """Result of `bootstrap`: one best fit per resample.

    **Fields**: `laws` (batched, leading axis B), `objectives` [B], `converged` [B] (the chosen start's),
    `n_failed` [B], `resamples` [B, P] (the resample weights, reusable for other targets or laws so that derived
    quantities stay coherent), `status` [B] (the chosen start's `Status` code; None for a result built from laws
    alone or read from a file written before it was recorded). A bootstrap of T targets has [B, T] in place of
    [B] (and laws batched [B, T]): every target refitted on the same resamples. `names`, `targets`: the mixture
    column and target names of the data (static; None when unknown), as in `FitResult`.
    """

    laws: Any
    objectives: Float[Array, " B *T"]
    converged: Array
    n_failed: Int[Array, " B *T"]
    resamples: Float[Array, "B P"]
    status: Int[Array, " B *T"] | None = None
    names: tuple[str, ...] | None = eqx.field(static=True, default=None)
    targets: tuple[str, ...] | None = eqx.field(static=True, default=None)

    @classmethod
    def of_laws(cls, laws: Any) -> BootstrapResult:
        """A batched law (e.g. a batched `Pipeline`'s loss law) viewed as resamples, for bands and plots: every
        resample counts as converged with objective 0 (the fits behind it are not known here)."""
        B = jax.tree.leaves(eqx.filter(laws, eqx.is_array))[0].shape[0]
        zeros = jnp.zeros(B)
        return cls(laws, zeros, zeros == 0, jnp.zeros(B, int), jnp.zeros((B, 0)))

    @property
    def n_resamples(self) -> int:
        return int(self.objectives.shape[0])

    @property
    def n_targets(self) -> int | None:
        """T for a bootstrap of T targets at once, else None."""
        return None if self.objectives.ndim == 1 else int(self.objectives.shape[1])

    def problems(self) -> list[str]:
        """What makes the resamples' spread unreliable, one sentence each with its cause and fix ([] when every
        resample's chosen start met its stopping rule)."""
        out = []
        converged = np.asarray(self.converged, dtype=bool)
        finite = np.isfinite(np.asarray(self.objectives))
        if (~converged).any():
            labels = ""
            if self.status is not None:
                codes = np.asarray(self.status)[~converged]
                labels = f" ({', '.join(sorted({Status(int(c)).label for c in codes}))})"
            out.append(
                f"{int((~converged).sum())} of {converged.size} resamples did not converge{labels}: intervals include "
                "where those fits stopped, not only what the data determine; warm-start the bootstrap from the fit's "
                "best starts (`inits`), or raise FitOptions(max_steps=..., polish=...)"
            )
        if (~finite).any():
            out.append(f"{int((~finite).sum())} resamples have a non-finite objective and are left out of intervals")
        return out

    def summary(self) -> dict[str, Any]:
        """`problems` first, then the number of resamples, how many converged, the median objective and, where
        recorded, the count of each `Status` of the resamples' chosen starts."""
        objectives = np.asarray(self.objectives)
        out: dict[str, Any] = {
            "problems": self.problems(),
            "n_resamples": self.n_resamples,
            "n_converged": int(np.sum(np.asarray(self.converged, dtype=bool))),
            "median_objective": float(np.median(objectives[np.isfinite(objectives)])) if self.n_resamples else np.nan,
        }
        if self.status is not None:
            codes = np.asarray(self.status)
            out["status_counts"] = {s.label: int(np.sum(codes == s)) for s in Status if np.any(codes == s)}
        return out

    def params(self, coordinates: Callable[[Any], dict[str, Any]] = paper_params) -> dict[str, Array]:
        """Constrained parameters, each with a leading resample axis [B, ...]; `coordinates`: which (a function of
        the law, default its `params()`; e.g. `cj.CAMEL.log_limit_params`); [B, T, ...] for T targets."""
        if self.n_targets is not None:
            return jax.vmap(jax.vmap(coordinates))(self.laws)
        return jax.vmap(coordinates)(self.laws)

    def interval(
        self, level: float = 0.95, coordinates: Callable[[Any], dict[str, Any]] | None = None
    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Percentile intervals of every parameter: {name: (low, high)} (non-finite resamples dropped), of the
        law's `params()` or of the given `coordinates` (as `params`). By default each resample's elements that
        stand for a limit are read at their values there (`limit_params`: a term in the log-law limit has K_i
        infinite and C minus infinite, a detached term K_i 0), so that an interval reaching a limit ends at it
        (inf: "unbounded") rather than where a resample's solver stopped (C = -1.3e34)."""
        _check_level(level)
        q = 100 * np.array([(1 - level) / 2, (1 + level) / 2])
        ok = np.isfinite(np.asarray(self.objectives))
        out = {}
        for name, v in self.params(limit_params if coordinates is None else coordinates).items():
            values = np.asarray(v, dtype=float)
            kept = np.where(ok.reshape(ok.shape + (1,) * (values.ndim - ok.ndim)), values, np.nan)
            out[name] = _percentiles(kept, q)
        return out

    def predict(self, *inputs: ArrayLike) -> Float[Array, "B P"]:
        """Every resample's predictions at `inputs`: [B, P] (or [B, T, P] for the resamples of a fit of T
        targets, whose `objectives` are [B, T])."""
        arrays = tuple(jnp.asarray(x) for x in inputs)
        return jax.vmap(lambda law: evaluate(law, arrays, self.objectives.ndim > 1))(self.laws)

    def finite(self) -> np.ndarray:
        """[B]: the resamples whose objective is finite (for every target of a fit of several)."""
        objectives = np.asarray(self.objectives)
        return np.all(np.isfinite(objectives.reshape(objectives.shape[0], -1)), axis=1)

    def prediction_interval(
        self,
        *inputs: ArrayLike,
        level: float = 0.95,
        calibration: Calibration | None = None,
        drop: ArrayLike | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Band of the predictions across resamples: (low [P], high [P]). The percentile band, or with a
        `calibration` (`cj.calibrate` on the same data) that band widened by the extrapolation error beyond the
        largest trained size and outside the trained tokens (`Calibration.widen`; unchanged inside the data).
        `drop` ([B, P] or [B, T, P] booleans): resamples' predictions left out of the band at those points (a
        resample's law outside its own support: `FitResult.prediction_band`); a point every resample drops gets
        no band (NaN)."""
        _check_level(level)
        pred = np.asarray(self.predict(*inputs))
        if drop is not None:
            pred = np.where(np.broadcast_to(np.asarray(drop, bool), pred.shape), np.nan, pred)
        pred = pred[self.finite()]
        if calibration is not None:
            return calibration.widen(pred, inputs[calibration.size_index], level,
                                     tokens=calibration.tokens_of(inputs))  # fmt: skip
        with warnings.catch_warnings():  # a point every resample dropped: NaN, said by the caller
            warnings.simplefilter("ignore", RuntimeWarning)
            low, high = np.nanpercentile(pred, 100 * np.array([(1 - level) / 2, (1 + level) / 2]), axis=0)
        return low, high


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"`level` must be in (0, 1); got {level}")


def bootstrap(
    law: Any,
    inputs: Any,
    y: ArrayLike | None = None,
    *,
    key: Array,
    n_resamples: int = 1000,
    restarts: int = 8,
    inits: Any = None,
    groups: ArrayLike | None = None,
    strata: ArrayLike | None = None,
    resamples: ArrayLike | None = None,
    weights: ArrayLike | None = None,
    chunk_size: int | None = None,
    devices: Sequence[jax.Device] | None = None,
    progress: bool = True,
    options: FitOptions | None = None,
    names: Sequence[str] | None = None,
    targets: Sequence[str] | None = None,
) -> BootstrapResult:
    """Refit `law` on `n_resamples` bootstrap resamples of the points (or of `groups`, within `strata`).

    Every resample is a weight vector over the fixed table, so all resamples share one compiled program; the
    resample axis is vmapped, cut into chunks of `chunk_size` (default: as many as fit in `MEMORY_BUDGET_BYTES`,
    768 MiB, so that the process stays within 1 GiB; chunks bound memory, drive the progress bar, and Ctrl-C
    returns the chunks already finished), and sharded over `devices` (default: all local devices) with
    `jax.sharding`. Chunking or sharding changes no result beyond the last bits of arithmetic: objectives agree
    to ~1e-14 and, the objective being flat to second order at an optimum, parameters to ~sqrt(machine epsilon).

    **Arguments**:

    - `law`, `inputs`, `y`: the law template, its inputs and targets [P] (or [T, P]: every target refitted on the
      same resamples, in one program), as for `fit`. `inputs` may be a `MixtureData`: it then also gives `y`,
      `weights`, the names and, unless `groups` is passed, its `group` (so that the checkpoints of one run are
      resampled together, as `read_runs(..., checkpoint="all")` sets up).
    - `key`: draws the resamples and the random starts.
    - `n_resamples`: B, the number of resamples (ignored when `resamples` is given).
    - `restarts`: random starts per resample when no `inits` are given.
    - `inits`: a batched law used as the starts of every resample (e.g. `fit(...).laws` or its best few);
      warm starts make thousands of resamples cheap. Or the `FitResult` itself: its 4 best starts
      (`FitResult.best_laws`), and its own `FitOptions` when `options` is None.
      (A warm-started bootstrap of a fit of T targets: bootstrap each target, `one_target`.)
    - `groups`, `strata`: resample whole groups (e.g. one code per run), within strata (e.g. the model size); see
      `resample_weights`.
    - `resamples`: explicit resample weights [B, P] (e.g. `other_result.resamples`), overriding the draw.
    - `weights`: per-point weights [P] (or [T, P] for T targets) multiplied into every resample (e.g. `data.weight`).
    - `chunk_size`: resamples per compiled call (default: from the memory budget); `devices`: to shard over
      (default: all local devices); `progress`: show a progress bar over the chunks.
    - `options`: a `FitOptions`, as for `fit` (default: the fit's own when `inits` is a `FitResult`).
    - `names`, `targets`: the mixture column and target names, kept in the result (default: from a `MixtureData`).

    **Returns**: a `BootstrapResult` with every resample's best law, objective and status, and the resample
    weights it used.
    """
    inits, options = warm_from_fit(inits, options)
    options = resolve_options(options, law)
    check_key(key)
    count(restarts, "restarts")
    if groups is None and is_mixture_data(inputs):
        groups = inputs.group
    inputs, y, weights, names, targets = from_data(inputs, y, weights, names, targets)
    arrays = check_inputs(inputs)
    check_law_inputs(law, arrays)
    names = check_names(names, arrays)
    if inits is not None:
        check_inits(law, inits)
    y_arr, target_weights = _targets(y, weights, arrays[0].shape[0], options)
    targets = check_target_names(targets, y_arr.shape)
    key_draw, key_starts = jax.random.split(key)
    W = _resample_matrix(key_draw, y_arr[0], n_resamples, groups, strata, resamples, None)
    T, P = y_arr.shape
    full = (W[:, None, :] * target_weights[None]).reshape(-1, P)
    check_targets(jnp.broadcast_to(y_arr[None], (W.shape[0], T, P)).reshape(-1, P), full, P, options.log_residuals)
    n_starts = restarts if inits is None else _n_starts(law, inits)
    plan = _Plan.make(law, W, n_starts * T, chunk_size, devices)
    starts = _Starts(law if inits is not None else data_template(law, arrays, y_arr), inits, restarts)
    pieces: list[Any] = []
    chunk_args = (arrays, y_arr, target_weights, options)
    try:
        _run_chunks(pieces, plan, W, jax.random.split(key_starts, W.shape[0]), starts, chunk_args, progress)
    except KeyboardInterrupt:
        if not pieces:
            raise
        done = min(len(pieces) * plan.chunk, W.shape[0])
        warnings.warn(f"bootstrap interrupted: returning the {done} of {W.shape[0]} resamples that finished",
                      stacklevel=user_stacklevel())  # fmt: skip
        W = W[:done]
    merged = jax.tree.map(lambda *leaves: jnp.asarray(np.concatenate(leaves)[: W.shape[0]]), *pieces)
    if np.ndim(y) == 1:  # one target: drop the target axis of the chunks
        merged = jax.tree.map(lambda leaf: leaf[:, 0], merged)
    if weights is not None and np.ndim(weights) == 1:
        W = W * jnp.asarray(weights, W.dtype)[None, :]
    return BootstrapResult(merged.law, merged.objective, merged.converged, merged.n_failed, W, merged.status,
                           names=names, targets=targets)  # fmt: skip


def _targets(y: ArrayLike, weights: ArrayLike | None, n_points: int, options: FitOptions) -> tuple[Array, Array]:
    """The targets as [T, P] (T = 1 for `y` [P]) and their weights [T, P] (the per-point `weights`, broadcast)."""
    y_arr, w = check_targets(y, weights, n_points, options.log_residuals)
    return jnp.atleast_2d(y_arr), jnp.atleast_2d(w)


def _n_starts(law: Any, inits: Any) -> int:
    """The starts per target of `inits`: [R, ...] shared, or [T, R, ...] one set per target."""
    return int(jax.tree.leaves(eqx.filter(inits, eqx.is_array))[0].shape[batch_axes(law, inits) - 1])


def _resample_matrix(key, y, n_resamples, groups, strata, resamples, weights) -> Array:
    """The resample weights [B, P]: drawn (`resample_weights`) or given, times the per-point `weights`."""
    n_points = y.shape[0]
    if resamples is None:
        count(n_resamples, "n_resamples")
        for name, value in (("groups", groups), ("strata", strata)):
            if value is not None and np.asarray(value).shape != (n_points,):
                raise ValueError(f"`{name}` must have shape ({n_points},); got {np.asarray(value).shape}")
        W = resample_weights(key, n_points, n_resamples, groups=groups, strata=strata).astype(y.dtype)
    else:
        W = jnp.asarray(resamples, dtype=y.dtype)
        if W.ndim != 2 or W.shape[1] != n_points:
            raise ValueError(f"`resamples` must have shape (B, {n_points}); got {W.shape}")
    if weights is not None:
        w = jnp.asarray(weights, dtype=y.dtype)
        if w.shape != (n_points,):
            raise ValueError(f"`weights` (per point) must have shape ({n_points},); got {w.shape}")
        W = W * w[None, :]
    return W


class _Plan(eqx.Module):
    """How the B resamples are cut: `chunk` per compiled call (a multiple of the device count), `n_chunks`
    calls, and the mesh that shards a chunk over devices (None on one device)."""

    chunk: int = eqx.field(static=True)
    n_chunks: int = eqx.field(static=True)
    mesh: Mesh | None = eqx.field(static=True)

    @classmethod
    def make(cls, law: Any, W: Array, n_starts: int, chunk_size: Any, devices: Any) -> _Plan:
        B, n_points = W.shape
        devices = list(jax.local_devices() if devices is None else devices)
        if chunk_size is None:
            chunk = _chunk_from_memory(law, n_points, n_starts, W.dtype.itemsize, B)
        elif isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
            raise ValueError(
                f"`chunk_size` must be an integer >= 1 (or None: from a memory budget); got {chunk_size!r}"
            )
        else:
            chunk = int(chunk_size)
        chunk = -(-chunk // len(devices)) * len(devices)
        return cls(chunk, -(-B // chunk), lane_mesh(devices))

    def piece(self, array: Array, c: int) -> Array:
        """Chunk `c` of a per-resample array, padded with copies of its first row to a full chunk and sharded."""
        part = array[c * self.chunk : (c + 1) * self.chunk]
        if part.shape[0] < self.chunk:
            part = jnp.concatenate([part, jnp.broadcast_to(part[:1], (self.chunk - part.shape[0],) + part.shape[1:])])
        if self.mesh is not None:
            part = jax.device_put(part, NamedSharding(self.mesh, PartitionSpec(LANE_AXIS)))
        return part


class _Starts(eqx.Module):
    """Where each resample starts: the shared `inits`, or `restarts` random starts drawn from its own key."""

    template: Any
    inits: Any
    restarts: int = eqx.field(static=True)

    def __call__(self, key: Array) -> Any:
        return random_starts(self.template, key, self.restarts) if self.inits is None else self.inits


class _Best(eqx.Module):
    law: Any
    objective: Array
    converged: Array
    n_failed: Array
    status: Array


def _run_chunks(pieces, plan, W, keys, starts, chunk_args, progress) -> None:
    """Fit the resamples chunk by chunk, appending each finished chunk to `pieces` (kept if interrupted)."""
    B = W.shape[0]
    arrays, y, target_weights, options = chunk_args
    for c in range(plan.n_chunks):
        out = _bootstrap_chunk(starts, plan.piece(keys, c), arrays, y, target_weights, plan.piece(W, c), options,
                               plan.mesh)  # fmt: skip
        pieces.append(_to_host(out))
        if progress:
            _progress(c + 1, plan.n_chunks, min((c + 1) * plan.chunk, B), B)


@eqx.filter_jit
def _bootstrap_chunk(starts, keys, inputs, y, target_weights, W, options, mesh=None) -> _Best:
    """One chunk of resamples of T targets (y [T, P]): each (resample, target) is a fit from its own starts, its
    best start kept. The starts of all of them are lanes of one solve (`solve_targets` with a lane set per
    resample and target), so that the lanes that finish are set aside together and the chunk's time follows its
    typical lane, not its slowest. The results have leading axes [chunk, T]."""
    C, (T, P) = W.shape[0], y.shape
    per_resample = jax.vmap(starts)(keys)  # [C, R, ...] shared by the targets, or [C, T, R, ...] per target
    axes = batch_axes(starts.template, per_resample)

    def spread(leaf):
        if axes == 2:
            leaf = jnp.broadcast_to(leaf[:, None], (C, T) + leaf.shape[1:])
        return leaf.reshape((C * T,) + leaf.shape[2:])

    params, static = eqx.partition(per_resample, eqx.is_array)
    lanes_starts = eqx.combine(jax.tree.map(spread, params), static)
    Y = jnp.broadcast_to(y[None], (C, T, P)).reshape(C * T, P)
    Wt = (W[:, None, :] * target_weights[None]).reshape(C * T, P)
    lanes = solve_targets(lanes_starts, inputs, Y, Wt, options, per_target=True, mesh=mesh)
    best = _Best(
        lanes.best_value,
        lanes.take_best(lanes.objectives),
        lanes.take_best(lanes.converged),
        jnp.sum(~lanes.finite, axis=-1),
        lanes.take_best(lanes.status),
    )
    return jax.tree.map(lambda leaf: leaf.reshape((C, T) + leaf.shape[1:]), best)


def _to_host(out: Any) -> Any:
    """A chunk's results as NumPy arrays; across processes (`jax.distributed`, a mesh over `jax.devices()`), each
    process gathers every process's resamples, so that every process returns the whole result."""
    if all(getattr(leaf, "is_fully_addressable", True) for leaf in jax.tree.leaves(out)):
        return jax.device_get(out)
    return multihost_utils.process_allgather(out, tiled=True)


# Working memory a bootstrap chunk may take when `chunk_size=None` (the process's own, about 250 MB, comes on top).
MEMORY_BUDGET_BYTES = 3 << 28


def _chunk_from_memory(law: Any, n_points: int, n_starts: int, itemsize: int, n_resamples: int) -> int:
    """Resamples per chunk within MEMORY_BUDGET_BYTES: the starts a resample solves side by side
    (`starts_side_by_side`) each hold their per-point memory (`start_bytes`) and their L-BFGS and Newton state."""
    d = n_free_parameters(law)
    lanes = min(n_starts, starts_side_by_side(n_points, itemsize))
    per_resample = lanes * (start_bytes(n_points, itemsize) + itemsize * (30 * d + 4 * d * d))
    return int(max(1, min(n_resamples, MEMORY_BUDGET_BYTES // per_resample)))


def _progress(done: int, total: int, resamples: int, n_resamples: int) -> None:
    """After chunk `done` of `total`: the resamples finished so far, as the package's one progress bar."""
    progress_bar(resamples if done < total else n_resamples, n_resamples, "bootstrap", "resamples")


def bootstrap_fit(
    result: FitResult,
    *,
    key: Array,
    n_resamples: int = 200,
    groups: ArrayLike | None = None,
    strata: ArrayLike | None = None,
    options: FitOptions | None = None,
    progress: bool = False,
    starts: int | None = None,
) -> BootstrapResult:
    """The bootstrap of a finished fit, on its own data and weights, warm-started from its best starts: what
    `camel-jax fit` keeps in its file for bands and verdicts (`FitResult.prediction_band`, `decide_loss`).

    A fit of one target is `bootstrap(result.law, result.inputs, result.y, inits=result.best_laws(4),
    weights=result.weights)`. A fit of T targets [T, P] is refitted on every resample as one multi-target fit
    (every target shares the resamples, so an objective over the targets is coherent), each row warm-started at
    its target's full-data law: its laws are batched [B, T, ...] and its objectives [B, T].

    **Arguments**:

    - `result`: a `FitResult` (of `fit`).
    - `key`: draws the resamples (and the starts); `n_resamples`: B.
    - `groups`, `strata`: resample whole groups (e.g. all checkpoints of one run) within strata, as `bootstrap`.
    - `options`: the fits' `FitOptions` (default: the law's own, as `fit`'s); `progress`: a progress bar (one target).
    - `starts`: how many of each target's best starts every resample starts from (`FitResult.best_laws`; at most
      the fit's starts). Default: 4 for a fit of one target, 1 for a fit of several. Each start is a lane of the
      refit: the cost grows with it, and one start suffices where the fit's best starts agree.

    **Returns**: a `BootstrapResult`.
    """
    check_key(key)
    count(n_resamples, "n_resamples")
    k = min(count(starts, "starts") if starts is not None else 4 if result.n_targets is None else 1,
            int(np.shape(result.objectives)[-1]))  # fmt: skip
    if result.n_targets is None:
        return bootstrap(result.law, result.inputs, result.y, key=key, n_resamples=n_resamples,
                         inits=result.best_laws(k), groups=groups, strata=strata, weights=result.weights,
                         progress=progress, options=options)  # fmt: skip
    T, P = result.y.shape
    key_draw, key_fit = jax.random.split(key)
    W = _resample_matrix(key_draw, result.y[0], n_resamples, groups, strata, None, None)  # [B, P]
    B = W.shape[0]
    rows = (jnp.asarray(result.weights)[:, None, :] * W[None]).reshape(T * B, P)  # target-major
    best = result.best_laws(k) if k > 1 else jax.tree.map(lambda leaf: leaf[:, None], result.law)  # [T, k, ...]
    warm = jax.tree.map(lambda leaf: jnp.repeat(leaf, B, axis=0), best)  # [T * B, k, ...]
    template = jax.tree.map(lambda leaf: leaf[0], result.law)
    with warnings.catch_warnings():  # a resample's unconverged fit is reported by the result's `problems()`
        warnings.simplefilter("ignore", FitWarning)
        refit = fit(template, result.inputs, jnp.repeat(result.y, B, axis=0), weights=rows, key=key_fit,
                    inits=warm, options=options)  # fmt: skip

    def per_resample(leaf: Any) -> Any:  # [T * B, ...] -> [B, T, ...]
        return jnp.swapaxes(jnp.reshape(leaf, (T, B) + leaf.shape[1:]), 0, 1)

    return BootstrapResult(
        jax.tree.map(per_resample, refit.law),
        per_resample(refit.objective),
        per_resample(jnp.asarray(refit.converged)[:, 0]),
        per_resample(refit.n_failed),
        W,
        per_resample(refit.status[:, 0]),
        names=result.names,
        targets=result.targets,
    )
