"""Time of one `cj.next_runs` call: 500 candidate runs x 200 resamples (issue 16), and a baseline in the same run.

The ensemble is 200 tied CAMEL laws (5 datasets, k=3) standing in for bootstrap resamples; the candidates are
random mixtures at sizes 4-20 with 6 N D costs. The baseline scores the same candidates the way a hand-written
loop would: one resample's predictions at a time, then one candidate's covariance at a time (numpy), and no
batch conditioning. Prints the compiled call's time, the first call's (with compilation) and the ratio.

    python benchmarks/bench_next.py [--candidates 500] [--resamples 200] [--batch 10]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", type=int, default=500)
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--batch", type=int, default=10)
    args = parser.parse_args()
    keys = jax.random.split(jax.random.key(0), args.resamples)
    laws = jax.vmap(lambda k: cj.CAMEL.sample_init(k, n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0))(
        keys
    )
    boot = cj.BootstrapResult.of_laws(laws)
    rng = np.random.default_rng(0)
    r = rng.dirichlet(np.ones(5), args.candidates)
    size = rng.choice([4.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0], args.candidates)
    table = pd.DataFrame(r, columns=[f"r_{j}" for j in range(5)]).assign(size=size, flops=6.0 * size**3 * 1e18)
    kw = dict(budget=float(table["flops"].sum()), target_size=20.0, key=jax.random.key(1), batch=args.batch)

    start = time.perf_counter()
    cj.next_runs(boot, table, noise=0.002, **kw)
    first = time.perf_counter() - start
    times = []
    for _ in range(3):
        start = time.perf_counter()
        out = cj.next_runs(boot, table, noise=0.002, **kw)
        times.append(time.perf_counter() - start)
    ours = min(times)

    start = time.perf_counter()
    q = np.asarray(jax.vmap(lambda law: law(jnp.asarray(out.attrs["recommended"])[None], jnp.full(1, 20.0)))(laws))
    F = np.stack([np.asarray(jax.tree.map(lambda x: x[b], laws)(jnp.asarray(r), jnp.asarray(size)))
                  for b in range(args.resamples)])  # fmt: skip
    loop = [np.cov(q[:, 0], F[:, c])[0, 1] ** 2 / (np.var(F[:, c], ddof=1) + 0.002**2) for c in range(args.candidates)]
    baseline = time.perf_counter() - start
    assert len(loop) == args.candidates

    print(f"next_runs: {args.candidates} candidates x {args.resamples} resamples, batch {args.batch}, "
          f"on {jax.devices()[0].platform}")  # fmt: skip
    print(f"  compiled call: {ours:.3f} s   first call (with compilation): {first:.2f} s")
    print(f"  baseline (a loop over resamples and candidates, scores only): {baseline:.3f} s   "
          f"ratio baseline / next_runs: {baseline / ours:.1f}x")  # fmt: skip
    print(f"  chosen: {len(out)} runs, sd of q {out.attrs['sd_before']:.4g} -> {out['sd_after'].iloc[-1]:.4g}")


if __name__ == "__main__":
    main()
