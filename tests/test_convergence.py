"""Fits that finish (issue 29): the default problem of tied CAMEL on the paper's 66-run design converges in every
start to its first-order conditions, the same data give the same answer, and the units of loss and size do not
matter; files of earlier formats load as the same function; the other shipped laws' default problems converge
(Chinchilla on Epoch's data, SODMAdditive on the design and dmsl's c4, DML k=1 within its bound on the rate, free
CAMEL, SODMJoint and CAMELData on the design; the slow ones under `make test-all`).
`benchmarks/bench_fit.py --only convergence` and `benchmarks/study_convergence.py` print the figures."""

import warnings
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import shared_data
from helpers import known_tied_camel

import camel_jax as cj
from camel_jax.experiments import _simulate
from camel_jax.experiments._design import perturbed_mixtures
from camel_jax.laws._camel_data import mean_mixture

DATA = Path(__file__).parent / "data"
REFERENCE = np.array([0.35, 0.25, 0.15, 0.10, 0.15])
SIZES = np.array([4.0, 5.0, 6.0, 7.0, 8.0, 10.0])
TIED = dict(n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0)


@pytest.fixture(scope="module")
def design():
    world = _simulate.default_world(jax.random.key(0))
    runs = world.runs(perturbed_mixtures(REFERENCE), SIZES, noise=0.003, key=jax.random.key(1))
    data = world.mixture_data(runs, "loss_val0")
    return np.asarray(data.r), np.asarray(data.size), np.asarray(data.y)


@pytest.fixture(scope="module")
def point(design):
    r, M, y = design
    law = cj.CAMEL.sample_init(jax.random.key(0), **TIED)
    return cj.fit(law, (r, M), y, key=jax.random.key(1), restarts=32)


def test_every_start_meets_its_stopping_rule(point):
    status = np.asarray(point.status)
    assert np.mean(np.isin(status, [cj.Status.CONVERGED, cj.Status.STALLED])) >= 0.9, np.bincount(status)
    assert cj.Status(int(point.best_status)) == cj.Status.CONVERGED
    assert point.problems() == [] and point.summary(identify=False)["problems"] == []
    # converged means the first-order conditions: the gradient of the objective is within tolerance
    tol = float(cj.FitOptions().gradient_tolerance(point.weights))
    assert float(point.grad_norm[np.argmin(np.asarray(point.objectives))]) <= tol


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 19 s; test_every_start_meets_its_stopping_rule stays
def test_five_domains_meet_their_stopping_rule_within_a_bound_on_beta():
    """Tied k=5 (41 parameters) on another world's design (world 4): without a bound on beta 29 of 32 starts
    converged and the best start ran to the step cap; within beta_max = 9 (domain exponents <= 3), every start
    converges. With the default polish (300 Newton steps) whether the best start does is a coin flip on the
    compiler's last bits: at XLA's default and at backend optimization level 0 the best start (objective
    1.1582922e-4) converged after ~1,070 steps, at levels 1 and 2 another start reached that minimum only after
    1,875 steps (875 Newton steps) and ran to the cap. With 1,000 polish steps all 32 converge at every level and
    the best objective agrees to 1e-12, so the test asks for that."""
    r, M, y = _design_arrays(4)
    law = cj.CAMEL.sample_init(jax.random.key(0), **{**TIED, "n_domains": 5, "beta_max": 9.0})
    result = cj.fit(law, (r, M), y, key=jax.random.key(1), restarts=32, options=cj.FitOptions(polish=1000))
    status = np.asarray(result.status)
    assert np.mean(np.isin(status, [cj.Status.CONVERGED, cj.Status.STALLED])) >= 0.9, np.bincount(status)
    assert cj.Status(int(result.best_status)).is_converged


def test_the_best_objective_is_the_long_runs(design, point):
    r, M, y = design
    law = cj.CAMEL.sample_init(jax.random.key(0), **TIED)
    long = cj.fit(
        law, (r, M), y, key=jax.random.key(1), restarts=32, options=cj.FitOptions(max_steps=20_000, polish=500)
    )
    np.testing.assert_allclose(float(point.objective), float(long.objective), rtol=1e-8)


@pytest.mark.slow  # the suite's budget (issue 57): 13 s
def test_a_warm_refit_on_the_same_data_reproduces_the_point(design, point):
    r, M, y = design
    warm = jax.tree.map(lambda leaf: leaf[None], point.law)
    again = cj.fit(point.law, (r, M), y, key=jax.random.key(5), inits=warm)
    for name, value in point.law.params().items():
        np.testing.assert_allclose(again.law.params()[name], value, rtol=1e-5, err_msg=name)
    # and a higher step cap than convergence needs changes nothing
    more = cj.fit(point.law, (r, M), y, key=jax.random.key(5), inits=warm, options=cj.FitOptions(max_steps=3000))
    np.testing.assert_allclose(more.predict(r, M), again.predict(r, M), rtol=1e-10)


