"""Each run's influence on a fit: against exact leave-one-out refits, against the derivatives of `fit_arrays`
itself, and the infinitesimal-jackknife standard errors against the bootstrap's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import spearmanr

import camel_jax as cj

KEY = jax.random.key(0)
# A well-posed simulated Chinchilla design: 30 runs, 1% noise, a Huber band at the noise scale (least squares),
# so that the first-order theory applies (see `camel_jax.fitting._influence`).
OPTIONS = cj.FitOptions(delta=0.1, tol=1e-13)
AT = (np.array([1e10]), np.array([2e11]))  # the target: a larger model and more tokens than any run


def simulate(seed, P=30, noise=0.01):
    rng = np.random.default_rng(seed)
    N, D = 10 ** rng.uniform(7, 9.5, P), 10 ** rng.uniform(9, 11, P)
    law = cj.Chinchilla.from_params(A=406.4, B=410.7, E=1.69, alpha=0.34, beta=0.28, size_scale=1e8, tokens_scale=1e10)
    y = np.asarray(law(jnp.asarray(N), jnp.asarray(D))) * np.exp(rng.normal(0, noise, P))
    return law, (N, D), y


@pytest.fixture(scope="module")
def fitted():
    law, inputs, y = simulate(2)
    result = cj.fit_arrays(law, inputs, y, key=KEY, restarts=16, options=OPTIONS)
    assert cj.Status(int(result.best_status)).is_converged
    return law, inputs, y, result, cj.influence(result, AT, options=OPTIONS)


@pytest.fixture(scope="module")
def well_posed():
    """80 runs, 0.5% noise: the regime where first-order standard errors are meant to hold. (At 30 runs and 1%
    noise the bootstrap's spread is 15-30% wider than the jackknife's: the fit is visibly nonlinear there.)"""
    law, inputs, y = simulate(2, P=80, noise=0.005)
    result = cj.fit_arrays(law, inputs, y, key=KEY, restarts=16, options=OPTIONS)
    assert cj.Status(int(result.best_status)).is_converged
    return law, inputs, y, result, cj.influence(result, AT, options=OPTIONS)


def test_leave_one_out_matches_exact_refits(fitted):
    law, inputs, y, result, influence = fitted
    P = y.shape[0]
    warm = jax.tree.map(lambda a: a[None], result.law)
    base = float(result.predict(*AT)[0])
    exact = []
    for p in range(P):
        refit = cj.fit_arrays(law, inputs, y, weights=_without(P, p), key=KEY, inits=warm, options=OPTIONS)
        assert cj.Status(int(refit.best_status)).is_converged
        exact.append(float(refit.predict(*AT)[0]) - base)
    exact = np.array(exact)
    approx = np.asarray(influence.loo[:, influence.column("prediction[0]")])
    assert spearmanr(exact, approx)[0] >= 0.9
    # The same five largest runs; a swap is allowed only between runs whose exact changes tie with the 5th within
    # twice the approximation's error (here none: the sets are equal, but a near-tie must not make a coin flip).
    order = np.argsort(-np.abs(exact))
    fifth = np.abs(exact)[order[4]]
    error = np.max(np.abs(approx - exact))
    swapped = set(order[:5]) ^ set(np.argsort(-np.abs(approx))[:5])
    assert all(abs(abs(exact[p]) - fifth) <= 2 * error for p in swapped), swapped
    assert error <= 0.1 * np.abs(exact[order[0]])


@pytest.fixture(scope="module")
def at_noise():
    """The same 30-run design with the Huber band at the noise scale (delta = 1% = the noise): 5 of the 30 runs lie
    outside the band, where the objective is linear in their residual and they carry no curvature, all within 10x
    it. Each run's exact leave-one-out refit is one multi-target fit (a target per run left out, warm-started)."""
    law, inputs, y = simulate(2)
    options = cj.FitOptions(delta=0.01, tol=1e-13)
    result = cj.fit_arrays(law, inputs, y, key=KEY, restarts=16, options=options)
    assert cj.Status(int(result.best_status)).is_converged
    P = y.shape[0]
    warm = jax.tree.map(lambda a: jnp.broadcast_to(a, (P,) + a.shape)[:, None], result.law)
    refits = cj.fit_arrays(law, inputs, np.broadcast_to(y, (P, P)), key=KEY, weights=1.0 - np.eye(P), inits=warm,
                           options=options)  # fmt: skip
    assert np.all(np.isin(np.asarray(refits.best_status), [cj.Status.CONVERGED, cj.Status.STALLED]))
    exact = np.asarray(refits.predict(*AT))[:, 0] - float(result.predict(*AT)[0])
    return result, options, exact


def test_influence_uses_the_fits_own_options(at_noise):
    result, options, _ = at_noise
    assert result.options == options
    default, given = cj.influence(result, AT), cj.influence(result, AT, options=options)
    assert int(default.status) == 0
    for name in ("loo", "d_weight", "d_log_y", "leverage", "se"):
        np.testing.assert_array_equal(getattr(default, name), getattr(given, name))
    assert cj.fit_derivative_status(result) == cj.fit_derivative_status(result, options)
    # another objective (the default band) is another derivative: the options are read, not ignored
    assert not np.allclose(cj.influence(result, AT, options=cj.FitOptions(tol=1e-13)).loo, default.loo)


