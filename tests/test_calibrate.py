"""Calibrated uncertainty and the verdict (issue 14): the band arithmetic, the moment estimator on errors of known
scale, calibration of a law that extrapolates well against one that cannot, the score draws and the verdict.

Coverage itself needs many worlds: `benchmarks/study_calibration.py` measures it; these tests check the machinery."""

import io
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from helpers import known_tied_camel, make_pipeline, random_mixtures, tamper
from jax.scipy.stats import norm

import camel_jax as cj
from camel_jax import simulate
from camel_jax.fitting._calibrate import _moments, t_quantile

DATA = Path(__file__).parent / "data"


def _calibration(kappa_level, kappa_mix, size_max=10.0, log_scale=True, cells=(0.2, 0.2, 0.4)):
    zero = jnp.zeros(())
    return cj.Calibration(jnp.asarray(kappa_level), jnp.asarray(kappa_mix), size_max, 1, log_scale, cells, zero,
                          zero, zero)  # fmt: skip


def test_widen_adds_the_extrapolation_variance_to_the_percentile_band():
    # resampled predictions whose percentile band is exactly median * exp(+-z sd) in log space
    z = float(norm.ppf(0.975))
    sd = np.array([0.01, 0.02, 0.03])
    u = norm.ppf((np.arange(20001) + 0.5) / 20001)  # symmetric quantiles: percentiles land on them
    pred = 2.0 * np.exp(u[:, None] * sd[None, :])
    cal = _calibration(0.03, 0.04)
    size = np.array([5.0, 10.0, 10.0 * np.e**2])  # inside the data, at its edge, 2 log-units out
    low, high = cal.widen(pred, size, 0.95)
    extra = np.array([0.0, 0.0, 2 * 0.05])  # d * sqrt(kappa_level^2 + kappa_mix^2)
    t = cal.quantile(0.95)  # the kappas' own uncertainty: Student-t with as many dof as held-out cells
    assert t == pytest.approx(3.182446, rel=1e-5)  # t(0.975, 3), from tables
    half = np.sqrt((z * sd) ** 2 + (t * extra) ** 2)
    np.testing.assert_allclose(np.log(high / 2.0), half, rtol=1e-3)
    np.testing.assert_allclose(np.log(2.0 / low), half, rtol=1e-3)
    np.testing.assert_allclose(cal.extra_sd(size), extra, atol=1e-12)
    np.testing.assert_allclose(cal.extra_sd(size, difference=True), np.sqrt(2) * 0.04 * np.array([0, 0, 2]))


def test_t_quantile_matches_the_tables():
    from camel_jax.fitting._calibrate import t_quantile

    for dof, value in ((1, 12.7062), (2, 4.3027), (3, 3.1824), (10, 2.2281), (1000, 1.9623)):
        assert t_quantile(0.975, dof) == pytest.approx(value, abs=1e-4)


def test_moment_estimator_recovers_known_error_scales():
    # held-out cells whose errors are noise + bootstrap error + d (a + b_p), with known scales
    rng = np.random.default_rng(0)
    kl, km, s_boot, s_noise, B, H = 0.02, 0.01, 0.004, 0.003, 50, 40
    cells = []
    for c in range(200):
        d = [0.2, 0.4][c % 2]
        mid_error = s_boot * rng.standard_normal(H)  # the bootstrap median's own error
        err = d * (kl * rng.standard_normal() + km * rng.standard_normal(H)) + s_noise * rng.standard_normal(H)
        err = err - mid_error
        scaled = mid_error[None, :] + s_boot * rng.standard_normal((B, H))  # resamples scatter by s_boot
        cells.append((d, jnp.asarray(err[None]), jnp.asarray(scaled[None]), jnp.ones((1, H))))
    level, mix, rms, sd = _moments(cells, jnp.asarray([s_noise**2]))
    assert float(level[0]) == pytest.approx(kl, rel=0.2)
    assert float(mix[0]) == pytest.approx(km, rel=0.2)
    assert rms.shape == sd.shape == (1, 200)


def test_a_shared_drift_shows_through_a_noise_estimate_inflated_by_lack_of_fit():
    # errors past the data are one shift per cell (d * a) plus noise; the noise variance handed in is 4x the true
    # one, as a misspecified law's training residuals make it. The shift is what a mean over the cell's points
    # sees: an estimator that subtracted the per-point noise from each squared error would find nothing here.
    rng = np.random.default_rng(1)
    kl, s_noise, B, H = 0.01, 0.003, 40, 11
    cells = []
    for c in range(300):
        d = [0.15, 0.3, 0.45][c % 3]
        err = d * kl * rng.standard_normal() + s_noise * rng.standard_normal(H)
        cells.append((d, jnp.asarray(err[None]), jnp.zeros((1, B, H)), jnp.ones((1, H))))
    level, mix, _, _ = _moments(cells, jnp.asarray([(2 * s_noise) ** 2]))
    assert 0.7 * kl < float(level[0]) < 1.1 * kl, float(level[0])
    assert float(mix[0]) < 0.2 * kl  # no spread by mixture beyond the noise


def test_pooled_moments_sum_every_targets_cells():
    # pooled kappa^2 = (sum over targets of each one's moment numerator) / (sum of denominators): with every point
    # present that is the mean of the targets' own kappa^2; with a target missing points, its cells weigh less
    # (a spread by mixture well above the noise: no target's own sums are negative, truncated at 0)
    rng = np.random.default_rng(2)
    T, B, H = 3, 20, 11
    cells = []
    for d in (0.2, 0.3, 0.5):
        err = d * (0.01 * rng.standard_normal((T, 1)) + 0.01 * rng.standard_normal((T, H)))
        cells.append((d, err, 0.001 * rng.standard_normal((T, B, H)), np.ones((T, H))))
    noise = np.full(T, 1e-6)
    level, mix, _, _ = _moments(cells, noise)
    p_level, p_mix, _, _ = _moments(cells, noise, pool=True)
    np.testing.assert_allclose(p_level, np.sqrt(np.mean(level**2)), rtol=1e-12)
    np.testing.assert_allclose(p_mix, np.sqrt(np.mean(mix**2)), rtol=1e-12)
    assert np.ptp(level) > 0 and np.ptp(p_level) == 0  # the targets differed; pooled, they share one value
    mask = np.ones((T, H))
    mask[2, 4:] = 0.0  # the third target holds 4 of the 11 points
    holey = [(d, e, s, mask) for d, e, s, _ in cells]
    den = np.array([4.0 if t == 2 else H for t in range(T)]) * sum(d**2 for d, *_ in cells)
    level, mix, _, _ = _moments(holey, noise)
    p_level, p_mix, _, _ = _moments(holey, noise, pool=True)
    np.testing.assert_allclose(p_level**2, np.sum(level**2 * den) / np.sum(den), rtol=1e-12)
    np.testing.assert_allclose(p_mix**2, np.sum(mix**2 * den) / np.sum(den), rtol=1e-12)


