"""Gradient-based design vs `next_runs` over candidates, on simulated worlds (issue 60; study 8's protocol, one
round): a seed design (hourglass at 25% of the paper's 66-run design: 11 mixtures within +-20% of the reference x 6
sizes), then more FLOPs chosen either by `next_runs` from the design's unused runs or by `continuous_next_runs`
(mixtures optimized by gradient at the design's sizes, rounded to 3 decimals), against the paper's hourglass drawn
at the same total FLOPs. Each choice is trained (simulated, 1% noise), tied CAMEL refitted on the seed plus the
choice, and the mixture minimizing its predicted mean validation loss (the mean of the world's five validation
losses) at M=20 is scored by its regret: its true mean loss minus the world's optimal one (loss units); the full
design (every run) is the yardstick.

`gradient (band)` is `continuous_next_runs(score="band")` on the seed fit itself: the gain's Gauss-Newton band
through the fit's implicit derivative (no bootstrap), the size a continuous variable too, every share at least
--min-share, rounded to the design's sizes.

The adaptive methods choose once, from the seed fit (the ensemble ones from one bootstrap of it), with the
largest extra budget; a smaller budget reads the prefix of their (greedy, in order) choice that fits it. Every fit
has the same shapes (the design plus slots for the chosen runs, zero-weighted when unused), so the whole run
compiles one fit.

Prints per world and the regret-vs-FLOPs table (median [mean] over worlds); --out writes the per-world rows (CSV),
--figure draws them (or --replot rows.csv --figure fig.png redraws a figure without fitting).

Usage: python benchmarks/bench_continuous_next.py [--worlds 5] [--first 0] [--extra 0.125,0.25] [--resamples 8]
       [--restarts 4] [--out rows.csv] [--figure fig.png]; --replot a.csv,b.csv,... joins runs over other worlds
"""

from __future__ import annotations

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax import simulate  # noqa: E402
from camel_jax.mixture._continuous_next import continuous_next_runs  # noqa: E402

SIZES = (4.0, 5.0, 6.0, 7.0, 8.0, 10.0)
TARGET = 20.0
NOISE = 0.01
SEED_SHARE = 0.25
METHODS = ("seed only", "next_runs", "next_runs (simplex)", "gradient", "gradient (band)", "hourglass", "full design")


class _Predicted(eqx.Module):
    """Minus a fitted law's loss at (r, M): a Module, so that every fit reuses the optimizer's compiled program."""

    law: object
    size: Array

    def __call__(self, r: Array) -> Array:
        return -self.law(r[None, :], self.size)[0]  # type: ignore[operator]


class _TrueMeanLoss(eqx.Module):
    """Minus the world's mean validation loss at (r, M)."""

    world: object
    size: Array

    def __call__(self, r: Array) -> Array:
        return -jnp.mean(self.world.losses(r[None, :], self.size)[0])  # type: ignore[attr-defined]


def true_mean_loss(world, r: np.ndarray) -> float:
    return float(np.mean(np.asarray(world.losses(jnp.asarray(r)[None, :], jnp.full(1, TARGET)))))


class Slots:
    """The design's runs followed by `cap` slots for runs outside it: fits are 0/1 weights over the same rows."""

    def __init__(self, design: pd.DataFrame, columns: list[str], cap: int) -> None:
        self.columns, self.n_design = columns, len(design)
        filler = design.iloc[[0] * cap]  # a valid (r, M, y) for unused slots; weight 0 removes it from every fit
        self.table = pd.concat([design, filler], ignore_index=True)
        self.used = 0

    def add(self, new: pd.DataFrame) -> np.ndarray:
        """Write the trained runs `new` into free slots; their row positions."""
        rows = np.arange(self.n_design + self.used, self.n_design + self.used + len(new))
        self.used += len(new)
        for column in [*self.columns, "size", "loss_mean", "flops"]:
            self.table.loc[rows, column] = new[column].to_numpy()
        return rows

    def arrays(self) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
        return (self.table[self.columns].to_numpy(float), self.table["size"].to_numpy(float)), \
            self.table["loss_mean"].to_numpy(float)  # fmt: skip


