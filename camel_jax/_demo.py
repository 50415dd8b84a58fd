"""`camel-jax demo`: a mixture decision worth making, made from small runs and checked against the truth, offline.

Part 1 runs on a simulated world of the default family (`simulate.make_world`) whose truth is known: which
mixture is best for a model larger than any trained one, and by how much it beats the reference. The world's key
was chosen by `benchmarks/find_demo_world.py` from the truth alone (the first key whose best mixture within the
trust region beats the reference by >= 1 accuracy point), and the demo checks that gain again at run time.
Part 2 fits the multi-loss loss-to-benchmark law on a subset of the MIT-licensed gadre2024 table shipped in
`camel_jax/data`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
import warnings
from importlib import resources
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

WORLD_KEY = 0  # `benchmarks/find_demo_world.py`: the first key of the default family offering >= 1 point
MIN_GAIN = 0.01  # a decision worth making: the true gain available within the trust region, in accuracy
TRAIN_SIZES = [4.0, 5.0, 6.0, 7.0, 8.0, 10.0]
HELD_OUT, TARGET = 12.0, 20.0
SHIFT = 0.2  # the trust region: the laws saw mixtures within +-20% of the reference (the paper's design)
NOISE = 0.002
WEIGHTS = "balanced"  # the named benchmark weights (`BENCHMARK_WEIGHTS`) of the score the demo maximizes


class _Stages:
    """Prints one line per stage, with the seconds it took, as each stage ends; the fits' warnings of the stage
    (`FitWarning`s, caught by `run_demo`) are counted into its line instead of printed one by one."""

    def __init__(self, caught: list | None = None) -> None:
        self.start = self.last = time.perf_counter()
        self.cpu_last = time.process_time()
        self.times: dict[str, float] = {}
        self.cpu: dict[str, float] = {}  # CPU seconds of every thread (the machine may be shared)
        self.caught = [] if caught is None else caught
        self.seen = 0
        self.unconverged: dict[str, tuple[int, int]] = {}  # stage -> (targets unconverged, of targets) over refits

    def done(self, name: str, text: str) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        self.times[name], self.cpu[name] = now - self.last, cpu - self.cpu_last
        self.last, self.cpu_last = now, cpu
        print(f"  {self.times[name]:5.1f} s  {name:<15s} {text}{self._warnings(name)}", flush=True)

    def _warnings(self, name: str) -> str:
        """The stage's caught warnings: fits' convergence summed into one clause, any other warning on a line."""
        from camel_jax.fitting._fit import FitWarning

        new, self.seen = self.caught[self.seen :], len(self.caught)
        fits = [w.message for w in new if isinstance(w.message, FitWarning)]
        others = [f"\n{'':24s}warning: {w.message}" for w in new if not isinstance(w.message, FitWarning)]
        late = sum(f.unconverged for f in fits)
        if not late:
            return "".join(others)
        total = sum(f.targets for f in fits if f.unconverged)
        self.unconverged[name] = (late, total)
        return (f";\n{'':24s}fits that warned: the best start of {late} of {total} targets (point fit and resampled "
                "refits) stopped before converging (`FitWarning`: their values are not optima)" + "".join(others))


@dataclasses.dataclass
class _World:
    """The simulated world, its runs (training sizes and the held-out size), names and the truth at the target."""

    world: Any
    train: pd.DataFrame
    test: pd.DataFrame
    losses: list[str]
    benchmarks: list[str]
    datasets: list[str]
    reference: np.ndarray
    true_f: Any
    truth: np.ndarray  # the true optimal mixture within the trust region at the target size
    gain: float  # its true gain over the reference, in accuracy

    @property
    def L_test(self) -> Any:
        return jnp.asarray(self.test[self.losses].to_numpy())

    def score(self, runs: pd.DataFrame) -> np.ndarray:
        """The observed score of each run (weighted observed accuracies)."""
        import camel_jax as cj

        weights = cj.BENCHMARK_WEIGHTS[WEIGHTS]
        return sum(w * runs[f"acc_{b}"].to_numpy() for b, w in weights.items())


def run_demo(seed: int = 0, out: str = "camel-demo", quick: bool = False) -> dict[str, Any]:
    """Run the demo, print the report, write the runs, figures and a summary to `out`; returns the key numbers,
    the figures and the fits (for tests)."""
    jax.config.update("jax_enable_x64", True)
    from camel_jax.fitting._fit import FitWarning

    with warnings.catch_warnings(record=True) as caught:
        # warnings that would show are recorded and reported by the stage during which they arrived (the real-data
        # thread's too); every FitWarning is kept, not once per line of code, so that the stage counts them all
        warnings.simplefilter("always", FitWarning)
        return _run(_Stages(caught), seed, out, quick)


def _run(stages: _Stages, seed: int, out: str, quick: bool) -> dict[str, Any]:
    from camel_jax import plot

    key = jax.random.key(seed)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    numbers: dict[str, Any] = {"quick": quick}
    n_splits = 0 if quick else 5
    # the real-data part depends on nothing below: its fits (and compiles) run in a thread beside them
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        gadre = pool.submit(_gadre_fits, key, seed, n_splits)
        setup, fits, fitted, pick, band, figures = _simulated_part(stages, key, out_dir, quick, numbers)
        figures |= _gadre_stage(stages, gadre.result(), numbers, n_splits)
    for name, fig in figures.items():
        plot.save_figure(fig, str(out_dir / name))
    summary = _report(setup, numbers)
    (out_dir / "summary.md").write_text(summary)
    numbers["summary"] = summary
    numbers["commands"] = _next_steps(out_dir, setup)
    print(f"\ndone in {time.perf_counter() - stages.start:.0f} s; figures, runs and summary in {out_dir}/")
    numbers |= {"figures": figures, "fitted": fitted, "fits": fits, "setup": setup, "stages": stages.times,
                "stages_cpu": stages.cpu, "unconverged": stages.unconverged}
    return numbers


def _simulated_part(stages: _Stages, key: Any, out_dir: Path, quick: bool, numbers: dict[str, Any]) -> tuple:
    """Part 1, on the simulated world: runs, both stages' fits, the decision and its figures."""
    setup = _make_world(stages, key, out_dir, numbers)
    fits = _benchmark_stage(stages, setup, key, numbers)
    fitted = _mixture_stage(stages, setup, fits, key, 20 if quick else 100, numbers)
    pick, band = _decision_stage(stages, setup, fitted, key, numbers)
    figures = _figures(setup, fits, fitted, pick, band, key, numbers)
    stages.done("figures", f"{len(figures)} written to {out_dir}")
    return setup, fits, fitted, pick, band, figures


