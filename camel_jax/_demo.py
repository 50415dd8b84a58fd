"""`camel-jax demo`: the paper's whole pipeline, offline, on data made or shipped in the package.

Part 1 runs on a simulated world (`camel_jax.simulate`) whose true optimal mixture is known; part 2 fits the
multi-loss loss-to-benchmark law on a subset of the MIT-licensed gadre2024 table shipped in `camel_jax/data`.
"""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

_START = [0.0]


def _section(title: str) -> None:
    elapsed = f" [{time.perf_counter() - _START[0]:.0f} s]"
    print(f"\n== {title} " + "=" * max(0, 80 - len(title)) + elapsed)


def run_demo(seed: int = 0, out: str = "camel-demo", quick: bool = False) -> dict:
    """Run the demo, print the report, write figures to `out`; returns the key numbers (for tests)."""
    jax.config.update("jax_enable_x64", True)
    import camel_jax as cj
    from camel_jax import plot, simulate

    start = time.perf_counter()
    _START[0] = start
    key = jax.random.key(seed)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    n_resamples = 40 if quick else 100
    train_sizes = [4.0, 5.0, 6.0, 7.0, 8.0, 10.0]
    held_out, target = 12.0, 20.0
    reference = np.array([0.35, 0.25, 0.15, 0.10, 0.15])
    shift = 0.2
    numbers: dict = {}

    print("camel-jax demo: the CAMEL paper's pipeline on a simulated world with a known optimum")
    print(f"  world: 5 datasets {simulate.DATASETS}, 3 intrinsic domains, 4 validation sets, 7 benchmarks;")
    print(
        f"  fit on scale indices {train_sizes} x 11 perturbed mixtures (66 runs), check at M={held_out:g}, "
        f"optimize for M={target:g}"
    )
    world = simulate.default_world(jax.random.fold_in(key, 1))
    mixtures = cj.perturbed_mixtures(reference, 0.2)
    runs = world.runs(mixtures, train_sizes + [held_out], noise=0.002, key=jax.random.fold_in(key, 2))
    train = runs[runs["size"].isin(train_sizes)].reset_index(drop=True)
    test = runs[runs["size"] == held_out].reset_index(drop=True)
    losses = [f"loss_{v}" for v in world.validation_sets]
    benchmarks = list(world.benchmarks)

    _section("1. loss -> benchmark accuracy (multi-loss logistic law, one fit for 7 benchmarks)")
    fits = cj.fit_benchmarks(
        train,
        losses=losses,
        benchmarks=[f"acc_{b}" for b in benchmarks],
        names=benchmarks,
        key=jax.random.fold_in(key, 3),
        restarts=16,
    )
    L_test = jnp.asarray(test[losses].to_numpy())
    maes = {
        b: float(np.mean(np.abs(np.asarray(fits.laws[b](L_test)) - test[f"acc_{b}"].to_numpy()))) for b in benchmarks
    }
    print("  held-out (M=12) accuracy MAE: " + ", ".join(f"{b} {m:.4f}" for b, m in maes.items()))
    numbers["benchmark_mae"] = maes

    _section("2. mixture -> benchmark-proxy loss (tied CAMEL, k=3, every benchmark and resample in one program)")
    data = world.mixture_data(train, losses[0])
    law = cj.CAMEL.sample_init(key, n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0)
    fitted = cj.fit_pipeline(
        data,
        fits,
        cj.OBJECTIVES["balanced"],
        law=law,
        key=jax.random.fold_in(key, 4),
        n_resamples=n_resamples,
        strata=np.asarray(data.size),
    )
    test_data = world.mixture_data(test, losses[0])
    for b in ("mmlu", "humaneval"):
        true_proxy = np.asarray(fits.laws[b].proxy_loss(L_test))
        pred = np.asarray(fitted.pipeline.loss_laws[b](test_data.r, test_data.size))
        mape = 100 * np.mean(np.abs(pred / true_proxy - 1))
        p = fitted.pipeline.loss_laws[b].params()
        boot_beta = np.asarray(fitted.pipelines.loss_laws[b].params()["beta"])
        lo, hi = np.percentile(boot_beta, [2.5, 97.5], axis=0)
        print(
            f"  {b:9s} proxy-loss extrapolation to M=12: MAPE {mape:.3f}%; beta = "
            + ", ".join(f"{v:.3f} [{a:.3f}, {c:.3f}]" for v, a, c in zip(np.asarray(p["beta"]), lo, hi))
        )
        numbers[f"proxy_mape_{b}"] = mape
    summary = fitted.loss_fit.summary()
    print(
        f"  full-data fits: {int(np.sum(summary['n_converged']))}/{summary['n_starts'] * len(benchmarks)} starts "
        f"converged; {n_resamples} bootstrap resamples of whole runs within each size"
    )

    _section(f"3. optimal mixture for M={target:g} under the Balanced objective, within +-{shift:.0%} of the reference")
    # The laws saw mixtures within +-20% of the reference: optimize in that trust region (the paper's design),
    # where extrapolation in the mixture is supported by data, and compare with the true optimum there.
    region = {"reference": reference, "max_shift": shift}
    point = cj.optimal_mixture(fitted.pipeline, 5, key=key, model_size=target, **region)
    band = cj.optimal_mixture(fitted.pipelines, 5, key=key, model_size=target, **region)
    robust = cj.optimal_mixture(fitted.pipelines, 5, key=key, model_size=target, robust=("quantile", 0.1), **region)
    weights = cj.OBJECTIVES["balanced"]
    true_f = world.true_objective(target, weights)
    truth = cj.optimal_mixture(true_f, 5, key=key, **region)
    lo, hi = np.percentile(np.asarray(band.r), [2.5, 97.5], axis=0)
    print(f"  {'dataset':10s} {'predicted':>9s} {'95% band':>17s} {'robust q10':>10s} {'true':>7s} {'reference':>9s}")
    for j, d in enumerate(simulate.DATASETS):
        print(
            f"  {d:10s} {float(point.r[j]):9.3f}   [{lo[j]:.3f}, {hi[j]:.3f}] {float(robust.r[j]):10.3f} "
            f"{float(truth.r[j]):7.3f} {reference[j]:9.3f}"
        )
    value = {
        name: float(true_f(jnp.asarray(r)))
        for name, r in (
            ("predicted", point.r),
            ("robust", robust.r),
            ("true optimum", truth.r),
            ("reference", reference),
        )
    }
    print("  true Balanced score: " + ", ".join(f"{k} {v:.4f}" for k, v in value.items()))
    gap = value["true optimum"] - value["reference"]
    captured = (value["predicted"] - value["reference"]) / gap if gap > 0 else float("nan")
    print(f"  the predicted mixture captures {100 * captured:.0f}% of the possible gain over the reference mixture")
    numbers |= {
        "r_predicted": np.asarray(point.r),
        "r_true": np.asarray(truth.r),
        "scores": value,
        "captured": captured,
    }

    _section("4. figures")
    path = cj.mixture_path(
        fitted.pipelines, [6.0, 10.0, 14.0, 20.0, 28.0, 40.0], key=key, datasets=list(simulate.DATASETS), **region
    )
    true_path = pd.DataFrame(
        [
            {"size": s, "dataset": d, "weight": float(w)}
            for s in path["size"].unique()
            for d, w in zip(
                simulate.DATASETS,
                np.asarray(cj.optimal_mixture(world.true_objective(s, weights), 5, key=key, **region).r),
            )
        ]
    )
    figures = {
        "optimal_mixture_vs_size.png": plot.mixture_vs_size(
            path,
            true=true_path,
            title="Optimal Balanced mixture within +-20% of the reference\n(band: 95% bootstrap, dashed: true optimum)",
        ),
        "proxy_loss_vs_size_mmlu.png": plot.loss_vs_size(
            cj.MixtureData(
                r=data.r,
                y=np.asarray(fits.proxy["proxy_mmlu"]),
                size=data.size,
                group=data.group,
                positive_target=False,
            ),
            fitted.pipeline.loss_laws["mmlu"],
            bootstrap=_as_bootstrap(fitted.pipelines.loss_laws["mmlu"]),
            extend_to=target,
            mixtures=[0, 1, 2, 5],
            title="MMLU proxy loss: fit on M<=10, extrapolated with a bootstrap band",
        ),
        "benchmark_predicted_vs_observed.png": plot.predicted_vs_observed(
            train["acc_gsm8k"],
            np.asarray(fits.laws["gsm8k"](jnp.asarray(train[losses].to_numpy()))),
            test["acc_gsm8k"],
            np.asarray(fits.laws["gsm8k"](L_test)),
            title="GSM8K accuracy from validation losses",
            label="accuracy",
        ),
    }

    _section("5. real data: loss -> benchmark on gadre2024 (104 models, shipped subset, MIT)")
    gadre = pd.read_csv(resources.files("camel_jax") / "data" / "gadre2024_subset.csv")
    g_losses = [c for c in gadre.columns if c.startswith("loss_")]
    g_bench = [c for c in gadre.columns if c.startswith("acc_")]
    sets = {"multi-loss (8)": g_losses, "single-loss (c4)": ["loss_c4_val"]}
    heldout = cj.heldout_benchmark_error(gadre, sets, g_bench, key, n_splits=10)
    per_split = heldout.groupby(["split", "losses"])["heldout_mae"].mean().unstack()
    diff = per_split["multi-loss (8)"] - per_split["single-loss (c4)"]
    table = heldout.groupby(["benchmark", "losses"])["heldout_mae"].mean().unstack()
    table.index = [b[4:] for b in table.index]
    print("  held-out MAE, mean over 10 seeded 80/20 splits of the models:")
    print("    " + table.round(4).to_string().replace("\n", "\n    "))
    print("    mean: " + ", ".join(f"{c} {v:.4f}" for c, v in table.mean().items()))
    print(
        f"    multi-loss minus single-loss, paired over splits: {diff.mean():+.4f} "
        f"(standard error {diff.std(ddof=1) / np.sqrt(len(diff)):.4f}; multi-loss better on {(diff < 0).sum()}/10)"
    )
    numbers["gadre"] = table
    held = np.zeros(len(gadre), bool)
    held[np.random.default_rng(seed).permutation(len(gadre))[: len(gadre) // 5]] = True
    gf = cj.fit_benchmarks(
        gadre, losses=g_losses, benchmarks=["acc_hellaswag"], key=key, restarts=16, weights=(~held).astype(float)
    )
    pred = np.asarray(gf.laws["acc_hellaswag"](jnp.asarray(gadre[g_losses].to_numpy())))
    figures["gadre_hellaswag_predicted_vs_observed.png"] = plot.predicted_vs_observed(
        gadre["acc_hellaswag"][~held],
        pred[~held],
        gadre["acc_hellaswag"][held],
        pred[held],
        title="gadre2024 HellaSwag: multi-loss law",
        label="accuracy",
    )

    for name, fig in figures.items():
        plot.save_figure(fig, str(out_dir / name))
    print(f"\n  figures written to {out_dir.resolve()}: " + ", ".join(figures))
    print(f"\ndone in {time.perf_counter() - start:.0f} s")
    return numbers


def _as_bootstrap(laws):
    """A batched law viewed as a BootstrapResult (for the prediction band of a plot)."""
    from camel_jax import BootstrapResult

    B = jax.tree.leaves(laws)[0].shape[0]
    zeros = jnp.zeros(B)
    return BootstrapResult(
        laws=laws, objectives=zeros, converged=zeros > 0, n_failed=zeros.astype(int), weights=jnp.zeros((B, 1))
    )
