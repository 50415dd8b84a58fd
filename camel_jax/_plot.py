"""Pictures of fits, extrapolations, optimal mixtures and designs (matplotlib, the `plot` extra).

Every function returns a `matplotlib.figure.Figure`; nothing is shown or saved unless the caller does it.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    ax: Any = None,
):
    """Scatter of predictions against observations (train, and held-out if given) with the identity line and
    each split's mean absolute error, as in the paper's benchmark figure."""
    fig, ax = (ax.figure, ax) if ax is not None else _figure(figsize=(4.2, 4.0))
    obs, pred = np.asarray(observed), np.asarray(predicted)
    ax.scatter(obs, pred, s=18, alpha=0.7, color="tab:blue", label=f"train (MAE {np.mean(np.abs(pred - obs)):.3g})")
    values = [obs, pred]
    if observed_test is not None:
        obs_t, pred_t = np.asarray(observed_test), np.asarray(predicted_test)
        ax.scatter(
            obs_t,
            pred_t,
            s=30,
            marker="D",
            color="tab:orange",
            edgecolor="k",
            linewidth=0.5,
            label=f"held out (MAE {np.mean(np.abs(pred_t - obs_t)):.3g})",
        )
        values += [obs_t, pred_t]
    lo, hi = float(min(v.min() for v in values)), float(max(v.max() for v in values))
    pad = 0.05 * (hi - lo + 1e-12)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="0.4", lw=1, ls="--", zorder=0)
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlabel(f"observed {label}")
    ax.set_ylabel(f"predicted {label}")
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    ax.set_aspect("equal")
    fig.tight_layout()
    return fig


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
):
    """Loss against model size for a few mixtures: observations, the fitted law's curve (extrapolated to
    `extend_to`), and a bootstrap band. `data` is a MixtureData with size and group; `law` a law or FitResult;
    `held_out` an optional MixtureData drawn as open markers (e.g. the held-out size)."""
    from ._fit import FitResult

    law = law.law if isinstance(law, FitResult) else law
    groups = np.asarray(data.group) if data.group is not None else np.zeros(data.n_points, int)
    ids = np.unique(groups) if mixtures is None else np.asarray(mixtures)
    ids = ids[:6]
    size = np.asarray(data.size)
    top = max(
        float(size.max()), extend_to or 0.0, float(np.asarray(held_out.size).max()) if held_out is not None else 0.0
    )
    grid = np.geomspace(size.min(), top, 60) if log_size else np.linspace(size.min(), top, 60)
    fig, ax = _figure(figsize=(6.0, 4.2))
    colors = _colors("viridis", np.linspace(0.05, 0.9, len(ids)))
    for color, g in zip(colors, ids):
        rows = groups == g
        r = np.asarray(data.r)[rows][0]
        r_grid = jnp.asarray(np.tile(r, (len(grid), 1)))
        ax.plot(grid, np.asarray(law(r_grid, jnp.asarray(grid))), color=color, lw=1.5)
        if bootstrap is not None:
            low, high = bootstrap.prediction_interval(r_grid, jnp.asarray(grid), level=level)
            ax.fill_between(grid, low, high, color=color, alpha=0.2, lw=0)
        ax.scatter(size[rows], np.asarray(data.y)[rows], color=color, s=22, zorder=3, label=f"mixture {g}")
        if held_out is not None and held_out.group is not None:
            h = np.asarray(held_out.group) == g
            ax.scatter(
                np.asarray(held_out.size)[h],
                np.asarray(held_out.y)[h],
                s=40,
                facecolor="none",
                edgecolor=color,
                lw=1.5,
                zorder=3,
            )
    _size_axis(ax, size, top, log_size)
    ax.set_xlabel("model size M")
    ax.set_ylabel("loss")
    band = f" with {level:.0%} bootstrap band" if bootstrap is not None else ""
    ax.set_title(title or f"fit and extrapolation{band}")
    ax.legend(fontsize=8, frameon=False, ncol=2)
    fig.tight_layout()
    return fig


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


def sampling_strategies(
    sizes: Sequence[float], cost_per_run: Any, budget: float, max_per_size: int, *, title: str = ""
):
    """The five strategies' allocations under one budget, as in the paper: one circle per run, area growing
    with model size, columns = sizes."""
    from ._design import STRATEGIES, allocate

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
