"""Decisions from losses alone (issue 56): the pick inside the runs' support, its band, the gain over a reference with
its band and a verdict; `camel-jax optimize --reference --out` and `camel-jax predict`; the fit file keeps the
bootstrap that the bands need."""

import dataclasses
import inspect
import json
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from helpers import known_tied_camel

import camel_jax as cj
from camel_jax import cli, simulate
from camel_jax.fitting import _degenerate
from camel_jax.fitting._degenerate import degenerate_parameters, in_limits
from camel_jax.io._save import _fit_hash

# The simulated worlds' decision: runs with 0.1% relative noise at sizes 2, 4 and 8 (12 mixtures: the reference and
# 11 drawn from a flat Dirichlet), decided at size 16 against a reference that no world favours.
NOISE = 0.001
TARGET = 16.0
REFERENCE = np.array([0.4, 0.1, 0.1, 0.1, 0.3])
RESTARTS = 16  # the CLI's ascent starts: the library calls here share its compiled programs


def world_decision(i: int, n_resamples: int = 32, starts: int | None = None) -> dict:
    """Fit, bootstrap (`n_resamples`, each from the fit's `starts` best starts: `bootstrap_fit`'s default 4) and
    decide in world i; the true losses of the pick, the recommended mixture and the reference at the target size."""
    world = simulate.default_world(jax.random.key(i))
    mixtures = np.vstack([REFERENCE, np.random.default_rng(i).dirichlet(np.ones(5), 11)])
    runs = world.runs(mixtures, [2.0, 4.0, 8.0], noise=NOISE, key=jax.random.key(100 + i))
    data = world.mixture_data(runs, "loss_val0")
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=2, tied=True, capacity_exponent=3.0)
    with _quiet():
        result = cj.fit(law, data.inputs, data.y, key=jax.random.key(i), restarts=4)
    boot = cj.bootstrap_fit(result, key=jax.random.key(200 + i), n_resamples=n_resamples, starts=starts)
    result = dataclasses.replace(result, bootstrap=boot)
    decision = cj.decide_loss(result, key=jax.random.key(300 + i), size=TARGET, reference=REFERENCE, restarts=RESTARTS)

    def true(r):
        return float(world.losses(jnp.asarray(r)[None], jnp.array([TARGET]))[0, 0])

    return {"decision": decision, "pick": true(decision.mixture), "recommended": true(decision.recommended),
            "reference": true(REFERENCE), "support": cj.mixture.data_support(result)}  # fmt: skip


class _quiet:
    """Silence FitWarning (an unconverged start is reported, and the decision carries it in `problems`)."""

    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("ignore", cj.FitWarning)

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)


@pytest.fixture(scope="module")
def worlds():
    cache: dict[tuple, dict] = {}

    def get(i: int, **kw) -> dict:
        key = (i, *sorted(kw.items()))
        if key not in cache:
            cache[key] = world_decision(i, **kw)
        return cache[key]

    return get


def check_worlds(outcomes: list[dict]) -> None:
    """The issue's claims over worlds: a band and a verdict in every world; never a recommendation truly worse than
    the reference beyond one run's noise; the pick recommended in at least half of the worlds where its true gain is
    above that noise."""
    for o in outcomes:
        d = o["decision"]
        assert d.verdict in cj.mixture.VERDICTS and d.decision is not None
        assert np.all(np.isfinite(d.mixture_low)) and np.all(np.isfinite(d.mixture_high))
        assert np.isfinite(d.decision.gain_low) and d.decision.gain_low <= d.decision.gain_high
        lower, upper = o["support"][:2]
        assert np.all(d.mixture >= lower - 1e-9) and np.all(d.mixture <= upper + 1e-9)  # inside the support
        noise = NOISE * o["reference"]
        assert o["recommended"] <= o["reference"] + noise, (o["recommended"], o["reference"])
        if any(p.startswith("degenerate fit") for p in d.problems):  # its extrapolation means nothing: no verdict
            assert d.verdict == "not resolved" and "degenerate" in d.decision.reason
    above = [o for o in outcomes if o["reference"] - o["pick"] > NOISE * o["reference"]]
    taken = [o for o in above if o["decision"].verdict == "improves"]
    assert len(taken) >= len(above) / 2, (len(taken), len(above))