def _make_world(stages: _Stages, key: Any, out_dir: Path, numbers: dict[str, Any]) -> _World:
    import camel_jax as cj
    from camel_jax import simulate

    world = simulate.make_world(jax.random.key(WORLD_KEY))
    reference = np.asarray(simulate.REFERENCE)
    datasets = list(world.datasets)
    print(
        f"camel-jax demo: choose the training-data mixture of a model at size M={TARGET:g} (1.2B active parameters) "
        f"from 66 small runs (M={TRAIN_SIZES[0]:g}-{TRAIN_SIZES[-1]:g}), then check the choice against the truth.\n"
        f"  world: simulate.make_world(key {WORLD_KEY}), family {world.family!r}: datasets {', '.join(datasets)}; "
        f"{len(world.benchmarks)} benchmarks;\n  score: {WEIGHTS.capitalize()} (weighted mean accuracy); "
        f"the search stays within +-{SHIFT:.0%} of the reference {_mixture(reference)}"
    )
    true_f = world.true_score(TARGET, cj.BENCHMARK_WEIGHTS[WEIGHTS])
    truth = cj.optimal_mixture(true_f, len(datasets), key=jax.random.key(0), restarts=32, reference=reference,
                               max_shift=SHIFT)  # fmt: skip
    gain = float(truth.value - true_f(jnp.asarray(reference)))
    if gain < MIN_GAIN:  # the world was chosen for this (benchmarks/find_demo_world.py): a changed simulator breaks it
        raise RuntimeError(f"the demo's world offers {100 * gain:.2f} accuracy points, below {100 * MIN_GAIN:g}: "
                           "rerun benchmarks/find_demo_world.py and update WORLD_KEY")  # fmt: skip
    print(f"  at stake (the simulator's truth, checked now): the best mixture scores {100 * gain:+.2f} points over "
          f"the reference at M={TARGET:g}\n")  # fmt: skip
    mixtures = cj.experiments.perturbed_mixtures(reference, SHIFT)
    runs = world.runs(mixtures, TRAIN_SIZES + [HELD_OUT], noise=NOISE, key=jax.random.fold_in(key, 2))
    train = runs[runs["size"].isin(TRAIN_SIZES)].reset_index(drop=True)
    test = runs[runs["size"] == HELD_OUT].reset_index(drop=True)
    columns = [c for c in runs.columns if c.startswith(("r_", "loss_", "acc_"))] + ["size"]
    train[sorted(columns, key=columns.index)].to_csv(out_dir / "runs.csv", index=False)
    candidates = pd.DataFrame(np.tile(mixtures, (2, 1)), columns=[f"r_{d}" for d in datasets])
    candidates["size"] = np.repeat([HELD_OUT, 14.0], len(mixtures))
    params = np.asarray(simulate.paper_active_params(jnp.asarray(candidates["size"].to_numpy())))
    candidates["flops"] = 6.0 * params * simulate.COOLDOWN_TOKENS
    candidates.to_csv(out_dir / "candidates.csv", index=False)
    numbers |= {"true_gain": gain, "r_true": np.asarray(truth.r), "flops_held_out": float(test["flops"].iloc[0])}
    stages.done(
        "runs",
        f"{len(train)} training runs ({len(TRAIN_SIZES)} sizes x {len(mixtures)} mixtures within +-{SHIFT:.0%}), "
        f"{len(test)} held out at M={HELD_OUT:g}, {NOISE:.1%} noise -> {out_dir / 'runs.csv'}",
    )
    return _World(world, train, test, [f"loss_{v}" for v in world.validation_sets], list(world.benchmarks),
                  datasets, reference, true_f, np.asarray(truth.r), gain)  # fmt: skip