def test_a_cell_without_a_targets_points_does_not_dilute_its_kappas():
    # a target's loss missing at one held-out size (mask 0 there) leaves its kappas what its other cells say; an
    # empty cell that counted its distance in the denominator drew them toward 0, alone and pooled
    rng = np.random.default_rng(4)
    T, B, H = 2, 20, 11
    cells = [(d, d * (0.01 * rng.standard_normal((T, 1)) + 0.004 * rng.standard_normal((T, H))),
              0.001 * rng.standard_normal((T, B, H)), np.ones((T, H))) for d in (0.2, 0.3, 0.5)]  # fmt: skip
    holed = [(d, e, s, m * (np.array([[1.0], [0.0]]) if c == 2 else 1.0)) for c, (d, e, s, m) in enumerate(cells)]
    noise = np.full(T, 1e-6)
    level, mix, _, _ = _moments(holed, noise)
    first_two = _moments(cells[:2], noise)
    np.testing.assert_allclose(level[1], first_two[0][1], rtol=1e-12)  # target 1: its two cells with points
    np.testing.assert_allclose(mix[1], first_two[1][1], rtol=1e-12)
    np.testing.assert_allclose(level[0], _moments(cells, noise)[0][0], rtol=1e-12)  # target 0 unchanged
    none = _moments([(d, e, s, 0 * m) for d, e, s, m in cells], noise)  # no held-out point at all: no excess
    assert np.all(none[0] == 0) and np.all(none[1] == 0)


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 18 s of fits
def test_pooled_kappas_are_read_with_the_pooled_degrees_of_freedom():
    # A known answer: errors past the data d * a, a ~ N(0, k^2) drawn afresh per (target, cell), no noise and no
    # bootstrap spread, every cell at one distance. Then kappa_hat^2 ~ k^2 chi2_n / n over n cells, and a new
    # error over its predicted sd is Student-t with n dof: the band covers exactly 95% when read with n dof, n = 3
    # per target alone and 5 x 3 pooled; pooled with 3 dof it would cover more (about 99%). 4,000 worlds: the
    # coverage's standard error is 0.0035.
    rng = np.random.default_rng(3)
    T, n_worlds, d, k = 5, 4000, 0.4, 0.01
    covered = {"alone": [], "pooled": []}
    width = {"alone": [], "pooled": []}
    for _ in range(n_worlds):
        a = k * rng.standard_normal((3, T))
        cells = [(d, d * a[c][:, None] * np.ones((T, 2)), np.zeros((T, 2, 2)), np.ones((T, 2))) for c in range(3)]
        new = d * k * rng.standard_normal(T)
        for name, pool in (("alone", False), ("pooled", True)):
            level, mix, _, _ = _moments(cells, np.zeros(T), pool=pool)
            cal = _calibration(level, mix, cells=(d, d, d)) if not pool else cj.Calibration(
                jnp.asarray(level), jnp.asarray(mix), 10.0, 1, True, (d, d, d), *(jnp.zeros(()),) * 3, pooled=T)
            half = cal.quantile(0.95) * np.asarray(cal.extra_sd(np.full(T, 10.0 * np.exp(d))))
            covered[name].append(np.abs(new) <= half)
            width[name].append(half)
    for name in covered:
        assert abs(np.mean(covered[name]) - 0.95) < 0.012, (name, np.mean(covered[name]))
    assert np.mean(width["pooled"]) < 0.8 * np.mean(width["alone"])  # t(15) 2.13 vs t(3) 3.18, E[chi] 0.98 vs 0.92
    assert cj.Calibration(*(jnp.zeros(()),) * 2, 10.0, 1, True, (0.1,) * 3, *(jnp.zeros(()),) * 3, pooled=T).dof == 15


# the drifting target is no CAMEL: some of its 2-size folds' resamples stop at the step cap (warned); the claims
# below compare calibrations built on the very same fold fits, whatever those are
@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 34 s of fits; the pooled moments are tested exactly above
@pytest.mark.filterwarnings("ignore::camel_jax.FitWarning")
def test_calibrating_targets_together_pools_their_kappas_on_log_residuals():
    law = known_tied_camel()
    template = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0)
    r, R, M, y = _runs(lambda r, M: np.asarray(law(jnp.asarray(r), jnp.asarray(M))), 0, sizes=(2.0, 3.0, 4.0, 6.0))
    Y = np.stack([y, y * (1 + 0.02 * np.log(M / 2.0))])  # the second target drifts with size: a larger kappa
    point = cj.fit(template, (R, M), Y, key=jax.random.key(1), restarts=4)
    common = dict(key=jax.random.key(2), n_resamples=4, inits=point.law, strata=M)
    alone = cj.calibrate(template, (R, M), Y, pool=False, **common)
    pooled = cj.calibrate(template, (R, M), Y, **common)  # default: pooled, the fit being on log residuals
    assert alone.pooled == 1 and pooled.pooled == 2 and pooled.dof == 2 * alone.dof == 6
    assert "3 held-out (fold, size) cells x 2 targets, pooled, Student-t at 6 dof" in pooled.summary()
    assert "cells, Student-t at 3 dof" in alone.summary() and "by target" in alone.summary()
    np.testing.assert_allclose(pooled.kappa_level, np.sqrt(np.mean(alone.kappa_level**2)), rtol=1e-6)
    np.testing.assert_allclose(pooled.kappa_mix, np.sqrt(np.mean(alone.kappa_mix**2)), rtol=1e-6)
    absolute = cj.calibrate(template, (R, M), Y, options=cj.FitOptions(log_residuals=False), **common)
    assert absolute.pooled == 1  # errors in each target's own units are not pooled unless asked
    with pytest.raises(TypeError, match="`pool` must be True, False or None"):
        cj.calibrate(template, (R, M), Y, pool="yes", **common)


def _runs(truth, seed, sizes=(2.0, 3.0, 4.0, 5.0, 6.0, 8.0), n_mixtures=10, noise=0.003):
    rng = np.random.default_rng(seed)
    r = random_mixtures(rng, n_mixtures, 3)
    R = np.tile(r, (len(sizes), 1))
    M = np.repeat(np.asarray(sizes), n_mixtures)
    return r, R, M, truth(R, M) * np.exp(noise * rng.standard_normal(len(M)))


SEEDS = range(6)


@pytest.mark.filterwarnings("ignore::camel_jax.FitWarning")  # a 2-size fold's resample may reach the step cap
def test_calibration_leaves_the_band_inside_the_data_and_holds_out_two_folds():
    """The exact half of the claim below, on one world (CI size): inside the trained sizes the calibrated band is
    the bootstrap's own, and the default holds out 2 folds (1 + 2 cells) past a size_max of 8."""
    law = known_tied_camel()
    r, R, M, y = _runs(lambda r, M: np.asarray(law(jnp.asarray(r), jnp.asarray(M))), 0)
    template = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0)
    key = jax.random.key(1)
    point = cj.fit(template, (R, M), y, key=key, restarts=4)
    boot = cj.bootstrap(template, (R, M), y, key=jax.random.fold_in(key, 2), n_resamples=8, inits=point.laws,
                        strata=M, progress=False)  # fmt: skip
    cal = cj.calibrate(template, (R, M), y, key=jax.random.fold_in(key, 3), n_resamples=8, inits=point.law, strata=M)
    inside = np.full(len(r), 4.0)
    np.testing.assert_allclose(boot.prediction_interval(r, inside, calibration=cal),
                               boot.prediction_interval(r, inside), rtol=1e-12)  # fmt: skip
    assert cal.size_max == 8.0 and cal.size_index == 1 and len(cal.distances) == 3
    outside = np.full(len(r), 20.0)
    plain, wide = boot.prediction_interval(r, outside), boot.prediction_interval(r, outside, calibration=cal)
    assert np.all(wide[0] <= plain[0]) and np.all(wide[1] >= plain[1])  # past the data it only widens


@pytest.mark.slow  # 6 worlds x 2 truths x (fit, 60 resamples, 60-resample calibration): `make test-all`
def test_calibration_widens_only_what_extrapolates_badly():
    # A claim about a method, so over 6 worlds' noise draws (the same keys every run) and with margins. Measured:
    # kappa (misspecified / well-specified) 0.0085/0.0020, 0.0113/0.0037, 0/0, 0.0198/0.0116, 0.0089/0.0066,
    # 0.0073/0.0015 (means 0.0093 vs 0.0043: 2.2x); mean widening of the band at M=20 4.9x vs 2.4x (2.1x).
    # One seed alone is a coin flip (seed 3's well-specified kappa exceeds seed 0's misspecified one).
    law = known_tied_camel()

    def good(r, M):
        return np.asarray(law(jnp.asarray(r), jnp.asarray(M)))

    def bad(r, M):  # a loss that rises with size: no CAMEL law can follow it
        return good(r, M) * (1 + 0.04 * np.log(M / 2.0))

    template = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0)
    kappa, widen = {"good": [], "bad": []}, {"good": [], "bad": []}
    for seed in SEEDS:
        for name, truth in (("good", good), ("bad", bad)):
            r, R, M, y = _runs(truth, seed)
            key = jax.random.fold_in(jax.random.key(1), seed)
            point = cj.fit(template, (R, M), y, key=key, restarts=8)
            boot = cj.bootstrap(template, (R, M), y, key=jax.random.fold_in(key, 2), n_resamples=60, inits=point.laws,
                                strata=M, progress=False)  # fmt: skip
            cal = cj.calibrate(template, (R, M), y, key=jax.random.fold_in(key, 3), n_resamples=60, inits=point.law,
                               strata=M)  # fmt: skip
            target = np.full(len(r), 20.0)
            plain = np.log(np.divide(*boot.prediction_interval(r, target)[::-1]))  # log(high / low)
            wide = np.log(np.divide(*boot.prediction_interval(r, target, calibration=cal)[::-1]))
            kappa[name].append(float(np.hypot(cal.kappa_level, cal.kappa_mix)))
            widen[name].append(float(np.mean(wide / plain)))
            if seed == 0:  # exact, whatever the seed: inside the data the band is left as it is
                inside = np.full(len(r), 4.0)
                np.testing.assert_allclose(boot.prediction_interval(r, inside, calibration=cal),
                                           boot.prediction_interval(r, inside), rtol=1e-12)  # fmt: skip
                assert cal.size_max == 8.0 and cal.size_index == 1 and len(cal.distances) == 3  # 2 folds: 1 + 2 cells
    good_k, bad_k = np.array(kappa["good"]), np.array(kappa["bad"])
    assert np.all(bad_k >= good_k), (good_k, bad_k)
    assert np.mean(bad_k) > 1.5 * np.mean(good_k), (good_k, bad_k)
    assert np.mean(widen["bad"]) > 1.5 * np.mean(widen["good"]) and np.mean(widen["bad"]) > 2.5, widen


