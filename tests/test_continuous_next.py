"""continuous_next_runs(score="band"): the gain's Gauss-Newton band through the fit's implicit derivative, checked
against NumPy on a tiny law, and its ascent's gradient against finite differences."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array

from camel_jax.mixture._continuous_next import (
    _band_setup,
    _band_variance,
    _BandProblem,
    _new_rows,
    continuous_next_runs,
)
from camel_jax.solver._options import FitOptions


class Tiny(eqx.Module):
    """f(r, M) = e + a M^-alpha exp(b . r): a user's own law of (mixture, size)."""

    e: Array
    a: Array
    alpha: Array
    b: Array

    def __call__(self, r: Array, M: Array) -> Array:
        return self.e + self.a * M ** (-self.alpha) * jnp.exp(r @ self.b)


def _tiny_problem():
    law = Tiny(jnp.asarray(1.5), jnp.asarray(2.0), jnp.asarray(0.4), jnp.asarray([0.3, -0.2, 0.5]))
    rng = np.random.default_rng(0)
    r = rng.dirichlet(np.ones(3), 9)
    M = rng.choice([1.0, 2.0, 4.0], 9)
    y = np.asarray(law(jnp.asarray(r), jnp.asarray(M))) * np.exp(rng.normal(0, 0.01, 9))
    weights = np.asarray([1.0, 2.0, 0.0, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0])
    return law, r, M, y, weights


def _numpy_jacobian(theta, r, M):
    """d log f / d(e, a, alpha, b) by hand."""
    e, a, alpha, b = theta[0], theta[1], theta[2], theta[3:]
    term = a * M ** (-alpha) * np.exp(r @ b)
    f = e + term
    columns = [np.ones_like(f), term / a, -np.log(M) * term, term[:, None] * r]
    return np.column_stack(columns[:3] + [columns[3]]) / f[:, None]


def test_band_variance_matches_numpy_gauss_newton():
    law, r, M, y, weights = _tiny_problem()
    options = FitOptions(log_residuals=True)
    pick, reference, target, noise = np.asarray([0.2, 0.1, 0.7]), np.full(3, 1 / 3), 8.0, 0.02
    info, g, s2, ridge = _band_setup(law, (jnp.asarray(r), jnp.asarray(M)), jnp.asarray(y), jnp.asarray(weights),
                                     options, jnp.asarray(pick), jnp.asarray(reference), jnp.asarray(target),
                                     jnp.asarray(noise))  # fmt: skip
    r_new, M_new = np.asarray([[0.6, 0.3, 0.1], [0.1, 0.1, 0.8]]), np.asarray([2.0, 8.0])
    rows = _new_rows(law, options, jnp.asarray(1.0), jnp.asarray(r_new), jnp.asarray(M_new))
    variance = float(_band_variance(info, g, s2, ridge, rows))
    # NumPy: the residual Jacobian (log residuals; the new runs at the law's prediction), W = weights over their
    # positive mean, g = d(f(pick) - f(reference)) / dtheta, s = noise / mean positive-weight y
    theta = np.asarray([1.5, 2.0, 0.4, 0.3, -0.2, 0.5])
    J = _numpy_jacobian(theta, r, M)
    W = weights * np.sum(weights > 0) / weights.sum()
    info_np = J.T @ (W[:, None] * J)
    f_of = lambda rr, mm: _numpy_jacobian(theta, rr, mm) * (theta[0] + theta[1] * mm ** (-theta[2])  # noqa: E731
                                                            * np.exp(rr @ theta[3:]))[:, None]
    g_np = (f_of(pick[None], np.asarray([target])) - f_of(reference[None], np.asarray([target])))[0]
    J_new = _numpy_jacobian(theta, r_new, M_new)
    s2_np = (noise / y[weights > 0].mean()) ** 2
    ridge_np = np.sqrt(np.finfo(float).eps) * np.linalg.eigvalsh(info_np).max()
    expected = s2_np * g_np @ np.linalg.solve(info_np + J_new.T @ J_new + ridge_np * np.eye(6), g_np)
    np.testing.assert_allclose(np.asarray(info), info_np, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(g), g_np, rtol=1e-10)
    np.testing.assert_allclose(variance, expected, rtol=1e-8)
    # new runs only remove variance
    before = float(_band_variance(info, g, s2, ridge, jnp.zeros_like(rows)))
    assert 0 < variance < before


def test_band_ascent_gradient_matches_finite_differences():
    law, r, M, y, weights = _tiny_problem()
    options = FitOptions(log_residuals=True)
    inputs = (jnp.asarray(r), jnp.asarray(M))
    info, g, s2, ridge = _band_setup(law, inputs, jnp.asarray(y), jnp.asarray(weights), options,
                                     jnp.asarray([0.2, 0.1, 0.7]), None, jnp.asarray(8.0), jnp.asarray(0.02))
    sizes = np.asarray([1.0, 2.0, 4.0])
    problem = _BandProblem(law, options, info, g, s2, ridge, jnp.asarray(1.0), jnp.log(jnp.asarray(sizes)),
                           jnp.log(jnp.asarray(6 * sizes**2)), jnp.asarray(0.05))  # fmt: skip
    chosen = jnp.zeros((2, info.shape[0])).at[0].set(
        _new_rows(law, options, jnp.asarray(1.0), jnp.asarray([[0.5, 0.25, 0.25]]), jnp.asarray([4.0]))[0])
    zv = jnp.asarray([0.3, -0.4, 0.1, 0.7])
    value = eqx.filter_jit(lambda p, w: p.removed_per_flop(w, chosen))
    grad = np.asarray(eqx.filter_jit(jax.grad(lambda w, p: p.removed_per_flop(w, chosen)))(zv, problem))
    h = 1e-6
    fd = [(float(value(problem, zv.at[i].add(h))) - float(value(problem, zv.at[i].add(-h)))) / (2 * h)
          for i in range(4)]  # fmt: skip
    assert np.all(np.abs(grad) > 0)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7 * np.abs(fd).max())


def test_band_score_refuses_the_wrong_inputs():
    with pytest.raises(ValueError, match="`score` must be"):
        continuous_next_runs(None, [1.0], [1.0], target_size=2.0, noise=0.01, key=jax.random.key(0), score="x")
    with pytest.raises(TypeError, match="FitResult"):
        continuous_next_runs(None, [1.0], [1.0], target_size=2.0, noise=0.01, key=jax.random.key(0), score="band")
