"""The coverage study behind the README's calibration table (issue 14): do nominal 95% bands cover the truth?

For each world of a zoo family (seed 0..N-1): the paper's design (11 perturbed mixtures x sizes 4-10, 0.2% noise),
then at M=12 (one size step out) and M=20 (the target):
- the loss: tied CAMEL on each of the world's five validation losses, 100 bootstrap resamples (whole runs within
  each size); the plain percentile band and the extrapolation-calibrated bands at the 11 mixtures, against the
  world's true (noise-free) loss: "calibrated" with each loss's own kappas (`cj.calibrate(..., pool=False)` on
  the five losses together), "pooled" with kappas pooled over the five (`cj.calibrate`'s default on log
  residuals), and the same over all five losses ("loss (all)");
- the score at the chosen mixture: `fit_pipeline` with 100 resamples (mixture stage only, both stages, both
  stages calibrated), `optimal_mixture(robust="mean")` within +-20% of the reference and over the simplex, and
  `decide` against the reference (with the fit's noise floor and trained-mixture range, as `optimal_mixture`
  applies them to a `PipelineFit`): does the band of the pick's score cover its true value, and when the
  verdict is "improves", is the true gain positive?

Prints coverage per (quantity, size, band) with its standard error over worlds, the loss bands' sharpness (mean
half-width over the root-mean-square error of the point fit's prediction, in % of the loss; 1.96 is ideal for a
Gaussian error), the verdicts' precision, and the cost of calibration relative to the plain bootstrap. Usage:
    python benchmarks/study_calibration.py [--family capacity_data] [--worlds 20] [--first 0] [--resamples 100]
        [--loss-only] [--out cal.csv]
    python benchmarks/study_calibration.py --dmsl [--resamples 100]   # real data: dmsl's 2.718B runs held out
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax import simulate  # noqa: E402

SIZES = [4.0, 5.0, 6.0, 7.0, 8.0, 10.0]
CHECK = (12.0, 20.0)


def one_world(family: str, seed: int, B: int, validation: tuple[int, ...] | None = None, scores: bool = True,
              beta_max: float | None = None) -> tuple[list[dict], dict[str, float]]:  # fmt: skip
    key = jax.random.key(seed)
    world = simulate.make_world(key, family)
    mixtures = np.asarray(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2))
    runs = world.runs(mixtures, SIZES, noise=0.002, key=jax.random.fold_in(key, 1))
    losses = [c for c in runs.columns if c.startswith("loss_")]
    validation = tuple(range(len(losses))) if validation is None else validation
    law = cj.CAMEL.sample_init(jax.random.fold_in(key, 2), n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0,
                               beta_max=beta_max)  # fmt: skip
    strata = np.asarray(runs["size"])
    rows, cost = [], {"plain": 0.0, "calibration": 0.0}
    datas = [world.mixture_data(runs, losses[v]) for v in validation]
    points = [cj.fit(law, d.inputs, d.y, key=jax.random.fold_in(key, 3), restarts=16) for d in datas]
    inputs, Y = datas[0].inputs, jnp.stack([d.y for d in datas])  # every loss is measured on every run
    # the validation losses calibrated together (pooled kappas, the default on log residuals) and each alone
    if len(datas) == 1:  # one loss: pooled and alone are the same calibration, warm-started at its point fit
        inits = jax.tree.map(lambda leaf: leaf[None], points[0].law)
    else:
        inits = cj.fit(law, inputs, Y, key=jax.random.fold_in(key, 3), restarts=16).law
    common = dict(key=jax.random.fold_in(key, 5), n_resamples=min(B, 100), inits=inits, strata=strata)
    start = time.perf_counter()
    pooled = cj.calibrate(law, inputs, Y, **common)
    cost["calibration"] += time.perf_counter() - start
    alone = pooled if len(datas) == 1 else cj.calibrate(law, inputs, Y, pool=False, **common)
    for i, (v, data, point) in enumerate(zip(validation, datas, points)):  # which losses' bands are checked
        start = time.perf_counter()
        boot = cj.bootstrap(law, data.inputs, data.y, key=jax.random.fold_in(key, 4), n_resamples=B, inits=point.laws,
                            strata=strata, groups=np.arange(len(strata)), progress=False)  # fmt: skip
        jax.block_until_ready(boot.laws)
        cost["plain"] += time.perf_counter() - start
        for M in CHECK:
            size = np.full(len(mixtures), M)
            truth = np.asarray(world.losses(jnp.asarray(mixtures), jnp.asarray(size)))[:, v]
            error = (np.asarray(point.law(jnp.asarray(mixtures), jnp.asarray(size))) - truth) / truth  # point fit's
            bands = {"plain": boot.prediction_interval(mixtures, size)}
            for name, cal in (("calibrated", alone), ("pooled", pooled)):
                bands[name] = boot.prediction_interval(mixtures, size, calibration=jax.tree.map(lambda a: a[i], cal))
            for band, (low, high) in bands.items():
                covered, width = (low <= truth) & (truth <= high), (high - low) / truth
                rows += [{"family": family, "world": seed, "quantity": f"loss {v}", "size": M, "band": band,
                          "covered": float(c), "width": float(w), "error": float(e)}
                         for c, w, e in zip(covered, width, error)]  # fmt: skip
    if scores:
        rows += _score_rows(world, runs, losses, law, key, B, family, seed)
    return rows, cost


def _score_rows(world, runs, losses, law, key, B, family, seed) -> list[dict]:
    fits = cj.fit_benchmarks(runs, losses=losses, benchmarks=[f"acc_{b}" for b in world.benchmarks],
                             names=list(world.benchmarks), key=jax.random.fold_in(key, 6), restarts=16)  # fmt: skip
    data = world.mixture_data(runs, losses[0])
    common = dict(law=law, key=jax.random.fold_in(key, 7), n_resamples=B, strata=np.asarray(data.size))
    weights = cj.BENCHMARK_WEIGHTS["balanced"]
    one = cj.fit_pipeline(data, fits, weights, two_stage=False, calibrate=False, **common)
    two = cj.fit_pipeline(data, fits, weights, **common)
    rows = []
    for region_name, region in (("+-20%", {"max_shift": 0.2}), ("simplex", {})):
        for M in CHECK:
            true_f = world.true_score(M, weights)
            best = cj.optimal_mixture(two.pipelines, 5, key=jax.random.fold_in(key, 8), model_size=M, robust="mean",
                                      reference=simulate.REFERENCE, **region)  # fmt: skip
            value = float(true_f(jnp.asarray(best.r)))
            gain = value - float(true_f(jnp.asarray(simulate.REFERENCE)))
            for band, fitted, cal in (("plain 1-stage", one, None), ("plain", two, None),
                                      ("calibrated", two, two.calibration)):  # fmt: skip
                d = cj.decide(fitted.pipelines, best.r, simulate.REFERENCE, model_size=M,
                              key=jax.random.fold_in(key, 9), calibration=cal, min_gain=fitted.score_noise,
                              support=fitted.support())  # fmt: skip
                rows.append({"family": family, "world": seed, "quantity": f"score {region_name}", "size": M,
                             "band": band, "covered": float(d.value_low <= value <= d.value_high),
                             "width": d.value_high - d.value_low, "verdict": d.verdict, "p_improve": d.p_improve,
                             "true_gain": gain, "gain": d.gain})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", default="capacity_data", choices=simulate.FAMILIES)
    parser.add_argument("--worlds", type=int, default=20)
    parser.add_argument("--first", type=int, default=0, help="seed of the first world (to extend a study)")
    parser.add_argument("--resamples", type=int, default=100)
    parser.add_argument("--out", default=None)
    parser.add_argument("--loss-only", action="store_true", help="the loss bands only (no pipeline, no score)")
    parser.add_argument("--beta-max", type=float, default=None, help="CAMEL's bound on beta (default: the law's)")
    parser.add_argument("--dmsl", action="store_true", help="real data instead: dmsl_shukor2025's 2.718B runs")
    args = parser.parse_args()
    if args.dmsl:
        dmsl(args.resamples)
        return
    rows, costs = [], []
    for seed in range(args.first, args.first + args.worlds):
        start = time.perf_counter()
        r, c = one_world(args.family, seed, args.resamples, scores=not args.loss_only, beta_max=args.beta_max)
        rows += r
        costs.append(c)
        print(f"world {seed}: {time.perf_counter() - start:.0f} s", flush=True)
        if args.out:
            pd.DataFrame(rows).to_csv(args.out, index=False)
    table = pd.DataFrame(rows)
    every = table[table["quantity"].str.startswith("loss")].assign(quantity="loss (all)")
    table = pd.concat([table, every], ignore_index=True)  # the five validation losses' bands together
    # a world's points share its fit: the standard error is over worlds
    per_world = table.groupby(["quantity", "size", "band", "world"])["covered"].mean()
    summary = per_world.groupby(["quantity", "size", "band"]).agg(coverage="mean", se="sem")
    loss = table[table["quantity"].str.startswith("loss")]  # sharpness: mean half-width over the point fit's RMSE
    sharp = loss.groupby(["quantity", "size", "band"]).agg(**{
        "half-width %": ("width", lambda w: 50 * w.mean()),
        "rmse %": ("error", lambda e: 100 * np.sqrt(np.mean(e**2)))})  # fmt: skip
    sharp["hw/rmse"] = sharp["half-width %"] / sharp["rmse %"]
    summary = summary.join(sharp)
    with pd.option_context("display.width", 160):
        print(summary.round(3).to_string())
    if "verdict" in table:
        _verdicts(table)
    plain = np.median([c["plain"] for c in costs[1:] or costs])
    calibration = np.median([c["calibration"] for c in costs[1:] or costs])
    print(f"cost: plain bootstrap {plain:.1f} s, calibration {calibration:.1f} s ({calibration / plain:.2f}x)")


def dmsl(B: int) -> None:
    """dmsl_shukor2025 (skipped with the reason when ../shared is absent): tied CAMEL k=3 on the longest run per
    mixture and size at 122M-1.2B, the seven domain losses calibrated together (alone and pooled); each loss's
    bands at the four 2.718B runs against their measured losses."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import shared_data

    try:
        train, test, mixture, losses = shared_data.dmsl_held_out()
    except Exception as error:  # noqa: BLE001
        print(f"dmsl: skipped ({error})")
        return
    train = train[np.isfinite(train[losses]).all(axis=1)]
    key = jax.random.key(0)
    law = cj.CAMEL.sample_init(key, n_datasets=len(mixture), n_domains=3, tied=True, capacity_exponent=3.0)
    strata = train["size"].to_numpy()
    inputs, Y = (train[mixture].to_numpy(), strata), train[losses].to_numpy().T
    joint = cj.fit(law, inputs, Y, key=jax.random.fold_in(key, 1), restarts=32)
    common = dict(key=jax.random.fold_in(key, 2), n_resamples=B, inits=joint.law, strata=strata)
    cals = {"alone": cj.calibrate(law, inputs, Y, pool=False, **common),
            "pooled": cj.calibrate(law, inputs, Y, **common)}
    print(f"dmsl: {len(train)} runs at 122M-1.2B, 7 losses; held out: the {len(test)} runs at 2.718B, {B} resamples")
    rows = []
    for i, loss in enumerate(losses):
        point = cj.fit(law, inputs, Y[i], key=jax.random.fold_in(key, 3), restarts=32)
        boot = cj.bootstrap(law, inputs, Y[i], key=jax.random.fold_in(key, 4), n_resamples=B,
                            inits=point.best_laws(4), strata=strata, groups=np.arange(len(train)),
                            progress=False)  # fmt: skip
        held = test[np.isfinite(test[loss])]
        r, M, y = held[mixture].to_numpy(), held["size"].to_numpy(), held[loss].to_numpy()
        error = np.asarray(point.predict(r, M)) / y - 1
        bands = {"plain": boot.prediction_interval(r, M)}
        bands |= {name: boot.prediction_interval(r, M, calibration=jax.tree.map(lambda a: a[i], cal))
                  for name, cal in cals.items()}  # fmt: skip
        for band, (low, high) in bands.items():
            rows += [{"loss": loss, "band": band, "covered": float(low[j] <= y[j] <= high[j]),
                      "half-width %": 50 * (high[j] - low[j]) / y[j], "error %": 100 * error[j]}
                     for j in range(len(y))]  # fmt: skip
    table = pd.DataFrame(rows)
    summary = table.groupby(["band", "loss"]).agg(coverage=("covered", "mean"), **{
        "half-width %": ("half-width %", "mean"), "|error| %": ("error %", lambda e: np.mean(np.abs(e)))})  # fmt: skip
    with pd.option_context("display.width", 160):
        print(summary.round(3).to_string())
    rmse = np.sqrt(np.mean(table[table["band"] == "plain"]["error %"] ** 2))
    for band, part in table.groupby("band"):
        hw = part["half-width %"].mean()
        print(f"{band:8s} covers {int(part['covered'].sum())} of {len(part)}, mean half-width {hw:.2f}% "
              f"(RMSE {rmse:.2f}%: {hw / rmse:.2f}x)")  # fmt: skip


def _verdicts(table: pd.DataFrame) -> None:
    """The calibrated verdicts' count and precision, and each band's."""
    calls = table[table["band"] == "calibrated"].dropna(subset=["verdict"])
    improves = calls[calls["verdict"] == "improves"]
    print(f"\nverdict 'improves' in {len(improves)}/{len(calls)} decisions; true gain > 0 in "
          f"{np.mean(improves['true_gain'] > 0):.2f} of them")  # fmt: skip
    for band, part in table.dropna(subset=["verdict"]).groupby("band"):
        said = part[part["verdict"] == "improves"]
        right, small, wrong = np.mean(said["true_gain"] > 0), part["true_gain"] < 1e-3, said["true_gain"] < 1e-3
        print(f"  {band}: 'improves' {len(said)}/{len(part)}, right {right:.2f}; true gain below 0.001 in "
              f"{small.sum()}, of which called 'improves' {wrong.sum()}")  # fmt: skip


if __name__ == "__main__":
    main()