def _mixture(r: Any) -> str:
    return "(" + ", ".join(f"{float(x):.2f}" for x in np.asarray(r)) + ")"


def _convergence(result: Any, what: str) -> str:
    """The fits' convergence in words: how many starts finished, and why the others stopped."""
    from camel_jax.solver._options import Status

    status = np.asarray(result.status)
    n, finished = status.size, int(np.sum(np.asarray(result.converged)))
    if finished == n:
        return f"all {n} starts converged"
    capped, nonfinite = int(np.sum(status == Status.MAX_STEPS)), int(np.sum(status == Status.NONFINITE))
    why = []
    if capped:
        why.append(f"{capped} stopped at the step cap still improving")
    if nonfinite:
        why.append(f"{nonfinite} went non-finite and were dropped")
    best, late = result._unconverged()
    best_ok = best.size - late.size
    return (f"{finished}/{n} starts converged ({'; '.join(why)}); the best start of {best_ok}/{best.size} {what} "
            "converged")  # fmt: skip


def _benchmark_stage(stages: _Stages, setup: _World, key: Any, numbers: dict[str, Any]) -> Any:
    import camel_jax as cj

    fits = cj.fit_benchmarks(setup.train, losses=setup.losses, benchmarks=[f"acc_{b}" for b in setup.benchmarks],
                             names=setup.benchmarks, key=jax.random.fold_in(key, 3), restarts=16)  # fmt: skip
    maes = {
        b: float(np.mean(np.abs(np.asarray(fits.laws[b](setup.L_test)) - setup.test[f"acc_{b}"].to_numpy())))
        for b in setup.benchmarks
    }
    worst = max(maes, key=lambda b: maes[b])
    numbers["benchmark_mae"] = maes
    stages.done(
        "loss->accuracy",
        f"{len(maes)} benchmark laws from {len(setup.losses)} validation losses; held-out error at M={HELD_OUT:g} "
        f"{100 * np.mean(list(maes.values())):.2f} points (worst {worst} {100 * maes[worst]:.2f}); "
        + _convergence(fits.result, "benchmarks"),
    )
    return fits


