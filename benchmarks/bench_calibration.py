"""Calibration benchmark (issue 14): the cost of the two-stage, extrapolation-calibrated bootstrap relative to the
plain (mixture-stage only) bootstrap of `fit_pipeline`, on the paper's 66-run design of one simulated world.

Each setting is called once to compile, then timed on a second world of the same family (the compiled programs are
reused). Prints seconds per call and the ratio to the plain bootstrap measured in the same run: calibration's own
cost is "plain + calibrated" against "plain" (target <= 2x); "two-stage" adds the resampled loss-to-benchmark fits.
Asserts nothing.

Usage: python benchmarks/bench_calibration.py [--resamples 100]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax import simulate  # noqa: E402

SIZES = [4.0, 5.0, 6.0, 7.0, 8.0, 10.0]
SETTINGS = {
    "plain (mixture stage only)": dict(two_stage=False, calibrate=False),
    "plain + calibrated": dict(two_stage=False, calibrate=True),
    "two-stage": dict(two_stage=True, calibrate=False),
    "two-stage + calibrated": dict(two_stage=True, calibrate=True),
}


def inputs(seed: int):
    world = simulate.make_world(jax.random.key(seed))
    runs = world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), SIZES, noise=0.002,
                      key=jax.random.key(seed))
    losses = [c for c in runs.columns if c.startswith("loss_")]
    fits = cj.fit_benchmarks(runs, losses=losses, benchmarks=[f"acc_{b}" for b in world.benchmarks],
                             names=list(world.benchmarks), key=jax.random.key(1), restarts=8)  # fmt: skip
    return world.mixture_data(runs, losses[0]), fits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resamples", type=int, default=100)
    args = parser.parse_args()
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0)
    times = {}
    for name, setting in SETTINGS.items():
        for seed, label in ((0, "compile"), (1, "timed")):
            data, fits = inputs(seed)
            start = time.perf_counter()
            out = cj.fit_pipeline(data, fits, cj.BENCHMARK_WEIGHTS["balanced"], law=law, key=jax.random.key(2),
                                  n_resamples=args.resamples, strata=np.asarray(data.size), **setting)  # fmt: skip
            jax.block_until_ready(out.pipelines)
            if label == "timed":
                times[name] = time.perf_counter() - start
    base = times["plain (mixture stage only)"]
    print(f"fit_pipeline, 66 runs, 7 benchmarks, {args.resamples} resamples, {jax.devices()[0].platform}:")
    for name, seconds in times.items():
        print(f"  {name:28s} {seconds:6.1f} s   {seconds / base:4.2f}x the plain bootstrap")


if __name__ == "__main__":
    main()
