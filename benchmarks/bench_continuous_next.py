"""Gradient-based design vs `next_runs` over candidates, on simulated worlds (issue 60; study 8's protocol, one
round): a seed design (hourglass at 25% of the paper's 66-run design), then 25% more FLOPs chosen either by
`next_runs` from the design's unused runs or by `continuous_next_runs` (mixtures optimized by gradient at the
design's sizes, rounded to 3 decimals). Each choice is trained (simulated, 1% noise), tied CAMEL refitted, and the
mixture minimizing its predicted validation loss at M=20 scored by its regret against the world's true optimum
(loss units); the full design (every run) is the yardstick. Prints per world and the medians.

Usage: python benchmarks/bench_continuous_next.py [--worlds 5] [--resamples 16] [--restarts 8]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax import simulate  # noqa: E402
from camel_jax.mixture._continuous_next import continuous_next_runs  # noqa: E402

SIZES = (4.0, 5.0, 6.0, 7.0, 8.0, 10.0)
TARGET = 20.0
NOISE = 0.01


def fit_and_regret(world, runs, key, restarts):
    data = world.mixture_data(runs, "loss_val_english")
    law = cj.CAMEL.sample_init(key, n_datasets=data.n_datasets, n_domains=3, tied=True, capacity_exponent=3.0)
    result = cj.fit(law, data.inputs, data.y, key=key, restarts=restarts)
    M = jnp.full(1, TARGET)
    pick = cj.optimal_mixture(lambda r: -result.law(r[None, :], M)[0], data.n_datasets, key=key).r
    true = np.asarray(world.losses(jnp.asarray(pick)[None, :], M))[0, 0]
    best = cj.optimal_mixture(lambda r: -world.losses(r[None, :], M)[0, 0], data.n_datasets, key=key).r
    return result, data, float(true - np.asarray(world.losses(jnp.asarray(best)[None, :], M))[0, 0])


def one_world(seed: int, args: argparse.Namespace) -> dict[str, float]:
    world = simulate.make_world(jax.random.key(seed))
    key = jax.random.key(100 + seed)
    design = world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), SIZES, noise=NOISE, key=key)
    full_flops = float(design["flops"].sum())
    seed_mask = cj.experiments.sample_design("hourglass", design, 0.25 * full_flops, key).astype(bool)
    seed_runs = design[seed_mask]
    seed_flops = float(seed_runs["flops"].sum()) / full_flops
    result, data, _ = fit_and_regret(world, seed_runs, key, args.restarts)
    residual = np.asarray(data.y) - np.asarray(result.predict(*data.inputs))
    noise = float(np.sqrt(np.mean(residual**2)))
    boot = cj.bootstrap(result.law, data.inputs, data.y, key=key, n_resamples=args.resamples,
                        inits=result.best_laws(4), progress=False)  # fmt: skip
    budget = 0.25 * full_flops
    columns = [f"r_{d}" for d in world.datasets]
    out: dict[str, float] = {"world": seed, "seed_flops": seed_flops}
    # next_runs over the design's unused runs
    pool = design[~seed_mask]
    chosen = cj.next_runs(boot, pool, budget=budget, target_size=TARGET, key=key, batch=20, replace=False,
                          noise=noise, mixture=columns)  # fmt: skip
    new = _train(world, chosen[columns].to_numpy(), chosen["size"].to_numpy(), jax.random.fold_in(key, 1))
    _, _, out["next_runs"] = fit_and_regret(world, _stack(seed_runs, new), key, args.restarts)
    out["next_runs_removed"] = float(chosen["score"].sum()) if len(chosen) else 0.0
    out["next_runs_flops"] = float(chosen["cost"].sum()) / full_flops if len(chosen) else 0.0
    # gradient-based design at the design's sizes
    costs = [float(design.loc[design["size"] == s, "flops"].iloc[0]) for s in SIZES]
    t0 = time.perf_counter()
    grad = continuous_next_runs(boot, SIZES, costs, target_size=TARGET, noise=noise, key=key, batch=20,
                                budget=budget, names=columns)  # fmt: skip
    out["gradient_seconds"] = time.perf_counter() - t0
    new = _train(world, grad[columns].to_numpy(), grad["size"].to_numpy(), jax.random.fold_in(key, 2))
    _, _, out["gradient"] = fit_and_regret(world, _stack(seed_runs, new), key, args.restarts)
    out["gradient_removed"] = float(grad["score"].sum())
    out["gradient_flops"] = float(grad["flops"].sum()) / full_flops
    _, _, out["full design"] = fit_and_regret(world, design, key, args.restarts)
    _, _, out["seed only"] = fit_and_regret(world, seed_runs, key, args.restarts)
    return out


def _train(world, r, sizes, key):
    """The runs (r, size) trained in the world with NOISE (one table row each)."""
    import pandas as pd

    rows = [world.runs(r[i : i + 1], [float(sizes[i])], noise=NOISE, key=jax.random.fold_in(key, i))
            for i in range(len(r))]  # fmt: skip
    return pd.concat(rows, ignore_index=True) if rows else None


def _stack(seed_runs, new):
    import pandas as pd

    if new is None:
        return seed_runs
    new = new.assign(mixture=new["mixture"] + 1000 + np.arange(len(new)))  # new mixtures: their own groups
    return pd.concat([seed_runs, new], ignore_index=True)


def main() -> None:
    import pandas as pd

    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=16)
    parser.add_argument("--restarts", type=int, default=8)
    args = parser.parse_args()
    rows = []
    for seed in range(args.worlds):
        t0 = time.perf_counter()
        rows.append(one_world(seed, args))
        print(f"world {seed} ({time.perf_counter() - t0:.0f} s): " + ", ".join(
            f"{k} {v:.4g}" for k, v in rows[-1].items() if k != "world"), flush=True)  # fmt: skip
    table = pd.DataFrame(rows)
    print("\nregret at M=20 (loss units) vs FLOPs spent (share of the full design's), median [mean] over worlds")
    seed_flops = table["seed_flops"]
    spent = {"seed only": seed_flops, "next_runs": seed_flops + table["next_runs_flops"],
             "gradient": seed_flops + table["gradient_flops"], "full design": 1.0 + 0 * seed_flops}  # fmt: skip
    print(f"  {'method':12s} {'FLOPs':>6s}  regret")
    for method in ("seed only", "next_runs", "gradient", "full design"):
        median, mean = table[method].median(), table[method].mean()
        print(f"  {method:12s} {spent[method].median():6.3f}  {median:.4g} [{mean:.4g}]")
    print(f"decision variance removed (predicted): next_runs {table['next_runs_removed'].median():.3g}, gradient "
          f"{table['gradient_removed'].median():.3g} (median); FLOPs spent (share of the design): next_runs "
          f"{table['next_runs_flops'].median():.3f}, gradient {table['gradient_flops'].median():.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