def fit_mask(slots: Slots, mask: np.ndarray, key, restarts: int):
    inputs, y = slots.arrays()
    law = cj.CAMEL.sample_init(key, n_datasets=inputs[0].shape[1], n_domains=3, tied=True, capacity_exponent=3.0)
    return cj.fit(law, inputs, y, weights=mask.astype(float), key=key, restarts=restarts)


def scored(world, result, key, best: np.ndarray) -> dict[str, float]:
    """The fit's pick scored in the world: its regret, its L1 distance to the true optimum, the fit's problems."""
    pick = np.asarray(cj.optimal_mixture(_Predicted(result.law, jnp.full(1, TARGET)), 5, key=key).r)
    return {"regret": true_mean_loss(world, pick) - true_mean_loss(world, best),
            "distance": float(np.abs(pick - best).sum()), "min_share": float(pick.min()),
            "converged": float(np.all(np.asarray(result.best_status) <= 1)),
            "problems": len(result.problems())}  # fmt: skip


def prefix_within(costs: np.ndarray, budget: float) -> np.ndarray:
    """Positions of the ordered choice taken while the budget allows (a run that does not fit is skipped)."""
    take, spent = [], 0.0
    for i, c in enumerate(costs):
        if spent + c <= budget * (1 + 1e-12):
            take.append(i)
            spent += c
    return np.asarray(take, int)


def train(world, r: np.ndarray, sizes: np.ndarray, key) -> pd.DataFrame:
    """The runs (r[i], sizes[i]) trained in the world with NOISE, one table row each."""
    if not len(r):
        return with_mean_loss(world.runs(np.full((1, 5), 0.2), [SIZES[0]])).iloc[:0]
    return pd.concat([with_mean_loss(world.runs(r[i : i + 1], [float(sizes[i])], noise=NOISE,
                                                key=jax.random.fold_in(key, i))) for i in range(len(r))],
                     ignore_index=True)  # fmt: skip


def with_mean_loss(runs: pd.DataFrame) -> pd.DataFrame:
    return runs.assign(loss_mean=runs[[c for c in runs.columns if c.startswith("loss_")]].mean(axis=1))


