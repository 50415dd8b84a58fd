"""Pictures of fits, extrapolations, optimal mixtures and designs (matplotlib, the `plot` extra).

Every function returns a `matplotlib.figure.Figure`; nothing is shown or saved unless the caller does it.
`drawn(fig)` gives the arrays a figure draws (in its axes' units), so a test or a notebook can check what a reader
would check by eye without parsing an image.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
import pandas as pd


def _figure(*args: Any, **kwargs: Any):
    """A new (figure, axes) outside pyplot's global state: notebooks display the returned figure exactly once,
    and scripts leak no open figures."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("camel_jax.plot needs matplotlib: pip install 'camel-jax[plot]'") from None
    figsize = kwargs.pop("figsize", None)
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(*args, **kwargs)


def _keep(fig: Any, **arrays: Any) -> Any:
    """Attach what `fig` draws (see `drawn`) and return the figure."""
    fig._camel_jax_drawn = arrays
    return fig


def drawn(fig: Any) -> dict[str, Any]:
    """The arrays a figure of this module draws, in its axes' units: {name: value} (each function's docstring
    says which); {} for a figure made elsewhere."""
    return dict(getattr(fig, "_camel_jax_drawn", {}))


def _colors(name: str, values: Any) -> Any:
    import matplotlib

    return matplotlib.colormaps[name](values)


def predicted_vs_observed(
    observed: Any,
    predicted: Any,
    observed_test: Any = None,
    predicted_test: Any = None,
    *,
    title: str = "",
    label: str = "value",
    groups: Sequence[str] | None = None,
    groups_test: Sequence[str] | None = None,
    ax: Any = None,
):
    """Scatter of predictions against observations (train, and held-out if given) with the identity line and
    each split's mean absolute error, as in the paper's benchmark figure. `groups` (and `groups_test`): a name per
    point (e.g. the benchmark), drawn in one colour each and named in the legend; held-out points are diamonds.

    `drawn(fig)`: `observed`, `predicted` (and `observed_test`, `predicted_test`), `legend` (the legend's labels),
    `xlabel`, `ylabel`."""
    fig, ax = (ax.figure, ax) if ax is not None else _figure(figsize=(4.6 if groups is None else 5.6, 4.0))
    obs, pred = np.asarray(observed, dtype=float), np.asarray(predicted, dtype=float)
    splits = [("train", obs, pred, groups, "o", 18)]
    if observed_test is not None:
        splits.append(("held out", np.asarray(observed_test, float), np.asarray(predicted_test, float),
                       groups_test, "D", 30))  # fmt: skip
    names = list(dict.fromkeys([str(g) for _, _, _, gs, _, _ in splits if gs is not None for g in gs]))
    palette = dict(zip(names, _colors("tab10", np.arange(len(names)) % 10)))
    for split, o, p, gs, marker, size in splits:
        mae = f"{split} (MAE {np.mean(np.abs(p - o)):.3g})"
        edge = {"edgecolor": "k", "linewidth": 0.5} if marker == "D" else {}
        if gs is None:
            color = "tab:blue" if marker == "o" else "tab:orange"
            ax.scatter(o, p, s=size, alpha=0.7, marker=marker, color=color, label=mae, **edge)
            continue
        g = np.asarray([str(x) for x in gs])
        for name in names:
            rows = g == name
            if rows.any():
                ax.scatter(o[rows], p[rows], s=size, alpha=0.75, marker=marker, color=palette[name], **edge)
        ax.scatter([], [], s=size, marker=marker, color="0.5", label=mae, **edge)  # the split's legend entry
    for name in names:
        ax.scatter([], [], s=18, color=palette[name], label=name)
    values = [v for _, o, p, _, _, _ in splits for v in (o, p)]
    lo, hi = float(min(v.min() for v in values)), float(max(v.max() for v in values))
    pad = 0.05 * (hi - lo + 1e-12)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="0.4", lw=1, ls="--", zorder=0)
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlabel(f"observed {label}")
    ax.set_ylabel(f"predicted {label}")
    ax.set_title(title)
    outside = groups is not None and len(names) > 2
    legend = ax.legend(fontsize=8, frameon=False, **({"loc": "center left", "bbox_to_anchor": (1.0, 0.5)}
                                                     if outside else {"loc": "upper left"}))  # fmt: skip
    ax.set_aspect("equal")
    fig.tight_layout()
    arrays: dict[str, Any] = {"observed": obs, "predicted": pred, "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
                              "legend": [t.get_text() for t in legend.get_texts()]}  # fmt: skip
    if observed_test is not None:
        arrays |= {"observed_test": splits[1][1], "predicted_test": splits[1][2]}
    return _keep(fig, **arrays)


