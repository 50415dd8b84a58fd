"""The decision study behind docs/studies/5_calibration.md (issue 31): bands that cover and are sharp, and a
verdict that says "improves" when it is true.

For each world of a zoo family (seed first..first+N-1): the paper's design (11 perturbed mixtures x sizes 4-10,
0.2% noise), the loss-to-benchmark fits, `fit_pipeline` (tied CAMEL k=3, both stages resampled, calibrated) and
`optimal_mixture(robust="mean")` within +-20% of the paper's reference at M=12 and M=20. Each pick is judged
twice against the world's truth:
- "held-out gain": the verdict of `fit_pipeline`'s `decision_calibration` (the gain calibrated on held-out sizes);
- "proxy draws": the previous verdict (the proxy losses' calibration drawn into the score, `decide` with
  `calibration=` only), for comparison.
With `--scales`, prints instead, per world, the design's scale at each size: the least-squares slope of the
world's true score deviations (noiseless, from the mean over the 11 design mixtures) on the point pipeline's
predicted ones, at the trained sizes and at M=12 and M=20 (why `calibrate_decision` lets the gain's scale follow
the size).
Prints, per (band, size): coverage of the nominal 95% bands of the score at the pick and of its gain over the
reference, mean half-width / RMSE of the point prediction (1.96 is ideal for a Gaussian error), and the verdicts'
precision (true gain > 0 when "improves") and recall (share called "improves" among picks whose true gain exceeds
both the score's noise and 0.5 points). Usage:
    python benchmarks/study_decisions.py [--family capacity_data] [--worlds 20] [--first 0] [--resamples 100]
        [--restarts 16] [--out decisions.csv] [--scales]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax import simulate  # noqa: E402

SIZES = [4.0, 5.0, 6.0, 7.0, 8.0, 10.0]
CHECK = (12.0, 20.0)
WEIGHTS = cj.BENCHMARK_WEIGHTS["balanced"]


def _design(family: str, seed: int, restarts: int):
    """The world, the paper's design trained in it, the benchmark fits, the mixture data and the law template."""
    key = jax.random.key(seed)
    world = simulate.make_world(key, family)
    mixtures = np.asarray(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2))
    runs = world.runs(mixtures, SIZES, noise=0.002, key=jax.random.fold_in(key, 1))
    losses = [c for c in runs.columns if c.startswith("loss_")]
    fits = cj.fit_benchmarks(runs, losses=losses, benchmarks=[f"acc_{b}" for b in world.benchmarks],
                             names=list(world.benchmarks), key=jax.random.fold_in(key, 6),
                             restarts=restarts)  # fmt: skip
    data = world.mixture_data(runs, losses[0])
    law = cj.CAMEL.sample_init(jax.random.fold_in(key, 2), n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0)
    return world, mixtures, fits, data, law


def scales_by_size(family: str, seed: int, restarts: int) -> dict[float, float]:
    """{size: least-squares slope of the true score's deviations on the point pipeline's} over the design's 11
    mixtures (deviations from their mean), at the trained sizes, M=12 and M=20."""
    world, mixtures, fits, data, law = _design(family, seed, restarts)
    key = jax.random.key(seed)
    point = cj.fit_pipeline(data, fits, WEIGHTS, law=law, key=jax.random.fold_in(key, 7), restarts=restarts).pipeline
    out = {}
    for M in [*SIZES, *CHECK]:
        truth = world.true_score(M, WEIGHTS)
        pred = np.asarray(point.score(jnp.asarray(mixtures), jnp.full(len(mixtures), M)))
        true = np.asarray([float(truth(jnp.asarray(r))) for r in mixtures])
        fp, ym = pred - pred.mean(), true - true.mean()
        out[M] = float(fp @ ym / (fp @ fp))
    return out


