"""The README's bootstrap example, timed: `bootstrap(..., n_resamples=1000)` warm-started from the fit's 4 best
starts (`result.best_laws(4)`, the README's form) against every one of its 64 starts (the README's form before),
on a simulated world (11 mixtures x 6 sizes, 0.5% noise, tied CAMEL k=2 as in the README).

Prints, measured in the same run after a first (compiling) call of each: the fit's time, each bootstrap's time,
its time per resample, the converged share, the 95% interval of beta from each, and the ratio. The 64-start form
runs `--slow-resamples` resamples (default 100) and is reported per resample and scaled to 1000. Asserts nothing.

Usage: python benchmarks/bench_bootstrap.py [--resamples 1000] [--slow-resamples 100]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax.experiments._design import perturbed_mixtures  # noqa: E402


def _timed(call):
    start = time.perf_counter()
    out = call()
    jax.block_until_ready(jax.tree.leaves(out.laws))
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--slow-resamples", type=int, default=100)
    args = parser.parse_args()
    world = cj.simulate.default_world(jax.random.key(0))
    mixtures = perturbed_mixtures(np.full(world.n_datasets, 1.0 / world.n_datasets))
    runs = world.runs(mixtures, [4, 5, 6, 7, 8, 10], noise=0.005, key=jax.random.key(1))
    data = world.mixture_data(runs, [c for c in runs if c.startswith("loss_")][0])
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=world.n_datasets, n_domains=2, tied=True,
                               capacity_exponent=3.0)  # fmt: skip
    start = time.perf_counter()
    result = cj.fit(law, data.inputs, data.y, key=jax.random.key(0), restarts=64)
    print(f"fit: 64 starts, {int(np.sum(np.asarray(result.converged)))} converged, {time.perf_counter() - start:.1f} s")
    forms = {
        "4 best starts": (result.best_laws(4), args.resamples),
        "all 64 starts": (result.laws, args.slow_resamples),
    }
    per_resample = {}
    for name, (inits, n) in forms.items():
        def run(n=n, inits=inits):
            return cj.bootstrap(result.law, data.inputs, data.y, key=jax.random.key(1), n_resamples=n, inits=inits)

        _, first = _timed(run)
        boot, seconds = _timed(run)
        per_resample[name] = seconds / n
        low, high = boot.interval(0.95)["beta"]
        print(f"{name}: {n} resamples in {seconds:.1f} s after a first call of {first:.1f} s "
              f"({1e3 * seconds / n:.1f} ms per resample, {1000 * seconds / n:.1f} s per 1000); "
              f"{boot.summary()['n_converged']}/{n} converged; "
              f"beta 95% [{np.round(low, 3)}, {np.round(high, 3)}]")  # fmt: skip
    ratio = per_resample["all 64 starts"] / per_resample["4 best starts"]
    print(f"ratio (time per resample, 64 starts / 4 best): {ratio:.1f}x")


if __name__ == "__main__":
    main()