def test_loss_decisions_in_ten_worlds_at_ci_size(worlds):
    """The issue's claim over 10 worlds, at CI size: 16 resamples, each refitted from the fit's best start. Each
    world's resamples crawl to the step cap along a floor that sizes 2 to 8 cannot fix; at the defaults (32
    resamples from 4 starts, the test below) that is ~2 CPU-minutes, past the suite's budget."""
    outcomes = [worlds(i, n_resamples=16, starts=1) for i in range(10)]
    check_worlds(outcomes)
    above = [o for o in outcomes if o["reference"] - o["pick"] > NOISE * o["reference"]]
    assert len(above) >= 3  # the claim about resolvable gains rests on several worlds, not on none


@pytest.mark.slow  # ~2 CPU-minutes of compiling and fitting at the defaults: past the suite's budget
def test_loss_decisions_in_twelve_worlds(worlds):
    outcomes = [worlds(i) for i in range(12)]
    check_worlds(outcomes)
    above = [o for o in outcomes if o["reference"] - o["pick"] > NOISE * o["reference"]]
    assert len(above) >= 3  # the claim about resolvable gains rests on several worlds, not on none


def test_loss_draws_calibration_shared_level_cancels_in_the_ratio():
    """A calibration with a level error only (kappa_mix = 0) multiplies both mixtures' losses of a draw by the same
    factor (log scale): their ratio is the bootstrap's; a mixture error changes it. Checked on a hand-made batch."""
    law = jax.tree.map(lambda leaf: jnp.stack([leaf, leaf * 1.01]), known_tied_camel())
    boot = cj.BootstrapResult.of_laws(law)
    r = np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]])
    zero, level = jnp.zeros(()), jnp.asarray(0.05)

    def cal(kappa_mix):
        return cj.Calibration(kappa_level=level, kappa_mix=jnp.asarray(kappa_mix), size_max=2.0, size_index=1,
                              log_scale=True, distances=(0.5, 1.0, 1.5), rms_error=zero, boot_sd=zero,
                              noise_sd=zero)  # fmt: skip

    plain = cj.mixture.loss_draws(boot, r, (8.0,), key=jax.random.key(0))
    law_at = np.asarray(jax.vmap(lambda one: one(jnp.asarray(r), jnp.full(2, 8.0)))(law))
    np.testing.assert_allclose(plain, law_at, rtol=1e-12)  # no calibration: each resample's own prediction
    shared = cj.mixture.loss_draws(boot, r, (8.0,), key=jax.random.key(0), calibration=cal(0.0))
    assert not np.allclose(shared, plain)
    np.testing.assert_allclose(shared[:, 0] / shared[:, 1], plain[:, 0] / plain[:, 1], rtol=1e-12)
    mixed = cj.mixture.loss_draws(boot, r, (8.0,), key=jax.random.key(0), calibration=cal(0.05))
    assert not np.allclose(mixed[:, 0] / mixed[:, 1], plain[:, 0] / plain[:, 1], rtol=1e-6)
    inside = cj.mixture.loss_draws(boot, r, (2.0,), key=jax.random.key(0), calibration=cal(0.05))
    np.testing.assert_allclose(inside, cj.mixture.loss_draws(boot, r, (2.0,), key=jax.random.key(0)), rtol=1e-12)


def test_data_support_widens_each_trained_range_by_the_margin():
    r = np.array([[0.2, 0.3, 0.5], [0.4, 0.3, 0.3], [0.3, 0.3, 0.4]])
    lower, upper, low, high = cj.mixture.data_support(r)
    np.testing.assert_allclose(low, [0.2, 0.3, 0.3])
    np.testing.assert_allclose(high, [0.4, 0.3, 0.5])
    np.testing.assert_allclose(lower, [0.15, 0.3, 0.25])  # 25% of each range on each side
    np.testing.assert_allclose(upper, [0.45, 0.3, 0.55])
    lower, upper, _, _ = cj.mixture.data_support(np.array([[0.0, 1.0], [0.1, 0.9]]), margin=1.0)
    np.testing.assert_allclose(lower, [0.0, 0.8])  # clipped to [0, 1]
    np.testing.assert_allclose(upper, [0.2, 1.0])
    with pytest.raises(ValueError, match="margin"):
        cj.mixture.data_support(r, margin=-0.1)


