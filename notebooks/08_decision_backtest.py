# %% [markdown]
# # Study 4: does the recommended mixture win? The world zoo and the decision backtest
#
# The paper's Figure 1 and Tables 1-2 ask whether a law's pick beats simple baselines. Here the truth is known: each
# world of `simulate.make_world` (default family `capacity_data`: capacity allocation plus a per-domain data term,
# specialized validation sets and benchmarks) is checked first against the real-data figures its realism targets come
# from, then `cj.experiments.backtest` trains the paper's 66-run design under FLOPs budgets, fits each method and
# scores its pick at M=20 by the world's true Balanced score. `regret` is the true optimum minus the pick's true value;
# `capture`
# the share of the achievable gain over the paper's reference mixture. CAMEL uses the hourglass strategy, the
# baselines the rectangle, as in the paper.

# %%
# %matplotlib inline
import os
import sys
import time

import jax
import matplotlib
import numpy as np
import pandas as pd
from IPython.display import display

import camel_jax as cj
from camel_jax import simulate

jax.config.update("jax_enable_x64", True)
matplotlib.rcParams["figure.dpi"] = 90
QUICK = os.environ.get("CAMEL_QUICK") == "1"  # CI runs every notebook with reduced sizes
sys.path.insert(0, os.path.abspath("../tests"))  # the one loader for ../shared/data/external
print("camel-jax", cj.__version__, "| jax", jax.__version__, "|", jax.devices(), "| quick" if QUICK else "| full size")

# %%
n_worlds = 1 if QUICK else 8
rows = []
for seed in range(n_worlds):
    rep = simulate.realism(simulate.make_world(jax.random.key(seed)), key=jax.random.key(0))
    rows.append(
        {
            "world": seed,
            "loss spread at M=10 (%)": np.median(rep["loss_spread"][10.0]),
            "shrink M=4 -> 20": np.max(rep["loss_spread"][4.0] / rep["loss_spread"][20.0]),
            "Balanced spread (points)": rep["score_spread"]["balanced"],
            "optimum - reference (points)": rep["gain"]["balanced"],
        }
    )
print("real data (dmsl_shukor2025): per-domain spreads 9-40%, shrink 1.0-1.1x from 122M to 1.2B")
print("the paper: picks differ by 3-5 points")
realism = pd.DataFrame(rows).set_index("world")
# the zoo's realism targets (over 20 worlds: spreads 3-24% at M=10, shrinking 1.1-1.5x from M=4 to M=20; the optimum
# beats the reference): every world checked here meets them
assert realism["loss spread at M=10 (%)"].between(3, 24).all() and (realism["shrink M=4 -> 20"] >= 1.0).all(), realism
assert (realism["optimum - reference (points)"] > 0).all(), realism
realism.round(2)

# %%
methods = ["camel", "size-agnostic", "best-observed"] if QUICK else list(cj.experiments.BACKTEST_METHODS)
seeds = range(1) if QUICK else range(6)
fractions = [0.4, 1.0] if QUICK else [0.1, 0.2, 0.4, 0.7, 1.0]
frames = []
for seed in seeds:
    world = simulate.make_world(jax.random.key(seed))
    design = cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2)
    full = world.runs(design, [4.0, 5.0, 6.0, 7.0, 8.0, 10.0])["flops"].sum()
    t0 = time.perf_counter()
    frame = cj.experiments.backtest(
        world,
        methods,
        key=jax.random.key(100 + seed),
        budgets=[f * full for f in fractions],
        strategy={"camel": "hourglass", "camel-free": "hourglass"},
        repeats=1 if QUICK else 6,
    )
    frames.append(frame.assign(world=seed, fraction=(frame["budget"] / full).round(2)))
    print(f"world {seed}: {time.perf_counter() - t0:.0f} s")
table = pd.concat(frames, ignore_index=True)
summary = table.groupby(["method", "fraction"])[["regret", "capture"]].agg(["mean", "sem"])
# regret is the true optimum minus the pick's true value, capture the pick's share of the optimum's gain: no pick
# beats the true optimum, at any budget
assert (table["regret"] > -1e-9).all() and (table["capture"] < 1 + 1e-9).all(), table[["method", "regret", "capture"]]
(100 * summary.xs("regret", axis=1, level=0)).round(2).unstack("fraction")  # regret in accuracy points

