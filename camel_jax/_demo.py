"""`camel-jax demo`: a short end-to-end run on data made in the package (no network, no ../shared)."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from ._bootstrap import bootstrap
from ._fit import fit
from .laws import CAMEL


def run_demo(seed: int = 0, out: str = "camel-demo", quick: bool = False) -> None:
    jax.config.update("jax_enable_x64", True)
    key = jax.random.key(seed)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    print("camel-jax demo: fit CAMEL (tied, k=2) on a known law at sizes 4..10, extrapolate to 12 and 20\n")
    true = CAMEL.from_params(
        t=np.array([[0.8, 0.3, 0.1], [0.2, 0.7, 0.9]]),
        K=[1.2, 0.7],
        beta=[0.9, 1.5],
        C=1.6,
        tied=True,
        capacity_exponent=3.0,
    )
    sizes = np.array([4.0, 5.0, 6.0, 7.0, 8.0, 10.0])
    r = rng.dirichlet(np.ones(3), 11 * len(sizes))
    M = np.repeat(sizes, 11)
    y = np.asarray(true(jnp.asarray(r), jnp.asarray(M))) * (1 + 0.002 * rng.standard_normal(len(M)))
    template = CAMEL.sample_init(key, n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0)
    result = fit(template, (r, M), y, key=key, restarts=32)
    print(f"fit: objective {float(result.objective):.3e}, {result.summary()['n_converged']}/32 starts converged")
    boot = bootstrap(
        result.law, (r, M), y, key=key, n_resamples=50 if quick else 200, inits=result.laws, progress=False
    )
    intervals = boot.interval(0.95)
    for name in ("beta", "K"):
        value = np.asarray(result.law.params()[name])
        low, high = intervals[name]
        print(f"  {name:5s} " + "  ".join(f"{v:.3f} [{lo:.3f}, {hi:.3f}]" for v, lo, hi in zip(value, low, high)))
    r_test = rng.dirichlet(np.ones(3), 11)
    for size in (12.0, 20.0):
        M_test = np.full(11, size)
        truth = np.asarray(true(jnp.asarray(r_test), jnp.asarray(M_test)))
        pred = np.asarray(result.predict(r_test, M_test))
        print(f"  extrapolation to M={size:g}: MAPE {100 * np.mean(np.abs(pred / truth - 1)):.3f}%")
    print(f"\ndone in {time.perf_counter() - start:.1f} s")