# --- the command line: fit -> optimize --reference --out, predict ------------------------------------------------


@pytest.fixture(scope="module")
def cli_fit(tmp_path_factory):
    """`camel-jax fit` on a small table (perturbed mixtures around the reference: a narrow trained range), its
    held-out rows at size 12 and the fit file (8 resamples, no calibration: the bands' file round trip is the point)."""
    folder = tmp_path_factory.mktemp("lossdec")
    world = simulate.default_world(jax.random.key(0))
    ref = np.array([0.35, 0.25, 0.15, 0.10, 0.15])
    runs = world.runs(cj.experiments.perturbed_mixtures(ref), [4.0, 6.0, 8.0, 12.0], noise=0.002, key=jax.random.key(1))
    table = runs.rename(columns={"loss_val0": "loss"})[[f"r_{d}" for d in world.datasets] + ["size", "loss"]]
    table[table["size"] < 12].to_csv(folder / "train.csv", index=False)
    table[table["size"] == 12].to_csv(folder / "test.csv", index=False)
    argv = ["fit", str(folder / "train.csv"), "--law", "camel-tied", "--n-domains", "2", "--restarts", "4",
            "--resamples", "8", "--no-calibrate", "--out", str(folder / "fit")]  # fmt: skip
    assert cli.main(argv) == 0
    return folder, ref, table


def test_optimize_writes_the_decision_json(cli_fit, capsys):
    folder, ref, table = cli_fit
    capsys.readouterr()
    argv = ["optimize", str(folder / "fit.npz"), "--size", "20", "--reference", ",".join(map(str, ref)),
            "--out", str(folder / "decision")]  # fmt: skip
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "pick's band (8 resamples' optima" in printed and "verdict: " in printed and "P(improves)" in printed
    record = json.loads((folder / "decision.json").read_text())
    columns = [c for c in table.columns if c.startswith("r_")]
    assert list(record["mixture"]) == columns and list(record["pick"]) == columns
    assert record["verdict"] in cj.mixture.VERDICTS and record["law"] == "CAMEL"
    chosen = record["pick"] if record["verdict"] == "improves" else dict(zip(columns, ref))
    assert record["recommended"] == ("pick" if record["verdict"] == "improves" else "reference")
    np.testing.assert_allclose(list(record["mixture"].values()), list(chosen.values()), atol=1e-12)
    assert record["gain_band"][0] <= record["gain"] <= record["gain_band"][1]
    assert record["fit_hash"] == _fit_hash(cj.load(folder / "fit.npz")) and record["resamples"] == 8
    # the printed pick is the library's decision on the loaded fit, inside the runs' support
    fitted = cj.load(folder / "fit.npz")
    lower, upper, _, _ = cj.mixture.data_support(fitted)
    pick = np.array(list(record["pick"].values()))
    assert np.all(pick >= lower - 1e-9) and np.all(pick <= upper + 1e-9)
    band = np.array(list(record["pick_band"].values()))
    assert np.all(band[:, 0] >= lower - 1e-9) and np.all(band[:, 1] <= upper + 1e-9)  # every resample's optimum too
    printed_line = printed.split("optimal mixture: ")[1].splitlines()[0]
    assert [float(part.split()[1]) for part in printed_line.split(", ")] == pytest.approx(pick, abs=5e-5)


def test_the_whole_simplex_only_when_asked_with_a_warning_naming_each_share(cli_fit):
    folder, ref, _ = cli_fit
    fitted = cj.load(folder / "fit.npz")
    _, _, low, high = cj.mixture.data_support(fitted)
    with pytest.warns(UserWarning, match=r"outside what the runs trained on") as caught:
        wide = cj.decide_loss(fitted, key=jax.random.key(0), size=20.0, reference=ref, support="simplex",
                              restarts=RESTARTS)  # fmt: skip
    outside = np.flatnonzero((wide.mixture < low - 1e-6) | (wide.mixture > high + 1e-6))
    assert len(outside) > 0  # this narrow design's simplex optimum leaves the trained range
    message = str(caught[0].message)
    assert all(f"{fitted.names[j]} at" in message for j in outside)
    assert wide.verdict == "not resolved"  # a pick outside the support gets no verdict
    assert "outside" in wide.decision.reason