@pytest.mark.slow  # the suite's budget (issue 57): 24 s of fits before each refusal
def test_calibration_refuses_designs_it_cannot_hold_out_from():
    law = known_tied_camel()

    def runs(sizes):
        return _runs(lambda r, M: np.asarray(law(jnp.asarray(r), jnp.asarray(M))), 0, sizes=sizes)

    template = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True)
    r, R, M, y = runs((2.0, 3.0))
    with pytest.raises(ValueError, match="needs >= 3 distinct sizes"):
        cj.calibrate(template, (R, M), y, key=jax.random.key(0))
    r, R, M, y = runs((2.0, 3.0, 4.0))
    with pytest.raises(ValueError, match="needs >= 4 distinct sizes"):
        cj.calibrate(template, (R, M), y, key=jax.random.key(0), holdout=2)
    with pytest.raises(ValueError, match="has no size input"):
        cj.calibrate(cj.DML.sample_init(jax.random.key(0), n_datasets=3, n_domains=2), (R,), y, key=jax.random.key(0))
    # the default takes 2 folds, or 1 when only 3 sizes leave 2 to fit: one held-out cell
    cal = cj.calibrate(template, (R, M), y, key=jax.random.key(0), n_resamples=4, restarts=2)
    assert cal.distances == pytest.approx((np.log(4.0 / 3.0),)) and cal.dof == 1


def test_score_draws_are_the_pipelines_score_plus_the_calibrated_error():
    pipe = make_pipeline(batch=5)
    r = jnp.asarray(np.random.default_rng(1).dirichlet(np.ones(3), 4))
    plain = cj.mixture.score_draws(pipe, r, 20.0, key=jax.random.key(0))
    np.testing.assert_allclose(plain, pipe.score(r, jnp.full(4, 20.0)), rtol=1e-12)
    inside = cj.mixture.score_draws(pipe, r, 8.0, key=jax.random.key(0), calibration=_calibration(0.5, 0.5, 10.0,
                                                                                                  False))
    np.testing.assert_allclose(inside, pipe.score(r, jnp.full(4, 8.0)), rtol=1e-12)  # d = 0 inside the data
    level = cj.mixture.score_draws(pipe, r, 20.0, key=jax.random.key(0), calibration=_calibration(0.3, 0.0, 10.0,
                                                                                                  False))
    mixed = cj.mixture.score_draws(pipe, r, 20.0, key=jax.random.key(0), calibration=_calibration(0.0, 0.3, 10.0,
                                                                                                  False))
    assert float(jnp.std(level - plain)) > 1e-3
    # a level error moves every mixture of a draw the same way; a mixture error does not
    assert np.all(np.sign(np.asarray(level - plain)) == np.sign(np.asarray(level - plain))[:, :1])
    assert not np.all(np.sign(np.asarray(mixed - plain)) == np.sign(np.asarray(mixed - plain))[:, :1])
    with pytest.raises(ValueError, match="batched Pipeline"):
        cj.mixture.score_draws(make_pipeline(), r, 20.0, key=jax.random.key(0))


def test_the_verdict_says_improves_only_when_the_draws_agree():
    pipe = make_pipeline(batch=8)
    best = cj.optimal_mixture(pipe, 3, key=jax.random.key(0), model_size=20.0, robust="mean")
    values = lambda r: pipe.score(jnp.asarray(r)[None], jnp.array([20.0]))[:, 0]  # noqa: E731
    corners = np.eye(3)
    worst = corners[int(np.argmin([float(jnp.mean(values(c))) for c in corners]))]
    clear = cj.decide(pipe, best.r, worst, model_size=20.0, key=jax.random.key(1))
    assert clear.verdict == "improves" and clear.p_improve == 1.0 and clear.gain_low > 0
    assert clear.gain == pytest.approx(float(jnp.median(values(best.r) - values(worst))), rel=1e-9)
    same = cj.decide(pipe, worst, worst, model_size=20.0, key=jax.random.key(1))
    assert same.verdict == "not resolved" and same.p_improve == 0.0 and same.gain == 0.0
    # a pipeline whose proxy-loss fit of a benchmark supports no prediction (degenerate, R^2 <= 0), or whose
    # loss-to-benchmark law of a benchmark is degenerate, withholds it, naming the benchmark and the fit
    from camel_jax.mixture._optimize import _meaningless_proxies, _with_decision, _withheld_by

    names = [b for b, _ in pipe.benchmark_weights]
    fitted = SimpleNamespace(pipeline=pipe, loss_fit=SimpleNamespace(meaningless_targets=lambda: np.array([1])),
                             degenerate_benchmarks=())  # fmt: skip
    assert _meaningless_proxies(fitted) == [names[1]]
    assert _withheld_by(fitted) == [f"the proxy-loss fit of {names[1]} is degenerate or explains none of the variance"]
    fitted.loss_fit.meaningless_targets = lambda: np.array([], dtype=int)
    assert _withheld_by(fitted) == []
    fitted.degenerate_benchmarks = (names[0],)
    void = _withheld_by(fitted)
    assert void == [f"the loss-to-benchmark law of {names[0]} is degenerate"]
    kept = _with_decision(best, pipe, worst, 20.0, jax.random.key(1), None, 0.95, {})
    withheld = _with_decision(best, pipe, worst, 20.0, jax.random.key(1), None, 0.95, {}, void)
    assert kept.decision.verdict == "improves" and withheld.decision.verdict == "not resolved"
    assert withheld.decision.reason.startswith(f"the loss-to-benchmark law of {names[0]} is degenerate (see `problems")
    assert withheld.decision.gain == kept.decision.gain  # the numbers stand; only the verdict is withheld
    blurred = cj.decide(pipe, best.r, worst, model_size=20.0, key=jax.random.key(1),
                        calibration=_calibration(0.0, 2.0, 10.0, False))  # fmt: skip
    assert blurred.verdict == "not resolved" and blurred.p_improve < 0.9
    assert blurred.value_high - blurred.value_low > clear.value_high - clear.value_low
    assert "verdict: improves" in clear.line() and "not calibrated" in clear.line()
    assert "extrapolation error" in blurred.line()
    # the noise floor and the trained mixtures' range can each withhold the verdict
    floor = cj.decide(pipe, best.r, worst, model_size=20.0, key=jax.random.key(1), min_gain=clear.gain_high)
    assert floor.verdict == "not resolved" and "noise floor" in floor.reason and floor.p_improve == 1.0
    lower, upper = np.asarray(best.r) - 0.01, np.asarray(best.r) + 0.01
    inside = cj.decide(pipe, best.r, worst, model_size=20.0, key=jax.random.key(1), support=(lower, upper))
    assert inside.verdict == "improves"
    upper[0] = float(best.r[0]) - 0.005
    outside = cj.decide(pipe, best.r, worst, model_size=20.0, key=jax.random.key(1), support=(lower, upper))
    assert outside.verdict == "not resolved" and "dataset 0" in outside.reason and "train runs there" in outside.line()