@pytest.fixture(scope="module")
def well_posed():
    """A tied CAMEL world (k=2, n=3) with one optimum: 5 sizes x 12 mixtures, 0.3% noise."""
    true = known_tied_camel()
    rng = np.random.default_rng(7)
    r = rng.dirichlet(np.ones(3), 12)
    r = np.tile(r, (5, 1))
    M = np.repeat([4.0, 5.0, 6.0, 8.0, 10.0], 12)
    y = np.asarray(true(r, M)) * np.exp(0.003 * rng.normal(size=60))
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0)
    return law, r, M, y, cj.fit(law, (r, M), y, key=jax.random.key(1), restarts=16)


# each factor of the issue once (every new unit is a compile: units are static structure)
# the first in the default suite, the other three in `make test-all` (the suite's budget, issue 57: 10-12 s each)
@pytest.mark.parametrize(
    "loss_factor, size_factor",
    [(1e-9, 1e-6), pytest.param(1e-3, 1e9, marks=pytest.mark.slow), pytest.param(1e3, 1e-6, marks=pytest.mark.slow),
     pytest.param(1e9, 1e9, marks=pytest.mark.slow)],
)
def test_units_do_not_matter(well_posed, loss_factor, size_factor):
    law, r, M, y, point = well_posed
    assert cj.Status(int(point.best_status)) == cj.Status.CONVERGED
    scaled = cj.fit(law, (r, M * size_factor), y * loss_factor, key=jax.random.key(1), restarts=16)
    assert cj.Status(int(scaled.best_status)).is_converged
    np.testing.assert_allclose(scaled.predict(r, M * size_factor), loss_factor * np.asarray(point.predict(r, M)),
                               rtol=1e-6)  # fmt: skip
    target = np.array([20.0, 40.0])  # extrapolation too, not only the fitted points
    mixes = np.stack([np.full(3, 1 / 3), np.array([0.6, 0.3, 0.1])])
    np.testing.assert_allclose(scaled.predict(mixes, target * size_factor),
                               loss_factor * np.asarray(point.predict(mixes, target)), rtol=1e-6)  # fmt: skip


def test_an_unconverged_fit_warns_and_throw_raises(design):
    r, M, y = design
    law = cj.CAMEL.sample_init(jax.random.key(0), **TIED)
    short = cj.FitOptions(max_steps=5, polish=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cj.fit(law, (r, M), y, key=jax.random.key(1), restarts=4, options=short)
    assert any("did not converge" in str(w.message) and "max_steps" in str(w.message) for w in caught)
    # a FitWarning, which counts the unconverged targets (one here) for callers that summarize many fits
    fit_warnings = [w.message for w in caught if isinstance(w.message, cj.FitWarning)]
    assert fit_warnings and (fit_warnings[0].unconverged, fit_warnings[0].targets) == (1, 1)
    Y = np.stack([y, 1.01 * y, 0.99 * y])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cj.fit(law, (r, M), Y, key=jax.random.key(1), restarts=4, options=short)
    counted = [(w.message.unconverged, w.message.targets) for w in caught if isinstance(w.message, cj.FitWarning)]
    assert counted[0] == (3, 3), counted
    assert result.problems() and "did not converge" in result.summary(identify=False)["problems"][0]
    with pytest.raises(RuntimeError, match="did not converge"):
        cj.fit(law, (r, M), y, key=jax.random.key(1), restarts=4, options=short, throw=True)


@pytest.mark.slow  # the suite's budget (issue 57): 12 s of fits for one message
def test_an_unconverged_camel_data_without_tokens_names_its_own_fix(design):
    """CAMELData without tokens has a cause of its own for unconverged starts (flat valleys along which its data and
    capacity terms trade): its warning says so and what to do; with tokens it gives the general advice."""
    r, M, y = design
    short = cj.FitOptions(max_steps=5, polish=0)
    law = cj.CAMELData.sample_init(jax.random.key(0), tokens=False, **TIED)
    own_fix = r"did not converge .*give the runs' tokens \(tokens=True\), use data_term=\"linear\""
    with pytest.warns(cj.FitWarning, match=own_fix):
        result = cj.fit(law, (r, M), y, key=jax.random.key(1), restarts=2, options=short)
    assert "both describe the mixture effect" in result.problems()[0]
    tokens = 20.0 * M
    law = cj.CAMELData.sample_init(jax.random.key(0), **TIED)
    general = r"did not converge .*raise FitOptions\(max_steps=\.\.\., polish=\.\.\.\)"
    with pytest.warns(cj.FitWarning, match=general):
        cj.fit(law, (r, M, tokens), y, key=jax.random.key(1), restarts=2, options=short)


def test_the_log_law_limit_is_reached_not_approached(design, point):
    """The free fit of this world wants a term in the log-law limit (beta -> 0), which the old coordinates could
    only approach with C -> -infinity. Here it is a finite point: the fit converged, and its finite coordinates
    are finite."""
    finite = point.law.log_limit_params()
    assert all(bool(np.all(np.isfinite(np.asarray(v)))) for v in finite.values())
    assert float(np.min(np.asarray(point.law.beta))) < 1e-6  # at the limit itself
    # which terms are there, and what the data determine in the finite coordinates (the paper's C is infinite)
    terms = np.asarray(point.law.log_limit_terms())
    np.testing.assert_array_equal(terms, np.asarray(point.law.beta) < 1e-8)
    assert terms.any() and "C" in point.identifiability().not_identified
    finite = point.identifiability(coordinates=cj.CAMEL.log_limit_params)
    assert "C1" in finite.names and "C1" not in finite.not_identified and finite.sd[finite.names.index("C1")] < 0.05


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 20 s
def test_a_sharpening_term_stops_at_the_bound_on_beta():
    """A size term sharper than the bound allows stops at the bound, converged. Unbounded, the fit of world 5's
    design wants a size term ever sharper (beta_i -> 12.7 with K_i -> 0: a term only the smallest runs see) and its
    best start runs to the step cap (as in 2 of 11 such worlds); with `beta_max` = 9 (domain exponents
    beta_i / c <= 3), beta = 9 sin(raw)^2, whose ends are regular points. On that design 1 of 32 starts finds the
    sharp basin, and whether it does depends on the compiler's last bits (none without LLVM optimization), so the
    test asks it of a law whose truth lies beyond the bound (beta = 14): every start ends at the bound, converged
    (measured: 16 of 16, with XLA's defaults and without LLVM optimization), while unbounded the same problem
    recovers beta = 14."""
    t = np.array([[0.8, 0.3, 0.1], [0.2, 0.7, 0.9]])
    true = cj.CAMEL.from_params(t=t, K=[0.05 * 4.0**14, 0.6], beta=[14.0, 1.0], C=1.5, tied=True,
                                capacity_exponent=3.0)  # fmt: skip
    rng = np.random.default_rng(0)
    r, M = rng.dirichlet(np.ones(3), 48), np.repeat(np.arange(4.0, 10.0), 8)
    y = np.asarray(true(jnp.asarray(r), jnp.asarray(M)))
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0,
                               beta_max=9.0)  # fmt: skip
    result = cj.fit(law, (r, M), y, key=jax.random.key(1), restarts=16)
    assert result.law.beta_max == 9.0 and result.law.structure()["beta_max"] == 9.0
    sharpest = np.max(np.asarray(result.laws.beta), axis=-1)
    np.testing.assert_allclose(sharpest, 9.0, rtol=1e-9)
    assert np.all(np.asarray(result.status) == cj.Status.CONVERGED), np.asarray(result.status)
    free = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unbounded, the sharp term may run to the step cap
        unbounded = cj.fit(free, (r, M), y, key=jax.random.key(1), restarts=16)
    assert float(np.max(np.asarray(unbounded.law.beta))) > 9.5  # the bound, not the data, stops the term at 9


