"""Mixture optimization: analytic optima, bounds, trust regions, grid search, infeasibility, resamples."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import make_pipeline

import camel_jax as cj

C = jnp.array([1.0, 2.0, 3.0, 4.0])


def log_utility(r):
    return jnp.sum(C * jnp.log(r))


def test_concave_score_reaches_the_analytic_optimum():
    result = cj.optimal_mixture(log_utility, 4, key=jax.random.key(0))
    np.testing.assert_allclose(result.r, C / C.sum(), atol=1e-4)
    assert float(result.kkt_residual) < 1e-4
    assert abs(float(jnp.sum(result.r)) - 1) < 1e-12


def test_binding_upper_bound_gives_the_analytic_capped_optimum():
    result = cj.optimal_mixture(log_utility, 4, key=jax.random.key(0), upper=[1.0, 1.0, 1.0, 0.3])
    expected = np.concatenate([0.7 * np.asarray(C[:3]) / 6.0, [0.3]])
    np.testing.assert_allclose(result.r, expected, atol=1e-4)
    assert float(result.r[3]) <= 0.3 + 1e-12 and abs(float(jnp.sum(result.r)) - 1) < 1e-12


def test_bounds_and_trust_region_hold_to_1e12():
    reference = np.array([0.4, 0.3, 0.2, 0.1])
    linear = lambda r: jnp.dot(jnp.array([0.0, 0.0, 0.0, 1.0]), r)  # pushes everything into dataset 3  # noqa: E731
    result = cj.optimal_mixture(
        linear, 4, key=jax.random.key(1), reference=reference, max_shift=0.2, lower=[0.0, 0.0, 0.1, 0.0]
    )
    r = np.asarray(result.r)
    lo, hi = np.maximum(reference * 0.8, [0, 0, 0.1, 0]), reference * 1.2
    assert np.all(r >= lo - 1e-12) and np.all(r <= hi + 1e-12) and abs(r.sum() - 1) < 1e-12
    assert abs(r[3] - hi[3]) < 1e-9  # the favoured dataset sits at its trust-region cap


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(lower=[0.5, 0.4, 0.2]), "lower bounds sum to 1.1 > 1"),
        (dict(upper=[0.3, 0.3, 0.3]), "upper bounds sum to 0.9 < 1"),
        (dict(lower=[0.5, 0.0, 0.0], upper=[0.4, 1.0, 1.0]), "dataset 0 has lower 0.5 > upper 0.4"),
        (dict(max_shift=0.2), "needs a `reference`"),
    ],
)
def test_infeasible_bounds_raise_before_compute(kwargs, message):
    with pytest.raises(ValueError, match=message):
        cj.optimal_mixture(lambda r: jnp.sum(r), 3, key=jax.random.key(0), **kwargs)


def ill_conditioned(r):
    """-sum c_j (r_j - a_j)^2 with curvatures 1e-2 to 300: its maximum on the simplex has r_2 = r_3 = 0."""
    c, a = jnp.array([1.0, 300.0, 1e-2, 3.0]), jnp.array([0.7, 0.35, 0.2, -0.25])
    return -jnp.sum(c * (r - a) ** 2)


def test_the_polish_runs_to_its_kkt_rule_not_to_a_count():
    """On a face of an ill-conditioned score the projected-gradient polish needs several hundred steps: it keeps
    going past `polish_steps` until the best start meets its KKT rule; capped at 100 (the old fixed count) it stops
    far off (r_0 0.41 where the optimum has 0.65), and says so (`converged` False) rather than pass it as optimal."""
    r0 = (195.7 / 301)  # KKT on the face {r_0 + r_1 = 1}: r_0 - 0.7 = 300 (r_1 - 0.35)
    optimum = np.array([r0, 1 - r0, 0.0, 0.0])
    # r_2 and r_3 stay at 0: their pulls 2 c_j a_j (0.004; -1.5) are below the face's multiplier 2 (0.7 - r_0)
    assert 2 * 1e-2 * 0.2 < 2 * (0.7 - r0)
    ascent = cj.mixture.AscentOptions(adam_steps=0)
    result = cj.optimal_mixture(ill_conditioned, 4, key=jax.random.key(0), restarts=4, ascent=ascent)
    assert bool(result.converged)
    np.testing.assert_allclose(result.r, optimum, atol=1e-7)
    capped = cj.mixture.AscentOptions(adam_steps=0, max_polish_steps=100)
    with pytest.warns(UserWarning, match="the ascent to the pick stopped short of its optimum"):
        short = cj.optimal_mixture(ill_conditioned, 4, key=jax.random.key(0), restarts=4, ascent=capped)
    assert not bool(np.any(short.starts_converged)) and not bool(short.converged)
    assert float(np.max(np.abs(np.asarray(short.r) - optimum))) > 0.05
    with pytest.raises(ValueError, match=r"max_polish_steps` \(50\) must be >= `polish_steps` \(100\)"):
        cj.mixture.AscentOptions(max_polish_steps=50)


def test_ascent_matches_dense_grid_search_for_three_datasets():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(3, 3))
    Q = -(A @ A.T) - 0.1 * np.eye(3)
    b = rng.normal(size=3)
    f = lambda r: r @ jnp.asarray(Q) @ r + jnp.asarray(b) @ r + 0.3 * jnp.sin(4 * r[0])  # noqa: E731
    result = cj.optimal_mixture(f, 3, key=jax.random.key(2))
    h = 1e-3
    grid = np.array(
        [
            (i * h, j * h, 1 - (i + j) * h)
            for i, j in itertools.product(range(1001), repeat=2)
            if (i + j) * h <= 1 + 1e-12
        ]
    )
    values = np.asarray(jax.vmap(f)(jnp.asarray(grid)))
    best = grid[np.argmax(values)]
    assert np.max(np.abs(np.asarray(result.r) - best)) <= 2 * h
    assert float(result.value) >= values.max() - 1e-9


def test_zero_weights_at_the_optimum_are_reached_exactly():
    # KKT: 1 - 2 r0 = 0.2 - 2 r1 = mu on the support gives r = (0.7, 0.3) and mu = -0.4; dataset 2's gradient
    # there is -1 < mu, so its optimal weight is exactly 0.
    f = lambda r: jnp.dot(jnp.array([1.0, 0.2, -1.0]), r) - jnp.sum(r**2)  # noqa: E731
    result = cj.optimal_mixture(f, 3, key=jax.random.key(0))
    np.testing.assert_allclose(result.r, [0.7, 0.3, 0.0], atol=1e-6)
    assert float(jnp.min(result.r)) >= 0.0


def test_projection_onto_the_capped_simplex():
    v = jnp.array([0.9, 0.5, -0.2, 0.1])
    lo, hi = jnp.array([0.0, 0.1, 0.05, 0.0]), jnp.array([0.6, 0.6, 0.6, 0.6])
    p = np.asarray(cj.mixture.project_capped_simplex(v, lo, hi))
    assert abs(p.sum() - 1) < 1e-12 and np.all(p >= np.asarray(lo)) and np.all(p <= np.asarray(hi))
    # optimality of a Euclidean projection: <v - p, q - p> <= 0 for feasible q
    rng = np.random.default_rng(0)
    q = np.asarray(jax.vmap(lambda x: cj.mixture.project_capped_simplex(x, lo, hi))(jnp.asarray(rng.normal(size=(200,
                                                                                                                 4)))))
    assert np.all((q - p) @ (np.asarray(v) - p) <= 1e-10)


@pytest.mark.parametrize("robust", ["mean", pytest.param(("quantile", 0.25), marks=pytest.mark.slow)])  # budget
def test_robust_mixtures_solves_each_decision_as_optimal_mixture_does(robust):
    from camel_jax.mixture._optimize import robust_mixtures

    pipe = make_pipeline(batch=6)  # 6 resamples -> 2 decisions of 3 resamples each
    cells = jax.tree.map(lambda leaf: leaf.reshape((2, 3) + leaf.shape[1:]), pipe)
    region = dict(reference=[0.2, 0.3, 0.5], max_shift=0.5)
    both = robust_mixtures(cells, key=jax.random.key(0), model_size=20.0, robust=robust, **region)
    assert both.r.shape == (2, 3)
    for c in range(2):
        one = jax.tree.map(lambda leaf, c=c: leaf[c], cells)
        alone = cj.optimal_mixture(one, 3, key=jax.random.key(0), model_size=20.0, robust=robust, **region)
        np.testing.assert_allclose(both.r[c], alone.r, atol=1e-8)
        np.testing.assert_allclose(both.value[c], alone.value, rtol=1e-10)
    with pytest.raises(ValueError, match="batched"):
        robust_mixtures(pipe, key=jax.random.key(0), model_size=20.0, robust="mean")
