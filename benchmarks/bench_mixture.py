"""Mixture-optimization benchmark: 4 benchmark weightings x 1,000 bootstrap pipelines x 16 starts, on CPU.

The pipelines are the 7 paper benchmarks of a simulated world: a tied CAMEL law (k=3) per benchmark-proxy loss
and the true logistic maps, with parameters jittered across 1,000 "resamples" (timing does not depend on how
the batch was made). Prints time to first result (compile included) and after compile; asserts nothing.

Usage: python benchmarks/bench_mixture.py [--resamples 1000]
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax import simulate  # noqa: E402


def batched_pipeline(weights: dict[str, float], B: int, seed: int = 0) -> cj.Pipeline:
    world = simulate.default_world(jax.random.key(seed))
    rng = np.random.default_rng(seed)
    loss_laws, bench_laws = {}, {}
    for i, b in enumerate(world.benchmarks):
        t = rng.dirichlet(np.ones(3), size=5).T
        jitter = 1 + 0.02 * rng.standard_normal((B, 1))
        loss_laws[b] = cj.CAMEL.from_params(
            t=np.broadcast_to(t, (B, 3, 5)),
            K=rng.uniform(0.5, 2.0, 3) * jitter,
            beta=rng.uniform(0.6, 1.4, 3) * jitter,
            C=np.full(B, 1.5),
            tied=True,
            capacity_exponent=3.0,
        )
        bench_laws[b] = cj.LossToBenchmark.from_params(
            k=np.ones((B, 1)),
            A=np.full(B, float(world.bench_A[i])),
            B=np.full(B, -2.0),
            C=np.full(B, float(world.bench_C[i])),
        )
    return cj.Pipeline(loss_laws, bench_laws, weights)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--starts", type=int, default=16)
    args = parser.parse_args()
    print(f"camel-jax {cj.__version__}, jax {jax.__version__}, devices {jax.devices()}")
    total_first, total_run = 0.0, 0.0
    for name, weights in cj.BENCHMARK_WEIGHTS.items():
        pipe = batched_pipeline(weights, args.resamples)
        t0 = time.perf_counter()
        result = cj.optimal_mixture(pipe, 5, key=jax.random.key(0), model_size=20.0, restarts=args.starts)
        jax.block_until_ready(result.r)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = cj.optimal_mixture(pipe, 5, key=jax.random.key(1), model_size=20.0, restarts=args.starts)
        jax.block_until_ready(result.r)
        run = time.perf_counter() - t0
        total_first += first
        total_run += run
        r = np.asarray(result.r)
        print(
            f"{name:10s} first call {first:6.1f} s, after compile {run:6.1f} s; "
            f"median mixture {np.round(np.median(r, 0), 3)}, "
            f"max KKT residual {float(np.max(result.kkt_residual)):.1e}"
        )
    print(
        f"total: {4 * args.resamples} optimal mixtures x {args.starts} starts: {total_run:.1f} s after compile "
        f"({total_first:.1f} s including compile); target <= 10 s after compile"
    )


if __name__ == "__main__":
    main()