def test_the_bound_on_beta_is_a_regular_point_and_can_be_dropped():
    t = np.array([[0.8, 0.3, 0.1], [0.2, 0.7, 0.9]])
    r = np.array([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]])
    M = np.array([4.0, 9.0])
    bounded = cj.CAMEL.from_params(t=t, K=[1.0, 0.6], beta=[9.0, 1.5], C=1.5, tied=True, capacity_exponent=3.0,
                                   beta_max=9.0)  # fmt: skip
    unbounded = cj.CAMEL.from_params(t=t, K=[1.0, 0.6], beta=[9.0, 1.5], C=1.5, tied=True, capacity_exponent=3.0)
    assert bounded.beta_max == 9.0 and unbounded.beta_max is None
    np.testing.assert_allclose(bounded(r, M), unbounded(r, M), rtol=1e-12)  # the same function inside the bound
    # at the bound the coordinate is stationary (a start can stop there), inside it is not
    grad = jax.grad(lambda raw: jnp.sum(eqx.tree_at(lambda law: law.raw_beta, bounded, raw)(r, M)))(bounded.raw_beta)
    assert abs(float(grad[0])) < 1e-12 < abs(float(grad[1]))
    with pytest.raises(ValueError, match="beta_max"):
        cj.CAMEL.from_params(t=t, K=[1.0, 0.6], beta=[9.5, 1.5], C=1.5, tied=True, capacity_exponent=3.0, beta_max=9)
    wide = cj.CAMELData.from_params(t=t, K=[1.0, 0.6], beta=[9.5, 1.5], C=1.5, G=[0.1, 0.1], gamma=[0.3, 0.3],
                                    tied=True, capacity_exponent=3.0, tokens=False, beta_max=12.0)  # fmt: skip
    np.testing.assert_allclose(wide.beta, [9.5, 1.5], rtol=1e-12)
    assert cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True).beta_max is None  # opt-in


@pytest.mark.parametrize("name, cls", [("camel", "CAMEL"), ("camel_data", "CAMELData")])
def test_a_format_3_file_loads_as_the_same_function(name, cls, tmp_path):
    """Files written before the bound on beta (format 3; tests/data, written once by the previous main's code, whose
    beta coordinate is sqrt(beta), not arcsin(sqrt(beta / beta_max))) load unbounded, as the same function, and
    re-save so."""
    result = cj.load(DATA / f"format3_{name}_fit.npz")
    expected = np.load(DATA / "format3_expected.npz")
    assert type(result.law).__name__ == cls and result.law.beta_max is None
    np.testing.assert_allclose(jax.vmap(lambda law: law(expected["r"], expected["M"]))(result.laws), expected[name],
                               rtol=1e-12)  # fmt: skip
    again = cj.load(cj.save(result, tmp_path / "again.npz"))
    assert again.law.beta_max is None
    inputs = (expected["r"], expected["M"])
    np.testing.assert_allclose(again.predict(*inputs), result.predict(*inputs), rtol=1e-14)


