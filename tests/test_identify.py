"""What the data determine: the identifiability report, the design warnings, convergence on Epoch's data."""

import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import shared_data

import camel_jax as cj
from camel_jax import cli
from camel_jax.experiments import _simulate
from camel_jax.experiments._design import perturbed_mixtures
from camel_jax.fitting._identify import element_names, identifiability

REFERENCE = np.array([0.35, 0.25, 0.15, 0.10, 0.15])
PAPER_SIZES = [4.0, 5.0, 6.0, 7.0, 8.0, 10.0]


def world_table(sizes, noise=0.003):
    world = _simulate.default_world(jax.random.key(0))
    return world, world.runs(perturbed_mixtures(REFERENCE), sizes, noise=noise, key=jax.random.key(1))


def tied_camel(k):
    return cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=k, tied=True, capacity_exponent=3.0)


def test_floor_is_not_identified_when_sizes_span_less_than_a_decade():
    # Sizes 4-10: a term with beta -> 0 and K -> infinity turns into C' - b log M, so C trades against the K_i.
    world, runs = world_table(PAPER_SIZES)
    data = world.mixture_data(runs, "loss_val0")
    result = cj.fit(tied_camel(3), data.inputs, data.y, key=jax.random.key(1), restarts=16)
    report = result.identifiability()
    assert "C" in report.not_identified
    assert "C" in result.summary()["not_identified"]
    assert report.sd[report.names.index("C")] > 10 * report.max_sd


def test_one_domain_law_on_sizes_over_two_decades_is_identified():
    world, runs = world_table([1.0, 3.0, 10.0, 30.0, 100.0, 300.0])
    data = world.mixture_data(runs, "loss_val0")
    result = cj.fit(tied_camel(1), data.inputs, data.y, key=jax.random.key(1), restarts=16)
    report = result.identifiability()
    # t has one domain, so every entry is exactly 1: its logits are pure gauge and must not be reported.
    assert report.not_identified == ()
    sd = dict(zip(report.names, report.sd))
    assert sd["C"] < 0.01 and sd["beta[0]"] < 0.05 and sd["K[0]"] < 0.05


def test_standard_deviations_match_numpy_finite_differences_on_epoch():
    df = shared_data.epoch_chinchilla()
    N, D, y = (df[c].to_numpy() for c in ("N", "D", "loss"))
    result = cj.fit(cj.Chinchilla.sample_init(jax.random.key(0)), (N, D), y, key=jax.random.key(0), restarts=32)
    report = result.identifiability()
    p = {k: float(v) for k, v in result.law.params().items()}
    names = ["A", "B", "E", "alpha", "beta"]
    theta = np.log([p[n] for n in names])

    def res(t):  # independent NumPy residuals in the log of every parameter
        A, B, E, a, b = np.exp(t)
        return np.log(E + A * N**-a + B * D**-b) - np.log(y)

    h = 1e-6
    J = np.stack([(res(theta + h * e) - res(theta - h * e)) / (2 * h) for e in np.eye(5)], axis=1)
    s2 = np.sum(res(theta) ** 2) / (len(y) - 5)
    expected = np.sqrt(s2 * np.diag(np.linalg.inv(J.T @ J)))
    got = np.array([report.sd[report.names.index(n)] for n in names])
    np.testing.assert_allclose(got, expected, rtol=1e-4)
    assert report.not_identified == ()


def test_max_sd_is_validated():
    law = cj.PowerLaw.from_params(E=1.0, A=2.0, alpha=0.5)
    x = jnp.array([1.0, 2.0, 4.0, 8.0])
    with pytest.raises(ValueError, match="max_sd"):
        identifiability(law, (x,), law(x), jnp.ones(4), max_sd=0.0)


def quick_fit(law, inputs, y):
    """A short fit: the design warnings do not depend on convergence."""
    return cj.fit(law, inputs, y, key=jax.random.key(0), restarts=4, options=cj.FitOptions(max_steps=100, polish=0))


def caught_messages(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught]


def test_one_model_size_warns():
    world, runs = world_table([6.0])
    data = world.mixture_data(runs, "loss_val0")
    messages = caught_messages(lambda: quick_fit(tied_camel(1), data.inputs, data.y))
    assert any("one model size" in m for m in messages)


def test_fewer_sizes_than_size_parameters_warns():
    world, runs = world_table([4.0, 10.0])
    data = world.mixture_data(runs, "loss_val0")
    messages = caught_messages(lambda: quick_fit(tied_camel(3), data.inputs, data.y))
    assert any("2 distinct model sizes for 4 parameters" in m for m in messages)
    # six sizes are enough for k=3 (4 size parameters): no size warning
    world, runs = world_table(PAPER_SIZES)
    data = world.mixture_data(runs, "loss_val0")
    messages = caught_messages(lambda: quick_fit(tied_camel(3), data.inputs, data.y))
    assert not any("model size" in m for m in messages)


def test_two_point_table_warns():
    law = cj.Chinchilla.sample_init(jax.random.key(0))
    N, D = np.array([1e8, 1e9]), np.array([2e9, 2e10])
    messages = caught_messages(lambda: quick_fit(law, (N, D), np.array([3.0, 2.5])))
    assert any("5 free parameters to 2 points" in m for m in messages)
    assert any("2 distinct model sizes for 3 parameters" in m for m in messages)