def loss_vs_size(
    data: Any,
    law: Any,
    *,
    bootstrap: Any = None,
    extend_to: float | None = None,
    mixtures: Sequence[int] | None = None,
    level: float = 0.95,
    held_out: Any = None,
    title: str = "",
    log_size: bool = True,
    labels: Sequence[str] | None = None,
    ylabel: str = "loss",
):
    """Loss against model size for a few mixtures: observations, the fitted law's curve (extrapolated to
    `extend_to`), and a bootstrap band. `data` is a MixtureData with size and group; `law` a law or FitResult;
    `held_out` an optional MixtureData drawn as open markers (e.g. the held-out size); `labels` the legend's name
    of each drawn mixture (default "mixture <group>").

    The band is the percentile band of `bootstrap`'s laws: they must be fits of the same target as `law` (a
    two-stage pipeline's resampled proxy losses each follow their own resample's benchmark law, so they are not).

    `drawn(fig)`: `size` (the grid), and per drawn mixture (lists in legend order) `curve`, `low`, `high` (None
    without a bootstrap), `observed_size`, `observed`; `legend`, `xlabel`, `ylabel`."""
    from ..fitting._fit import FitResult

    law = law.law if isinstance(law, FitResult) else law
    groups = np.asarray(data.group) if data.group is not None else np.zeros(data.n_points, int)
    ids = np.unique(groups) if mixtures is None else np.asarray(mixtures)
    ids = ids[:6]
    names = [f"mixture {g}" for g in ids] if labels is None else [str(x) for x in labels]
    if len(names) != len(ids):
        raise ValueError(f"`labels` must name each drawn mixture ({len(ids)}); got {len(names)}")
    kept: dict[str, list] = {"curve": [], "low": [], "high": [], "observed_size": [], "observed": []}
    size = np.asarray(data.size)
    top = max(
        float(size.max()), extend_to or 0.0, float(np.asarray(held_out.size).max()) if held_out is not None else 0.0
    )
    grid = np.geomspace(size.min(), top, 60) if log_size else np.linspace(size.min(), top, 60)
    fig, ax = _figure(figsize=(6.0, 4.2))
    colors = _colors("viridis", np.linspace(0.05, 0.9, len(ids)))
    for color, g, name in zip(colors, ids, names):
        rows = groups == g
        r = np.asarray(data.r)[rows][0]
        r_grid = jnp.asarray(np.tile(r, (len(grid), 1)))
        curve = np.asarray(law(r_grid, jnp.asarray(grid)))
        ax.plot(grid, curve, color=color, lw=1.5)
        low = high = None
        if bootstrap is not None:
            low, high = bootstrap.prediction_interval(r_grid, jnp.asarray(grid), level=level)
            ax.fill_between(grid, low, high, color=color, alpha=0.2, lw=0)
        ax.scatter(size[rows], np.asarray(data.y)[rows], color=color, s=22, zorder=3, label=name)
        for field, value in zip(kept, (curve, low, high, size[rows], np.asarray(data.y)[rows])):
            kept[field].append(value)
        if held_out is not None and held_out.group is not None:
            h = np.asarray(held_out.group) == g
            ax.scatter(np.asarray(held_out.size)[h], np.asarray(held_out.y)[h], s=40, facecolor="none",
                       edgecolor=color, lw=1.5, zorder=3)  # fmt: skip
    _size_axis(ax, size, top, log_size)
    ax.set_xlabel("model size M")
    ax.set_ylabel(ylabel)
    band = f" with {level:.0%} bootstrap band" if bootstrap is not None else ""
    ax.set_title(title or f"fit and extrapolation{band}")
    legend = ax.legend(fontsize=8, frameon=False, ncol=2)
    fig.tight_layout()
    return _keep(fig, size=grid, legend=[t.get_text() for t in legend.get_texts()], xlabel=ax.get_xlabel(),
                 ylabel=ax.get_ylabel(), **kept)  # fmt: skip