# 26 s; the verdict's rule is tested by test_the_verdict_says_improves_only_when_the_draws_agree
@pytest.mark.slow  # suite budget (issue 57)
def test_optimal_mixture_gives_the_verdict_for_a_reference():
    pipe = make_pipeline(batch=6)
    ref = np.array([0.2, 0.3, 0.5])
    result = cj.optimal_mixture(pipe, 3, key=jax.random.key(0), model_size=20.0, robust="mean", reference=ref)
    assert isinstance(result.decision, cj.Decision)
    # the 6 resamples are near copies (K, C +1% each), and in every one the chosen mixture beats the reference
    draws = pipe.score(jnp.stack([jnp.asarray(result.r), jnp.asarray(ref)]), jnp.full(2, 20.0))  # [B, 2]
    gains = np.asarray(draws[:, 0] - draws[:, 1])
    assert np.all(gains > 0)
    assert result.decision.verdict == "improves" and result.decision.p_improve == 1.0
    assert result.decision.gain == pytest.approx(float(np.median(gains)), rel=1e-9)
    direct = cj.decide(pipe, result.r, ref, model_size=20.0, key=jax.random.fold_in(jax.random.key(0), 1))
    assert result.decision == direct
    boxed = cj.optimal_mixture(pipe, 3, key=jax.random.key(0), model_size=20.0, robust="mean", reference=ref,
                               max_shift=0.2)  # fmt: skip
    assert boxed.decision is not None and np.all(np.abs(np.asarray(boxed.r) / ref - 1) <= 0.2 + 1e-9)
    assert cj.optimal_mixture(pipe, 3, key=jax.random.key(0), model_size=20.0, robust="mean").decision is None
    with pytest.raises(ValueError, match="for the verdict"):
        cj.optimal_mixture(pipe, 3, key=jax.random.key(0), model_size=20.0, reference=ref)  # no robust choice


@pytest.fixture(scope="module")
def small_pipeline_fit():
    world = simulate.make_world(jax.random.key(0))
    runs = world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), [4.0, 5.0, 6.0, 8.0], noise=0.002,
                      key=jax.random.key(1))  # fmt: skip
    losses = [c for c in runs.columns if c.startswith("loss_")]
    fits = cj.fit_benchmarks(runs, losses=losses, benchmarks=[f"acc_{b}" for b in world.benchmarks],
                             names=list(world.benchmarks), key=jax.random.key(2), restarts=4)  # fmt: skip
    data = world.mixture_data(runs, losses[0])
    law = cj.CAMEL.sample_init(jax.random.key(3), n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0)
    weights = {"mmlu": 0.5, "gsm8k": 0.5}
    kw = dict(law=law, key=jax.random.key(4), n_resamples=6, restarts=4, strata=np.asarray(data.size))
    return fits, cj.fit_pipeline(data, fits, weights, **kw), cj.fit_pipeline(data, fits, weights, two_stage=False,
                                                                               calibrate=False, **kw)  # fmt: skip


# a calibrated pipeline fit (150 s, shared with the save/load and tamper tests below)
@pytest.mark.slow  # suite budget (issue 57)
def test_fit_pipeline_resamples_both_stages_and_calibrates(small_pipeline_fit):
    fits, two, one = small_pipeline_fit
    for b in ("mmlu", "gsm8k"):
        k_two = np.asarray(two.pipelines.benchmark_laws[b].params()["k"])  # [B, V]
        k_one = np.asarray(one.pipelines.benchmark_laws[b].params()["k"])
        assert k_two.shape == k_one.shape == (6, 5)
        assert np.ptp(k_two, axis=0).max() > 1e-6  # each resample has its own loss-to-benchmark law
        np.testing.assert_array_equal(k_one, np.broadcast_to(np.asarray(fits.laws[b].params()["k"]), k_one.shape))
    np.testing.assert_array_equal(two.resamples, one.resamples)  # the same resamples drive both stages
    assert one.calibration is None and two.calibration is not None
    assert two.calibration.kappa_level.shape == (2,) and two.calibration.size_max == 8.0
    assert not two.calibration.log_scale  # proxy losses are fitted on plain residuals
    assert two.score_noise > 0
    # the same folds calibrate the decision: sizes 4-8, folds keep <= 6 and <= 5: 3 held-out cells of 11 runs
    dc = two.decision_calibration
    assert one.decision_calibration is None and dc is not None
    assert int(dc.n_cells) == 3 and int(dc.n_runs) == 33 and float(dc.size_max) == 8.0
    assert float(dc.noise_sd) == two.score_noise and float(dc.replicated) == 0.0  # no repeated runs here
    assert float(dc.exponent_se) > 0  # the point pipeline's score at the 4 trained sizes measured the scale's trend
    lower, upper = two.support()
    np.testing.assert_allclose(lower, np.min(np.asarray(two.loss_fit.inputs[0]), axis=0))
    np.testing.assert_allclose(upper, np.max(np.asarray(two.loss_fit.inputs[0]), axis=0))
    result = cj.optimal_mixture(two, 5, key=jax.random.key(5), model_size=20.0, robust="mean",
                                reference=simulate.REFERENCE, max_shift=0.2)  # fmt: skip
    d = result.decision
    assert d.calibrated and d.min_gain == two.score_noise and "33 held-out runs in 3" in d.basis
    assert "gain scale x size^" in d.basis
    assert d.value_low <= d.value <= d.value_high and d.gain_low <= d.gain <= d.gain_high
    assert (d.verdict == "improves") == (d.reason == "")


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): the calibrated pipeline fixture (150 s)
def test_a_saved_pipeline_fit_keeps_its_verdict_through_load_and_the_cli(small_pipeline_fit, tmp_path, capsys):
    from camel_jax import cli

    _, two, one = small_pipeline_fit
    for fitted, name in ((two, "two.npz"), (one, "one.npz")):
        loaded = cj.load(cj.save(fitted, tmp_path / name))
        assert isinstance(loaded, cj.PipelineFit)
        assert jax.tree.structure(loaded) == jax.tree.structure(fitted)  # static fields (calibration's) included
        for a, b in zip(jax.tree.leaves(loaded), jax.tree.leaves(fitted)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert type(loaded.score_noise) is float and loaded.score_noise == fitted.score_noise
    loaded = cj.load(tmp_path / "two.npz")
    ref = ",".join(str(float(x)) for x in simulate.REFERENCE)
    kw = dict(key=jax.random.key(0), model_size=20.0, robust="mean", reference=simulate.REFERENCE, max_shift=0.2)
    expected = cj.optimal_mixture(two, 5, **kw).decision
    assert expected.calibrated and expected.min_gain == two.score_noise
    assert cj.optimal_mixture(loaded, 5, **kw).decision == expected
    args = ["optimize", str(tmp_path / "two.npz"), "--size", "20", "--reference", ref, "--max-shift", "0.2"]
    assert cli.main(args) == 0
    verdicts = [line for line in capsys.readouterr().out.splitlines() if line.startswith("verdict: ")]
    assert verdicts == [expected.line()] and "held-out gain" in verdicts[0]
    assert cli.main([*args, "--weights", "math"]) == 2  # its calibration is the fitted score's
    assert "keeps the benchmark weights it was fitted with" in capsys.readouterr().err
    # `next` reads the fit's own score noise from the file: no --noise needed
    # candidates are matched to the fit's mixture columns by name (the file keeps them)
    assert loaded.loss_fit.names == loaded.pipeline.datasets == two.loss_fit.names and two.loss_fit.names is not None
    cand = pd.DataFrame(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2)[:4],
                        columns=list(two.loss_fit.names))
    cand = cand.assign(size=[10.0, 12.0, 16.0, 20.0], flops=[1.0, 1.0, 2.0, 3.0])
    cand.to_csv(tmp_path / "cand.csv", index=False)
    argv = ["next", "--fit", str(tmp_path / "two.npz"), "--candidates", str(tmp_path / "cand.csv"), "--budget", "3",
            "--size", "20", "--out", str(tmp_path / "next.csv")]  # fmt: skip
    assert cli.main(argv) == 0
    chosen = cj.next_runs(two, cand, budget=3.0, target_size=20.0, key=jax.random.key(0))
    assert len(chosen) >= 1
    np.testing.assert_allclose(pd.read_csv(tmp_path / "next.csv")["sd_after"], chosen["sd_after"], rtol=1e-12)


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): the calibrated pipeline fixture (150 s)
def test_a_pooled_calibration_survives_save_and_load(small_pipeline_fit, tmp_path):
    import dataclasses

    _, two, _ = small_pipeline_fit
    n_bench = len(two.pipeline.benchmark_weights)
    pooled = dataclasses.replace(two.calibration, pooled=n_bench)
    back = cj.load(cj.save(dataclasses.replace(two, calibration=pooled), tmp_path / "pooled.npz")).calibration
    assert back.pooled == n_bench and back.dof == n_bench * two.calibration.dof
    assert cj.load(cj.save(two, tmp_path / "alone.npz")).calibration.pooled == 1