def test_fit_that_explains_nothing_warns():
    # One intrinsic domain: <t, r> = 1 for every mixture, so CAMEL cannot follow a loss that varies with r.
    rng = np.random.default_rng(0)
    r = rng.dirichlet(np.ones(3), 24)
    M = np.repeat([4.0, 8.0], 12)
    y = 2.0 + r[:, 0]
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=1)
    messages = caught_messages(lambda: quick_fit(law, (r, M), y))
    assert any("explains none of the variance" in m and "R^2 = -" in m for m in messages)
    # a multi-target fit names how many targets and which rows, not one R^2 per target
    Y = np.stack([2.0 + 0.1 / M**0.5, y, 2.0 + 0.2 / M**0.3, y + 0.1])  # rows 1 and 3 depend on r only
    messages = caught_messages(lambda: quick_fit(law, (r, M), Y))
    said = [m for m in messages if "explains none of the variance" in m]
    assert len(said) == 1 and "2 of 4 targets, rows [1, 3]; worst R^2 = -" in said[0], said


def test_non_finite_parameters_are_errors():
    with pytest.raises(ValueError, match="parameter `C` must be finite"):
        cj.CAMEL.from_params(t=np.full((1, 2), 1.0), K=[1.0], alpha=[0.5], beta=[0.5], C=np.nan)
    with pytest.raises(ValueError, match="parameter `beta` must be finite"):
        cj.Chinchilla.from_params(A=1.0, B=1.0, E=1.0, alpha=0.3, beta=np.inf)


@pytest.mark.slow  # the suite's budget (issue 57): 13 s; test_epoch fits Epoch's table in CI
def test_defaults_converge_on_epoch_chinchilla_and_refit_reproduces_the_point():
    df = shared_data.epoch_chinchilla()
    inputs, y = (df["N"].to_numpy(), df["D"].to_numpy()), df["loss"].to_numpy()
    law = cj.Chinchilla.sample_init(jax.random.key(0))
    result = cj.fit(law, inputs, y, key=jax.random.key(3))
    reference = cj.fit(law, inputs, y, key=jax.random.key(3), options=cj.FitOptions(max_steps=20_000))
    assert np.mean(np.asarray(result.converged)) >= 0.9
    assert int(result.best_status) in (1, 2)  # converged or stalled at working precision
    assert abs(float(result.objective) - float(reference.objective)) <= 1e-8 * float(reference.objective)
    # Unit resample weights, warm-started from the point fit: the same data give the same parameters.
    warm = jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (3, 1) + leaf.shape), result.law)
    refit = cj.fit(law, inputs, np.tile(y, (3, 1)), key=jax.random.key(4), inits=warm, weights=np.ones((3, len(y))))
    for name, value in result.law.params().items():
        np.testing.assert_allclose(np.asarray(refit.law.params()[name]), np.broadcast_to(value, (3,)), rtol=1e-5)


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 34 s: a CLI fit with its bootstrap
def test_cli_intervals_contain_every_identified_point_estimate(tmp_path, capsys):
    world, runs = world_table(PAPER_SIZES)
    runs.to_csv(tmp_path / "runs.csv", index=False)
    prefix = tmp_path / "fit"
    code = cli.main(
        ["fit", str(tmp_path / "runs.csv"), "--law", "camel-tied", "--target", "loss_val0", "--out", str(prefix),
         "--restarts", "16", "--resamples", "40"]
    )  # fmt: skip
    assert code == 0
    out = json.loads((tmp_path / "fit.json").read_text())
    printed = capsys.readouterr().out
    assert out["best_status"] in ("converged", "stalled", "max steps")
    assert "starts converged" in printed and "resamples converged" in printed
    assert "C" in out["summary"]["not_identified"]
    block = out
    if "log_limit" in out:
        # This design's fit puts a term in the log-law limit (beta = 0: C and that K infinite): the paper's
        # parameters are printed as the limit, not as the numbers where the coordinates stopped, and the law's
        # finite coordinates follow with their own intervals.
        block = out["log_limit"]
        terms = block["terms"]
        # never `inf` (issue 56): the limit is said in words
        assert terms and "are in the law's log-law limit" in printed and "inf\n" not in printed
        assert "  C: degenerate (minus infinite in the log-law limit)\n" in printed
        assert np.all(np.asarray(out["params"]["beta"])[terms] < 1e-8) and np.isfinite(block["params"]["C1"])
        assert "finite coordinates (reference size" in printed and "  C1: " in printed
        assert set(block["intervals_95"]) == {"a", "b", "kappa", "C1"} and "C1" not in block["not_identified"]
    else:
        assert "not identified by these data: C" in printed
    # A point outside its own interval is allowed only where the data leave the parameter free: the local check
    # says so, or the bootstrap does (an interval spanning more than three orders of magnitude, as where C and one
    # K run off together toward the log-law limit); and every such point is said.
    spans = {}
    for name, (lo, hi) in block["intervals_95"].items():
        # the JSON writes an end that is not finite as null (strict JSON): read it as unbounded
        low, high = (np.abs(np.where(np.equal(np.asarray(v, dtype=object), None), np.inf, v).astype(float)).ravel()
                     for v in (lo, hi))  # fmt: skip
        ratio = np.maximum(low, high) / np.maximum(np.minimum(low, high), 1e-300)
        spans.update(zip(element_names(name, lo), ratio))
    free = set(block.get("not_identified", out["summary"]["not_identified"]))
    free |= {label for label, span in spans.items() if span > 1e3}
    assert set(block["outside_interval"]) <= free
    if block["outside_interval"]:
        assert "point estimate outside its own interval for " + ", ".join(block["outside_interval"]) in printed
