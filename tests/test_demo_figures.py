"""The demo shows a decision worth making, and its figures pass what a reader would check by eye.

Every check reads the arrays a figure draws (`plot.drawn`), not its image. The band check fails on the demo's old
proxy-loss figure (a two-stage band of resampled proxy losses, each in its own resample's units).
"""

import re
import shlex
from pathlib import Path

import jax.numpy as jnp
import matplotlib
import pytest

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import camel_jax as cj  # noqa: E402
from camel_jax import _demo as demo  # noqa: E402
from camel_jax import cli, plot  # noqa: E402

README = Path(__file__).resolve().parents[1] / "README.md"


def band_problems(fig, runs_at_size, width_factor=3.0, min_inside=0.8):
    """What a reader would object to in a band at the trained sizes: observations outside it (more than
    1 - `min_inside` of them), or a band wider than `width_factor` times the spread (max - min) of all the runs
    fitted at that size (`runs_at_size` {size: values}, in the figure's units). [] when there is nothing."""
    d = plot.drawn(fig)
    log_grid = np.log(d["size"])
    inside, problems = [], []
    for name, low, high, sizes, values in zip(d["legend"], d["low"], d["high"], d["observed_size"], d["observed"]):
        if low is None or sizes is None:
            continue
        for size, value in zip(sizes, values):
            if size not in runs_at_size:
                continue  # a held-out size: not fitted on
            lo, hi = np.interp(np.log(size), log_grid, low), np.interp(np.log(size), log_grid, high)
            inside.append(lo <= value <= hi)
            spread = np.ptp(runs_at_size[size])
            if hi - lo > width_factor * spread:
                problems.append(f"{name} at size {size:g}: band {hi - lo:.3g} wide, runs spread {spread:.3g}")
    if not inside:
        problems.append("no observation at a trained size")
    elif np.mean(inside) < min_inside:
        problems.append(f"only {np.mean(inside):.0%} of the fitted observations inside the band")
    return problems


@pytest.mark.slow  # suite budget (issue 57): the demo at CI size (126 s, shared by this module's demo tests)
def test_demo_runs_offline_and_beats_the_reference(demo_quick):
    tmp_path, numbers = demo_quick
    scores = numbers["scores"]  # each mixture scored by the simulator's true score: exact, no noise
    # a known answer: the optimum of the true score in the trust region is at least as good as any mixture there
    assert scores["true optimum"] >= max(scores["predicted"], scores["reference"]) - 1e-9
    # the claim, on this world, with a margin: the pick gains over half of what could be gained over the reference
    # (whether picks beat the reference across worlds is measured over 20 worlds in benchmarks/study_backtest.py)
    gap = scores["true optimum"] - scores["reference"]
    assert gap > 0 and scores["predicted"] - scores["reference"] > 0.5 * gap
    assert numbers["captured"] == pytest.approx((scores["predicted"] - scores["reference"]) / gap, rel=1e-6)
    assert max(numbers["benchmark_mae"].values()) < 0.01
    assert len(list(tmp_path.glob("*.png"))) == 4


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): the demo fixture (126 s)
def test_world_offers_a_decision_worth_making(demo_quick):
    _, numbers = demo_quick
    setup = numbers["setup"]
    assert numbers["true_gain"] >= demo.MIN_GAIN
    # independent of the optimizer: random mixtures within the trust region never beat the truth, and the best
    # of them comes close to it
    rng = np.random.default_rng(0)
    ref = setup.reference
    box = ref * (1 + demo.SHIFT * rng.uniform(-1, 1, (4000, len(ref))))
    r = box / box.sum(axis=1, keepdims=True)
    r = r[np.all(np.abs(r / ref - 1) <= demo.SHIFT, axis=1)]
    weights = jnp.asarray([cj.BENCHMARK_WEIGHTS[demo.WEIGHTS][b] for b in setup.world.benchmarks])
    acc = setup.world.accuracies(jnp.asarray(r), jnp.full(len(r), demo.TARGET))
    values = np.asarray(acc @ weights)
    true_ref = float(setup.true_f(jnp.asarray(ref)))
    assert values.max() - true_ref <= numbers["true_gain"] + 1e-9
    assert values.max() - true_ref >= 0.7 * numbers["true_gain"]
    scores = numbers["scores"]
    assert numbers["captured"] == (scores["predicted"] - scores["reference"]) / numbers["true_gain"]
    assert numbers["decision"].verdict in cj.mixture.VERDICTS