def _leaf_index(fitted, pick):
    return next(i for i, leaf in enumerate(jax.tree.leaves(fitted)) if leaf is pick(fitted))


@pytest.mark.parametrize(
    "case, match",
    [
        ("size_index", "size_index must be an integer"),
        ("distances", "distances must be a list"),
        ("pooled", "pooled must be an integer"),
        ("pooled_count", "pooled must be 1 or the number of benchmarks"),
        ("kappa", "kappa_mix must be finite numbers >= 0"),
        ("noise", "score_noise must be a finite number"),
        ("resamples", "resamples must be whole counts"),
    ],
)
# the calibrated pipeline fixture (150 s); tampered plain fits are refused in test_bad_input
@pytest.mark.slow  # suite budget (issue 57)
def test_load_refuses_a_tampered_pipeline_fit(small_pipeline_fit, tmp_path, case, match):
    _, two, _ = small_pipeline_fit
    src = cj.save(two, tmp_path / "fit.npz")

    def leaf(pick, value):
        def edit(arrays):
            name = f"leaf_{_leaf_index(two, pick)}"
            arrays[name] = np.full(arrays[name].shape, value, dtype=float)

        return edit

    edits = {
        "size_index": dict(edit_meta=lambda m: m["calibration"].update(size_index=7)),
        "distances": dict(edit_meta=lambda m: m["calibration"].update(distances=[-1.0])),
        "pooled": dict(edit_meta=lambda m: m["calibration"].update(pooled=0)),
        "pooled_count": dict(edit_meta=lambda m: m["calibration"].update(pooled=1000)),  # 3,000 dof: a narrow band
        "kappa": dict(edit_leaf=leaf(lambda f: f.calibration.kappa_mix, -1.0)),
        "noise": dict(edit_leaf=leaf(lambda f: f.score_noise, np.nan)),
        "resamples": dict(edit_leaf=leaf(lambda f: f.resamples, 0.5)),
    }
    bad = tamper(src, tmp_path / "bad.npz", **edits[case])
    with pytest.raises(ValueError, match=match):
        cj.load(bad)


@pytest.mark.slow  # its own benchmark and pipeline fits compile anew (~40 s)
def test_fit_pipeline_warns_when_it_cannot_calibrate():
    world = simulate.make_world(jax.random.key(0))
    runs = world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), [4.0, 8.0], noise=0.002,
                      key=jax.random.key(1))
    losses = [c for c in runs.columns if c.startswith("loss_")]
    fits = cj.fit_benchmarks(runs, losses=losses, benchmarks=["acc_mmlu"], names=["mmlu"], key=jax.random.key(2),
                             restarts=2)  # fmt: skip
    law = cj.CAMEL.sample_init(jax.random.key(3), n_datasets=5, n_domains=1, tied=True, capacity_exponent=3.0)
    with pytest.warns(UserWarning, match="cannot be calibrated"):
        out = cj.fit_pipeline(world.mixture_data(runs, losses[0]), fits, {"mmlu": 1.0}, law=law,
                              key=jax.random.key(4), n_resamples=4, restarts=2)  # fmt: skip
    assert out.calibration is None and out.pipelines is not None


def test_cli_optimize_prints_the_verdict_for_a_batched_pipeline(tmp_path, capsys):
    from camel_jax import cli

    path = cj.save(make_pipeline(batch=6), tmp_path / "pipe.npz")
    weights = "mmlu=0.5,gsm8k=0.3,humaneval=0.2"
    assert cli.main(["optimize", str(path), "--size", "20", "--weights", weights, "--reference", "0.2,0.3,0.5"]) == 0
    out = capsys.readouterr().out
    verdict = [line for line in out.splitlines() if line.startswith("verdict: ")]
    assert len(verdict) == 1 and "P(improves) = " in verdict[0] and "not calibrated" in verdict[0]
    assert "optimal mixture: " in out
    # a point pipeline has no resamples: a lone --reference is still an error
    point = cj.save(make_pipeline(), tmp_path / "point.npz")
    assert cli.main(["optimize", str(point), "--size", "20", "--weights", weights, "--reference", "0.2,0.3,0.5"]) == 2
    assert "--reference is only used with --max-shift" in capsys.readouterr().err


TRAINED = np.array([0.25, 0.5, 0.75, 1.0])  # the fold's trained sizes: log sizes -1.39..0, one run each


def _leverage_distance(size):
    """Distance of `size` from the trained sizes, written out: (log size - mean log size) / sqrt(sum of squares)."""
    logs = np.log(TRAINED)
    return (np.log(size) - logs.mean()) / np.sqrt(np.sum((logs - logs.mean()) ** 2))


def _held_out(rng, *, scale, floor, slope, noise, level, n_cells, runs=11, spread=0.002):
    """One fold trained on `TRAINED` (sizes <= 1) and `n_cells` held-out sizes of `runs` runs each, at log sizes
    0.1 to 0.4 past it: the predicted score f = mu_c + x, the measured one mu_c + a_c + scale x + own + noise, with
    a_c the cell's shared error, `own` N(0, floor^2 + slope^2 d^2) per run at the cell's leverage distance d and
    `noise` the measurement's. The trained runs come first; their scores are never compared."""
    size = np.repeat(np.exp(np.linspace(0.1, 0.4, n_cells)), runs)
    d = _leverage_distance(size)
    x = spread * rng.standard_normal(len(d))
    mu = np.repeat(rng.uniform(0.4, 0.6, n_cells), runs)
    shared = np.repeat(level * rng.standard_normal(n_cells), runs)
    own = np.sqrt(floor**2 + (slope * d) ** 2) * rng.standard_normal(len(d))
    measured = mu + shared + scale * x + own + noise * rng.standard_normal(len(d))
    trained = np.full(len(TRAINED), 0.5)
    predicted = np.concatenate([trained, mu + x])[None, :]
    return predicted, np.concatenate([trained, measured]), np.concatenate([TRAINED, size]), np.array([1.0])


def test_decision_calibration_recovers_known_scale_and_error_scales():
    rng = np.random.default_rng(0)
    truth = dict(scale=2.5, floor=0.001, slope=0.004, noise=0.001, level=0.01)
    predicted, measured, size, keeps = _held_out(rng, n_cells=400, **truth)
    cal = cj.fitting.calibrate_decision(predicted, measured, size, keeps, noise_sd=truth["noise"], replicated=True)
    assert int(cal.n_cells) == 400 and int(cal.n_runs) == 4400 and cal.dof == 4400 - 400 - 1
    assert float(cal.scale) == pytest.approx(2.5, rel=0.03)
    assert float(cal.gain_floor) == pytest.approx(0.001, abs=3e-4)
    assert float(cal.gain_slope) == pytest.approx(0.004, rel=0.15)
    # the final fit's distance is measured from all the runs given, as each fold's is from its own
    everything = np.log(size)
    assert float(cal.center) == pytest.approx(everything.mean(), rel=1e-12)
    assert float(cal.spread) == pytest.approx(np.sqrt(np.sum((everything - everything.mean()) ** 2)), rel=1e-12)
    M = 2.0
    assert cal.distance(M) == pytest.approx((np.log(M) - everything.mean()) / float(cal.spread), rel=1e-12)
    assert cal.distance(np.exp(everything.mean()) / 2) == 0.0  # below the runs' mean log size: no distance
    # the score's own error: the cell's shared error, the shrunk deviations and each run's own error
    d = 0.8  # inside the held-out cells' distances (0.66-0.95), as an estimate is read
    total = np.sqrt(0.01**2 + (1.5 * 0.002) ** 2 + 0.001**2 + (0.004 * d) ** 2)
    at_d = float(np.exp(float(cal.center) + d * float(cal.spread)))
    assert cal.value_sd(at_d) == pytest.approx(total, rel=0.15)
    assert cal.value_sd(0.1) == pytest.approx(float(cal.value_floor))  # well inside the data: d = 0
    assert "4400 held-out runs in 400" in cal.summary() and "repeated runs" in cal.summary()
    # a noise that is not the repeats' scatter is not subtracted: the error scales then hold it
    unsure = cj.fitting.calibrate_decision(predicted, measured, size, keeps, noise_sd=truth["noise"])
    assert float(unsure.gain_floor) == pytest.approx(np.hypot(0.001, 0.001), abs=3e-4)
    assert "residuals" in unsure.summary() and float(unsure.noise_sd) == truth["noise"]


