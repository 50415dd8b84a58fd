"""Study 11: replay real swarms as if trained one batch at a time (issue 60). Does `next_runs` reach the whole
table's decision at <= 50% of its FLOPs, against random order and the paper's static strategies?

Tables (../shared/data/external, read through tests/shared_data.py):
- dmsl: the longest run of each (mixture, size) at 122M-1.235B (220 runs, FLOPs 6 N D); decision: the mean of the 7
  SlimPajama validation losses among the four mixtures trained at 2.718B.
- mixinglaws: 5Mix at step 20k, 70M-410M (104 runs, 6 N D with N non-embedding parameters); decision: the weighted
  validation loss among the four 1B runs.
- regmix: the 512 1M-parameter runs (each the same cost); decision: Pile-CC loss of the 256 held-out mixtures at
  60M (the rank correlation is the paper's measure here).

Prints per table the curve of each metric over FLOPs spent (median and 10%-90% band over repeats) and the regret
table; writes every fit to --out (CSV) and the figure to --figure.

Usage: python benchmarks/study_replay.py [--tables dmsl,mixinglaws,regmix] [--repeats 4] [--restarts 8]
       [--resamples 16] [--out replay.csv] [--figure docs/studies/11_replay.png]

Split across processes: `--repeat-index I[,J,...]` runs those repeats alone (of --repeats, with the keys of the
whole run), and `--methods` a subset; every row carries its table, method and repeat, so the processes' --out CSVs
concatenate (`--replot a.csv,b.csv,...` reads several); a repeat draws the same keys as in a whole run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pandas as pd

jax.config.update("jax_enable_x64", True)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import shared_data  # noqa: E402

import camel_jax as cj  # noqa: E402
from camel_jax.experiments._replay import ReplayTable, replay, replay_curve  # noqa: E402

FRACTIONS = (0.1, 0.2, 0.3, 0.5)
METRICS = ("regret", "rank", "error", "spearman")


def dmsl() -> ReplayTable:
    train, test, mixture, _ = shared_data.dmsl_decision()
    losses = [f"{c.removeprefix('weight_')}_loss" for c in mixture]
    train = train.dropna(subset=losses)
    return ReplayTable(
        r=train[mixture].to_numpy(float), size=train["model_size"].to_numpy(float),
        y=train[losses].mean(axis=1).to_numpy(float),
        cost=cj.experiments.flops(train["model_size"].to_numpy(float), train["n_tokens"].to_numpy(float)),
        r_test=test[mixture].to_numpy(float), y_test=test[losses].mean(axis=1).to_numpy(float),
        size_test=float(test["model_size"].iloc[0]), names=tuple(mixture),
    )  # fmt: skip


def mixinglaws() -> ReplayTable:
    train, test, mixture, _ = shared_data.mixinglaws_decision()
    tokens = 20000 * 2**20  # step 20k x 1M tokens per step
    return ReplayTable(
        r=train[mixture].to_numpy(float), size=train["nonembedding_params"].to_numpy(float),
        y=train["loss"].to_numpy(float),
        cost=cj.experiments.flops(train["nonembedding_params"].to_numpy(float), tokens),
        r_test=test[mixture].to_numpy(float), y_test=test["loss"].to_numpy(float),
        size_test=float(test["nonembedding_params"].iloc[0]), names=tuple(mixture),
    )  # fmt: skip


def regmix(test: str = "60m", pool: int | None = None) -> ReplayTable:
    """RegMix's 1M runs as the pool (`pool`: a random subset of that many, seed 0), scored on the 256 held-out
    mixtures trained at 60M (`test="60m"`) or at 1M (`test="1m"`, the pool's own size)."""
    train, test_60m, test_1m, mixture, _ = shared_data.regmix_decision()
    if pool is not None:
        train = train.iloc[np.sort(np.random.default_rng(0).choice(len(train), pool, replace=False))]
    held_out = test_60m if test == "60m" else test_1m
    r = train[mixture].to_numpy(float)
    r_test = held_out[mixture].to_numpy(float)
    return ReplayTable(
        r=r / r.sum(1, keepdims=True), size=train["size"].to_numpy(float), y=train["pile_cc_val_loss"].to_numpy(float),
        cost=cj.experiments.flops(train["size"].to_numpy(float), 1.0), r_test=r_test / r_test.sum(1, keepdims=True),
        y_test=held_out["pile_cc_val_loss"].to_numpy(float), size_test=float(held_out["size"].iloc[0]),
        names=tuple(mixture),
    )  # fmt: skip


TABLES = {"dmsl": dmsl, "mixinglaws": mixinglaws, "regmix": regmix}


def reaches(curve: pd.DataFrame, metric: str, higher_is_better: bool = False) -> dict[str, float | None]:
    """Per method: the smallest budget whose median `metric` is at least as good as the full table's."""
    full = float(curve.loc[("full table", 1.0), "median"])
    out: dict[str, float | None] = {}
    for method in curve.index.get_level_values(0).unique():
        if method == "full table":
            continue
        rows = curve.loc[method]["median"]
        good = rows >= full - 1e-12 if higher_is_better else rows <= full + 1e-12
        out[method] = float(rows.index[good].min()) if good.any() else None
    return out


def figure(curves: dict[str, dict[str, pd.DataFrame]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(name, metric) for name in curves for metric in (("regret", "error") if name != "regmix"
                                                                 else ("spearman", "regret"))]  # fmt: skip
    fig, axes = plt.subplots(len(curves), 2, figsize=(10, 3.2 * len(curves)), squeeze=False)
    for ax, (name, metric) in zip(axes.ravel(), panels):
        curve = curves[name][metric]
        for method in curve.index.get_level_values(0).unique():
            if method == "full table":
                continue
            rows = curve.loc[method]
            style = {"next": {"lw": 2.5, "color": "k"}, "gradient": {"lw": 2.5, "color": "tab:red"},
                     "gradient-ensemble": {"lw": 1.5, "color": "tab:orange"}}.get(method, {"lw": 1, "alpha": 0.8})
            ax.plot(rows.index, rows["median"], marker="o", ms=3, label=method, **style)
            if method in ("next", "random", "gradient"):
                ax.fill_between(rows.index, rows["low"], rows["high"], alpha=0.15, color=style.get("color"))
        full = curve.loc[("full table", 1.0)]
        ax.axhline(full["median"], ls="--", color="gray", label="full table")
        ax.axvline(0.5, ls=":", color="gray")
        ax.set_title(f"{name}: {metric}")
        ax.set_xlabel("share of the table's FLOPs revealed")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def summarize(curves: dict[str, pd.DataFrame]) -> None:
    """Print each metric's median [10%, 90%] per method and budget, and where each method reaches the full table."""
    for metric in METRICS:
        curve = curves[metric]
        cells = curve.apply(lambda c: f"{c['median']:.4g} [{c['low']:.4g}, {c['high']:.4g}]", axis=1)
        print(f"-- {metric} (median [10%, 90%] over repeats; loss units for regret, % for error)")
        print(cells.unstack("fraction").to_string())
        at_least = reaches(curve, metric, metric == "spearman")
        print(f"   smallest budget at least as good as the full table: {at_least}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", default="dmsl,mixinglaws,regmix")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--restarts", type=int, default=4)
    parser.add_argument("--resamples", type=int, default=12)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--methods", default="next,gradient,random," + ",".join(cj.experiments.STRATEGIES))
    parser.add_argument("--out", default=None)
    parser.add_argument("--figure", default=None)
    parser.add_argument("--fractions", default=",".join(map(str, FRACTIONS)), help="budgets (shares of the pool)")
    parser.add_argument("--regmix-test", default="60m", choices=("60m", "1m"), help="RegMix's held-out size")
    parser.add_argument("--regmix-pool", type=int, default=None, help="RegMix: a random subset of its 512 runs")
    parser.add_argument("--seed", type=int, default=0, help="the key of every draw; repeats are numbered from "
                        "seed x repeats, so runs with other seeds can be concatenated")  # fmt: skip
    parser.add_argument("--replot", default=None, help="draw --figure from the rows of earlier runs' --out CSVs "
                        "(comma-separated: the rows of processes that ran parts are concatenated)")
    parser.add_argument("--repeat-index", default=None, help="run only these repeats (comma-separated, each in 0 .. "
                        "--repeats - 1), with the keys of the whole run")
    parser.add_argument("--steps", type=int, default=100, help="gradient design: ascent steps")
    args = parser.parse_args()
    fractions = tuple(float(f) for f in args.fractions.split(","))
    if args.replot:
        rows = pd.concat([pd.read_csv(path) for path in args.replot.split(",")], ignore_index=True)
        curves = {}
        for name, group in rows.groupby("table", sort=False):
            curves[name] = {m: replay_curve(group, fractions, m) for m in METRICS}
            print(f"\n== {name}: {group['repeat'].nunique()} repeats")
            summarize(curves[name])
        if args.figure:
            figure(curves, args.figure)
            print(f"wrote {args.figure}")
        return
    print(f"camel-jax {cj.__version__}, jax {jax.__version__}, devices {jax.devices()}")
    frames, curves = [], {}
    for name in args.tables.split(","):
        t0 = time.perf_counter()
        table = regmix(args.regmix_test, args.regmix_pool) if name == "regmix" else TABLES[name]()
        methods = args.methods.split(",")
        if len(np.unique(table.size)) == 1:  # one size: every static strategy is a random draw
            methods = [m for m in methods if m in ("next", "random", "gradient", "gradient-ensemble")]
        rows = replay(table, key=jax.random.key(args.seed), methods=methods, fractions=fractions, repeats=args.repeats,
                      restarts=args.restarts, n_resamples=args.resamples, batch=args.batch, steps=args.steps,
                      only=None if args.repeat_index is None else [int(i) for i in args.repeat_index.split(",")],
                      log=lambda s: print(s, flush=True))  # fmt: skip
        rows = rows.assign(table=name, repeat=rows["repeat"] + args.seed * args.repeats)
        frames.append(rows)
        curves[name] = {m: replay_curve(rows, fractions, m) for m in METRICS}
        print(f"\n== {name}: {len(table.y)} pool runs, {len(table.y_test)} held out at {table.size_test:.4g}; "
              f"{rows['repeat'].nunique()} repeats; {time.perf_counter() - t0:.0f} s")  # fmt: skip
        summarize(curves[name])
        if args.out:
            pd.concat(frames).to_csv(args.out, index=False)
    if args.figure:
        figure(curves, args.figure)
        print(f"wrote {args.figure}")


if __name__ == "__main__":
    main()