def test_a_fit_whose_extrapolation_means_nothing_gives_no_verdict(cli_fit, monkeypatch):
    """An "improves" resting on a degenerate fit (by its own problems) is withheld: "not resolved", the reason
    naming it, the reference recommended. The fit here is sound; the test makes its law degenerate where
    `FitResult` looks (`degenerate_by_target`), so that the rule alone is what changes."""
    from camel_jax.mixture._decide import Decision
    from camel_jax.mixture._loss_decision import _withheld

    folder, ref, _ = cli_fit
    fitted = cj.load(folder / "fit.npz")
    improves = Decision(gain=0.01, gain_low=0.005, gain_high=0.02, p_improve=1.0, value=2.0, value_low=1.99,
                        value_high=2.01, level=0.95, verdict="improves", calibrated=False)  # fmt: skip
    assert fitted.meaningless_targets().size == 0
    assert _withheld(improves, fitted, np.ones(1), ["loss"], None) is improves
    monkeypatch.setattr(cj.FitResult, "degenerate_by_target", lambda self: [{"beta[1]": "a step in size"}])
    assert fitted.meaningless_targets().tolist() == [0] and any("degenerate" in p for p in fitted.problems())
    withheld = _withheld(improves, fitted, np.ones(1), ["loss"], None)
    assert withheld.verdict == "not resolved" and withheld.reason.startswith("the fit behind it is degenerate")
    decided = cj.decide_loss(fitted, key=jax.random.key(0), size=20.0, reference=ref, restarts=RESTARTS)
    assert decided.verdict == "not resolved" and np.array_equal(decided.recommended, ref)
    assert any(p.startswith("degenerate fit") for p in decided.problems)


def _with_params(law, **changes):
    """The same law (structure and units) with some of its `params()` changed (a tied law's alpha follows beta)."""
    accepted = inspect.signature(type(law).from_params).parameters
    keywords = {k: v for k, v in law.structure().items() if k in accepted}
    params = {k: v for k, v in law.params().items() if not (k == "alpha" and keywords.get("tied"))}
    return type(law).from_params(**(params | changes), **keywords)


def test_degenerate_resamples_travel_with_the_fit_into_the_decision(cli_fit):
    """A resampled law with a step in size is counted among the bootstrap's problems (`bootstrap_problems`), and the
    loss decision carries the sentence; a bootstrap of sound laws says nothing of it."""
    folder, ref, _ = cli_fit
    fitted = cj.load(folder / "fit.npz")
    law = fitted.law
    beta = np.asarray(law.params()["beta"], dtype=float)
    step = _with_params(law, beta=np.r_[beta[:-1], 3.0e4])  # a factor e^(3e4 * log 2) between sizes 4 and 8
    stack = lambda laws: jax.tree.map(lambda *leaves: jnp.stack(leaves), *laws)  # noqa: E731
    boot = cj.BootstrapResult.of_laws(stack([law, step, law, law]))
    np.testing.assert_array_equal(fitted.degenerate_resamples(boot), [False, True, False, False])
    said = fitted.bootstrap_problems(boot)
    assert said[-1].startswith("1 of 4 resamples are degenerate")
    clean = cj.BootstrapResult.of_laws(stack([law] * 4))
    assert not any("degenerate" in p for p in fitted.bootstrap_problems(clean))
    decided = cj.decide_loss(dataclasses.replace(fitted, bootstrap=boot), key=jax.random.key(0), size=20.0,
                             reference=ref, restarts=RESTARTS)  # fmt: skip
    assert said[-1] in decided.problems
    with pytest.raises(ValueError, match="no bootstrap"):
        dataclasses.replace(fitted, bootstrap=None).degenerate_resamples()
    assert dataclasses.replace(fitted, bootstrap=None).bootstrap_problems() == []