# %%
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 3.5))
for method, part in table.groupby("method"):
    curve = part.groupby("fraction")["true_value"].agg(["mean", "sem"])
    ax.errorbar(curve.index, 100 * curve["mean"], yerr=100 * curve["sem"], label=method, marker="o", capsize=2)
ax.set_xlabel("optimization budget (fraction of the 66-run design's FLOPs)")
ax.set_ylabel("true Balanced score of the pick (points)")
ax.legend(fontsize=8)
ax.set_title("Figure 1 on the zoo: the pick's true score vs budget")
plt.show()

# %% [markdown]
# How to read this: the law-based methods extrapolate a fit made on a +-20% design to the whole simplex, so their
# picks can land far outside the mixtures they saw; `best-observed` never leaves the trained mixtures and so cannot
# capture gains beyond them. Study 4 reports the full study (`benchmarks/study_backtest.py`: 20 worlds x 4
# repeats, within +-20% of the reference and over the whole simplex) and the default it supports: within the trust
# region SODMAdditive beats tied CAMEL (in 18 of 20 worlds) and CAMELData (by 0.03 points) on this zoo.

# %% [markdown]
# ## Tables 1-2: the four benchmark weightings
#
# The paper's Tables 1-2 compare methods on four benchmark weightings: Balanced and the three specialized ones (math,
# code, knowledge: each weights its own benchmarks). Every method here fits the full 66-run design (100% budget) and
# chooses within +-20% of the reference (`max_shift=0.2`); the same runs and noise draws serve every method and
# weighting, so the comparison is paired. `benchmarks/study_backtest.py --weights X --fractions 1.0` runs the same
# cell (`one_world`, imported here) for study 4's table (20 worlds, within +-20% and over the whole simplex).

# %%
sys.path.insert(0, os.path.join("..", "benchmarks"))
import study_backtest

# CI (CAMEL_QUICK=1) runs this section and the next at full size only: within the suite's 20-minute budget
# (issue 57) the backtest above is the one CI runs here; a full-size run (CAMEL_QUICK unset) runs them whole
weightings = [] if QUICK else ["balanced", "math", "code", "knowledge"]
methods = list(cj.experiments.BACKTEST_METHODS)
parts = []
for weights in weightings:
    for seed in range(6):
        part = study_backtest.one_world("capacity_data", seed, 2, weights, 0.2, fractions=(1.0,), methods=methods)
        parts.append(part.assign(weights=weights))
if parts:
    tables = pd.concat(parts, ignore_index=True)
    per_world = tables.groupby(["weights", "method", "seed"])["regret"].mean()
    assert (tables["regret"] > -1e-9).all(), tables[["weights", "method", "regret"]]
    # regret in points
    display((100 * per_world.groupby(["weights", "method"]).agg(["mean", "sem"])).round(3).unstack("weights"))

# %% [markdown]
# ## Bands you can trust, and a verdict (issue 14)
#
# A bootstrap band only sees how the fit moves when runs are resampled. `fit_pipeline` now also resamples the
# loss-to-benchmark stage and calibrates the extrapolation error on held-out sizes (`cj.calibrate`), and
# `optimal_mixture(fitted, robust="mean", reference=...)` returns a verdict. `benchmarks/study_calibration.py`
# (imported here) checks, world by world, whether nominal 95% bands cover the world's true loss at M=12 and M=20 (11
# mixtures, two validation losses) and the true score of the pick, and whether an "improves" verdict is right. The
# study 5's table runs 12 worlds with 100 resamples.

# %%
import study_calibration

rows = []
for seed in [] if QUICK else range(12):  # full size only (see the section above)
    world_rows, cost = study_calibration.one_world("capacity_data", seed, 100, (0, 2))
    rows += world_rows
if rows:
    cal = pd.DataFrame(rows)
    coverage = (
        cal.groupby(["quantity", "size", "band", "world"])["covered"]
        .mean()
        .groupby(["quantity", "size", "band"])
        .agg(["mean", "sem"])
    )
    # the calibrated band only widens the bootstrap band, so it covers at least what the plain band covers
    by_band = coverage["mean"].unstack("band")
    assert (by_band["calibrated"] >= by_band["plain"] - 1e-12).all(), by_band
    display(coverage.round(3))

# %%
if rows:
    verdicts = cal.dropna(subset=["verdict"])
    display(verdicts[["quantity", "size", "band", "verdict", "p_improve", "gain", "true_gain"]].round(4).head(12))