def test_the_calibrated_gain_band_covers_at_its_level_where_the_model_holds():
    # A linear-in-parameters world: each decision's true gain is scale x (predicted gain) plus the two mixtures'
    # own Gaussian errors, and the calibration sees 3 held-out cells of 11 runs, as in the paper's design; the
    # decision is read at a distance inside the cells' (as the paper's M=12 and M=20 are: 0.26 and 0.47 against
    # 0.29-0.45). The band (Student-t on the estimated error scale) then covers at its nominal 95% up to the
    # estimate's own error: measured 0.94 over these 400 draws (binomial se 0.012), half-width 1.9x the RMSE.
    rng = np.random.default_rng(1)
    from camel_jax.mixture._decide import _calibrated

    covered, widths, errors = [], [], []
    for _ in range(400):
        predicted, measured, size, keeps = _held_out(rng, scale=2.0, floor=0.002, slope=0.0, noise=0.0005,
                                                     level=0.01, n_cells=3)  # fmt: skip
        cal = cj.fitting.calibrate_decision(predicted, measured, size, keeps, noise_sd=0.0005, replicated=True)
        g_pred = 0.002 * rng.standard_normal()
        true_gain = 2.0 * g_pred + 0.002 * (rng.standard_normal() - rng.standard_normal())
        draws = np.array([[0.5 + g_pred, 0.5]] * 4)  # a bootstrap that does not move
        at = float(np.exp(float(cal.center) + 0.8 * float(cal.spread)))  # inside the cells' distances 0.66-0.95
        d = _calibrated(draws, np.full(3, 1 / 3), at, cal, 0.95, 0.0, None)
        covered.append(d.gain_low <= true_gain <= d.gain_high)
        widths.append((d.gain_high - d.gain_low) / 2)
        errors.append(d.gain - true_gain)
    assert 0.91 <= np.mean(covered) <= 0.98, np.mean(covered)
    assert np.mean(widths) / np.sqrt(np.mean(np.square(errors))) < 2.5


DESIGN_SIZES = np.array([4.0, 5.0, 6.0, 7.0, 8.0, 10.0])  # the paper's trained sizes


def _shrinking_law(rng, *, runs, scale0, exponent, own, noise):
    """The paper's six sizes x `runs` runs, a law whose predicted deviations x are a size-dependent share of the
    measured ones: measured = mu_M + scale(M) x + own + noise, scale(M) = scale0 (M / 6)^exponent. The folds keep
    sizes <= 8 and <= 7 and predict as the full fit does (the in-sample `fitted`)."""
    size = np.repeat(DESIGN_SIZES, runs)
    x = 0.002 * rng.standard_normal(len(size))
    mu = np.repeat(rng.uniform(0.4, 0.6, len(DESIGN_SIZES)), runs)
    scale = scale0 * (size / 6.0) ** exponent
    measured = mu + scale * x + own * rng.standard_normal(len(size)) + noise * rng.standard_normal(len(size))
    fitted = mu + x
    return np.stack([fitted, fitted]), measured, size, np.array([8.0, 7.0]), fitted


def test_the_gain_scale_follows_the_size_by_which_the_law_shrinks_the_mixture_effect():
    rng = np.random.default_rng(3)
    predicted, measured, size, keeps, fitted = _shrinking_law(rng, runs=400, scale0=2.0, exponent=0.8, own=0.001,
                                                              noise=0.001)  # fmt: skip
    cal = cj.fitting.calibrate_decision(predicted, measured, size, keeps, noise_sd=0.001, fitted=fitted)
    assert float(cal.scale_exponent) == pytest.approx(0.8, abs=0.05)
    assert float(cal.scale_center) == pytest.approx(np.mean(np.log(size)), rel=1e-12)
    for M in (12.0, 20.0):  # read past the trained sizes, where one scale would be 0.55-0.7x the truth
        assert cal.scale_at(M)[0] == pytest.approx(2.0 * (M / 6.0) ** 0.8, rel=0.05)
    assert cal.scale_at(20.0)[1] > cal.scale_at(8.0)[1] > 0  # known less well further out
    # the own error: each fold's own trend leaves it, with the measurement's noise removed
    assert float(cal.gain_floor) == pytest.approx(0.001, abs=2e-4) and "size^0.8" in cal.summary()
    # ... and so does the score's error of the scaled predictions (0.0014 with the noise left in)
    assert cal.value_sd(12.0) == pytest.approx(0.001, abs=2e-4)
    # without the final fit's scores: one scale for every size, as before
    one = cj.fitting.calibrate_decision(predicted, measured, size, keeps, noise_sd=0.001)
    assert float(one.scale_exponent) == 0.0 and float(one.exponent_se) == 0.0
    assert one.scale_at(20.0) == (pytest.approx(float(one.scale), rel=1e-15), pytest.approx(float(one.scale_se)))
    assert one.scale_at(20.0)[0] < 0.75 * 2.0 * (20.0 / 6.0) ** 0.8
    # a law whose deviations do not follow the measured ones has no trend to read: one scale again
    flipped = cj.fitting.calibrate_decision(predicted, measured, size, keeps, noise_sd=0.001, fitted=-fitted)
    assert float(flipped.scale_exponent) == 0.0
    # sizes 4, 5 and 10: the final fit has a trend, its one fold (trained on 2 sizes) none, so the own error
    # comes from the one-scale residuals, as without `fitted`
    few = np.isin(size, [4.0, 5.0, 10.0])
    args = (predicted[:, few], measured[few], size[few], np.array([5.0]))
    three = cj.fitting.calibrate_decision(*args, noise_sd=0.001, fitted=fitted[few])
    assert float(three.scale_exponent) == pytest.approx(0.8, abs=0.1)
    assert float(three.gain_floor) == float(cj.fitting.calibrate_decision(*args, noise_sd=0.001).gain_floor)


def test_the_size_trend_gain_band_covers_at_its_level_and_removes_the_one_scale_bias():
    # The paper's design (6 sizes x 11 runs) in a world where the law predicts a share of the mixture's effect that
    # shrinks as M^-0.6; decisions read at M=20. Measured over these 200 draws: coverage 0.965 (binomial se 0.013),
    # half-width 2.23x the RMSE, median gain 0.98x the truth; one scale for every size: 0.63x, covering 0.485.
    rng = np.random.default_rng(4)
    from camel_jax.mixture._decide import _calibrated

    covered, widths, errors, ratio_trend, ratio_one = [], [], [], [], []
    for _ in range(200):
        predicted, measured, size, keeps, fitted = _shrinking_law(rng, runs=11, scale0=2.0, exponent=0.6, own=0.002,
                                                                  noise=0.001)  # fmt: skip
        kw = dict(noise_sd=0.001)
        cal = cj.fitting.calibrate_decision(predicted, measured, size, keeps, fitted=fitted, **kw)
        one = cj.fitting.calibrate_decision(predicted, measured, size, keeps, **kw)
        g_pred = 0.003 * rng.choice([-1.0, 1.0]) * (1 + rng.uniform())
        true_gain = 2.0 * (20.0 / 6.0) ** 0.6 * g_pred + 0.002 * (rng.standard_normal() - rng.standard_normal())
        draws = np.array([[0.5 + g_pred, 0.5]] * 4)  # a bootstrap that does not move
        d = _calibrated(draws, np.full(3, 1 / 3), 20.0, cal, 0.95, 0.0, None)
        covered.append(d.gain_low <= true_gain <= d.gain_high)
        widths.append((d.gain_high - d.gain_low) / 2)
        errors.append(d.gain - true_gain)
        ratio_trend.append(d.gain / g_pred)
        ratio_one.append(_calibrated(draws, np.full(3, 1 / 3), 20.0, one, 0.95, 0.0, None).gain / g_pred)
    truth = 2.0 * (20.0 / 6.0) ** 0.6
    assert 0.90 <= np.mean(covered) <= 0.99, np.mean(covered)
    assert np.mean(widths) / np.sqrt(np.mean(np.square(errors))) < 2.7
    assert np.median(ratio_trend) == pytest.approx(truth, rel=0.1)
    assert np.median(ratio_one) < 0.8 * truth