def test_fit_counts_and_says_the_degenerate_resamples(cli_fit, capsys, monkeypatch):
    """`camel-jax fit`'s JSON counts the resampled laws that are degenerate, as the saved fit's bootstrap does, and a
    warning line says them (one of the 8 made degenerate here: the same fit as the fixture's, another file)."""
    folder, _, _ = cli_fit
    record = json.loads((folder / "fit.json").read_text())
    assert record["bootstrap_degenerate"] == int(cj.load(folder / "fit.npz").degenerate_resamples().sum())
    # and those with a term in a limit of the law (their intervals' ends are that limit: `limit_params`)
    assert record["bootstrap_at_limits"] == int(in_limits(cj.load(folder / "fit.npz").bootstrap.laws).sum())
    monkeypatch.setattr(cj.FitResult, "degenerate_resamples", lambda self, bootstrap=None: np.arange(8) == 3)
    monkeypatch.setattr(_degenerate, "in_limits", lambda laws: np.arange(8) == 5)
    capsys.readouterr()
    argv = ["fit", str(folder / "train.csv"), "--law", "camel-tied", "--n-domains", "2", "--restarts", "4",
            "--resamples", "8", "--no-calibrate", "--out", str(folder / "fit_said")]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "warning: 1 of 8 resampled laws are degenerate" in out
    assert "note: 1 of 8 resampled laws have a term in a limit of the law" in out
    said = json.loads((folder / "fit_said.json").read_text())
    assert said["bootstrap_degenerate"] == 1 and said["bootstrap_at_limits"] == 1


def test_an_ascent_short_of_its_optimum_is_a_problem_of_the_decision(cli_fit):
    """A pick whose ascent stopped at its step cap is not passed as the optimum: the decision's problems say so,
    for the pick and for the resamples its band rests on (one polish step and no Adam: no start gets there)."""
    folder, ref, _ = cli_fit
    fitted = cj.load(folder / "fit.npz")
    cut = cj.mixture.AscentOptions(adam_steps=0, polish_steps=1, max_polish_steps=1)
    short = cj.decide_loss(fitted, key=jax.random.key(0), size=20.0, reference=ref, restarts=2, ascent=cut)
    assert any(p.startswith("the ascent to the pick stopped short of its optimum") for p in short.problems)
    assert any(p.startswith("the ascent of 8 of 8 resamples stopped short") for p in short.problems)
    full = cj.decide_loss(fitted, key=jax.random.key(0), size=20.0, reference=ref, restarts=RESTARTS)
    assert not any("stopped short" in p for p in full.problems)


def test_predict_gives_the_saved_band_and_its_coverage(cli_fit, capsys):
    folder, _, table = cli_fit
    capsys.readouterr()
    argv = ["predict", str(folder / "fit.npz"), str(folder / "test.csv"), "--out", str(folder / "pred.csv")]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "held-out: MAPE " in printed and "band covers" in printed and "not calibrated" in printed
    pred = pd.read_csv(folder / "pred.csv")
    test = pd.read_csv(folder / "test.csv")
    assert list(pred.columns) == list(test.columns) + ["predicted", "lower", "upper", "supported"]
    assert pred["supported"].all()  # CAMEL's terms: every held-out mixture within the trained range of <t_i, r>
    pd.testing.assert_frame_equal(pred[test.columns], test)  # the rows, unchanged
    assert np.all(pred["lower"] <= pred["upper"])
    # predicted: the saved law at the rows; the band: the saved bootstrap's percentile band (the same without
    # refitting) widened in quadrature, in log space, by one run's scatter about the law at Student-t's quantile
    from scipy import stats

    fitted = cj.load(folder / "fit.npz")
    columns = [c for c in test.columns if c.startswith("r_")]
    r, size = jnp.asarray(test[columns].to_numpy()), jnp.asarray(test["size"].to_numpy())
    p = np.asarray(fitted.law(r, size))
    np.testing.assert_allclose(pred["predicted"], p, rtol=1e-10)
    laws = jax.vmap(lambda law: law(r, size))(fitted.bootstrap.laws)
    low, high = np.percentile(np.asarray(laws), [2.5, 97.5], axis=0)
    residual = np.log(np.asarray(fitted.law(*fitted.inputs)) / np.asarray(fitted.y))
    floats = [x for x in jax.tree.leaves(fitted.law) if hasattr(x, "dtype") and np.issubdtype(x.dtype, np.floating)]
    dof = len(residual) - sum(np.size(x) for x in floats)
    half = stats.t.ppf(0.975, dof) * np.sqrt(np.sum(residual**2) / dof)
    low = p * np.exp(-np.sqrt(np.log(p / low) ** 2 + half**2))
    high = p * np.exp(np.sqrt(np.log(high / p) ** 2 + half**2))
    np.testing.assert_allclose(pred["lower"], low, rtol=1e-10)
    np.testing.assert_allclose(pred["upper"], high, rtol=1e-10)
    y = test["loss"].to_numpy()
    covers = float(np.mean((low <= y) & (y <= high)))
    assert f"covers {covers:.0%}" in printed


