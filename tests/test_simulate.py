"""The ground-truth world: exact KKT allocation, brute force for k=2, runs table."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from camel_jax.experiments import _simulate


@pytest.fixture(scope="module")
def world():
    return _simulate.default_world(jax.random.key(0))


def test_allocation_meets_budget_and_stationarity(world):
    rng = np.random.default_rng(0)
    for _ in range(5):
        r = jnp.asarray(rng.dirichlet(np.ones(5)))
        size = float(rng.uniform(4, 20))
        m = np.asarray(world.allocation(r, jnp.asarray(size)))
        capacity = size**3
        assert abs(m.sum() - capacity) / capacity < 1e-10
        eta = np.asarray(world.t @ r)
        a, A = np.asarray(world.a), np.asarray(world.A)
        lam = a * A * eta / m ** (a + 1)  # stationarity: every domain's marginal gain equals the multiplier
        assert np.max(np.abs(lam / lam.mean() - 1)) < 1e-10


def test_allocation_matches_brute_force_for_two_domains():
    world = _simulate.default_world(jax.random.key(1), n_domains=2)
    r = jnp.asarray([0.1, 0.3, 0.2, 0.25, 0.15])
    size = 6.0
    eta, a, A = (np.asarray(x) for x in (world.t @ r, world.a, world.A))
    cap = size**3

    def train(m1):
        m = np.array([m1, cap - m1])
        return float(np.sum(eta * A / m**a))

    brute = minimize_scalar(
        train, bounds=(1e-9 * cap, cap * (1 - 1e-9)), method="bounded", options={"xatol": 1e-12 * cap}
    )
    m = np.asarray(world.allocation(r, jnp.asarray(size)))
    assert abs(m[0] - brute.x) / cap < 1e-7
    assert train(m[0]) <= brute.fun * (1 + 1e-12)


def test_losses_fall_with_size_and_gradients_are_exact(world):
    r = jnp.full((3, 5), 0.2)
    L = np.asarray(world.losses(r, jnp.array([4.0, 8.0, 16.0])))
    assert np.all(np.diff(L, axis=0) < 0)
    r0 = jnp.asarray([0.35, 0.25, 0.15, 0.1, 0.15])
    f = lambda x: world.losses(x[None], jnp.array([6.0]))[0, 1]  # noqa: E731
    grad = np.asarray(jax.grad(f)(r0))
    eye = np.eye(5)
    fd = np.array([(f(r0 + 1e-6 * e) - f(r0 - 1e-6 * e)) / 2e-6 for e in eye])
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)


def test_runs_table_has_flops_and_noise_is_keyed(world):
    mixtures = np.array([[0.2] * 5, [0.4, 0.1, 0.1, 0.2, 0.2]])
    runs = world.runs(mixtures, [4.0, 8.0])
    assert len(runs) == 4 and {"r_english", "size", "params", "tokens", "flops", "loss_val0", "acc_mmlu"} <= set(runs)
    np.testing.assert_allclose(runs["flops"], 6 * runs["params"] * runs["tokens"])
    np.testing.assert_allclose(runs["params"], _simulate.PAPER_PARAMS_PER_M3 * runs["size"] ** 3)
    a = world.runs(mixtures, [4.0], noise=0.01, key=jax.random.key(3))
    b = world.runs(mixtures, [4.0], noise=0.01, key=jax.random.key(3))
    assert a.equals(b) and not a.equals(world.runs(mixtures, [4.0]))
    with pytest.raises(ValueError, match="needs a `key`"):
        world.runs(mixtures, [4.0], noise=0.01)


def test_paper_architecture_parameter_counts():
    # the paper's 590M-A12M at M=4 and 55B-A1.2B at M=20 (active, non-embedding)
    assert abs(float(_simulate.paper_active_params(4.0)) / 12e6 - 1) < 0.3
    assert abs(float(_simulate.paper_active_params(20.0)) / 1.2e9 - 1) < 0.05
