"""Influence benchmark: every run's approximate leave-one-out change from `cj.influence` (one Hessian, no refit)
against one exact warm-started refit per run, on a simulated Chinchilla design (P runs, 1% noise).

Prints, measured in the same run: the time of `influence` for all runs and of the P refits, warm-started from
the fit and cold (16 random starts, as the fit itself), all after a first call (compilation is printed apart),
the ratios, and how well the approximation ranks the
runs (Spearman, top-5 overlap, largest error relative to the largest change). Asserts nothing.

Usage: python benchmarks/bench_influence.py [--runs 30]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402

OPTIONS = cj.FitOptions(delta=0.1, tol=1e-13)
AT = (np.array([1e10]), np.array([2e11]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    P = args.runs
    rng = np.random.default_rng(2)
    N, D = 10 ** rng.uniform(7, 9.5, P), 10 ** rng.uniform(9, 11, P)
    law = cj.Chinchilla.from_params(A=406.4, B=410.7, E=1.69, alpha=0.34, beta=0.28, size_scale=1e8, tokens_scale=1e10)
    y = np.asarray(law(jnp.asarray(N), jnp.asarray(D))) * np.exp(rng.normal(0, 0.01, P))
    result = cj.fit_arrays(law, (N, D), y, key=jax.random.key(0), restarts=16, options=OPTIONS)
    warm = jax.tree.map(lambda a: a[None], result.law)
    base = float(result.predict(*AT)[0])

    def refit(p: int) -> float:
        w = np.ones(P)
        w[p] = 0.0
        fit = cj.fit_arrays(law, (N, D), y, w, key=jax.random.key(0), inits=warm, options=OPTIONS)
        return float(fit.predict(*AT)[0]) - base

    start = time.perf_counter()
    influence = cj.influence(result, AT, options=OPTIONS)
    jax.block_until_ready(influence.loo)
    first_influence = time.perf_counter() - start
    start = time.perf_counter()
    influence = cj.influence(result, AT, options=OPTIONS)
    jax.block_until_ready(influence.loo)
    t_influence = time.perf_counter() - start

    start = time.perf_counter()
    refit(0)
    first_refit = time.perf_counter() - start
    start = time.perf_counter()
    exact = np.array([refit(p) for p in range(P)])
    t_refits = time.perf_counter() - start

    def cold_refit(p: int) -> None:  # what a user without warm starts runs: the original fit's 16 random starts
        w = np.ones(P)
        w[p] = 0.0
        fit = cj.fit_arrays(law, (N, D), y, w, key=jax.random.key(0), restarts=16, options=OPTIONS)
        jax.block_until_ready(fit.objective)

    cold_refit(0)
    start = time.perf_counter()
    for p in range(5):
        cold_refit(p)
    t_cold = (time.perf_counter() - start) / 5 * P

    approx = np.asarray(influence.loo[:, influence.column("prediction[0]")])
    first_order = -np.asarray(influence.d_weight[:, influence.column("prediction[0]")])
    ranks = lambda v: np.argsort(np.argsort(v))  # noqa: E731
    spearman = float(np.corrcoef(ranks(exact), ranks(approx))[0, 1])
    top = lambda v: set(np.argsort(-np.abs(v))[:5])  # noqa: E731
    print(f"device: {jax.devices()[0].device_kind}; {P} runs, Chinchilla, prediction at N=1e10, D=2e11")
    print(f"first calls (compile included): influence {first_influence:.2f} s, one refit {first_refit:.2f} s")
    print(f"influence of all {P} runs: {t_influence * 1e3:.1f} ms")
    print(f"{P} exact leave-one-out refits (warm-started): {t_refits * 1e3:.1f} ms")
    print(f"ratio refits / influence: {t_refits / t_influence:.1f}x")
    print(f"{P} cold refits (16 random starts each, 5 timed and scaled): {t_cold:.2f} s, "
          f"ratio {t_cold / t_influence:.0f}x")  # fmt: skip
    print(
        f"accuracy: Spearman {spearman:.4f}, top-5 overlap {len(top(exact) & top(approx))}/5, largest error "
        f"{np.max(np.abs(approx - exact)) / np.max(np.abs(exact)):.3f} of the largest change "
        f"(plain first order: {np.max(np.abs(first_order - exact)) / np.max(np.abs(exact)):.3f})"
    )


if __name__ == "__main__":
    main()