def one_world(family: str, seed: int, B: int, restarts: int) -> tuple[list[dict], float]:
    key = jax.random.key(seed)
    world, _, fits, data, law = _design(family, seed, restarts)
    start = time.perf_counter()
    fitted = cj.fit_pipeline(data, fits, WEIGHTS, law=law, key=jax.random.fold_in(key, 7), n_resamples=B,
                             restarts=restarts, strata=np.asarray(data.size))  # fmt: skip
    jax.block_until_ready(fitted.pipelines)
    seconds = time.perf_counter() - start
    rows = []
    for M in CHECK:
        truth = world.true_score(M, WEIGHTS)
        best = cj.optimal_mixture(fitted, 5, key=jax.random.fold_in(key, 8), model_size=M, robust="mean",
                                  reference=simulate.REFERENCE, max_shift=0.2)  # fmt: skip
        value = float(truth(jnp.asarray(best.r)))
        gain = value - float(truth(jnp.asarray(simulate.REFERENCE)))
        old = cj.decide(fitted.pipelines, best.r, simulate.REFERENCE, model_size=M, key=jax.random.fold_in(key, 9),
                        calibration=fitted.calibration, min_gain=fitted.score_noise,
                        support=fitted.support())  # fmt: skip
        together = cj.decide(fitted.pipelines, best.r, simulate.REFERENCE, model_size=M,
                             key=jax.random.fold_in(key, 9), calibration=pooled(fitted.calibration),
                             min_gain=fitted.score_noise, support=fitted.support())  # fmt: skip
        bands = (("held-out gain", best.decision), ("proxy draws", old), ("proxy draws, pooled", together))
        for band, d in bands:
            rows.append({"family": family, "world": seed, "size": M, "band": band, "verdict": d.verdict,
                         "true_gain": gain, "gain": d.gain, "gain_low": d.gain_low, "gain_high": d.gain_high,
                         "true_value": value, "value": d.value, "value_low": d.value_low,
                         "value_high": d.value_high, "noise": fitted.score_noise})  # fmt: skip
    return rows, seconds


def pooled(calibration: cj.Calibration) -> cj.Calibration:
    """The pipeline's proxy-loss calibration with its targets' kappas pooled (`calibrate(..., pool=True)`): with
    every benchmark measured at every run, as here, the pooled kappa^2 is the mean of the targets' own, read with
    as many degrees of freedom as cells over all targets."""
    T = int(np.size(calibration.kappa_level))
    level, mix = (float(np.sqrt(np.mean(np.asarray(k) ** 2))) for k in (calibration.kappa_level, calibration.kappa_mix))
    return dataclasses.replace(calibration, kappa_level=jnp.full(T, level), kappa_mix=jnp.full(T, mix), pooled=T)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Coverage, half-width / RMSE, precision and recall per (family, band, size)."""
    out = []
    for (family, band, size), part in table.groupby(["family", "band", "size"]):
        row = {"family": family, "band": band, "M": size, "worlds": len(part)}
        for q in ("value", "gain"):
            truth, mid, low, high = (part[c].to_numpy() for c in (f"true_{q}", q, f"{q}_low", f"{q}_high"))
            row[f"{q} coverage"] = np.mean((low <= truth) & (truth <= high))
            row[f"{q} hw/rmse"] = np.mean((high - low) / 2) / np.sqrt(np.mean((mid - truth) ** 2))
        said = part["verdict"] == "improves"
        clear = (part["true_gain"] > part["noise"]) & (part["true_gain"] > 0.005)
        row["improves"] = int(said.sum())
        row["precision"] = np.mean(part.loc[said, "true_gain"] > 0) if said.any() else np.nan
        row["clear gains"] = int(clear.sum())
        row["recall"] = np.mean(said[clear]) if clear.any() else np.nan
        row["said improves below noise"] = int((said & (part["true_gain"] < part["noise"])).sum())
        out.append(row)
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", default="capacity_data", choices=simulate.FAMILIES)
    parser.add_argument("--worlds", type=int, default=20)
    parser.add_argument("--first", type=int, default=0, help="seed of the first world (to extend a study)")
    parser.add_argument("--resamples", type=int, default=100)
    parser.add_argument("--restarts", type=int, default=16)
    parser.add_argument("--out", default=None)
    parser.add_argument("--scales", action="store_true", help="print the design's scale at each size instead")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=".*(design|converge).*")
    if args.scales:
        for seed in range(args.first, args.first + args.worlds):
            scales = scales_by_size(args.family, seed, args.restarts)
            print(f"world {seed}: " + "  ".join(f"M={M:g} {s:.2f}" for M, s in scales.items()), flush=True)
        return
    rows, costs = [], []
    for seed in range(args.first, args.first + args.worlds):
        start = time.perf_counter()
        r, seconds = one_world(args.family, seed, args.resamples, args.restarts)
        rows += r
        costs.append(seconds)
        print(f"world {seed}: {time.perf_counter() - start:.0f} s (fit_pipeline {seconds:.0f} s)", flush=True)
        if args.out:
            pd.DataFrame(rows).to_csv(args.out, index=False)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summary(pd.DataFrame(rows)).round(2).to_string(index=False))


if __name__ == "__main__":
    main()