def runs_by_size(runs, values):
    return {float(s): values[runs["size"].to_numpy() == s] for s in np.unique(runs["size"])}


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): the demo fixture (126 s)
def test_score_band_holds_the_runs_and_is_narrow(demo_quick):
    out, numbers = demo_quick
    setup, fig = numbers["setup"], numbers["figures"]["decision_score_vs_size.png"]
    runs = pd.read_csv(out / "runs.csv")  # the user's units: the written table's accuracies
    score = 100 * sum(w * runs[f"acc_{b}"].to_numpy() for b, w in cj.BENCHMARK_WEIGHTS[demo.WEIGHTS].items())
    assert band_problems(fig, runs_by_size(runs, score)) == []
    d = plot.drawn(fig)
    reference = d["legend"].index("reference")
    rows = np.all(np.isclose(runs[[f"r_{x}" for x in setup.datasets]].to_numpy(), setup.reference), axis=1)
    trained = d["observed_size"][reference] <= d["trained_max"]
    np.testing.assert_allclose(d["observed"][reference][trained], score[rows], rtol=1e-12)
    assert "accuracy points" in d["ylabel"] and "size" in d["xlabel"]


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): the demo fixture (126 s)
def test_the_old_proxy_loss_figure_fails_the_band_check(demo_quick):
    """The demo's old figure drew the two-stage resamples' proxy losses around the full-data proxy losses: each
    resample's proxy k_b . L follows its own refitted benchmark law (another scale), so the band was of a different
    quantity and spanned several times the data's range at the trained sizes."""
    _, numbers = demo_quick
    setup, fits, fitted = numbers["setup"], numbers["fits"], numbers["fitted"]
    data = setup.world.mixture_data(setup.train, setup.losses[0])
    proxy = cj.MixtureData(r=data.r, y=fits.proxy["mmlu"], size=data.size, group=data.group, positive_target=False)
    old = plot.loss_vs_size(proxy, fitted.pipeline.loss_laws["mmlu"],
                            bootstrap=cj.BootstrapResult.of_laws(fitted.pipelines.loss_laws["mmlu"]),
                            extend_to=demo.TARGET, mixtures=[0, 1, 2, 5])  # fmt: skip
    assert any("wide" in p for p in band_problems(old, runs_by_size(setup.train, np.asarray(fits.proxy["mmlu"]))))
    assert plot.drawn(old)["legend"] == ["mixture 0", "mixture 1", "mixture 2", "mixture 5"]  # the old legend


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): the demo fixture (126 s)
def test_predicted_vs_observed_lie_near_the_diagonal(demo_quick):
    _, numbers = demo_quick
    for name in ("benchmark_predicted_vs_observed.png", "gadre_hellaswag_predicted_vs_observed.png"):
        d = plot.drawn(numbers["figures"][name])
        obs = np.concatenate([d["observed"], d["observed_test"]])
        error = np.abs(np.concatenate([d["predicted"], d["predicted_test"]]) - obs)
        assert np.median(error) <= 0.05 * np.ptp(obs), name
        assert error.max() <= 0.25 * np.ptp(obs), name
        assert d["xlabel"] == "observed accuracy" and d["ylabel"] == "predicted accuracy"


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): the demo fixture (126 s)
def test_legends_name_what_is_drawn(demo_quick):
    _, numbers = demo_quick
    setup, figures = numbers["setup"], numbers["figures"]
    assert len(figures) == 4
    for name, fig in figures.items():
        legend = plot.drawn(fig)["legend"]
        assert legend and not any(re.fullmatch(r"mixture \d+", label) for label in legend), name
    assert set(setup.benchmarks) <= set(plot.drawn(figures["benchmark_predicted_vs_observed.png"])["legend"])
    decision = plot.drawn(figures["decision_mixture.png"])
    assert decision["datasets"] == setup.datasets and "mixture weight" in decision["xlabel"]
    assert np.all(decision["region_low"] - 1e-9 <= decision["pick"])
    assert np.all(decision["pick"] <= decision["region_high"] + 1e-9)
    np.testing.assert_allclose(decision["true"], setup.truth)
    score = plot.drawn(figures["decision_score_vs_size.png"])["legend"]
    assert score[0] == "reference" and any(label.startswith("pick") for label in score)


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): the demo fixture and four CLI calls (172 s)
def test_the_printed_commands_run_on_the_demos_csv(demo_quick, tmp_path, capsys):
    """The three commands the demo prints for a user's own CSV work on the CSV it wrote (fewer restarts and
    resamples, to keep the test short; in a copy of its folder, which the other tests read)."""
    out, numbers = demo_quick
    for name in ("runs.csv", "candidates.csv"):
        (tmp_path / name).write_bytes((out / name).read_bytes())
    commands = [c.replace(str(out), str(tmp_path)) for c in numbers["commands"]]
    assert all(str(tmp_path) in c for c in commands)
    assert [c.split()[:2] for c in commands] == [["camel-jax", "fit"], ["camel-jax", "optimize"],
                                                 ["camel-jax", "next"]]  # fmt: skip
    faster = {"fit": ["--law", "camel-tied", "--restarts", "4", "--resamples", "8"], "optimize": [],
              "next": ["--resamples", "8"]}  # fmt: skip
    for command in commands:
        argv = shlex.split(command)[1:]
        assert cli.main(argv + faster[argv[0]]) == 0, command
    printed = capsys.readouterr().out
    assert "verdict" in printed or "optimal" in printed.lower()