def _mixture_stage(
    stages: _Stages, setup: _World, fits: Any, key: Any, n_resamples: int, numbers: dict[str, Any]
) -> Any:
    import camel_jax as cj

    data = setup.world.mixture_data(setup.train, setup.losses[0])
    law = cj.CAMEL.sample_init(key, n_datasets=len(setup.datasets), n_domains=3, tied=True, capacity_exponent=3.0)
    fitted = cj.fit_pipeline(data, fits, cj.BENCHMARK_WEIGHTS[WEIGHTS], law=law, key=jax.random.fold_in(key, 4),
                             n_resamples=n_resamples, strata=np.asarray(data.size))  # fmt: skip
    r_test = jnp.asarray(setup.test[[f"r_{d}" for d in setup.datasets]].to_numpy())
    size_test = jnp.asarray(setup.test["size"].to_numpy())
    predicted = np.asarray(fitted.pipeline.score(r_test, size_test))
    error = float(np.mean(np.abs(predicted - setup.score(setup.test))))
    r_train = jnp.asarray(setup.train[[f"r_{d}" for d in setup.datasets]].to_numpy())
    fitted_train = np.asarray(fitted.pipeline.score(r_train, jnp.asarray(setup.train["size"].to_numpy())))
    rms = float(np.sqrt(np.mean((fitted_train - setup.score(setup.train)) ** 2)))
    numbers |= {"score_mae_held_out": error, "score_rms_train": rms}
    stages.done(
        "mixture laws",
        f"tied CAMEL (k=3) on {len(fitted.pipeline.loss_laws)} proxy losses, then the score: rms error on the "
        f"training runs {100 * rms:.2f} points, held out at M={HELD_OUT:g} {100 * error:.2f}; "
        + _convergence(fitted.loss_fit, "proxy losses")
        + f";\n{'':24s}uncertainty: {n_resamples} bootstrap resamples of whole runs (both stages refitted)"
        + ("; the extrapolation error calibrated on 2 held-out folds" if fitted.calibration is not None else ""),
    )
    return fitted


def _decision_stage(stages: _Stages, setup: _World, fitted: Any, key: Any, numbers: dict[str, Any]) -> tuple:
    import camel_jax as cj

    region: dict[str, Any] = {"reference": setup.reference, "max_shift": SHIFT}
    n = len(setup.datasets)
    pick = cj.optimal_mixture(fitted, n, key=key, model_size=TARGET, robust="mean", **region)
    band = cj.optimal_mixture(fitted.pipelines, n, key=key, model_size=TARGET, **region)
    assert pick.decision is not None  # a PipelineFit with resamples and a reference always gives one
    value = {name: float(setup.true_f(jnp.asarray(r)))
             for name, r in {"predicted": pick.r, "true optimum": setup.truth, "reference": setup.reference}.items()}
    gained = value["predicted"] - value["reference"]  # fmt: skip
    numbers |= {"r_predicted": np.asarray(pick.r), "scores": value, "decision": pick.decision,
                "captured": gained / setup.gain, "true_gain_of_pick": gained}  # fmt: skip
    numbers["band"] = np.percentile(np.asarray(band.r), [2.5, 97.5], axis=0)
    stages.done("decision", f"the mixture of best mean score over the resamples at M={TARGET:g}, and its verdict")
    return pick, band


def _report(setup: _World, numbers: dict[str, Any]) -> str:
    """Print the decision beside the truth; return the summary (the README quotes the full demo's)."""
    d = numbers["decision"]
    lo, hi = numbers["band"]
    print(f"\nThe decision for M={TARGET:g} ({WEIGHTS.capitalize()} score, mixture weights):")
    print(f"  {'dataset':10s} {'reference':>9s} {'pick':>6s} {'95% band':>16s} {'true optimum':>13s}")
    for j, name in enumerate(setup.datasets):
        print(f"  {name:10s} {setup.reference[j]:9.3f} {numbers['r_predicted'][j]:6.3f}  [{lo[j]:.3f}, {hi[j]:.3f}] "
              f"{setup.truth[j]:13.3f}")  # fmt: skip
    source = ("both stages' bootstrap and the calibrated extrapolation error" if d.calibrated
              else "the bootstrap only (no calibration)")  # fmt: skip
    act = "train the pick" if d.verdict == "improves" else f"keep the reference: {d.reason}"
    verdict = (f"{d.verdict}: predicted gain {100 * d.gain:+.2f} points [{100 * d.gain_low:+.2f}, "
               f"{100 * d.gain_high:+.2f}] at {d.level:.0%}, P(improves) = {d.p_improve:.2f}")  # fmt: skip
    print(f"  verdict: {verdict} -> {act}")
    print(f"    it rests on {source}, against a noise floor of {100 * d.min_gain:.2f} points "
          f"(one run's score noise)")  # fmt: skip
    truth = (f"the pick gains {100 * numbers['true_gain_of_pick']:+.2f} points of the {100 * setup.gain:+.2f} "
             f"available: it captures {100 * numbers['captured']:.0f}% of the gain")  # fmt: skip
    print(f"  truth (the simulator's): {truth}")
    resamples = "20 resamples, --quick" if numbers["quick"] else "100 resamples"
    return (
        f"`camel-jax demo` ({resamples}): world `simulate.make_world(key {WORLD_KEY})`, {WEIGHTS.capitalize()} "
        f"score at M={TARGET:g}, mixtures within +-{SHIFT:.0%} of the reference\n"
        f"- available: the true optimum beats the reference by {100 * setup.gain:.2f} accuracy points\n"
        f"- verdict: {verdict}\n"
        f"- truth: {truth}\n"
    )