def one_world(seed: int, args: argparse.Namespace) -> list[dict[str, float]]:
    world = simulate.make_world(jax.random.key(seed))
    key = jax.random.key(100 + seed)
    k_design, k_seed, k_fit, k_boot, k_next, k_grad, k_train, k_static, k_pick, k_simplex = jax.random.split(key, 10)
    design = with_mean_loss(world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), SIZES,
                                       noise=NOISE, key=k_design))  # fmt: skip
    columns = [f"r_{d}" for d in world.datasets]
    full_flops = float(design["flops"].sum())
    extras = sorted(float(e) for e in args.extra.split(","))
    slots = Slots(design, columns, 3 * args.batch)
    n_rows = len(slots.table)
    best = np.asarray(cj.optimal_mixture(_TrueMeanLoss(world, jnp.full(1, TARGET)), 5, key=k_pick).r)

    def mask_of(positions) -> np.ndarray:
        mask = np.zeros(n_rows, bool)
        mask[np.asarray(positions, int)] = True
        return mask

    def share(mask: np.ndarray) -> float:
        return float(slots.table["flops"].to_numpy()[mask].sum()) / full_flops

    rows: list[dict[str, float]] = []

    def record(method: str, level: float, mask: np.ndarray, extra_info: dict | None = None) -> None:
        result = fit_mask(slots, mask, k_fit, args.restarts)
        rows.append({"world": seed, "method": method, "level": level, "flops": share(mask), "n_runs": int(mask.sum()),
                     **scored(world, result, k_pick, best), **(extra_info or {})})  # fmt: skip

    seed_rows = np.flatnonzero(cj.experiments.sample_design("hourglass", design, SEED_SHARE * full_flops, k_seed))
    seed_mask = mask_of(seed_rows)
    seed_fit = fit_mask(slots, seed_mask, k_fit, args.restarts)
    rows.append({"world": seed, "method": "seed only", "level": SEED_SHARE, "flops": share(seed_mask),
                 "n_runs": len(seed_rows), **scored(world, seed_fit, k_pick, best)})  # fmt: skip
    inputs, y = slots.arrays()
    w = seed_mask.astype(float)
    residual = y - np.asarray(seed_fit.predict(*inputs))
    noise = float(np.sqrt(np.average(residual**2, weights=w)))
    t0 = time.perf_counter()
    boot = cj.bootstrap(seed_fit.law, inputs, y, key=k_boot, n_resamples=args.resamples, weights=w,
                        inits=seed_fit.best_laws(min(4, args.restarts)), progress=False)  # fmt: skip
    boot_seconds = time.perf_counter() - t0
    budget = max(extras) * full_flops
    # next_runs over the design's unused runs
    t0 = time.perf_counter()
    pool = design[~seed_mask[: len(design)]]
    chosen = cj.next_runs(boot, pool, budget=budget, target_size=TARGET, key=k_next, batch=args.batch,
                          replace=False, noise=noise, mixture=columns)  # fmt: skip
    next_seconds = time.perf_counter() - t0
    costs = [float(design.loc[design["size"] == s, "flops"].iloc[0]) for s in SIZES]
    # control: next_runs over random mixtures of the whole simplex at the design's sizes (what the gradient may
    # reach), so that "gradient" vs "next_runs" separates the optimizer from the candidates' region
    shares = np.round(np.asarray(jax.random.dirichlet(k_simplex, jnp.ones(5), (args.candidates,))), 3)
    shares = shares / shares.sum(axis=1, keepdims=True)
    simplex = pd.DataFrame(np.tile(shares, (len(SIZES), 1)), columns=columns).assign(
        size=np.repeat(SIZES, len(shares)), flops=np.repeat(costs, len(shares)))
    wide = cj.next_runs(boot, simplex, budget=budget, target_size=TARGET, key=k_next, batch=args.batch,
                        replace=False, noise=noise, mixture=columns)  # fmt: skip
    k_wide = jax.random.fold_in(k_train, 10_000)
    wide_rows = slots.add(train(world, wide[columns].to_numpy(), wide["size"].to_numpy(), k_wide))
    # gradient-based design at the design's sizes, trained in the world
    t0 = time.perf_counter()
    grad = continuous_next_runs(boot, SIZES, costs, target_size=TARGET, noise=noise, key=k_grad, batch=args.batch,
                                budget=budget, names=columns, starts=args.starts, steps=args.steps)  # fmt: skip
    grad_seconds = time.perf_counter() - t0
    grad_rows = slots.add(train(world, grad[columns].to_numpy(), grad["size"].to_numpy(), k_train))
    # the same ascent on the seed fit's own Gauss-Newton band of the gain over the reference (implicit derivative;
    # no bootstrap), the size a continuous variable too, rounded to the design's sizes
    t0 = time.perf_counter()
    band = continuous_next_runs(seed_fit, SIZES, costs, target_size=TARGET, noise=noise, key=k_grad, batch=args.batch,
                                budget=budget, names=columns, starts=args.starts, steps=args.steps, score="band",
                                reference=np.asarray(simulate.REFERENCE), min_share=args.min_share)  # fmt: skip
    band_seconds = time.perf_counter() - t0
    band_rows = slots.add(train(world, band[columns].to_numpy(), band["size"].to_numpy(),
                                jax.random.fold_in(k_train, 20_000)))  # fmt: skip
    for level, kl in zip(extras, jax.random.split(k_static, len(extras))):
        total = SEED_SHARE + level
        take = prefix_within(chosen["cost"].to_numpy(float), level * full_flops)
        record("next_runs", total, seed_mask | mask_of(chosen.index.to_numpy()[take]),
               {"predicted_removed": float(chosen["score"].to_numpy()[take].sum()), "seconds": next_seconds})
        take = prefix_within(wide["cost"].to_numpy(float), level * full_flops)
        record("next_runs (simplex)", total, seed_mask | mask_of(wide_rows[take]),
               {"predicted_removed": float(wide["score"].to_numpy()[take].sum())})
        take = prefix_within(grad["flops"].to_numpy(float), level * full_flops)
        record("gradient", total, seed_mask | mask_of(grad_rows[take]),
               {"predicted_removed": float(grad["score"].to_numpy()[take].sum()), "seconds": grad_seconds})
        take = prefix_within(band["flops"].to_numpy(float), level * full_flops)
        record("gradient (band)", total, seed_mask | mask_of(band_rows[take]),
               {"predicted_removed": float(band["score"].to_numpy()[take].sum()), "seconds": band_seconds})
        static = cj.experiments.sample_design("hourglass", design, total * full_flops, kl).astype(bool)
        record("hourglass", total, mask_of(np.flatnonzero(static)))
    record("full design", 1.0, mask_of(np.arange(len(design))))
    for row in rows:
        row["bootstrap_seconds"] = boot_seconds
    return rows


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """Median and mean regret and FLOPs share per (method, budget level) over worlds."""
    g = rows.groupby(["level", "method"], sort=True)
    return pd.DataFrame({"flops": g["flops"].median(), "median": g["regret"].median(), "mean": g["regret"].mean(),
                         "sem": g["regret"].std() / np.sqrt(g["regret"].size()), "converged": g["converged"].mean(),
                         "clean": (g["problems"].apply(lambda p: (p == 0).mean())), "runs": g["n_runs"].median(),
                         "distance": g["distance"].median(), "worlds": g["regret"].size()})  # fmt: skip