def test_a_format_5_free_camel_file_loads_unbounded_as_the_same_function(tmp_path):
    """Files written before the free law's bound on alpha / beta (format 5; tests/data, written once by the previous
    main's code, its starts' alpha / beta up to 1.6) load without the bound, as the same function, and re-save so;
    a free law built today has it."""
    result = cj.load(DATA / "format5_camel_free_fit.npz")
    expected = np.load(DATA / "format5_camel_expected.npz")
    assert type(result.law) is cj.CAMEL and not result.law.tied and result.law.ratio_max is None
    assert float(np.max(np.asarray(result.laws.ratio))) > 1.0
    np.testing.assert_allclose(jax.vmap(lambda law: law(expected["r"], expected["M"]))(result.laws),
                               expected["camel_free"], rtol=1e-12)  # fmt: skip
    again = cj.load(cj.save(result, tmp_path / "again.npz"))
    assert again.law.ratio_max is None and again.law.structure() == result.law.structure()
    inputs = (expected["r"], expected["M"])
    np.testing.assert_allclose(again.predict(*inputs), result.predict(*inputs), rtol=1e-14)
    assert cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2).ratio_max == pytest.approx(1 / 3)


def test_a_format_1_file_loads_as_the_same_function():
    """Files written before the reparameterization (format 1: softmax logits, log K) load converted."""
    result = cj.load(DATA / "format1_camel_fit.npz")
    inputs = np.load(DATA / "format1_camel_inputs.npy")
    expected = np.load(DATA / "format1_camel_pred.npy")
    np.testing.assert_allclose(result.predict(inputs[:, :3], inputs[:, 3]), expected, rtol=1e-12)
    assert isinstance(result.law, cj.CAMEL) and result.laws.t.shape == (4, 2, 3)


@pytest.mark.parametrize("name", ["SODMAdditive", "SODMJoint", "DML", "Chinchilla"])
def test_a_format_2_file_loads_as_the_same_function(name, tmp_path):
    """Files written by the format-2 code (log coordinates of SODM, DML and Chinchilla; tests/data, written once by
    the main branch's code) load converted to today's coordinates: every start is the same function."""
    result = cj.load(DATA / f"format2_{name.lower()}_fit.npz")
    expected = np.load(DATA / "format2_expected.npz")
    inputs = {"DML": ("r",), "Chinchilla": ("N", "D")}.get(name, ("r", "N", "D"))
    args = tuple(expected[k] for k in inputs)
    assert type(result.law) is getattr(cj, name)
    np.testing.assert_allclose(jax.vmap(lambda law: law(*args))(result.laws), expected[name], rtol=1e-11)
    again = cj.load(cj.save(result, tmp_path / "again.npz"))  # and saves in today's format
    np.testing.assert_allclose(again.predict(*args), result.predict(*args), rtol=1e-14)