def test_a_format_6_pipeline_fit_decides_as_the_code_that_wrote_it():
    # written by the format-6 code (main at 08499a5, the `small_pipeline_fit` above): its decision calibration
    # measured distances in plain log size past the largest trained size, and loads so
    fitted = cj.load(DATA / "format6_pipeline_fit.npz")
    expected = np.load(DATA / "format6_pipeline_expected.npz")
    dc = fitted.decision_calibration
    assert float(dc.center) == pytest.approx(np.log(8.0), rel=1e-15) and float(dc.spread) == 1.0
    _decides_as_written(fitted, expected)


def _decides_as_written(fitted, expected):
    """A loaded pipeline fit's error scales at M=20 and its verdict there, against what the writing code saved."""
    dc = fitted.decision_calibration
    assert dc.value_sd(20.0) == pytest.approx(float(expected["value_sd_20"]), rel=1e-12)
    assert dc.gain_sd(20.0, 0.01) == pytest.approx(float(expected["gain_sd_20"]), rel=1e-12)
    d = cj.optimal_mixture(fitted, 5, key=jax.random.key(5), model_size=20.0, robust="mean",
                           reference=simulate.REFERENCE, max_shift=0.2).decision  # fmt: skip
    for name in ("gain", "gain_low", "gain_high", "value", "value_low", "value_high"):
        assert getattr(d, name) == pytest.approx(float(expected[name]), rel=1e-6, abs=1e-9), name
    return d


def test_a_format_9_pipeline_fit_decides_as_the_code_that_wrote_it():
    # written by the format-9 code (main at 04eafef, the `small_pipeline_fit` above): one gain scale for every
    # size, and it loads so (exponent 0) and gives the same verdict
    fitted = cj.load(DATA / "format9_pipeline_fit.npz")
    expected = np.load(DATA / "format9_pipeline_expected.npz")
    dc = fitted.decision_calibration
    assert float(dc.scale_exponent) == 0.0 and float(dc.exponent_se) == 0.0
    assert fitted.calibration.pooled == 1 and fitted.calibration.dof == 3  # before format 11: kappas per target
    assert dc.scale_at(20.0)[0] == pytest.approx(float(expected["scale"]), rel=1e-15)
    d = _decides_as_written(fitted, expected)
    assert "x1.33 at this size" in d.basis and "size^" not in d.basis  # the one scale, read at every size


def test_the_held_out_verdict_reads_the_calibrated_gain():
    pipe = make_pipeline(batch=8)
    best = cj.optimal_mixture(pipe, 3, key=jax.random.key(0), model_size=20.0, robust="mean")
    ref = np.array([0.2, 0.3, 0.5])
    draws = np.asarray(pipe.score(jnp.stack([jnp.asarray(best.r), jnp.asarray(ref)]), jnp.full(2, 20.0)))
    boot = draws[:, 0] - draws[:, 1]

    def cal(scale, gain_floor, n_runs=33.0, exponent=0.0, exponent_se=0.0):
        values = (10.0, 0.001, 0.0, scale, 0.1, gain_floor, 0.0, 0.001, 3.0, n_runs, 0.0, np.log(10.0), 1.0,
                  np.log(10.0), exponent, exponent_se, 0.0)  # default: one scale for every size (exponent 0)
        return cj.fitting.DecisionCalibration(*(jnp.asarray(v) for v in values))

    sharp = cal(1.5, 1e-5)
    d = cj.decide(pipe, best.r, ref, model_size=20.0, key=jax.random.key(1), decision_calibration=sharp)
    g = float(np.median(boot))
    assert d.gain == pytest.approx(1.5 * g, rel=1e-12)
    sd = np.hypot(1.5 * np.std(boot, ddof=1), sharp.gain_sd(20.0, g))
    half = t_quantile(0.975, 33 - 3 - 1) * sd
    assert d.gain_low == pytest.approx(1.5 * g - half, rel=1e-9) and d.gain_high == pytest.approx(1.5 * g + half)
    assert (d.verdict == "improves") == (d.gain_low > 0) and d.verdict == "improves"
    assert "held-out gain x1.50" in d.line() and "33 held-out runs" in d.line()
    floor = cj.decide(pipe, best.r, ref, model_size=20.0, key=jax.random.key(1), decision_calibration=sharp,
                      min_gain=2 * d.gain)  # fmt: skip
    assert floor.verdict == "not resolved" and "noise floor" in floor.reason
    blurred = cj.decide(pipe, best.r, ref, model_size=20.0, key=jax.random.key(1),
                        decision_calibration=cal(1.5, 10 * abs(g)))  # fmt: skip
    assert blurred.verdict == "not resolved" and "reaches 0" in blurred.reason and blurred.gain_low < 0
    # one scale: the score at r is its own draws' median; a scale that follows the size (measured at 10, read at
    # 20 with exponent 0.5) scales the gain there, and the score at r is the reference's plus that gain
    assert d.value == pytest.approx(float(np.median(draws[:, 0])), rel=1e-12) and not sharp.trended
    grown = cal(1.5, 1e-5, exponent=0.5, exponent_se=0.1)
    t = cj.decide(pipe, best.r, ref, model_size=20.0, key=jax.random.key(1), decision_calibration=grown)
    unbias = np.exp(-0.5 * (0.1 * np.log(2.0)) ** 2)  # exp(b x)'s log-normal bias at x = log 2, se_b = 0.1
    at_20 = 1.5 * np.sqrt(2.0) * unbias
    assert grown.trended and grown.scale_at(20.0)[0] == pytest.approx(at_20, rel=1e-12)
    delta = np.hypot(np.sqrt(2.0) * 0.1, 1.5 * np.sqrt(2.0) * np.log(2.0) * 0.1)
    assert grown.scale_at(20.0)[1] == pytest.approx(delta * unbias, rel=1e-12)
    assert t.gain == pytest.approx(at_20 * g, rel=1e-12)
    assert t.value == pytest.approx(float(np.median(draws[:, 1])) + t.gain, rel=1e-12)
    # with a trend, the held-out errors already hold the folds' own bootstrap error: each band takes the larger of
    # the bootstrap's variance and the held-out one, not their sum (the scale's own error still adds to the gain's)
    value_sd = max(np.std(draws[:, 1], ddof=1), grown.value_sd(20.0))
    assert t.value_high - t.value == pytest.approx(t_quantile(0.975, 29) * value_sd, rel=1e-9)
    own, boot_sd = grown.gain_sd(20.0, 0.0), at_20 * np.std(boot, ddof=1)
    gain_sd = np.hypot(max(boot_sd, own), g * grown.scale_at(20.0)[1])
    assert t.gain_high - t.gain == pytest.approx(t_quantile(0.975, 29) * gain_sd, rel=1e-9)
    wide = cal(1.5, 10 * np.std(boot, ddof=1), exponent=0.5, exponent_se=0.1)  # the held-out error is the larger
    w = cj.decide(pipe, best.r, ref, model_size=20.0, key=jax.random.key(1), decision_calibration=wide)
    gain_sd = np.hypot(wide.gain_sd(20.0, 0.0), g * wide.scale_at(20.0)[1])
    assert w.gain_high - w.gain == pytest.approx(t_quantile(0.975, 29) * gain_sd, rel=1e-9)
    assert wide.gain_sd(20.0, 0.0) > at_20 * np.std(boot, ddof=1) > 0