def figure(rows: pd.DataFrame, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = table(rows).reset_index()
    fig, ax = plt.subplots(figsize=(6, 3.8))
    seed = summary[summary["method"] == "seed only"]
    full = summary[summary["method"] == "full design"]
    for method, style in (("next_runs", {"marker": "o"}), ("next_runs (simplex)", {"marker": "v"}),
                          ("gradient", {"marker": "s", "color": "k", "lw": 2}),
                          ("gradient (band)", {"marker": "P", "color": "tab:red", "lw": 2}),
                          ("hourglass", {"marker": "^", "alpha": 0.8})):  # fmt: skip
        part = pd.concat([seed, summary[summary["method"] == method]])
        ax.plot(part["flops"], part["median"], label=method, **style)
    ax.plot(seed["flops"], seed["median"], "D", color="gray", label="seed (hourglass 25%)")
    ax.axhline(float(full["median"].iloc[0]), ls="--", color="gray", label="full design (100%)")
    ax.axvline(0.5, ls=":", color="gray")
    ax.set_xlabel("share of the full design's FLOPs (median over worlds)")
    ax.set_ylabel("median regret (mean validation loss at M=20)")
    ax.set_title(f"gradient design vs next_runs, {rows['world'].nunique()} worlds")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def report(rows: pd.DataFrame) -> None:
    summary = table(rows)
    print("\nregret at M=20 (true mean validation loss of the pick minus the optimum's, loss units) vs FLOPs spent")
    print("(share of the full design's FLOPs), median [mean +- s.e.] over worlds; runs: median number trained;")
    print("L1: the pick's median L1 distance to the true optimum; converged: share of fits whose best start met its")
    print("stopping rule; clean: share of fits with no `problems()` (converged, not degenerate, identifiable)")
    print(f"  {'budget':>6s}  {'method':19s} {'FLOPs':>6s} {'runs':>5s}  {'median':>8s}  {'mean +- s.e.':>18s}  "
          f"{'L1':>5s}  converged  clean")  # fmt: skip
    for (level, method), row in summary.iterrows():
        print(f"  {level:6.3f}  {method:19s} {row['flops']:6.3f} {row['runs']:5.0f}  {row['median']:8.4f}  "
              f"{row['mean']:8.4f} +- {row['sem']:6.4f}  {row['distance']:5.3f}  {row['converged']:9.2f}  "
              f"{row['clean']:5.2f}")  # fmt: skip
    full = summary.loc[(1.0, "full design"), "median"]
    for method in ("next_runs", "next_runs (simplex)", "gradient", "gradient (band)", "hourglass"):
        if method not in summary.index.get_level_values("method"):
            continue
        part = summary.xs(method, level="method")
        at_half = part.loc[part.index <= 0.5 + 1e-9]
        if len(at_half):
            verdict = "no worse than" if at_half["median"].iloc[-1] <= full + 1e-12 else "WORSE than"
            print(f"  {method} at {at_half['flops'].iloc[-1]:.3f} of the FLOPs: median regret "
                  f"{at_half['median'].iloc[-1]:.4f}, {verdict} the full design's {full:.4f}")  # fmt: skip
    paired = rows.pivot_table(index="world", columns=["method", "level"], values="regret")
    top = max(rows.loc[rows["method"] == "gradient", "level"])
    pairs = [("gradient", other) for other in ("next_runs", "next_runs (simplex)", "hourglass", "full design")]
    pairs += [("gradient (band)", other) for other in ("gradient", "next_runs (simplex)", "next_runs", "hourglass",
                                                       "full design")]  # fmt: skip
    for method, other in pairs:
        if (method, top) not in paired.columns:
            continue
        diff = paired[(method, top)] - paired[(other, 1.0 if other == "full design" else top)]
        print(f"  {method} at budget {top:.3f} minus {other}, paired by world: mean {diff.mean():.4f} +- "
              f"{diff.std() / np.sqrt(len(diff)):.4f}, median {diff.median():.4f}; {method} lower in "
              f"{(diff < -1e-9).sum()}, higher in {(diff > 1e-9).sum()} of {len(diff)} worlds")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", type=int, default=5)
    parser.add_argument("--first", type=int, default=0, help="the first world's seed")
    parser.add_argument("--extra", default="0.125,0.25", help="FLOPs added to the 25%% seed (shares of the design)")
    parser.add_argument("--resamples", type=int, default=8)
    parser.add_argument("--restarts", type=int, default=4)
    parser.add_argument("--batch", type=int, default=24, help="at most this many runs chosen per method")
    parser.add_argument("--candidates", type=int, default=64, help="control: random simplex mixtures per size")
    parser.add_argument("--starts", type=int, default=8, help="gradient design: ascent starts per size")
    parser.add_argument("--steps", type=int, default=150, help="gradient design: ascent steps")
    parser.add_argument("--min-share", type=float, default=0.02, help="gradient (band): each dataset's least share")
    parser.add_argument("--out", default=None)
    parser.add_argument("--figure", default=None)
    parser.add_argument("--replot", default=None, help="report and draw --figure from earlier runs' --out CSVs "
                        "(comma-separated, e.g. of runs over other --first worlds)")
    args = parser.parse_args()
    if args.replot:
        rows = pd.concat([pd.read_csv(path) for path in args.replot.split(",")], ignore_index=True)
        report(rows)
        if args.figure:
            figure(rows, args.figure)
        return
    print(f"camel-jax {cj.__version__}, jax {jax.__version__}; {args}")
    frames = []
    for seed in range(args.first, args.first + args.worlds):
        t0 = time.perf_counter()
        frames.append(pd.DataFrame(one_world(seed, args)))
        part = frames[-1]
        print(f"world {seed} ({time.perf_counter() - t0:.0f} s): " + ", ".join(
            f"{m}@{lv:.3f} {r:.4f}" for m, lv, r in zip(part["method"], part["level"], part["regret"])), flush=True)
        rows = pd.concat(frames, ignore_index=True)
        if args.out:
            rows.to_csv(args.out, index=False)
    timing = rows.groupby("world")[["bootstrap_seconds"]].first()
    grad_s = rows[rows["method"] == "gradient"].groupby("world")["seconds"].first()
    next_s = rows[rows["method"] == "next_runs"].groupby("world")["seconds"].first()
    band_s = rows[rows["method"] == "gradient (band)"].groupby("world")["seconds"].first()
    print(f"choice time per world (median): bootstrap {timing['bootstrap_seconds'].median():.1f} s, next_runs "
          f"{next_s.median():.1f} s, gradient design {grad_s.median():.1f} s, "
          f"gradient (band) {band_s.median():.1f} s")  # fmt: skip
    report(rows)
    if args.figure:
        figure(rows, args.figure)
        print(f"wrote {args.figure}")


if __name__ == "__main__":
    main()