@pytest.mark.slow  # the suite's budget (issue 57): 11 s each; format 2's SODM file loads in CI
@pytest.mark.parametrize("name", ["SODMAdditive", "SODMJoint"])
def test_a_format_4_sodm_file_loads_in_the_log_chart_as_the_same_function(name, tmp_path):
    """Files written before SODM's `mixture_chart` (format 4; tests/data, written once by the previous main's code,
    a zero weight included) hold the "log" chart, then the only one: they load in it, as the same function, and
    re-save so, while a law built today defaults to the "linear" chart."""
    result = cj.load(DATA / f"format4_{name.lower()}_fit.npz")
    expected = np.load(DATA / "format4_expected.npz")
    args = (expected["r"], expected["N"], expected["D"])
    assert type(result.law) is getattr(cj, name) and result.law.mixture_chart == "log"
    assert name == "SODMAdditive" or result.law.coefficient_chart == "roots"
    np.testing.assert_allclose(jax.vmap(lambda law: law(*args))(result.laws), expected[name], rtol=1e-12)
    again = cj.load(cj.save(result, tmp_path / "again.npz"))
    assert again.law.mixture_chart == "log" and again.law.structure() == result.law.structure()
    np.testing.assert_allclose(again.predict(*args), result.predict(*args), rtol=1e-14)
    linear = type(result.law).from_params(**result.law.params(), size_scale=result.law.size_scale,
                                          tokens_scale=result.law.tokens_scale, loss_scale=result.law.loss_scale)
    assert linear.mixture_chart == "linear"  # the same function in today's default chart
    np.testing.assert_allclose(linear(*args), result.predict(*args), rtol=1e-11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a five-step fit, only to have a file of the linear chart
        short = cj.fit(linear, args, expected[name][0], key=jax.random.key(0), restarts=2,
                       options=cj.FitOptions(max_steps=5, polish=0))  # fmt: skip
    assert cj.load(cj.save(short, tmp_path / "linear.npz")).law.mixture_chart == "linear"


# SODMJoint's programs compile for 15-45 s; format 2's SODMJoint file loads in CI
@pytest.mark.slow  # the suite's budget (issue 57)
def test_a_format_7_sodm_joint_file_loads_in_the_roots_chart_as_the_same_function(tmp_path):
    """Files written before SODMJoint's `coefficient_chart` (format 7; tests/data, written once by the previous
    main's code: 4 starts, with tokens, a zero weight included) hold the "roots" chart, then the only one: they load
    in it, as the same function, and re-save so, while a law built today defaults to the "uniform" chart."""
    result = cj.load(DATA / "format7_sodmjoint_fit.npz")
    expected = np.load(DATA / "format7_expected.npz")
    args = (expected["r"], expected["N"], expected["D"])
    assert type(result.law) is cj.SODMJoint and result.law.coefficient_chart == "roots"
    np.testing.assert_allclose(jax.vmap(lambda law: law(*args))(result.laws), expected["SODMJoint"], rtol=1e-12)
    again = cj.load(cj.save(result, tmp_path / "again.npz"))
    assert again.law.coefficient_chart == "roots" and again.law.structure() == result.law.structure()
    np.testing.assert_allclose(again.predict(*args), result.predict(*args), rtol=1e-14)
    units = {name: getattr(result.law, name) for name in cj.SODMJoint.UNITS}
    uniform = cj.SODMJoint.from_params(**result.law.params(), **units)
    assert uniform.coefficient_chart == "uniform"  # the same function in today's default chart
    np.testing.assert_allclose(uniform(*args), result.predict(*args), rtol=1e-11)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a five-step fit, only to have a file of the uniform chart
        short = cj.fit(uniform, args, expected["SODMJoint"][0], key=jax.random.key(0), restarts=2,
                       options=cj.FitOptions(max_steps=5, polish=0))  # fmt: skip
    assert cj.load(cj.save(short, tmp_path / "uniform.npz")).law.coefficient_chart == "uniform"


def test_a_format_8_camel_data_file_loads_with_the_domains_data_term(tmp_path):
    """Files written before CAMELData's `data_term` (format 8; tests/data, written once by the previous main's code:
    4 starts of a tied k=2 law without tokens) hold the per-domain data term, the default: they load with it, as the
    same function, and re-save so; a law with the opt-in "linear" data term saves and loads so."""
    result = cj.load(DATA / "format8_cameldata_fit.npz")
    expected = np.load(DATA / "format8_expected.npz")
    args = (expected["r"], expected["M"])
    assert type(result.law) is cj.CAMELData and result.law.data_term == "domains" and not result.law.tokens
    np.testing.assert_allclose(jax.vmap(lambda law: law(*args))(result.laws), expected["CAMELData"], rtol=1e-12)
    again = cj.load(cj.save(result, tmp_path / "again.npz"))
    assert again.law.data_term == "domains" and again.law.structure() == result.law.structure()
    np.testing.assert_allclose(again.predict(*args), result.predict(*args), rtol=1e-14)
    linear = cj.CAMELData.sample_init(jax.random.key(0), n_datasets=4, n_domains=2, tied=True, tokens=False,
                                      data_term="linear")  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a five-step fit, only to have a file of the linear data term
        short = cj.fit(linear, args, expected["CAMELData"][0], key=jax.random.key(0), restarts=2,
                       options=cj.FitOptions(max_steps=5, polish=0))  # fmt: skip
    loaded = cj.load(cj.save(short, tmp_path / "linear.npz"))
    assert loaded.law.data_term == "linear"
    np.testing.assert_allclose(loaded.predict(*args), short.predict(*args), rtol=1e-14)


def test_a_format_11_camel_data_file_loads_unbounded_and_from_the_origin_as_the_same_function(tmp_path):
    """Files written before CAMELData's bound on gamma and its mixture center (format 11; tests/data, written once by
    the previous main's code: a tied k=2 law without tokens, gamma_1 = 4.5 > the default bound 3) load without
    either, as the same function, and re-save so; a law of today's defaults saves and loads with both."""
    result = cj.load(DATA / "format11_cameldata_fit.npz")
    expected = np.load(DATA / "format11_expected.npz")
    args = (expected["r"], expected["M"])
    assert result.law.gamma_max is None and result.law.mixture_center is None
    assert float(np.max(np.asarray(result.laws.params()["gamma"]))) > 4.5
    np.testing.assert_allclose(jax.vmap(lambda law: law(*args))(result.laws), expected["CAMELData"], rtol=1e-12)
    again = cj.load(cj.save(result, tmp_path / "again.npz"))
    assert again.law.structure() == result.law.structure()
    np.testing.assert_allclose(again.predict(*args), result.predict(*args), rtol=1e-14)
    today = cj.CAMELData.sample_init(jax.random.key(0), n_datasets=4, n_domains=2, tied=True, tokens=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a five-step fit, only to have a file of today's layout
        short = cj.fit(today, args, expected["CAMELData"][0], key=jax.random.key(0), restarts=2,
                       options=cj.FitOptions(max_steps=5, polish=0))  # fmt: skip
    assert short.law.gamma_max == 3.0 and short.law.mixture_center == mean_mixture(args[0])
    loaded = cj.load(cj.save(short, tmp_path / "today.npz"))
    assert loaded.law.structure() == short.law.structure()
    np.testing.assert_allclose(loaded.predict(*args), short.predict(*args), rtol=1e-14)


def test_a_format_5_dml_file_loads_unbounded_as_the_same_function(tmp_path):
    """Files written before DML's bound on the rate (format 5; tests/data, written once by the previous main's code:
    8 starts of the DML k=1 problem below, 4 of them spikes of rate |t| > 240, beyond today's default t_max = 10)
    hold raw_kappa = sqrt(kappa): they load unbounded, as the same function, and re-save so."""
    result = cj.load(DATA / "format5_dml_fit.npz")
    expected = np.load(DATA / "format5_expected.npz")
    assert type(result.law) is cj.DML and result.law.t_max is None
    rates = np.asarray(result.laws.kappa) * np.linalg.norm(np.asarray(result.laws.a), axis=-1)
    assert np.max(rates) > 100
    np.testing.assert_allclose(jax.vmap(lambda law: law(expected["r"]))(result.laws), expected["DML"], rtol=1e-12)
    again = cj.load(cj.save(result, tmp_path / "again.npz"))
    assert again.law.t_max is None and again.law.structure() == result.law.structure()
    np.testing.assert_allclose(again.predict(expected["r"]), result.predict(expected["r"]), rtol=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a five-step fit, only to have a file of today's default
        bounded = cj.fit(cj.DML.sample_init(jax.random.key(0), n_datasets=5, n_domains=1), (expected["r"],),
                         expected["DML"][0], key=jax.random.key(0), restarts=2,
                         options=cj.FitOptions(max_steps=5, polish=0))  # fmt: skip
    assert cj.load(cj.save(bounded, tmp_path / "bounded.npz")).law.t_max == 10.0


# --- the other shipped laws' default problems (issue 29): converged share of 32 default starts -----------------


def _design_arrays(seed=0):
    """The paper's 66-run design in the default world of key `seed`: (r, M, y) of its first validation loss."""
    world = _simulate.default_world(jax.random.key(seed))
    runs = world.runs(perturbed_mixtures(REFERENCE), SIZES, noise=0.003, key=jax.random.key(1))
    data = world.mixture_data(runs, "loss_val0")
    return np.asarray(data.r), np.asarray(data.size), np.asarray(data.y)


def _problem(name):
    """(law template, inputs, targets) of one default problem; skips when its external data are absent."""
    key = jax.random.key(0)
    if name == "Chinchilla (Epoch)":
        df = shared_data.epoch_chinchilla()
        return cj.Chinchilla.sample_init(key), (df["N"].to_numpy(), df["D"].to_numpy()), df["loss"].to_numpy()
    if name.endswith("(dmsl c4)"):
        train, _, mixture, _ = shared_data.dmsl_held_out()
        train = train[np.isfinite(train["c4_loss"])]
        if name.startswith("SODMAdditive"):
            law = cj.SODMAdditive.sample_init(key, n_datasets=len(mixture), tokens=False)
        else:
            law = cj.CAMEL.sample_init(key, n_datasets=len(mixture), n_domains=3, tied=True)
        return law, (train[mixture].to_numpy(), train["size"].to_numpy()), train["c4_loss"].to_numpy()
    r, M, y = _design_arrays()
    if name == "DML k=1 (design at M=10)":
        return cj.DML.sample_init(key, n_datasets=5, n_domains=1), (r[M == 10],), y[M == 10]
    laws = {
        "SODMAdditive (design)": lambda: cj.SODMAdditive.sample_init(key, n_datasets=5, tokens=False),
        "SODMJoint (design)": lambda: cj.SODMJoint.sample_init(key, n_datasets=5, tokens=False),
        "CAMELData tied k=3 (design)": lambda: cj.CAMELData.sample_init(key, tokens=False, **TIED),
        "CAMEL free k=3 (design)": lambda: cj.CAMEL.sample_init(key, n_datasets=5, n_domains=3),
    }
    return laws[name](), (r, M), y


def _default_fit(name):
    law, inputs, y = _problem(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cj.fit(law, inputs, y, key=jax.random.key(1), restarts=32)


def _converged_share(name):
    return float(np.mean(np.isin(np.asarray(_default_fit(name).status), [cj.Status.CONVERGED, cj.Status.STALLED])))


def test_default_starts_converge_on_epochs_chinchilla():
    assert _converged_share("Chinchilla (Epoch)") >= 0.9


@pytest.mark.slow
def test_the_default_law_converges_and_reproduces_on_a_real_mixture_table():
    """The issue's first measurement: tied CAMEL k=3 on dmsl's c4 loss (220 runs, 122M-1.2B) converged in 0 of 32
    starts with C = -16. Now (measured: 32 of 32) every start meets its stopping rule, the best start is
    converged and a warm refit on the same data reproduces its parameters."""
    result = _default_fit("CAMEL tied k=3 (dmsl c4)")
    status = np.asarray(result.status)
    assert np.mean(np.isin(status, [cj.Status.CONVERGED, cj.Status.STALLED])) >= 0.9, np.bincount(status)
    assert cj.Status(int(result.best_status)) == cj.Status.CONVERGED and result.problems() == []
    warm = jax.tree.map(lambda leaf: leaf[None], result.law)
    again = cj.fit(result.law, result.inputs, result.y, key=jax.random.key(5), inits=warm)
    for name, value in result.law.params().items():
        np.testing.assert_allclose(again.law.params()[name], value, rtol=1e-5, err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["SODMAdditive (design)", "SODMAdditive (dmsl c4)"])
def test_sodm_additive_default_starts_converge(name):
    """SODMAdditive's best fit of the design is the mixture term's linear limit (equal C, gamma -> 1,
    K -> infinity: a term linear in r and r log r), which the "log" chart holds only at infinity: there 3% of the
    starts converged (dmsl c4: 50%), the rest crawling toward it. The "linear" chart (the default) makes it a
    regular point and starts near it: every start converges (measured: 100% on both), to a lower objective."""
    assert _converged_share(name) >= 0.9


@pytest.mark.slow
def test_dml_default_starts_converge_within_the_bound_on_the_rate():
    """DML k=1 on the design's 11 points at M=10. Unbounded, the exponential's rate runs to infinity (amplitude ->
    0): the best starts stopped at rate |t| ~ 440 (kappa ~ 3e5, amplitude 3.5e-6: a spike fitting one mixture's
    noise, objective 1.12e-5 vs 1.27e-5 at the linear limit, predictions 1e33% off at unseen mixtures) and 4 of 32
    crawled toward it (88% converged). Within the default bound t_max = 10 every start converges (measured: 32 of
    32), the best to the linear limit."""
    result = _default_fit("DML k=1 (design at M=10)")
    assert result.law.t_max == 10.0
    status = np.asarray(result.status)
    assert np.mean(np.isin(status, [cj.Status.CONVERGED, cj.Status.STALLED])) >= 0.9, np.bincount(status)
    assert cj.Status(int(result.best_status)) == cj.Status.CONVERGED


@pytest.mark.slow
def test_free_camel_default_starts_converge():
    """Unbounded, the free law's best fits of the design lie at infinity: a term ever sharper in the mixture
    (alpha_i -> 14 with K_i -> 0 and beta_i ~ 5 after 20,000 steps, the objective 0.6% lower than after 1,000 and
    still falling) that the starts chase to the step cap, while the others crawl through saddles: 34% of the starts
    converged (worlds 1, 2: 16%, 12%). Within the default bound alpha_i / beta_i <= 1/3, a regular point, every
    start converges (measured: 100%; worlds 1, 2: 97%, 88%). Its best start is not asserted: within the bound
    the lowest starts can still run away in size (beta_i -> 13-27 in worlds 2-5; here the best start converges or
    reaches the step cap depending on the platform's last bits), which the opt-in `beta_max=9` stops."""
    result = _default_fit("CAMEL free k=3 (design)")
    assert result.law.ratio_max == pytest.approx(1 / 3)
    status = np.asarray(result.status)
    assert np.mean(np.isin(status, [cj.Status.CONVERGED, cj.Status.STALLED])) >= 0.9, np.bincount(status)


@pytest.mark.slow
def test_sodm_joint_default_starts_converge():
    """In the "roots" coefficient chart (the only one up to format 7) the size term's fits of the design run along
    a valley: uniform weight added to pA with gammaA growing (and A as rho_0^-gammaA, exponentially), which ends at
    a weight pA_j = 0 (world 0: gammaA = 1.21) or at infinity, gammaA -> infinity with pA -> uniform (worlds 1, 5,
    7, 10: gammaA ~ 10 and rising at the step cap). 41% of the starts converged (11 worlds: 25%, the best start
    unconverged in 5). The "uniform" chart (the default) writes the coefficient about the uniform mixture, where
    A barely moves along the valley and its infinite end is a finite point (h_A = 0), and the mixture term starts
    nearer its linear limit (K in [10, 1000]; from K < 10 starts crawl toward it, the size term's mixture
    dependence leaving its curvature barely determined): 97% converge (measured; 11 worlds: 86%, every best start
    converged, to an equal or lower objective), and the held-out error at M=12 / M=20 is unchanged
    (0.258% / 0.521% -> 0.257% / 0.519% over the 11 worlds; benchmarks/study_convergence.py section 4)."""
    result = _default_fit("SODMJoint (design)")
    assert result.law.coefficient_chart == "uniform"
    status = np.asarray(result.status)
    assert np.mean(np.isin(status, [cj.Status.CONVERGED, cj.Status.STALLED])) >= 0.9, np.bincount(status)
    assert cj.Status(int(result.best_status)) == cj.Status.CONVERGED


@pytest.mark.slow
def test_camel_data_default_starts_converge():
    """Without tokens CAMELData's data term and capacity terms both describe the mixture effect. With the shares
    measured from the origin and gamma unbounded, its fits of the design ran along valleys to infinity: a spike
    (gamma_i -> 40-120 with G_i -> 0, a term that fits one mixture) or a profile row -> 0 with the slopes growing; 0%
    of these starts converged (4% over 11 worlds). Measured from the data's mean mixture, gamma <= 3, the size unit
    at the smallest size (as tied CAMEL's) and 1,000 Newton steps (`default_polish`), 100% here (11 worlds: 93%,
    84-100%; benchmarks/study_convergence.py), and the held-out error against the truth fell (M=20 1.25% -> 1.04%
    over the 11 worlds, docs/performance.md)."""
    result = _default_fit("CAMELData tied k=3 (design)")
    assert result.law.gamma_max == 3.0 and result.law.mixture_center is not None and result.law.size_scale == 4.0
    status = np.asarray(result.status)
    assert np.mean(np.isin(status, [cj.Status.CONVERGED, cj.Status.STALLED])) >= 0.9, np.bincount(status)
    assert cj.Status(int(result.best_status)).is_converged


# --- the loss-to-benchmark law: centred, scaled coordinates (issue 29) --------------------------------------------


def test_loss_to_benchmark_units_are_the_same_function():
    L = np.array([[3.1, 2.9, 3.4], [3.0, 3.05, 3.2], [2.8, 3.3, 3.6]])
    paper = dict(k=[1.5, 0.2, 0.9], A=0.6, B=-15.0, C=0.25)
    for monotone in (False, True):
        plain = cj.LossToBenchmark.from_params(**paper, monotone=monotone)
        units = cj.LossToBenchmark.from_params(**paper, monotone=monotone, center=(3.0, 3.1, 3.4), loss_spread=0.1)
        np.testing.assert_allclose(units(jnp.asarray(L)), plain(jnp.asarray(L)), rtol=1e-13)
        np.testing.assert_allclose(units.proxy_loss(jnp.asarray(L)), plain.proxy_loss(jnp.asarray(L)), rtol=1e-13)
        for name, value in units.params().items():
            np.testing.assert_allclose(value, paper[name], rtol=1e-12, err_msg=name)
    fitted_units = cj.LossToBenchmark.sample_init(jax.random.key(0), n_losses=3).with_data_scales((L,), L[:, 0])
    assert fitted_units["loss_spread"] == 0.1  # the power of ten nearest the columns' typical spread (0.12-0.2)
    np.testing.assert_allclose(fitted_units["center"], [3.0, 3.0, 3.0], rtol=1e-12)  # means (2.97-3.4) to 1.0
    L_milli = 1e3 * L  # the same losses in other units: the units follow them
    scaled = cj.LossToBenchmark.sample_init(jax.random.key(0), n_losses=3).with_data_scales((L_milli,), L[:, 0])
    assert scaled["loss_spread"] == pytest.approx(100.0)
    np.testing.assert_allclose(scaled["center"], 1e3 * np.asarray(fitted_units["center"]), rtol=1e-12)


def test_benchmark_fits_converge_on_a_simulated_design():
    """The demo's loss-to-benchmark stage: 66 runs, 5 validation losses, 7 benchmarks, 16 starts each. Before the
    centred coordinates 5% of the starts converged (the rest ran to the step cap); now 64% on this design and 79% on
    the demo's (measured), and the best start of every benchmark."""
    world = _simulate.make_world(jax.random.key(0))
    runs = world.runs(perturbed_mixtures(REFERENCE), SIZES, noise=0.002, key=jax.random.key(1))
    losses = [c for c in runs if c.startswith("loss_val")]
    benchmarks = [c for c in runs if c.startswith("acc_")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = cj.fit_benchmarks(runs, losses=losses, benchmarks=benchmarks, key=jax.random.key(0), restarts=16)
    status = np.asarray(fits.result.status)
    converged = np.isin(status, [cj.Status.CONVERGED, cj.Status.STALLED])
    assert converged.mean() >= 0.5, f"{converged.mean():.0%} of {status.size} starts converged"
    np.testing.assert_array_equal(np.isin(fits.result.best_status, [cj.Status.CONVERGED, cj.Status.STALLED]), True)


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 28 s
def test_tied_camel_anchors_its_size_unit_at_the_smallest_size_so_a_sharpening_term_stops():
    """On 5 of the paper's sizes (4-8, as `calibrate`'s folds fit) two worlds' data want a size term ever sharper,
    a term only the smallest runs see. Anchored at the power of ten near the sizes' geometric mean (10, before),
    2 of 16 starts and the best one ran to the step cap with beta at 23-26 (measured, worlds 7 and 12); anchored at
    the smallest size every start meets the first-order rule (beta ends where its pull has faded). The free law
    keeps the order of magnitude (docs/performance.md: its held-out error rose with the anchor)."""
    sizes = [4.0, 5.0, 6.0, 7.0, 8.0]
    for seed in (7, 12):
        key = jax.random.key(seed)
        world = _simulate.make_world(key, "capacity_data")
        runs = world.runs(perturbed_mixtures(REFERENCE, 0.2), sizes, noise=0.002, key=jax.random.fold_in(key, 1))
        data = world.mixture_data(runs, "loss_val_english")
        result = cj.fit(cj.CAMEL.sample_init(jax.random.key(0), **TIED), data.inputs, data.y, key=jax.random.key(1),
                        restarts=16)  # fmt: skip
        assert result.law.size_scale == 4.0
        assert np.mean(np.asarray(result.converged)) >= 0.9 and cj.Status(int(result.best_status)).is_converged
    free = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=3)
    assert free.with_data_scales(data.inputs, data.y)["size_scale"] == 10.0