def test_replicate_noise_is_the_pooled_scatter_of_repeated_runs():
    rng = np.random.default_rng(2)
    r = np.repeat(rng.dirichlet(np.ones(3), 4), 3, axis=0)  # 4 mixtures x 3 repeats
    size = np.tile([4.0, 4.0, 8.0], 4)  # ... of which 2 repeat at size 4; the size-8 run stands alone
    values = rng.standard_normal(12)
    sd, dof = cj.fitting.replicate_noise(r, size, values)
    pairs = values.reshape(4, 3)[:, :2]
    assert dof == 4
    assert sd == pytest.approx(np.sqrt(np.sum((pairs - pairs.mean(axis=1, keepdims=True)) ** 2) / 4), rel=1e-12)
    assert cj.fitting.replicate_noise(r[::3], size[::3], values[::3])[1] == 0  # no repeats: no noise estimate
    used = np.ones(12, bool)
    used[0] = False
    assert cj.fitting.replicate_noise(r, size, values, used)[1] == 3


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 28 s of fits; replicate_noise is tested exactly below
def test_repeated_runs_set_the_noise_floor():
    world = simulate.make_world(jax.random.key(0))
    mixtures = cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2)[:5]
    runs = pd.concat([world.runs(mixtures, [4.0, 8.0], noise=0.004, key=jax.random.key(k)) for k in (1, 2)])
    losses = [c for c in runs.columns if c.startswith("loss_")]
    fits = cj.fit_benchmarks(runs, losses=losses, benchmarks=["acc_mmlu", "acc_gsm8k"], names=["mmlu", "gsm8k"],
                             key=jax.random.key(2), restarts=2)  # fmt: skip
    law = cj.CAMEL.sample_init(jax.random.key(3), n_datasets=5, n_domains=1, tied=True, capacity_exponent=3.0)
    weights = {"mmlu": 0.5, "gsm8k": 0.5}
    kw = dict(law=law, key=jax.random.key(4), restarts=2)
    data = world.mixture_data(runs, losses[0])
    repeated = cj.fit_pipeline(data, fits, weights, **kw)
    residual = cj.fit_pipeline(data, fits, weights, replicates=False, **kw)
    measured = 0.5 * runs["acc_mmlu"].to_numpy() + 0.5 * runs["acc_gsm8k"].to_numpy()
    sd, dof = cj.fitting.replicate_noise(np.asarray(data.r), np.asarray(data.size), measured)
    assert dof == 10 and repeated.score_noise == pytest.approx(sd, rel=1e-9)
    assert residual.score_noise != pytest.approx(sd, rel=1e-3)  # the fits' residuals: another number
    # every mixture here is repeated once per size: its fit weights follow its repeats' scatter of each proxy loss
    expected = cj.fitting.replicate_weights(np.asarray(data.r), np.asarray(data.size), np.asarray(repeated.loss_fit.y))
    np.testing.assert_allclose(np.asarray(repeated.loss_fit.weights), expected, rtol=1e-12)
    assert np.ptp(expected) > 0.1 and np.all(np.asarray(residual.loss_fit.weights) == 1.0)


def test_replicate_weights_follow_each_mixtures_repeat_variance():
    rng = np.random.default_rng(3)
    r = np.repeat(rng.dirichlet(np.ones(3), 3), 40, axis=0)  # 3 mixtures x 2 sizes x 20 repeats
    size = np.tile(np.repeat([4.0, 8.0], 20), 3)
    sd = np.repeat([0.01, 0.05, 0.01], 40)  # the second mixture's noise variance is 25x the others'
    values = np.stack([size + sd * rng.standard_normal(120), np.ones(120)])  # the second target never varies
    w = cj.fitting.replicate_weights(r, size, values, prior_dof=0.0)
    assert w.shape == (2, 120) and w[0].mean() == pytest.approx(1.0)

    # with no shrinkage, each weight is 1 / the mixture's own pooled variance (here: 38 dof each), rescaled
    def var(m):
        v = values[0, 40 * m : 40 * m + 40].reshape(2, 20)
        return np.sum((v - v.mean(axis=1, keepdims=True)) ** 2) / 38

    inverse = np.repeat([1 / var(m) for m in range(3)], 40)
    np.testing.assert_allclose(w[0], inverse / inverse.mean(), rtol=1e-10)
    assert 15 < w[0, 0] / w[0, 40] < 40
    np.testing.assert_array_equal(w[1], np.ones(120))  # no scatter: no weighting
    # shrinkage pulls every mixture toward the pooled variance; a mixture without repeats gets it
    shrunk = cj.fitting.replicate_weights(r, size, values[0], prior_dof=1000.0)
    assert np.ptp(shrunk) < 0.1 * np.ptp(w[0])
    lone = cj.fitting.replicate_weights(np.vstack([r, [[0.2, 0.3, 0.5]]]), np.append(size, 4.0), np.append(values[0],
                                                                                                           9.0))
    pooled = np.sum([var(m) * 38 for m in range(3)]) / 114
    assert lone[-1] / lone[0] == pytest.approx((var(0) * 38 + 2 * pooled) / 40 / pooled, rel=1e-9)


def test_a_decision_needs_two_runs_in_a_held_out_size():
    from camel_jax.fitting._calibrate import HeldOut
    from camel_jax.mixture._pipeline import _decision_calibration

    size = np.array([1.0, 1.0, 2.0, 3.0])  # the fold keeps size 1 and sees one run at each larger size
    held = HeldOut(keeps=np.array([1.0]), size=size, median=np.zeros((1, 1, 4)))
    with pytest.raises(ValueError, match="no held-out cell with >= 2 runs"):
        cj.fitting.calibrate_decision(np.zeros((1, 4)), np.ones(4), size, held.keeps, noise_sd=0.01)
    with pytest.warns(UserWarning, match="fall back to the proxy losses' calibration"):
        assert _decision_calibration(np.zeros((1, 4)), np.ones(4), held, 0.01, np.ones(4, bool), False, None) is None


@pytest.mark.slow  # suite budget (issue 57): 25 s of calibration fits; the bar itself is tested on the bootstrap
def test_calibration_draws_a_bar_over_its_folds_on_a_terminal_only(monkeypatch):
    # 4 sizes: the default 2 folds, one bar step each, on stderr; nothing when stderr is a file or a pipe
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    truth = cj.Chinchilla.from_params(E=1.7, A=400.0, alpha=0.34, B=410.0, beta=0.28)
    N = np.repeat([1e7, 2e7, 4e7, 8e7], 3)
    D = N * np.tile([10.0, 20.0, 40.0], 4)
    y = np.asarray(truth(N, D)) * np.exp(0.003 * np.random.default_rng(0).standard_normal(N.size))
    kw = dict(key=jax.random.key(0), n_resamples=2, inits=truth)
    for stream in (Terminal(), io.StringIO()):
        monkeypatch.setattr(sys, "stderr", stream)
        with warnings.catch_warnings(record=True):  # recorded, never printed into the stream under test
            cal = cj.calibrate(truth, (N, D), y, **kw)
        monkeypatch.undo()
        assert len(cal.distances) == 3  # 2 folds: 1 + 2 held-out cells
        if isinstance(stream, Terminal):
            drawn = stream.getvalue()
            assert drawn.count("\r") == 3 and "calibration [" in drawn, drawn
            assert "0/2 folds" in drawn and "1/2 folds" in drawn and drawn.endswith("2/2 folds\n"), drawn
        else:
            assert stream.getvalue() == ""
    quiet = Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    with warnings.catch_warnings(record=True):
        cj.calibrate(truth, (N, D), y, **kw, progress=False)
    monkeypatch.undo()
    assert quiet.getvalue() == ""


def test_unfinished_fold_fits_are_one_warning_that_counts_fold_fits_not_targets():
    """A calibration's fold fits are resamples of each fold, not the user's targets: when their best starts stop at
    the step cap the warning says so once, counting folds x targets x resamples (before: 'the best start of 243 of
    352 targets' for 22 targets, per fold)."""
    law = known_tied_camel()
    r, R, M, y = _runs(lambda r, M: np.asarray(law(jnp.asarray(r), jnp.asarray(M))), 0)
    template = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0)
    capped = cj.FitOptions(max_steps=2, polish=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cj.calibrate(template, (R, M), np.stack([y, y]), key=jax.random.key(3), n_resamples=3, restarts=2,
                     options=capped, strata=M, progress=False)  # fmt: skip
    fits = [str(w.message) for w in caught if issubclass(w.category, cj.FitWarning)]
    assert len(fits) == 1 and fits[0].startswith("calibration: the best start of "), fits
    assert "of 12 fold fits (2 folds x 2 targets x 3 resamples) did not converge" in fits[0], fits
    assert caught[[issubclass(w.category, cj.FitWarning) for w in caught].index(True)].filename == __file__