def _next_steps(out_dir: Path, setup: _World) -> list[str]:
    """Print (and return) the commands that run the same steps on a user's own CSV, here the demo's."""
    ref = ",".join(f"{x:g}" for x in setup.reference)
    fit_out = out_dir / "camel-fit"
    budget = 4 * float(setup.test["flops"].iloc[0])
    commands = [
        f"camel-jax fit {out_dir / 'runs.csv'} --target {setup.losses[0]} --out {fit_out}",
        f"camel-jax optimize {fit_out}.npz --size {TARGET:g} --reference {ref} --max-shift {SHIFT:g}",
        f"camel-jax next --fit {fit_out}.npz --candidates {out_dir / 'candidates.csv'} --budget {budget:.3g} "
        f"--size {TARGET:g} --reference {ref} --batch 4",
    ]
    print(
        "\nYour own runs: a CSV with one row per training run (r_* mixture weights, size, a loss). These commands\n"
        "fit a mixture law with bootstrap intervals, pick the mixture for a larger size, and rank the next runs to\n"
        "train (on one loss column; the benchmark stage is Python: cj.fit_benchmarks, cj.fit_pipeline):"
    )
    for command in commands:
        print(f"  {command}")
    return commands


def _figures(setup: _World, fits: Any, fitted: Any, pick: Any, band: Any, key: Any,
             numbers: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    from camel_jax import plot

    lo, hi = np.percentile(np.asarray(band.r), [2.5, 97.5], axis=0)
    decision = plot.mixture_decision(
        setup.datasets, setup.reference, pick.r, low=lo, high=hi, true=setup.truth, max_shift=SHIFT,
        title=f"The pick for M={TARGET:g} (fitted on M<={TRAIN_SIZES[-1]:g}) vs the truth",
    )  # fmt: skip
    return {
        "decision_mixture.png": decision,
        "decision_score_vs_size.png": _score_figure(setup, fitted, pick, key, numbers),
        "benchmark_predicted_vs_observed.png": _benchmark_figure(setup, fits),
    }


def _score_figure(setup: _World, fitted: Any, pick: Any, key: Any, numbers: dict[str, Any]) -> Any:
    """The score against size: the reference, the best trained mixture and the pick (fitted, band, runs,
    truth)."""
    import camel_jax as cj
    from camel_jax import plot

    runs = pd.concat([setup.train, setup.test], ignore_index=True)
    runs["score"] = setup.score(runs)
    top = runs[runs["size"] == TRAIN_SIZES[-1]]
    best = int(top.loc[top["score"].idxmax(), "mixture"])
    names = _design_names(setup.datasets)
    mixtures = {"reference": setup.reference}
    if best != 0:
        mixtures[f"best trained mixture at M={TRAIN_SIZES[-1]:g} ({names[best]})"] = cj.experiments.perturbed_mixtures(
            setup.reference, SHIFT)[best]  # fmt: skip
    mixtures["pick (not trained)"] = np.asarray(pick.r)
    observed = {}
    for name, g in zip(mixtures, [0, best] if best != 0 else [0]):
        rows = runs[runs["mixture"] == g]
        observed[name] = (rows["size"].to_numpy(), rows["score"].to_numpy())
    sizes = np.geomspace(TRAIN_SIZES[0], TARGET, 14)
    R = np.stack(list(mixtures.values()))
    acc = setup.world.accuracies(jnp.asarray(np.repeat(R, len(sizes), axis=0)), jnp.asarray(np.tile(sizes, len(R))))
    weights = jnp.asarray([cj.BENCHMARK_WEIGHTS[WEIGHTS].get(b, 0.0) for b in setup.world.benchmarks])
    true = np.asarray(acc @ weights).reshape(len(R), len(sizes))
    # a run scatters about the fit by the fit's own rms error on the training runs (noise and lack of fit), at
    # least the benchmark stage's noise
    noise = max(fitted.score_noise, numbers["score_rms_train"])
    return plot.score_vs_size(
        fitted, mixtures, key=jax.random.fold_in(key, 5), sizes=sizes, observed=observed, noise=noise,
        true=dict(zip(mixtures, true)), label=f"{WEIGHTS.capitalize()} score",
        title=f"{WEIGHTS.capitalize()} score: fitted on M<={TRAIN_SIZES[-1]:g}, checked at M={HELD_OUT:g}, "
              f"extrapolated to M={TARGET:g}",
    )  # fmt: skip


def _design_names(datasets: list[str]) -> list[str]:
    """Names of `perturbed_mixtures`' rows: the reference, then each dataset up and down."""
    return ["the reference"] + [f"{d} {s}{SHIFT:.0%}" for d in datasets for s in "+-"]


def _benchmark_figure(setup: _World, fits: Any) -> Any:
    from camel_jax import plot

    L_train = jnp.asarray(setup.train[setup.losses].to_numpy())
    obs, pred, obs_t, pred_t, names, names_t = [], [], [], [], [], []
    for b in setup.benchmarks:
        obs.append(setup.train[f"acc_{b}"].to_numpy())
        pred.append(np.asarray(fits.laws[b](L_train)))
        obs_t.append(setup.test[f"acc_{b}"].to_numpy())
        pred_t.append(np.asarray(fits.laws[b](setup.L_test)))
        names += [b] * len(setup.train)
        names_t += [b] * len(setup.test)
    return plot.predicted_vs_observed(
        np.concatenate(obs), np.concatenate(pred), np.concatenate(obs_t), np.concatenate(pred_t),
        groups=names, groups_test=names_t, label="accuracy",
        title=f"Accuracy from validation losses\n(fitted on M<={TRAIN_SIZES[-1]:g}, held out at M={HELD_OUT:g})",
    )  # fmt: skip


def _gadre_fits(key: Any, seed: int, n_splits: int) -> dict[str, Any]:
    """The real-data part's fits (no printing, no figures): safe to run in a thread beside the other stages."""
    import camel_jax as cj

    gadre = pd.read_csv(resources.files("camel_jax") / "data" / "gadre2024_subset.csv")
    g_losses = [c for c in gadre.columns if c.startswith("loss_")]
    g_bench = [c for c in gadre.columns if c.startswith("acc_")]
    held = np.zeros(len(gadre), bool)
    held[np.random.default_rng(seed).permutation(len(gadre))[: len(gadre) // 5]] = True
    gf = cj.fit_benchmarks(
        gadre, losses=g_losses, benchmarks=["acc_hellaswag"], key=key, restarts=16, weights=(~held).astype(float)
    )
    pred = np.asarray(gf.laws["acc_hellaswag"](jnp.asarray(gadre[g_losses].to_numpy())))
    out = {"gadre": gadre, "held": held, "pred": pred, "g_losses": g_losses, "g_bench": g_bench, "heldout": None}
    if n_splits:
        sets = {"multi-loss (8)": g_losses, "single-loss (c4)": ["loss_c4_val"]}
        out["heldout"] = cj.experiments.heldout_benchmark_error(gadre, sets, g_bench, key, n_splits=n_splits)
    return out


def _gadre_stage(stages: _Stages, fits: dict[str, Any], numbers: dict[str, Any], n_splits: int) -> dict[str, Any]:
    from camel_jax import plot

    gadre, held, pred, g_bench = fits["gadre"], fits["held"], fits["pred"], fits["g_bench"]
    mae = float(np.mean(np.abs(pred[held] - gadre["acc_hellaswag"].to_numpy()[held])))
    text = f"gadre2024 ({len(gadre)} models, shipped subset, MIT): HellaSwag held-out error {100 * mae:.2f} points"
    if n_splits:
        heldout = fits["heldout"]
        per_split = heldout.groupby(["split", "losses"])["heldout_mae"].mean().unstack()
        diff = per_split["multi-loss (8)"] - per_split["single-loss (c4)"]
        numbers["gadre"] = heldout.groupby(["benchmark", "losses"])["heldout_mae"].mean().unstack()
        text += (f"; over {len(g_bench)} benchmarks and {n_splits} splits, 8 losses beat c4 alone by "
                 f"{-100 * diff.mean():.2f} +- {100 * diff.std(ddof=1) / np.sqrt(len(diff)):.2f} points")  # fmt: skip
    stages.done("real data", text + " (fitted in a thread beside the stages above; the time is the wait)")
    figure = plot.predicted_vs_observed(
        gadre["acc_hellaswag"][~held], pred[~held], gadre["acc_hellaswag"][held], pred[held],
        title="gadre2024 HellaSwag: multi-loss law", label="accuracy",
    )  # fmt: skip
    return {"gadre_hellaswag_predicted_vs_observed.png": figure}