def summary_shape(text):
    """A summary with its numbers blanked: what the README's excerpt and the demo's output share."""
    text = text.replace("20 resamples, --quick", "100 resamples")
    return re.sub(r"[+-]?\d+(\.\d+)?", "#", text)


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): the demo fixture (126 s)
def test_readme_quotes_the_demos_summary(demo_quick):
    out, numbers = demo_quick
    block = re.search(r"<!-- demo-summary -->\n(.*?)<!-- /demo-summary -->", README.read_text(), flags=re.S)
    assert block is not None, "README.md has no demo-summary block"
    excerpt = block.group(1).strip()
    summary = (out / "summary.md").read_text().strip()
    assert summary == numbers["summary"].strip()
    assert summary_shape(excerpt) == summary_shape(summary)
    available = [line for line in summary.splitlines() if line.startswith("- available")]
    assert available and available[0] in excerpt  # the truth does not depend on the fits: the same number


def test_a_stage_counts_its_fits_warnings_into_its_line(capsys):
    """The demo's console reads top to bottom: a stage's `FitWarning`s are summed into its line (how many targets'
    best starts did not converge, of how many), other warnings get a line each, and each warning is reported once."""
    import warnings

    from camel_jax._demo import _Stages

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stages = _Stages(caught)
        warnings.warn(cj.FitWarning("the best start of 2 of 5 targets did not converge", 2, 5))
        warnings.warn(cj.FitWarning("the best fit explains none of the variance", 0, 5))
        warnings.warn(cj.FitWarning("the best start of 3 of 140 targets did not converge", 3, 140))
        warnings.warn("fitting 31 free parameters on 12 points")
        stages.done("mixture laws", "fitted")
        stages.done("decision", "picked")
    lines = capsys.readouterr().out.splitlines()
    assert stages.unconverged == {"mixture laws": (5, 145)}  # the R^2 warning counts no unconverged target
    fitted = next(i for i, line in enumerate(lines) if "mixture laws" in line)
    assert "the best start of 5 of 145 targets" in lines[fitted + 1]
    assert "warning: fitting 31 free parameters" in lines[fitted + 2]
    picked = [line for line in lines if "decision" in line]
    assert len(picked) == 1 and picked[0].rstrip().endswith("picked")  # nothing left over for the next stage


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): the demo fixture (126 s)
def test_the_demo_reports_its_unconverged_fits(demo_quick):
    """No unconverged fit goes unreported: the point fit's unconverged proxy losses are among the mixture stage's
    count (which also holds the resampled refits')."""
    _, numbers = demo_quick
    best = np.atleast_1d(np.asarray(numbers["fitted"].loss_fit.best_status))
    late_point = int(np.sum(~np.isin(best, [cj.Status.CONVERGED, cj.Status.STALLED])))
    late, total = numbers["unconverged"].get("mixture laws", (0, 0))
    assert late >= late_point and total >= (best.size if late_point else 0)
    for stage, (n, of) in numbers["unconverged"].items():
        assert 0 < n <= of, (stage, n, of)
