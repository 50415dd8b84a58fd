"""Influence benchmark: every run's approximate leave-one-out change from `cj.influence` (one Hessian, no refit)
against one exact warm-started refit per run, on a simulated Chinchilla design (P runs, 1% noise).

Prints, measured in the same run: the time of `influence` for all runs and of the P refits, warm-started from
the fit and cold (16 random starts, as the fit itself), all after a first call (compilation is printed apart),
the ratios, and how well the approximation ranks the
runs (Spearman, top-5 overlap, largest error relative to the largest change).

Then the influence on the pick (`cj.mixture.pick_influence`): every run's approximate leave-one-out change of the
optimal mixture and its gain over the reference, on a simulated 3-benchmark pipeline (tied CAMEL, 3 datasets, P runs at
4
sizes, 0.1% noise), against one exact refit of the benchmark laws (warm-started) and re-optimization of the
mixture per run (`--pick-runs`, 0 to skip). Asserts nothing.

Usage: python benchmarks/bench_influence.py [--runs 30] [--pick-runs 30]
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
    parser.add_argument("--pick-runs", type=int, default=30)
    args = parser.parse_args()
    if args.runs > 0:
        fit_influence(args.runs)
    if args.pick_runs > 0:
        pick_influence(args.pick_runs)


def fit_influence(P: int) -> None:
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


PICK_OPTIONS = cj.FitOptions(tol=1e-13, delta=0.1)


def pick_influence(P: int) -> None:
    rng = np.random.default_rng(0)
    names, truth, bench = ["mmlu", "gsm8k", "humaneval"], [], {}
    for b in names:
        truth.append(
            cj.CAMEL.from_params(
                t=rng.dirichlet(np.ones(2), size=3).T,
                K=rng.uniform(0.5, 1.5, 2),
                beta=rng.uniform(0.6, 1.2, 2),
                C=rng.uniform(1.0, 2.0),
                tied=True,
                capacity_exponent=3.0,
            )
        )
        bench[b] = cj.LossToBenchmark.from_params(k=[1.0], A=0.7, B=-2.0, C=0.25)
    weights = {"mmlu": 0.5, "gsm8k": 0.3, "humaneval": 0.2}
    r = rng.dirichlet(np.ones(3), size=P)
    M = np.array([1.0, 3.0, 10.0, 30.0])[rng.integers(0, 4, P)]
    Y = np.stack([np.asarray(law(jnp.asarray(r), jnp.asarray(M))) for law in truth])
    Y = Y * np.exp(rng.normal(0, 1e-3, Y.shape))
    warm = jax.tree.map(lambda *a: jnp.stack(a)[:, None], *truth)
    key, target, reference = jax.random.key(0), 100.0, np.full(3, 1 / 3)

    def pipeline(fit):
        laws = {b: jax.tree.map(lambda a, t=t: a[t], fit.law) for t, b in enumerate(names)}
        return cj.Pipeline(laws, bench, weights, datasets=("web", "code", "books"))

    @jax.jit
    def refit_and_reoptimize(w):
        fit = cj.fit_arrays(truth[0], (r, M), Y, w, key=key, inits=warm, options=PICK_OPTIONS)
        pipe = pipeline(fit)
        pick = cj.optimal_mixture(pipe, 3, key=key, model_size=target)
        return pick.r, pick.value - pipe.score(jnp.asarray(reference)[None], jnp.array([target]))[0]

    fit = cj.fit_arrays(truth[0], (r, M), Y, key=key, inits=warm, options=PICK_OPTIONS)
    pipeline_fit = cj.PipelineFit(pipeline=pipeline(fit), pipelines=None, loss_fit=fit, resamples=None)

    def influence():
        out = cj.mixture.pick_influence(pipeline_fit, model_size=target, key=key, reference=reference,
                                        options=PICK_OPTIONS)
        return jax.block_until_ready(out)

    start = time.perf_counter()
    influence()
    first_influence = time.perf_counter() - start
    start = time.perf_counter()
    out = influence()
    t_influence = time.perf_counter() - start
    start = time.perf_counter()
    base = refit_and_reoptimize(jnp.ones(P))
    jax.block_until_ready(base)
    first_refit = time.perf_counter() - start
    start = time.perf_counter()
    exact = []
    for p in range(P):
        w = np.ones(P)
        w[p] = 0.0
        pick, gain = refit_and_reoptimize(jnp.asarray(w))
        exact.append(np.concatenate([np.asarray(pick - base[0]), [float(gain - base[1])]]))
    t_refits = time.perf_counter() - start
    exact = np.array(exact)
    approx = np.asarray(out.loo)[:, [0, 1, 2, out.names.index("gain")]]
    ranks = lambda v: np.argsort(np.argsort(v))  # noqa: E731
    shift_exact, shift_approx = np.max(np.abs(exact[:, :3]), axis=1), out.shift()
    top = lambda v: set(np.argsort(-v)[:5])  # noqa: E731
    print(f"\npick: {P} runs, 3 benchmarks (tied CAMEL, 3 datasets), pick at size {target:g}; "
          f"the pick is {np.round(np.asarray(out.r), 3)}")  # fmt: skip
    print(
        f"first calls (compile included): pick_influence {first_influence:.2f} s, refit+reoptimize {first_refit:.2f} s"
    )
    print(f"influence on the pick of all {P} runs: {t_influence * 1e3:.1f} ms")
    print(f"{P} exact leave-one-out refits + re-optimizations (warm-started): {t_refits * 1e3:.1f} ms")
    print(f"ratio refits / influence: {t_refits / t_influence:.1f}x")
    spearman = [  # nan for a weight held at its bound (no run moves it)
        float(np.corrcoef(ranks(exact[:, j]), ranks(approx[:, j]))[0, 1]) if np.any(exact[:, j] != 0) else np.nan
        for j in range(4)
    ]
    print(
        f"accuracy: Spearman per column (r[web], r[code], r[books], gain) {np.round(spearman, 4)}; top-5 shift "
        f"overlap {len(top(shift_exact) & top(shift_approx))}/5; largest shift error "
        f"{np.max(np.abs(shift_approx - shift_exact)) / np.max(shift_exact):.3f} of the largest shift "
        f"({np.max(shift_exact):.4f})"
    )


if __name__ == "__main__":
    main()
