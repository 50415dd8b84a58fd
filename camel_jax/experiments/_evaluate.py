"""The paper's extrapolation protocol: fit on small sizes, score on a held-out size; law comparison; choice of k.

Repeats are 0/1 weight masks over one fixed table, so all repeats of one (law, n_points) are a single multi-target
fit: one compiled program, whatever the masks (Li, Gu & Zhang 2026, Appendix "Prediction of Validation Loss":
train sizes {4,5,6,7,8,10} x 11 mixtures, n in {18, ..., 66} points drawn uniformly, 20 repeats, held-out M=12).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array, ArrayLike

from ..data._containers import MixtureData
from ..fitting._fit import fit
from ..laws import CAMEL, DML, PowerLaw
from ..laws._base import count
from ..laws._camel import CAPACITY_EXPONENT
from ..solver._options import FitOptions, Status
from ._design import sample_design

METRICS = ("mape", "mae", "rmse")


def _score(pred: np.ndarray, y: np.ndarray, metric: str) -> np.ndarray:
    """Error of each row of `pred` [R, Q] against `y` [Q]: MAPE in percent, MAE or RMSE."""
    if metric == "mape":
        return 100.0 * np.mean(np.abs(pred / y[None, :] - 1.0), axis=1)
    if metric == "mae":
        return np.mean(np.abs(pred - y[None, :]), axis=1)
    return np.sqrt(np.mean((pred - y[None, :]) ** 2, axis=1))


def _score_se(pred: np.ndarray, y: np.ndarray, metric: str) -> np.ndarray:
    """The standard error of `_score` over the held-out points (NaN for RMSE, or for fewer than 2 points): the
    noise of a held-out comparison, for a one-standard-error rule."""
    if metric == "rmse" or y.shape[0] < 2:
        return np.full(pred.shape[0], np.nan)
    per_point = 100.0 * np.abs(pred / y[None, :] - 1.0) if metric == "mape" else np.abs(pred - y[None, :])
    return np.std(per_point, axis=1, ddof=1) / np.sqrt(y.shape[0])


def training_masks(
    data: MixtureData,
    train_sizes: Sequence[float],
    *,
    n_points: int | None,
    repeats: int,
    key: Array,
    strategy: str | None = None,
    budget: float | None = None,
    cost: ArrayLike | None = None,
) -> np.ndarray:
    """0/1 masks [repeats, P] choosing training rows among those at `train_sizes`.

    Uniformly `n_points` rows per repeat, or, with a `strategy`, the runs `sample_design` picks under `budget`
    given each row's `cost` (e.g. FLOPs).

    **Arguments**:

    - `data`: the runs; `train_sizes`: the sizes whose rows may be chosen.
    - `n_points`: rows per repeat (uniform draw); `repeats`: the number of masks; `key`: draws them.
    - `strategy`, `budget`, `cost`: choose the runs by a sampling strategy under a budget instead.

    **Returns**: 0/1 masks [repeats, P].
    """
    if data.size is None:
        raise ValueError("the extrapolation protocol needs model sizes: build MixtureData with `size`")
    size = np.asarray(data.size)
    pool = np.flatnonzero(np.isin(size, np.asarray(train_sizes, dtype=float)))
    if len(pool) == 0:
        raise ValueError(
            f"no rows at the training sizes {list(train_sizes)}; sizes present: {sorted(set(size.tolist()))}"
        )
    keys = jax.random.split(key, repeats)
    masks = np.zeros((repeats, len(size)))
    if strategy is None:
        if n_points is None or not 1 <= n_points <= len(pool):
            raise ValueError(f"`n_points` must be in [1, {len(pool)}] (rows at the training sizes); got {n_points}")
        for i, k in enumerate(keys):
            masks[i, pool[np.asarray(jax.random.permutation(k, len(pool)))[:n_points]]] = 1.0
        return masks
    if budget is None or cost is None:
        raise ValueError("a `strategy` needs a `budget` and a per-row `cost`")
    runs = pd.DataFrame({"size": size[pool], "cost": np.asarray(cost, dtype=float)[pool]})
    for i, k in enumerate(keys):
        masks[i, pool] = sample_design(strategy, runs, budget, k, cost="cost")
    return masks


class DMLNested(eqx.Module):
    """The DML baseline as the paper runs it (Ye et al. 2025's nested scaling).

    Per mixture, a `PowerLaw` in model size is fitted on that mixture's training runs and extrapolated to the
    target size; the DML mixture law is then fitted on those predictions and evaluated at the target mixtures.
    Mixtures with fewer than 3 training sizes are skipped (`n_skipped` in the result). Mixtures are identified
    by `data.group` (or by identical rows of r when there is no group).
    """

    n_domains: int | None = eqx.field(static=True, default=None)
    restarts: int = eqx.field(static=True, default=16)
    options: FitOptions = eqx.field(static=True, default=FitOptions(max_steps=2000))

    def extrapolate(
        self, data: MixtureData, masks: np.ndarray, test_size: float, key: Array
    ) -> tuple[np.ndarray, np.ndarray]:
        """Predictions at the rows of size `test_size` for each mask: ([R, Q], n_skipped [R])."""
        size = np.asarray(data.size)
        Y = np.broadcast_to(np.asarray(data.y), masks.shape)
        laws, skipped = self.fit_nested(np.asarray(data.r), size, _mixture_ids(data), Y, masks, test_size, key)
        r_test = jnp.asarray(np.asarray(data.r)[np.isclose(size, test_size)])
        return np.asarray(jax.vmap(lambda law: law(r_test))(laws)), skipped

    def fit_nested(
        self,
        r: np.ndarray,
        size: np.ndarray,
        groups: np.ndarray,
        Y: np.ndarray,
        masks: np.ndarray,
        target_size: float,
        key: Array,
    ) -> tuple[DML, np.ndarray]:
        """One DML law at `target_size` per row of targets Y [T, P] and 0/1 `masks` [T, P] over runs with
        mixtures r [P, n], sizes [P] and mixture ids `groups` [P]: (DML laws batched [T], n_skipped [T])."""
        ids, grid_sizes, rows = _grid(groups, size)
        T, G = masks.shape[0], len(ids)
        # one power law per (target, mixture) on the mixture's own rows: rows [G, S] index the runs (-1: none)
        present, index = rows >= 0, np.maximum(rows, 0)
        W = np.where(present[None], masks[:, index], 0.0).reshape(T * G, -1)
        usable = (W > 0).sum(axis=1) >= 3
        W_fit = np.where(usable[:, None], W, np.tile(present, (T, 1)))  # skipped targets: any valid rows
        k_size, k_mix = jax.random.split(key)
        template = PowerLaw.sample_init(k_size, scale=float(np.median(size)))
        Y_fit = np.where(present[None], np.asarray(Y)[:, index], 1.0).reshape(T * G, -1)
        power = fit(template, (grid_sizes,), Y_fit, weights=W_fit, key=k_size, restarts=self.restarts,
                    options=self.options)  # fmt: skip
        at_target = np.asarray(jax.vmap(lambda law: law(jnp.full(1, target_size)))(power.law))[:, 0].reshape(T, G)
        usable = usable.reshape(T, G)
        r_groups = r[np.argmax(groups[None, :] == ids[:, None], axis=1)]  # [G, n]
        dml = DML.sample_init(k_mix, n_datasets=r.shape[1], n_domains=self.n_domains or r.shape[1])
        y_dml = np.where(usable, at_target, 1.0)
        weights = np.where(usable.any(axis=1, keepdims=True), usable, 1.0)  # nothing usable: a flat law, all skipped
        mixture_fit = fit(
            dml,
            (jnp.asarray(r_groups),),
            y_dml,
            weights=weights,
            key=k_mix,
            restarts=self.restarts,
            options=self.options,
        )
        return mixture_fit.law, (~usable).sum(axis=1)


def _grid(groups: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mixture ids [G], sizes [S], rows [G, S]: the row of each (mixture, size), -1 where none). Repeated runs of
    one mixture at one size are a `ValueError` (average them first)."""
    ids, g = np.unique(groups, return_inverse=True)
    sizes, s = np.unique(size, return_inverse=True)
    rows = np.full((len(ids), len(sizes)), -1)
    flat = g.ravel() * len(sizes) + s.ravel()
    if len(np.unique(flat)) < len(flat):
        raise ValueError("the nested DML baseline needs at most one run per (mixture, size); average repeats first")
    rows.reshape(-1)[flat] = np.arange(len(flat))
    return ids, sizes, rows


def _mixture_ids(data: MixtureData) -> np.ndarray:
    return np.asarray(data.group) if data.group is not None else identical_rows(np.asarray(data.r))


def identical_rows(r: np.ndarray) -> np.ndarray:
    """One id per distinct mixture: rows of r [P, n] equal to 12 decimals share an id [P]."""
    return np.unique(np.round(r, 12), axis=0, return_inverse=True)[1].ravel()


def extrapolation_error(
    law: Any,
    data: MixtureData,
    train_sizes: Sequence[float],
    test_size: float | Sequence[float],
    *,
    n_points: int | None = None,
    repeats: int = 20,
    key: Array,
    metric: str = "mape",
    strategy: str | None = None,
    budget: float | None = None,
    cost: ArrayLike | None = None,
    masks: np.ndarray | None = None,
    restarts: int = 16,
    options: FitOptions | None = None,
) -> pd.DataFrame:
    """The paper's protocol for one law: choose training runs, fit, score on the held-out size(s); repeat.

    All repeats are one multi-target fit over 0/1 weight masks (`training_masks`, or `masks` given; with neither
    `n_points` nor a `strategy`, one fit on every run at `train_sizes`). `law` is a
    law template (fitted on `data.inputs` with `restarts` and `options`) or a `DMLNested`. Returns a tidy frame
    (repeat, test_size, n_train, error, converged | n_skipped) with `metric` in "mape" (percent), "mae", "rmse";
    `converged`: whether the best start, whose predictions are scored, met its stopping rule (CONVERGED or STALLED).

    **Arguments**:

    - `law`: a law template or a `DMLNested`; `data`: the runs; `train_sizes`: the sizes to fit on;
      `test_size`: the held-out size(s).
    - `n_points`, `repeats`, `key`, `strategy`, `budget`, `cost`: how the training runs are chosen (see
      `training_masks`); `masks`: explicit 0/1 masks [repeats, P] instead.
    - `metric`: "mape", "mae" or "rmse"; `restarts`, `options`: of every fit.

    **Returns**: the tidy frame above, one row per (repeat, test size).
    """
    if metric not in METRICS:
        raise ValueError(f"`metric` must be one of {METRICS}; got {metric!r}")
    count(repeats, "repeats")
    if data.size is None:
        raise ValueError("the extrapolation protocol needs model sizes: build MixtureData with `size`")
    size, y = np.asarray(data.size), np.asarray(data.y)
    test_sizes, train = _protocol_sizes(data, test_size, train_sizes, masks)
    k_masks, k_fit = jax.random.split(key)
    if masks is None and strategy is None and n_points is None:  # every run at the training sizes, once
        masks = np.isin(size, train)[None, :].astype(float)
    if masks is None:
        masks = training_masks(
            data,
            train_sizes,
            n_points=n_points,
            repeats=repeats,
            key=k_masks,
            strategy=strategy,
            budget=budget,
            cost=cost,
        )
    masks = np.asarray(masks, dtype=float) * np.asarray(data.weight)[None, :]
    predict = _predictor(law, data, masks, k_fit, restarts, options)
    rows = []
    for s in test_sizes:
        test = np.isclose(size, s)
        pred, extra = predict(float(s), test)
        se = _score_se(pred, y[test], metric)
        for i, error in enumerate(_score(pred, y[test], metric)):
            n_train = int(masks[i].astype(bool).sum())
            rows.append({"repeat": i, "test_size": s, "n_train": n_train, "error": error, "error_se": se[i]}
                        | extra[i])  # fmt: skip
    return pd.DataFrame(rows)


def _protocol_sizes(data: MixtureData, test_size: Any, train_sizes: Any, masks: Any) -> tuple[np.ndarray, np.ndarray]:
    """The held-out and training sizes of the protocol, checked: every held-out size has rows and lies beyond
    every training size (the sizes the masks train on, when given)."""
    size = np.asarray(data.size)
    test_sizes = np.atleast_1d(np.asarray(test_size, dtype=float))
    for s in test_sizes:
        if not np.any(np.isclose(size, s)):
            raise ValueError(f"no rows at the held-out size {s}; sizes present: {sorted(set(size.tolist()))}")
    train = np.atleast_1d(np.asarray(train_sizes, dtype=float))
    if masks is not None:  # the sizes the masks train on
        trained = np.atleast_2d(np.asarray(masks, dtype=float)) * np.asarray(data.weight)[None, :]
        train = np.unique(size[(trained > 0).any(axis=0)])
    if train.size == 0 or not np.all(np.isfinite(train)):
        raise ValueError(f"`train_sizes` must list the (finite) sizes to fit on; got {list(train)}")
    inside = test_sizes[test_sizes <= train.max()]
    if inside.size:
        raise ValueError(
            f"held-out size {inside[0]:g} is not beyond the training sizes {sorted(set(train.tolist()))}: the protocol "
            "scores extrapolation to larger models; hold out sizes above every training size"
        )
    return test_sizes, train


def _predictor(law: Any, data: MixtureData, masks: np.ndarray, key: Array, restarts: int, options: Any):
    """`predict(test_size, test_rows) -> (predictions [R, Q], per-repeat extra columns)` for each mask."""
    if isinstance(law, DMLNested):

        def nested(s: float, test: np.ndarray):
            pred, skipped = law.extrapolate(data, masks, s, key)
            return pred, [{"n_skipped": int(k)} for k in skipped]

        return nested
    Y = np.broadcast_to(np.asarray(data.y), masks.shape)
    result = fit(law, data.inputs, Y, weights=masks, key=key, restarts=restarts, options=options)
    # The predictions are the best start's: so is "converged" (its stopping rule met, not any start's)
    best = np.atleast_1d(np.asarray(result.best_status))
    converged = [{"converged": Status(int(code)).is_converged} for code in best]

    def fitted(s: float, test: np.ndarray):
        inputs = tuple(jnp.asarray(np.asarray(x)[test]) for x in data.inputs)
        return np.asarray(result.predict(*inputs)), converged

    return fitted


def compare_laws(
    laws: Mapping[str, Any],
    data: MixtureData,
    train_sizes: Sequence[float],
    test_size: float | Sequence[float],
    *,
    n_points: Sequence[int],
    repeats: int = 20,
    key: Array,
    metric: str = "mape",
    progress: bool = False,
    restarts: int = 16,
    options: FitOptions | None = None,
) -> pd.DataFrame:
    """Every law on the same training masks for each n in `n_points` (a paired comparison); `restarts` and
    `options` as in `extrapolation_error`.

    **Arguments**:

    - `laws`: {name: law template or `DMLNested`}; `data`, `train_sizes`, `test_size`: as in
      `extrapolation_error`.
    - `n_points`: the training-set sizes to compare at; `repeats`, `key`: the masks (shared by every law).
    - `metric`: "mape", "mae" or "rmse"; `progress`: print one line per law; `restarts`, `options`: of every fit.

    **Returns**: a tidy frame (law, n_points, repeat, test_size, error, ...).
    """
    frames = []
    for n in n_points:
        masks = training_masks(data, train_sizes, n_points=int(n), repeats=repeats, key=jax.random.fold_in(key, int(n)))
        for name, law in laws.items():
            frame = extrapolation_error(
                law,
                data,
                train_sizes,
                test_size,
                masks=masks,
                key=key,
                metric=metric,
                restarts=restarts,
                options=options,
            )
            frames.append(frame.assign(law=name, n_points=int(n)))
            if progress:
                mean = frame.groupby("test_size")["error"].mean().round(3).to_dict()
                print(f"  n={n:3d} {name:14s} mean {metric}: {mean}", flush=True)
    columns = ["law", "n_points", "repeat", "test_size", "error"]
    out = pd.concat(frames, ignore_index=True)
    return out[columns + [c for c in out.columns if c not in columns]]


def select_domains(
    k_values: Sequence[int],
    data: MixtureData,
    train_sizes: Sequence[float],
    test_size: float,
    *,
    n_points: int,
    repeats: int = 10,
    key: Array,
    tied: bool = True,
    capacity_exponent: float = CAPACITY_EXPONENT,
    size_scale: float = 1.0,
    metric: str = "mape",
    restarts: int = 16,
    options: FitOptions | None = None,
) -> tuple[int, pd.DataFrame]:
    """Choose CAMEL's number of intrinsic domains k by held-out extrapolation error (the paper's ablation).

    **Arguments**:

    - `k_values`: the numbers of domains to try; `data`, `train_sizes`, `test_size`: as in `extrapolation_error`.
    - `n_points`, `repeats`, `key`: the training masks, shared by every k.
    - `tied`, `capacity_exponent`, `size_scale`: the CAMEL template (`CAMEL.sample_init`'s structure).
    - `metric`: "mape", "mae" or "rmse"; `restarts`, `options`: of every fit.

    **Returns**: (the k with the lowest mean error, a tidy frame of errors per k).
    """
    laws = {
        f"k={k}": CAMEL.sample_init(
            key,
            n_datasets=data.n_datasets,
            n_domains=int(k),
            tied=tied,
            capacity_exponent=capacity_exponent,
            size_scale=size_scale,
        )
        for k in k_values
    }
    table = compare_laws(
        laws,
        data,
        train_sizes,
        test_size,
        n_points=[n_points],
        repeats=repeats,
        key=key,
        metric=metric,
        restarts=restarts,
        options=options,
    )
    table["k"] = table["law"].str.slice(2).astype(int)
    mean = table.groupby("k")["error"].mean()
    return int(mean.idxmin()), table


def _test_masks(key: Array, P: int, n_splits: int, test_fraction: float) -> np.ndarray:
    """[n_splits, P] masks of the held-out rows: round(test_fraction * P) rows per split, drawn from `key`."""
    n_test = int(round(test_fraction * P))
    if not (0 < test_fraction < 1) or not 1 <= n_test <= P - 2:
        raise ValueError(f"`test_fraction` must leave >= 1 test and >= 2 training rows of {P}; got {test_fraction!r}")
    perms = np.stack([np.asarray(jax.random.permutation(k, P)) for k in jax.random.split(key, n_splits)])
    test = np.zeros((n_splits, P), bool)
    np.put_along_axis(test, perms[:, :n_test], True, axis=1)
    return test


def heldout_benchmark_error(
    df: pd.DataFrame,
    losses: Sequence[str] | Mapping[str, Sequence[str]],
    benchmarks: Sequence[str],
    key: Array,
    *,
    n_splits: int = 10,
    test_fraction: float = 0.2,
    restarts: int = 16,
    monotone: bool = True,
) -> pd.DataFrame:
    """Held-out error of the loss-to-benchmark law over random train/test splits of the runs (rows of `df`).

    Each split holds out `test_fraction` of the rows (drawn from `key`), fits `LossToBenchmark` for every
    benchmark on the rest (as `fit_benchmarks` does) and scores the held-out rows. `losses` is one list of
    validation-loss columns, or a mapping {name: columns} to compare several loss sets on the *same* splits
    (paired), e.g. {"multi-loss": all_losses, "single-loss": ["loss_c4_val"]}. All splits and benchmarks of a loss
    set are one multi-target fit (each split a 0/1 weight mask). The fit is well-posed (see `LossToBenchmark`),
    so a few restarts suffice.

    **Arguments**:

    - `df`: the runs (not modified); `losses`: loss columns, or {name: columns}; `benchmarks`: accuracy columns.
    - `key`: draws the splits and the starts; `n_splits`: the number of splits; `test_fraction`: held out in each.
    - `restarts`: starts per fit; `monotone`: as for `fit_benchmarks`.

    **Returns**: a tidy frame with columns `losses` (the set's name), `split`, `benchmark`, `heldout_mae`,
    `n_test`.
    """
    from ..mixture._pipeline import fit_benchmark_laws
    from ..mixture._tables import benchmark_arrays

    sets = dict(losses) if isinstance(losses, Mapping) else {"losses": losses}
    for name, columns in sets.items():
        if isinstance(columns, str):
            raise TypeError(f"`losses` ({name!r}) must be a list of column names, not the string {columns!r}")
    if not (isinstance(n_splits, int) and n_splits >= 1):
        raise ValueError(f"`n_splits` must be an integer >= 1; got {n_splits!r}")
    P = len(df)
    k_split, k_fit = jax.random.split(key)
    test = _test_masks(k_split, P, n_splits, test_fraction)
    n_test = int(test[0].sum())
    rows = []
    for name, columns in sets.items():
        L, Y = benchmark_arrays(df, columns, benchmarks)  # [P, V], [B, P]
        B = Y.shape[0]
        Y_all = jnp.tile(Y, (n_splits, 1))  # split-major: row s * B + b
        W_all = jnp.repeat(jnp.asarray(~test, Y.dtype), B, axis=0)
        names = [f"{s}/{b}" for s in range(n_splits) for b in benchmarks]
        fits = fit_benchmark_laws(L, Y_all, W_all, names=names, key=k_fit, restarts=restarts, monotone=monotone)
        pred = np.asarray(fits.result.predict(L)).reshape(n_splits, B, P)
        error = np.abs(pred - np.asarray(Y)[None])
        for s in range(n_splits):
            for b, column in enumerate(benchmarks):
                rows.append(
                    {
                        "losses": name,
                        "split": s,
                        "benchmark": column,
                        "heldout_mae": float(np.mean(error[s, b, test[s]])),
                        "n_test": n_test,
                    }
                )
    return pd.DataFrame(rows)