def _size_axis(ax: Any, size: np.ndarray, top: float, log_size: bool) -> None:
    """Shade the extrapolated sizes beyond the data; on a log axis, tick every observed size and the top."""
    if size.max() < top:
        ax.axvspan(size.max(), top, color="0.92", zorder=0)
        ax.text(top, ax.get_ylim()[1], "extrapolation ", ha="right", va="top", fontsize=8, color="0.35")
    if log_size:
        from matplotlib.ticker import NullFormatter, ScalarFormatter

        ax.set_xscale("log")
        ax.set_xticks(np.unique(np.concatenate([np.unique(size), [top]])))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())


def mixture_vs_size(
    path: pd.DataFrame, *, title: str = "Optimal mixture across model sizes", true: pd.DataFrame | None = None
):
    """Optimal mixture weight of each dataset against model size (the paper's Figure "evolve"), from
    `mixture_path`'s frame (with its resample band when present); `true` (same columns) as dashed lines."""
    fig, ax = _figure(figsize=(6.0, 4.0))
    colors = _colors("tab10", np.arange(10))
    for color, (name, part) in zip(colors, path.groupby("dataset", sort=False)):
        ax.plot(part["size"], part["weight"], marker="o", color=color, label=str(name))
        if {"low", "high"} <= set(part.columns):
            ax.fill_between(part["size"], part["low"], part["high"], color=color, alpha=0.18, lw=0)
        if true is not None:
            t = true[true["dataset"] == name]
            ax.plot(t["size"], t["weight"], ls="--", color=color, lw=1)
    ax.set_xlabel("model size M")
    ax.set_ylabel("mixture weight")
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.legend(fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    return fig


def score_vs_size(
    fitted: Any,
    mixtures: Mapping[str, Any],
    *,
    key: Any,
    sizes: Any,
    observed: Mapping[str, tuple[Any, Any]] | None = None,
    true: Mapping[str, Any] | None = None,
    level: float = 0.95,
    noise: float | None = None,
    percent: bool = True,
    label: str = "score",
    title: str = "",
):
    """The score (weighted benchmark accuracy) of a few named mixtures against model size: the fitted
    pipeline's prediction, its band, the observed runs and, when known, the truth (dashed).

    `fitted` is a `fit_pipeline` result with resamples. The band is where one observed run of the mixture
    would fall: at each size, the `level` percentile band of `score_draws` over the resamples (both stages,
    with the calibrated extrapolation error past the trained sizes, as the verdict uses them), widened in
    quadrature by the scatter of one run about the fit (`noise`, default `fitted.score_noise`; a fit that
    misses the trained runs by more needs its rms error there). It is drawn in the score's
    own units, which every resample shares (unlike its proxy losses). `observed` {name: (sizes, values)};
    `true` {name: values at `sizes`}; `percent` draws accuracies in points (x100).

    `drawn(fig)`: `size`, and per mixture in legend order `curve`, `low`, `high`, `observed_size`, `observed`,
    `true` (None when not given); `trained_max` (the largest trained size), `legend`, `xlabel`, `ylabel`."""


    if fitted.pipelines is None:
        raise ValueError("`fitted` has no resamples: fit it with `fit_pipeline(..., n_resamples=B)`")
    scale = 100.0 if percent else 1.0
    grid = np.asarray(sizes, dtype=float)
    names = list(mixtures)
    R = jnp.asarray(np.stack([np.asarray(mixtures[m], dtype=float) for m in names]))
    low, high = _score_band(fitted, R, grid, key, level, fitted.score_noise if noise is None else noise)
    low, high = low * scale, high * scale
    curve = np.stack([np.asarray(fitted.pipeline.score(jnp.tile(R[k], (len(grid), 1)), jnp.asarray(grid)))
                      for k in range(len(names))]) * scale  # fmt: skip
    size_in = np.asarray(fitted.loss_fit.inputs[1])
    trained_max = float(size_in[np.asarray(jnp.any(jnp.atleast_2d(fitted.loss_fit.weights) > 0, 0))].max())
    fig, ax = _figure(figsize=(6.4, 5.0))
    colors = _colors("tab10", np.arange(10))
    kept: dict[str, list] = {"curve": [], "low": [], "high": [], "observed_size": [], "observed": [], "true": []}
    for k, (name, color) in enumerate(zip(names, colors)):
        ax.fill_between(grid, low[k], high[k], color=color, alpha=0.18, lw=0)
        ax.plot(grid, curve[k], color=color, lw=1.6, label=name)
        obs_size = obs = t = None
        if observed is not None and name in observed:
            obs_size, obs = (np.asarray(x, dtype=float) for x in observed[name])
            obs = obs * scale
            ax.scatter(obs_size, obs, color=color, s=24, zorder=3, edgecolor="k", lw=0.4)
        if true is not None and name in true:
            t = np.asarray(true[name], dtype=float) * scale
            ax.plot(grid, t, color=color, ls="--", lw=1)
        for field, value in zip(kept, (curve[k], low[k], high[k], obs_size, obs, t)):
            kept[field].append(value)
    ax.plot([], [], color="0.3", lw=1.6, label=f"fitted; {level:.0%} band of one run")
    if observed is not None:
        ax.scatter([], [], color="0.6", s=24, edgecolor="k", lw=0.4, label="observed runs")
    if true is not None:
        ax.plot([], [], color="0.3", ls="--", lw=1, label="truth")
    _size_axis(ax, size_in, float(grid.max()), True)
    ax.set_xlabel("model size M (the runs' size column)")
    ax.set_ylabel(f"{label} ({'accuracy points' if percent else 'accuracy'})")
    ax.set_title(title)
    legend = ax.legend(fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    fig.tight_layout()
    return _keep(fig, size=grid, trained_max=trained_max, legend=[t.get_text() for t in legend.get_texts()],
                 xlabel=ax.get_xlabel(), ylabel=ax.get_ylabel(), **kept)  # fmt: skip


def _score_band(fitted: Any, R: Any, grid: np.ndarray, key: Any, level: float, noise: float):
    """The `level` band of one run's score at each mixture of `R` and size of `grid`: the resamples' spread
    (calibrated draws), widened by a run's noise (`noise`, in score units) around their median."""
    from statistics import NormalDist

    from ..mixture._decide import score_draws

    # one key for every size: each resample's extrapolation error grows smoothly with size (common draws)
    draws = np.stack([np.asarray(score_draws(fitted.pipelines, R, float(M), key=key,
                                             calibration=fitted.calibration)) for M in grid], axis=-1)  # [B, K, S]
    draws = draws[np.all(np.isfinite(draws), axis=(1, 2))]
    q = 100 * np.array([(1 - level) / 2, 0.5, (1 + level) / 2])
    low, mid, high = np.percentile(draws, q, axis=0)
    z = NormalDist().inv_cdf((1 + level) / 2) * noise
    return mid - np.hypot(mid - low, z), mid + np.hypot(high - mid, z)


def mixture_decision(
    datasets: Sequence[str],
    reference: Any,
    pick: Any,
    *,
    low: Any = None,
    high: Any = None,
    true: Any = None,
    max_shift: float | None = None,
    level: float = 0.95,
    title: str = "",
):
    """One row per dataset: the reference's weight, the picked mixture's with its band (`low`, `high`, e.g. the
    percentiles of each resample's optimum), the true optimum when known, and the trust region
    reference * (1 +- `max_shift`) the search was held to.

    `drawn(fig)`: `datasets`, `reference`, `pick`, `low`, `high`, `true`, `region_low`, `region_high` (None
    when not given), `legend`, `xlabel`."""
    names = [str(d) for d in datasets]
    ref, chosen = np.asarray(reference, dtype=float), np.asarray(pick, dtype=float)
    if ref.shape != (len(names),) or chosen.shape != ref.shape:
        raise ValueError(f"`reference` and `pick` must have one weight per dataset ({len(names)})")
    fig, ax = _figure(figsize=(6.0, 0.55 * len(names) + 1.4))
    y = np.arange(len(names))[::-1].astype(float)
    region_low = region_high = None
    if max_shift is not None:
        region_low, region_high = ref * (1 - max_shift), ref * (1 + max_shift)
        ax.barh(y, region_high - region_low, left=region_low, height=0.6, color="0.9", edgecolor="0.75",
                label=f"trust region (reference +-{max_shift:.0%})")  # fmt: skip
    ax.scatter(ref, y, marker="|", s=400, color="k", lw=2, zorder=3, label="reference")
    lo = hi = None
    if low is not None and high is not None:
        lo, hi = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
        ax.errorbar(chosen, y, xerr=np.stack([chosen - lo, hi - chosen]).clip(0), fmt="none", ecolor="tab:blue",
                    capsize=4, lw=1.5, zorder=4, label=f"{level:.0%} band (each resample's optimum)")  # fmt: skip
    ax.scatter(chosen, y, s=60, color="tab:blue", zorder=5, label="pick")
    t = None
    if true is not None:
        t = np.asarray(true, dtype=float)
        ax.scatter(t, y + 0.22, marker="v", s=50, color="tab:red", zorder=5, label="true optimum")
    ax.set_yticks(y, names)
    ax.set_xlabel("mixture weight (share of training tokens)")
    ax.set_xlim(left=0)
    ax.set_title(title)
    legend = ax.legend(fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3)
    fig.tight_layout()
    return _keep(fig, datasets=names, reference=ref, pick=chosen, low=lo, high=hi, true=t, region_low=region_low,
                 region_high=region_high, legend=[x.get_text() for x in legend.get_texts()],
                 xlabel=ax.get_xlabel())  # fmt: skip


def sampling_strategies(
    sizes: Sequence[float], cost_per_run: Any, budget: float, max_per_size: int, *, title: str = ""
):
    """The five strategies' allocations under one budget, as in the paper: one circle per run, area growing
    with model size, columns = sizes."""
    from ..experiments._design import STRATEGIES, allocate

    fig, axes = _figure(1, len(STRATEGIES), figsize=(2.6 * len(STRATEGIES), 3.0), sharey=True)
    sizes_arr = np.asarray(sizes, dtype=float)
    area = 15 + 160 * (sizes_arr / sizes_arr.max()) ** 2
    allocations = {
        strategy: allocate(strategy, sizes_arr, cost_per_run, budget, max_per_size) for strategy in STRATEGIES
    }
    tallest = max(1, max(int(c.max()) for c in allocations.values()))
    for ax, strategy in zip(axes, STRATEGIES):
        counts = allocations[strategy]
        for i, c in enumerate(counts):
            ax.scatter(np.full(c, i), np.arange(c), s=area[i], color="tab:blue", alpha=0.75, edgecolor="k", lw=0.4)
        ax.set_xticks(range(len(sizes_arr)), [f"{s:g}" for s in sizes_arr], fontsize=8)
        ax.set_title(f"{strategy.replace('_', ' ')}\n{int(counts.sum())} runs", fontsize=9)
        ax.set_xlim(-0.7, len(sizes_arr) - 0.3)
        ax.set_ylim(-0.8, tallest - 0.2)
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("model size")
    axes[0].set_ylabel("runs (mixtures)")
    fig.suptitle(title or f"sampling strategies under one budget ({budget:.3g})", fontsize=10)
    fig.tight_layout()
    return fig


def _log_axis_with_plain_labels(axis) -> None:
    """Log scale with labels like 0.2, 0.5, 1 rather than 2x10^-1."""
    from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter

    axis.axes.set_yscale("log") if axis.axis_name == "y" else axis.axes.set_xscale("log")
    axis.set_major_locator(LogLocator(subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    axis.set_major_formatter(StrMethodFormatter("{x:g}"))
    axis.set_minor_formatter(NullFormatter())


def _mean_and_error(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    grouped = table.groupby(by)["error"]
    return pd.DataFrame({"mean": grouped.mean(), "se": grouped.std(ddof=1) / np.sqrt(grouped.count())}).reset_index()


def strategy_error(table: pd.DataFrame, *, metric: str = "MAPE (%)", title: str = "Held-out error vs compute budget"):
    """Mean held-out error (+- standard error) against budget, one line per strategy; `table` has columns
    strategy, budget, error."""
    stats = _mean_and_error(table, ["strategy", "budget"])
    fig, ax = _figure(figsize=(5.8, 4.0))
    for name, part in stats.groupby("strategy", sort=False):
        ax.errorbar(
            part["budget"], part["mean"], yerr=part["se"], marker="o", capsize=3, label=str(name).replace("_", " ")
        )
    ax.set_xscale("log")
    ax.set_xlabel("compute budget (FLOPs)")
    ax.set_ylabel(f"held-out {metric}")
    ax.set_title(title)
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def law_comparison(table: pd.DataFrame, *, metric: str = "MAPE (%)", title: str = "Extrapolation error by law"):
    """Mean held-out error (+- standard error) against the number of training points, one line per law and one
    panel per held-out size; `table` from `compare_laws`."""
    sizes = sorted(table["test_size"].unique())
    fig, axes = _figure(1, len(sizes), figsize=(5.0 * len(sizes), 3.8), squeeze=False)
    for ax, s in zip(axes[0], sizes):
        stats = _mean_and_error(table[table["test_size"] == s], ["law", "n_points"])
        for name, part in stats.groupby("law", sort=False):
            ax.errorbar(part["n_points"], part["mean"], yerr=part["se"], marker="o", capsize=3, label=str(name))
        _log_axis_with_plain_labels(ax.yaxis)
        ax.set_xlabel("training points n")
        ax.set_ylabel(f"held-out {metric}")
        ax.set_title(f"held-out size {s:g}")
    axes[0][0].legend(fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def influence(table: pd.DataFrame, *, top: int = 20, title: str = ""):
    """Each run's approximate leave-one-out change of one quantity, largest first: a bar per run (the `top`
    largest), from `Influence.table()`. Runs whose bars stand out are the ones the quantity rests on."""
    for column in ("loo",):
        if column not in table.columns:
            raise ValueError(f"`table` needs a {column!r} column (use Influence.table()); got {list(table.columns)}")
    shown = table.iloc[np.argsort(-np.abs(table["loo"].to_numpy()), kind="stable")[:top]]
    fig, ax = _figure(figsize=(6.4, 0.25 * len(shown) + 1.2))
    values = shown["loo"].to_numpy()
    ax.barh(np.arange(len(shown)), values, color=np.where(values > 0, "tab:red", "tab:blue"))
    ax.set_yticks(np.arange(len(shown)), [str(i) for i in shown.index])
    ax.invert_yaxis()
    ax.axvline(0.0, color="black", lw=0.8)
    quantity = table.attrs.get("quantity", "the quantity")
    ax.set_xlabel(f"change of {quantity} when the run is left out (approximate)")
    ax.set_ylabel(str(table.index.name or "run"))
    ax.set_title(title or f"Which runs {quantity} rests on")
    fig.tight_layout()
    return fig


def save_figure(fig: Any, path: str, dpi: int = 130) -> None:
    """Write a figure to `path` (figures from this module hold no pyplot state to close)."""
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
