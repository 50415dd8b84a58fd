"""Lanes set aside when they finish (issue 29: converged lanes stop costing): advancing lanes in rounds, a few at a
time, gives every lane the iterates of one uninterrupted run; fits and bootstraps give the same answer whatever
the number of lanes advanced together. `benchmarks/bench_bootstrap.py` prints the time it saves."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import known_tied_camel

import camel_jax as cj
from camel_jax.solver import _lbfgs as lbfgs
from camel_jax.solver import _newton as newton
from camel_jax.solver._lanes import COMPACT_ABOVE, POLISH_LANES_MIN, lane_width, polish_width, run_lanes


def _rosenbrock(scale):
    """A Rosenbrock valley whose curvature grows with `scale`: lanes of different scales need different steps."""
    return lambda x: (1.0 - x[0]) ** 2 + scale * (x[1] - x[0] ** 2) ** 2


SCALES = jnp.array([1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0])
STARTS = jnp.stack([jnp.linspace(-1.5, 1.2, 7), jnp.linspace(2.0, -0.5, 7)], axis=1)


def _lbfgs_in_rounds(width, steps):
    def loss_of(i):
        return lambda x: _rosenbrock(SCALES[i])(x)

    lane = jnp.arange(len(SCALES))
    carry = jax.vmap(lambda x, i: lbfgs.start(loss_of(i), x, 1e-10))(STARTS, lane)
    carry = run_lanes(
        lambda c, i: lbfgs.advance(loss_of(i), c, steps=steps, max_steps=2000, tol=1e-10, handoff=1e-14),
        carry,
        lane,
        lambda c: lbfgs.running(c, 2000),
        width,
    )
    return jax.vmap(lambda c: lbfgs.solution(c, 2000))(carry)


def test_rounds_of_a_few_lanes_take_each_lane_through_its_uninterrupted_run():
    alone = [lbfgs.minimize(_rosenbrock(s), x0, max_steps=2000, tol=1e-10, handoff=1e-14)
             for s, x0 in zip(SCALES, STARTS)]  # fmt: skip
    steps = np.array([int(a.n_steps) for a in alone])
    assert len(set(steps.tolist())) > 3, steps  # the lanes really need different numbers of steps
    for width, round_steps in [(1, 7), (3, 50), (7, 2000), (100, 13)]:
        together = _lbfgs_in_rounds(width, round_steps)
        np.testing.assert_array_equal(np.asarray(together.n_steps), steps, err_msg=f"width {width}")
        np.testing.assert_array_equal(np.asarray(together.status), [int(a.status) for a in alone])
        np.testing.assert_allclose(np.asarray(together.x), np.stack([a.x for a in alone]), rtol=1e-12, atol=1e-14)
    assert all(cj.Status(int(a.status)) == cj.Status.CONVERGED for a in alone)


def test_newton_in_rounds_is_newton_uninterrupted():
    x0 = jnp.array([[-1.2, 1.0], [0.0, 0.5], [2.0, 2.0]])
    fun = _rosenbrock(100.0)
    alone = jax.vmap(lambda x: newton.polish(fun, x, max_steps=200, tol=1e-10))(x0)
    state = jax.vmap(lambda x: newton.start(fun, x, 1e-10))(x0)
    state = run_lanes(lambda s, _: newton.advance(fun, s, steps=2, max_steps=200, tol=1e-10), state,
                      jnp.zeros(3), lambda s: newton.running(s, 200), 1)  # fmt: skip
    rounds = jax.vmap(lambda s: newton.solution(s, 200))(state)
    np.testing.assert_array_equal(np.asarray(rounds.n_steps), np.asarray(alone.n_steps))
    np.testing.assert_allclose(np.asarray(rounds.x), np.asarray(alone.x), rtol=1e-12)
    assert np.all(np.asarray(alone.status) == int(cj.Status.CONVERGED))


def test_lane_width_is_all_lanes_when_few_and_bounded_by_memory():
    assert lane_width(32, 1000) == 32
    assert lane_width(32, 4) == 4  # a large table: a few starts at a time
    assert lane_width(32, 1000, requested=5) == 5
    many = lane_width(4000, 10_000)
    if jax.default_backend() == "cpu":
        assert COMPACT_ABOVE <= many == 1000
    else:
        assert many == 4000
    with pytest.raises(ValueError, match="lanes"):
        cj.FitOptions(lanes=0)


def test_the_polish_gathers_the_few_lanes_still_running_on_a_cpu():
    assert polish_width(32, 32, requested=32) == 32 and polish_width(32, 5, requested=5) == 5
    if jax.default_backend() == "cpu":
        assert polish_width(32, 32) == POLISH_LANES_MIN and polish_width(4000, 1000) == 125
        assert polish_width(32, 4) == 4  # never more than the memory allows
    else:
        assert polish_width(32, 32) == 32


@pytest.mark.slow  # the suite's budget (issue 57): 22 s
def test_a_fit_polished_in_narrow_rounds_is_the_fit_polished_side_by_side(problem):
    """The polish's width changes which lanes share a program, not a lane's iterates: every start ends at the same
    point (to rounding) with the same status and step count, whether 4 or all 16 lanes are polished at once. A step
    count may differ by one: a program's last bits depend on how many lanes it holds, and a stopping test that lands
    within rounding of its threshold stops a step earlier or later (measured: 1 lane of 16, 82 vs 81 steps, when XLA
    compiles without LLVM optimization; equal counts with its defaults). A round that lost or repeated a lane's
    iterates would be off by tens of steps and in the objective."""
    law, inputs, y, _ = problem
    options = cj.FitOptions(max_steps=60, polish=300)  # L-BFGS stops early, so that the polish does the work
    kwargs = dict(key=jax.random.key(1), restarts=16)
    narrow = cj.fit(law, inputs, y, options=options, **kwargs)  # CPU: 8 lanes per round; accelerators: all
    wide = cj.fit(law, inputs, y, options=options.replace(lanes=16), **kwargs)
    np.testing.assert_array_equal(np.asarray(narrow.status), np.asarray(wide.status))
    np.testing.assert_array_less(np.abs(np.asarray(narrow.n_steps) - np.asarray(wide.n_steps)), 2)
    np.testing.assert_allclose(np.asarray(narrow.objectives), np.asarray(wide.objectives), rtol=1e-10)
    assert np.mean(np.asarray(narrow.converged)) >= 0.9


@pytest.fixture(scope="module")
def problem():
    true = known_tied_camel()
    rng = np.random.default_rng(3)
    r = np.tile(rng.dirichlet(np.ones(3), 12), (5, 1))
    M = np.repeat([4.0, 5.0, 6.0, 8.0, 10.0], 12)
    y = np.asarray(true(r, M)) * np.exp(0.003 * rng.normal(size=60))
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0)
    return law, (r, M), y, cj.fit(law, (r, M), y, key=jax.random.key(1), restarts=16)


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 18 s; rounds of lanes are tested on the fit
def test_a_bootstrap_in_rounds_of_few_lanes_gives_the_same_resamples(problem):
    law, inputs, y, point = problem
    kwargs = dict(key=jax.random.key(2), n_resamples=24, inits=point.best_laws(2), progress=False)
    together = cj.bootstrap(point.law, inputs, y, **kwargs)
    rounds = cj.bootstrap(point.law, inputs, y, options=cj.FitOptions(lanes=5), **kwargs)
    converged = np.asarray(together.converged) & np.asarray(rounds.converged)
    assert converged.mean() >= 0.9
    np.testing.assert_allclose(np.asarray(rounds.objectives)[converged], np.asarray(together.objectives)[converged],
                               rtol=1e-9)  # fmt: skip
    np.testing.assert_allclose(np.asarray(rounds.predict(*inputs))[converged],
                               np.asarray(together.predict(*inputs))[converged], rtol=1e-7)  # fmt: skip
