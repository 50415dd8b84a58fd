"""`camel-jax demo`: the paper's whole pipeline, offline, on data made or shipped in the package.

Part 1 runs on a simulated world (`camel_jax.simulate`) whose true optimal mixture is known; part 2 fits the
multi-loss loss-to-benchmark law on a subset of the MIT-licensed gadre2024 table shipped in `camel_jax/data`.
"""

from __future__ import annotations

import dataclasses
import time
from importlib import resources
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

TRAIN_SIZES = [4.0, 5.0, 6.0, 7.0, 8.0, 10.0]
HELD_OUT, TARGET = 12.0, 20.0
REFERENCE = np.array([0.35, 0.25, 0.15, 0.10, 0.15])
SHIFT = 0.2  # the trust region: the laws saw mixtures within +-20% of the reference (the paper's design)


class _Clock:
    """Prints section headers with the time since the demo started."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def section(self, title: str) -> None:
        elapsed = f" [{time.perf_counter() - self.start:.0f} s]"
        print(f"\n== {title} " + "=" * max(0, 80 - len(title)) + elapsed)


@dataclasses.dataclass
class _World:
    """The simulated world and its runs: training sizes, the held-out size, and the column names."""

    world: Any
    train: pd.DataFrame
    test: pd.DataFrame
    losses: list[str]
    benchmarks: list[str]

    @property
    def L_test(self) -> Any:
        return jnp.asarray(self.test[self.losses].to_numpy())


def run_demo(seed: int = 0, out: str = "camel-demo", quick: bool = False) -> dict[str, Any]:
    """Run the demo, print the report, write figures to `out`; returns the key numbers (for tests)."""
    jax.config.update("jax_enable_x64", True)
    from camel_jax import plot

    clock = _Clock()
    key = jax.random.key(seed)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    numbers: dict[str, Any] = {}
    setup = _make_world(key)
    fits = _benchmark_section(clock, setup, key, numbers)
    fitted, data = _proxy_section(clock, setup, fits, key, 20 if quick else 100, numbers)
    _mixture_section(clock, setup, fitted, key, numbers)
    clock.section("4. figures")
    figures = _simulated_figures(setup, fits, fitted, data, key)
    figures |= _gadre_section(clock, key, seed, numbers, n_splits=3 if quick else 10)
    for name, fig in figures.items():
        plot.save_figure(fig, str(out_dir / name))
    print(f"\n  figures written to {out_dir.resolve()}: " + ", ".join(figures))
    print(f"\ndone in {time.perf_counter() - clock.start:.0f} s")
    return numbers


def _make_world(key: Any) -> _World:
    import camel_jax as cj
    from camel_jax import simulate

    print("camel-jax demo: the CAMEL paper's pipeline on a simulated world with a known optimum")
    print(f"  world: 5 datasets {simulate.DATASETS}, 3 intrinsic domains, 4 validation sets, 7 benchmarks;")
    print(
        f"  fit on scale indices {TRAIN_SIZES} x 11 perturbed mixtures (66 runs), check at M={HELD_OUT:g}, "
        f"optimize for M={TARGET:g}"
    )
    world = simulate.default_world(jax.random.fold_in(key, 1))
    mixtures = cj.perturbed_mixtures(REFERENCE, 0.2)
    runs = world.runs(mixtures, TRAIN_SIZES + [HELD_OUT], noise=0.002, key=jax.random.fold_in(key, 2))
    train = runs[runs["size"].isin(TRAIN_SIZES)].reset_index(drop=True)
    test = runs[runs["size"] == HELD_OUT].reset_index(drop=True)
    return _World(world, train, test, [f"loss_{v}" for v in world.validation_sets], list(world.benchmarks))


def _benchmark_section(clock: _Clock, setup: _World, key: Any, numbers: dict[str, Any]) -> Any:
    import camel_jax as cj

    clock.section("1. loss -> benchmark accuracy (multi-loss logistic law, one fit for 7 benchmarks)")
    fits = cj.fit_benchmarks(
        setup.train,
        losses=setup.losses,
        benchmarks=[f"acc_{b}" for b in setup.benchmarks],
        names=setup.benchmarks,
        key=jax.random.fold_in(key, 3),
        restarts=16,
    )
    maes = {
        b: float(np.mean(np.abs(np.asarray(fits.laws[b](setup.L_test)) - setup.test[f"acc_{b}"].to_numpy())))
        for b in setup.benchmarks
    }
    print("  held-out (M=12) accuracy MAE: " + ", ".join(f"{b} {m:.4f}" for b, m in maes.items()))
    numbers["benchmark_mae"] = maes
    return fits


def _proxy_section(
    clock: _Clock, setup: _World, fits: Any, key: Any, n_resamples: int, numbers: dict[str, Any]
) -> tuple[Any, Any]:
    import camel_jax as cj

    clock.section("2. mixture -> benchmark-proxy loss (tied CAMEL, k=3, every benchmark and resample in one program)")
    data = setup.world.mixture_data(setup.train, setup.losses[0])
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
    test_data = setup.world.mixture_data(setup.test, setup.losses[0])
    pipelines: Any = fitted.pipelines  # batched over the resamples (n_resamples > 0)
    for b in ("mmlu", "humaneval"):
        true_proxy = np.asarray(fits.laws[b].proxy_loss(setup.L_test))
        pred = np.asarray(fitted.pipeline.loss_laws[b](test_data.r, test_data.size))
        mape = 100 * np.mean(np.abs(pred / true_proxy - 1))
        beta = np.asarray(fitted.pipeline.loss_laws[b].params()["beta"])
        lo, hi = np.percentile(np.asarray(pipelines.loss_laws[b].params()["beta"]), [2.5, 97.5], axis=0)
        print(
            f"  {b:9s} proxy-loss extrapolation to M=12: MAPE {mape:.3f}%; beta = "
            + ", ".join(f"{v:.3f} [{a:.3f}, {c:.3f}]" for v, a, c in zip(beta, lo, hi))
        )
        numbers[f"proxy_mape_{b}"] = mape
    summary = fitted.loss_fit.summary()
    print(
        f"  full-data fits: {int(np.sum(summary['n_converged']))}/{summary['n_starts'] * len(setup.benchmarks)} "
        f"starts converged; {n_resamples} bootstrap resamples of whole runs within each size"
    )
    return fitted, data


def _mixture_section(clock: _Clock, setup: _World, fitted: Any, key: Any, numbers: dict[str, Any]) -> None:
    import camel_jax as cj
    from camel_jax import simulate

    clock.section(
        f"3. optimal mixture for M={TARGET:g} under the Balanced objective, within +-{SHIFT:.0%} of the reference"
    )
    region: dict[str, Any] = {
        "reference": REFERENCE,
        "max_shift": SHIFT,
    }  # optimize where the laws saw data; compare with the truth
    point = cj.optimal_mixture(fitted.pipeline, 5, key=key, model_size=TARGET, **region)
    band = cj.optimal_mixture(fitted.pipelines, 5, key=key, model_size=TARGET, **region)
    robust = cj.optimal_mixture(fitted.pipelines, 5, key=key, model_size=TARGET, robust=("quantile", 0.1), **region)
    true_f = setup.world.true_objective(TARGET, cj.OBJECTIVES["balanced"])
    truth = cj.optimal_mixture(true_f, 5, key=key, **region)
    lo, hi = np.percentile(np.asarray(band.r), [2.5, 97.5], axis=0)
    print(f"  {'dataset':10s} {'predicted':>9s} {'95% band':>17s} {'robust q10':>10s} {'true':>7s} {'reference':>9s}")
    for j, d in enumerate(simulate.DATASETS):
        print(
            f"  {d:10s} {float(point.r[j]):9.3f}   [{lo[j]:.3f}, {hi[j]:.3f}] {float(robust.r[j]):10.3f} "
            f"{float(truth.r[j]):7.3f} {REFERENCE[j]:9.3f}"
        )
    mixtures = {"predicted": point.r, "robust": robust.r, "true optimum": truth.r, "reference": REFERENCE}
    value = {name: float(true_f(jnp.asarray(r))) for name, r in mixtures.items()}
    print("  true Balanced score: " + ", ".join(f"{k} {v:.4f}" for k, v in value.items()))
    gap = value["true optimum"] - value["reference"]
    captured = (value["predicted"] - value["reference"]) / gap if gap > 0 else float("nan")
    print(f"  the predicted mixture captures {100 * captured:.0f}% of the possible gain over the reference mixture")
    numbers |= {"r_predicted": np.asarray(point.r), "r_true": np.asarray(truth.r), "scores": value}
    numbers["captured"] = captured
    # the verdict: the mixture of best mean objective over the resamples (both stages, calibrated), vs the reference
    mean = cj.optimal_mixture(fitted, 5, key=key, model_size=TARGET, robust="mean", **region)
    assert mean.decision is not None  # a PipelineFit with resamples and a reference always gives one
    print("  " + mean.decision.line())
    print(f"  (true gain of that mixture: {float(true_f(jnp.asarray(mean.r))) - value['reference']:+.4f})")
    numbers["decision"] = mean.decision


def _simulated_figures(setup: _World, fits: Any, fitted: Any, data: Any, key: Any) -> dict[str, Any]:
    import camel_jax as cj
    from camel_jax import plot, simulate

    region: dict[str, Any] = {"reference": REFERENCE, "max_shift": SHIFT}
    sizes = np.array([6.0, 10.0, 14.0, 20.0, 28.0, 40.0])
    path = cj.mixture_path(fitted.pipelines, sizes, key=key, datasets=list(simulate.DATASETS), **region)
    rows = []
    for s in sizes:
        true_f = setup.world.true_objective(s, cj.OBJECTIVES["balanced"])
        r = np.asarray(cj.optimal_mixture(true_f, 5, key=key, **region).r)
        rows += [{"size": float(s), "dataset": d, "weight": float(w)} for d, w in zip(simulate.DATASETS, r)]
    proxy = cj.MixtureData(r=data.r, y=fits.proxy["mmlu"], size=data.size, group=data.group, positive_target=False)
    train_pred = np.asarray(fits.laws["gsm8k"](jnp.asarray(setup.train[setup.losses].to_numpy())))
    return {
        "optimal_mixture_vs_size.png": plot.mixture_vs_size(
            path,
            true=pd.DataFrame(rows),
            title="Optimal Balanced mixture within +-20% of the reference\n(band: 95% bootstrap, dashed: true optimum)",
        ),
        "proxy_loss_vs_size_mmlu.png": plot.loss_vs_size(
            proxy,
            fitted.pipeline.loss_laws["mmlu"],
            bootstrap=cj.BootstrapResult.of_laws(fitted.pipelines.loss_laws["mmlu"]),
            extend_to=TARGET,
            mixtures=[0, 1, 2, 5],
            title="MMLU proxy loss: fit on M<=10, extrapolated with a bootstrap band",
        ),
        "benchmark_predicted_vs_observed.png": plot.predicted_vs_observed(
            setup.train["acc_gsm8k"],
            train_pred,
            setup.test["acc_gsm8k"],
            np.asarray(fits.laws["gsm8k"](setup.L_test)),
            title="GSM8K accuracy from validation losses",
            label="accuracy",
        ),
    }


def _gadre_section(clock: _Clock, key: Any, seed: int, numbers: dict[str, Any], n_splits: int) -> dict[str, Any]:
    import camel_jax as cj
    from camel_jax import plot

    clock.section("5. real data: loss -> benchmark on gadre2024 (104 models, shipped subset, MIT)")
    gadre = pd.read_csv(resources.files("camel_jax") / "data" / "gadre2024_subset.csv")
    g_losses = [c for c in gadre.columns if c.startswith("loss_")]
    g_bench = [c for c in gadre.columns if c.startswith("acc_")]
    sets = {"multi-loss (8)": g_losses, "single-loss (c4)": ["loss_c4_val"]}
    heldout = cj.heldout_benchmark_error(gadre, sets, g_bench, key, n_splits=n_splits)
    per_split = heldout.groupby(["split", "losses"])["heldout_mae"].mean().unstack()
    diff = per_split["multi-loss (8)"] - per_split["single-loss (c4)"]
    table = heldout.groupby(["benchmark", "losses"])["heldout_mae"].mean().unstack()
    table.index = [b[4:] for b in table.index]
    print(f"  held-out MAE, mean over {n_splits} seeded 80/20 splits of the models:")
    print("    " + table.round(4).to_string().replace("\n", "\n    "))
    print("    mean: " + ", ".join(f"{c} {v:.4f}" for c, v in table.mean().items()))
    print(
        f"    multi-loss minus single-loss, paired over splits: {diff.mean():+.4f} "
        f"(standard error {diff.std(ddof=1) / np.sqrt(len(diff)):.4f}; "
        f"multi-loss better on {(diff < 0).sum()}/{n_splits})"
    )
    numbers["gadre"] = table
    held = np.zeros(len(gadre), bool)
    held[np.random.default_rng(seed).permutation(len(gadre))[: len(gadre) // 5]] = True
    gf = cj.fit_benchmarks(
        gadre, losses=g_losses, benchmarks=["acc_hellaswag"], key=key, restarts=16, weights=(~held).astype(float)
    )
    pred = np.asarray(gf.laws["acc_hellaswag"](jnp.asarray(gadre[g_losses].to_numpy())))
    figure = plot.predicted_vs_observed(
        gadre["acc_hellaswag"][~held],
        pred[~held],
        gadre["acc_hellaswag"][held],
        pred[held],
        title="gadre2024 HellaSwag: multi-loss law",
        label="accuracy",
    )
    return {"gadre_hellaswag_predicted_vs_observed.png": figure}