def test_predict_refuses_rows_without_a_fitted_column(cli_fit, tmp_path, capsys):
    folder, _, _ = cli_fit
    rows = pd.read_csv(folder / "test.csv").drop(columns=["r_math"])
    rows.to_csv(tmp_path / "rows.csv", index=False)
    assert cli.main(["predict", str(folder / "fit.npz"), str(tmp_path / "rows.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "'r_math'" in err and len(err.splitlines()) == 1


def test_a_fit_keeps_its_bootstrap_and_calibration_through_save_and_load(cli_fit, tmp_path):
    folder, _, _ = cli_fit
    fitted = cj.load(folder / "fit.npz")
    assert fitted.bootstrap is not None and fitted.bootstrap.n_resamples == 8 and fitted.calibration is None
    zero = jnp.zeros(())
    cal = cj.Calibration(kappa_level=jnp.asarray(0.01), kappa_mix=jnp.asarray(0.02), size_max=8.0, size_index=1,
                         log_scale=True, distances=(0.4, 0.7), rms_error=zero, boot_sd=zero, noise_sd=zero)  # fmt: skip
    with_cal = dataclasses.replace(fitted, calibration=cal)
    cj.save(with_cal, tmp_path / "cal.npz", metadata={"columns": {"target": "loss"}})
    back = cj.load(tmp_path / "cal.npz")
    assert jax.tree.structure(back) == jax.tree.structure(with_cal)
    for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(with_cal)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert back.calibration.distances == (0.4, 0.7) and back.calibration.size_max == 8.0
    assert cj.read_metadata(tmp_path / "cal.npz") == {"columns": {"target": "loss"}}
    # a file written before the bootstrap was kept loads, without one
    path = Path(__file__).parent / "data" / "format11_cameldata_fit.npz"
    old = cj.load(path)
    assert old.bootstrap is None and old.calibration is None and cj.read_metadata(path) == {}


def test_the_band_of_a_new_run_covers_new_runs_and_the_mean_band_does_not():
    """A new run's measured loss scatters about the law: `prediction_band` (new_runs, the default) covers new
    draws at the trained sizes near its level; the band of the law's mean alone (new_runs=False) covers far fewer
    (the RegMix quarter held out through the CLI: 0.41 at 0.39x the RMS error before this band). Over 4 fits'
    noise draws, 500 new runs each."""
    truth = cj.PowerLaw.from_params(E=2.0, A=5.0, alpha=0.6)
    x = jnp.asarray(np.repeat([1.0, 2.0, 4.0, 8.0, 16.0], 8))
    covered, mean_covered = [], []
    for seed in range(4):
        rng = np.random.default_rng(seed)
        y = np.asarray(truth(x)) * np.exp(0.01 * rng.standard_normal(x.shape))
        result = cj.fit(cj.PowerLaw.sample_init(jax.random.key(0)), (x,), jnp.asarray(y), key=jax.random.key(seed),
                        restarts=4)  # fmt: skip
        result = dataclasses.replace(result, bootstrap=cj.bootstrap_fit(result, key=jax.random.key(9), n_resamples=16))
        new_x = np.tile([1.0, 2.0, 4.0, 8.0, 16.0], 100)
        new_y = np.asarray(truth(jnp.asarray(new_x))) * np.exp(0.01 * rng.standard_normal(new_x.shape))
        _, low, high = result.prediction_band(jnp.asarray(new_x))
        covered.append(np.mean((low <= new_y) & (new_y <= high)))
        _, low, high = result.prediction_band(jnp.asarray(new_x), new_runs=False)
        mean_covered.append(np.mean((low <= new_y) & (new_y <= high)))
    assert 0.9 <= np.mean(covered) <= 0.99, covered
    assert np.mean(mean_covered) < 0.7, mean_covered


def test_a_fit_of_several_losses_is_calibrated_and_decides_on_the_objective_by_name(tmp_path, capsys, monkeypatch):
    """`camel-jax fit` of three losses on 4 sizes calibrates its extrapolation error, as a fit of one does (the
    calibration gets the law's template and the batched fit as its starts: before, the batched law failed its
    shapes, the fit said "not calibrated", and the bands past the largest size were the bootstrap's alone; on 5Mix
    at 1B they covered 0.05 of the held-out rows). Its file keeps the resamples of all three together ([B, T]
    laws), and the objective of one target by name is the decision of that target alone; names it does not have
    are refused."""
    world = simulate.default_world(jax.random.key(0))
    ref = np.array([0.35, 0.25, 0.15, 0.10, 0.15])
    runs = world.runs(cj.experiments.perturbed_mixtures(ref), [4.0, 6.0, 8.0, 12.0], noise=0.002, key=jax.random.key(1))
    names = ["loss_val0", "loss_val1", "loss_val2"]
    runs[[f"r_{d}" for d in world.datasets] + ["size", *names]].to_csv(tmp_path / "runs.csv", index=False)
    argv = ["fit", str(tmp_path / "runs.csv"), "--target", ",".join(names), "--law", "log-linear-size",
            "--restarts", "2", "--resamples", "4", "--out", str(tmp_path / "fit")]  # fmt: skip
    with _quiet():
        assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "extrapolation error:" in printed and "not calibrated" not in printed
    result = cj.load(tmp_path / "fit.npz")
    assert result.calibration is not None and result.n_targets == 3 and result.targets == tuple(names)
    boot = result.bootstrap
    r, size = np.asarray(result.inputs[0]), np.asarray(result.inputs[1])
    assert np.shape(boot.objectives) == (4, 3) and np.asarray(boot.predict(r, size)).shape == (4, 3, len(size))
    # each resampled law of each target is checked as that law alone, under its resample's weights
    steps = eqx.tree_at(lambda laws: laws.alpha, boot.laws, jnp.asarray(boot.laws.alpha).at[1, 2].set(3.0e4))
    found = result.degenerate_resamples(dataclasses.replace(boot, laws=steps))
    y, w = np.asarray(result.y), np.broadcast_to(np.asarray(result.weights), np.shape(result.y))
    counts = np.asarray(boot.resamples)
    alone = [[bool(degenerate_parameters(jax.tree.map(lambda leaf, b=b, t=t: leaf[b, t], steps), result.inputs,
                                         y[t], counts[b] * w[t])) for t in range(3)] for b in range(4)]  # fmt: skip
    np.testing.assert_array_equal(found, alone)
    assert found[1, 2]  # the size exponent of 3e4: a step between sizes 4 and 8
    with _quiet():
        one = cj.decide_loss(result, key=jax.random.key(2), size=20.0, reference=ref, weights="loss_val1",
                             restarts=RESTARTS)  # fmt: skip
    np.testing.assert_allclose(one.weights, [0.0, 1.0, 0.0])
    at = np.asarray(result.predict(jnp.asarray(np.stack([one.mixture, ref])), jnp.full(2, 20.0)))
    assert one.value == pytest.approx(at[1, 0], rel=1e-10) and one.reference_value == pytest.approx(at[1, 1], rel=1e-10)
    with pytest.raises(ValueError, match="no target 'val9'"):
        cj.decide_loss(result, key=jax.random.key(2), size=20.0, weights="val9")
    # a degenerate target withholds the verdict of an objective that weighs it, and only of such an objective
    from camel_jax.mixture._loss_decision import _withheld

    improves = dataclasses.replace(one.decision, verdict="improves", reason="")
    monkeypatch.setattr(cj.FitResult, "degenerate_by_target", lambda self: [{"C": "-inf"}, {}, {}])
    assert _withheld(improves, result, one.weights, names, None) is improves
    withheld = _withheld(improves, result, np.full(3, 1 / 3), names, None)
    assert withheld.verdict == "not resolved" and withheld.reason.startswith("the fit of loss_val0 is degenerate")