def test_leave_one_out_values_match_exact_refits_with_the_band_at_the_noise_scale(at_noise):
    # Values, not ranks: the first-order change of the prediction when each run is left out, against the exact
    # refit. Measured: the largest error is 3.0% of the largest change. Runs outside the band carry no curvature
    # (leverage 0); a Hessian that counted every run within 10x the band gave them leverages of 0.1-0.4 and
    # changes up to 65% too large: an error of 36% of the largest change (benchmarks/mutation_check.py).
    result, options, exact = at_noise
    influence = cj.influence(result, AT)
    approx = np.asarray(influence.loo[:, influence.column("prediction[0]")])
    residual = np.log(np.asarray(result.predict(*result.inputs))) - np.log(np.asarray(result.y))
    outside = np.abs(residual) > options.delta
    assert 3 <= outside.sum() and np.all(np.abs(residual) <= 10 * options.delta)
    assert np.max(np.abs(approx - exact)) <= 0.1 * np.max(np.abs(exact))
    assert np.all(np.asarray(influence.leverage)[outside] == 0) and np.all(np.asarray(influence.leverage)[~outside] > 0)


def _without(P, p):
    w = np.ones(P)
    w[p] = 0.0
    return w


def test_influence_is_the_derivative_of_the_fit(fitted):
    """`d_log_y` and `d_weight` agree with reverse-mode derivatives through `fit_arrays` (two implementations)."""
    law, inputs, y, result, influence = fitted
    warm = jax.tree.map(lambda a: a[None], result.law)

    def alpha_and_prediction(log_y, w):
        fit = cj.fit_arrays(law, inputs, jnp.exp(log_y), weights=w, key=KEY, inits=warm, options=OPTIONS)
        return jnp.stack([fit.law.params()["alpha"], fit.law(*AT)[0]])

    by_log_y, by_weight = jax.jacrev(alpha_and_prediction, argnums=(0, 1))(jnp.log(y), jnp.ones_like(y))
    columns = [influence.column("alpha"), influence.column("prediction[0]")]
    np.testing.assert_allclose(np.asarray(influence.d_log_y[:, columns]).T, by_log_y, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(np.asarray(influence.d_weight[:, columns]).T, by_weight, rtol=1e-6, atol=1e-12)


def test_table_names_runs_and_sorts_by_leave_one_out(fitted):
    *_, influence = fitted
    runs = [f"run{p}" for p in range(30)]
    table = influence.table(runs=runs)
    assert table.attrs["quantity"] == "prediction[0]"
    assert list(table.columns) == ["weight", "d_weight", "d_log_y", "loo"]
    assert sorted(table.index) == sorted(runs)
    assert np.all(np.diff(np.abs(table["loo"].to_numpy())) <= 0)
    alpha = influence.table("alpha")
    assert alpha.attrs["quantity"] == "alpha"
    with pytest.raises(KeyError, match="no quantity 'gamma'"):
        influence.table("gamma")
    with pytest.raises(ValueError, match="must name the 30 runs"):
        influence.table(runs=runs[:3])


def _compare_with_bootstrap(fitted, n_resamples, margin):
    law, inputs, y, result, influence = fitted
    warm = jax.tree.map(lambda a: a[None], result.law)
    boot = cj.bootstrap(
        law, inputs, y, key=jax.random.key(7), n_resamples=n_resamples, inits=warm, options=OPTIONS, progress=False
    )
    assert np.all(np.asarray(boot.converged))
    boot_se = {name: float(np.std(np.asarray(v))) for name, v in boot.params().items()}
    boot_se["prediction[0]"] = float(np.std(np.asarray(boot.predict(*AT))[:, 0]))
    for name in ("alpha", "beta", "E", "prediction[0]"):
        se = float(influence.se[influence.column(name)])
        assert abs(se - boot_se[name]) <= margin * boot_se[name], (name, se, boot_se[name])


@pytest.mark.slow  # the suite's budget (issue 57): 19 s: a 200-resample bootstrap
def test_jackknife_standard_errors_near_the_bootstrap(well_posed):
    # 200 resamples estimate a standard deviation to ~5%; measured at 1,000 the jackknife is 5-8% below.
    _compare_with_bootstrap(well_posed, 200, 0.25)


@pytest.mark.slow
def test_jackknife_standard_errors_within_25_percent_of_1000_resamples(well_posed):
    _compare_with_bootstrap(well_posed, 1000, 0.25)


def test_not_converged_fit_has_nan_influence(fitted):
    law, inputs, y, *_ = fitted
    options = cj.FitOptions(max_steps=3, polish=0, delta=0.1)
    result = cj.fit_arrays(law, inputs, y, key=KEY, restarts=2, options=options)
    influence = cj.influence(result, AT, options=options)
    assert cj.fitting.DerivativeStatus(int(influence.status)) == cj.fitting.DerivativeStatus.NOT_CONVERGED
    assert np.all(np.isnan(np.asarray(influence.loo))) and np.all(np.isnan(np.asarray(influence.se)))


def test_bad_arguments(fitted):
    *_, result, _ = fitted
    with pytest.raises(ValueError, match="log_residuals"):
        cj.influence(result, AT, options=cj.FitOptions(log_residuals=False))
    two = cj.fit_arrays(result.law, result.inputs, jnp.stack([result.y, result.y]), key=KEY, restarts=2)
    with pytest.raises(ValueError, match="several targets"):
        cj.influence(two)


def test_plot_shows_the_largest_runs(fitted):
    pytest.importorskip("matplotlib")
    from camel_jax import plot

    *_, influence = fitted
    table = influence.table(runs=[f"run{p}" for p in range(30)])
    fig = plot.influence(table, top=5)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == list(table.index[:5])
    with pytest.raises(ValueError, match="'loo' column"):
        plot.influence(table.drop(columns="loo"))
