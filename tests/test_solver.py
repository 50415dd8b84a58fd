"""`camel_jax.solver.minimise` used alone (issue 58): a scalar function of a pytree, a batch of starts, its arguments
and options in; each start's end point and status out, the best start of each problem, and implicit derivatives.
Checked against closed-form minimizers, not against the code under test."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from camel_jax import FitOptions, Status
from camel_jax.solver import Solution, minimise


def quadratic(y, args):
    """(x - a)^2 + 10 (z - a^2)^2 + 3: minimum 3 at x = a, z = a^2 (two coordinates of a pytree)."""
    return (y["x"] - args) ** 2 + 10.0 * (y["z"] - args**2) ** 2 + 3.0


STARTS = {"x": jnp.array([[-1.0, 0.5, 2.0], [3.0, -2.0, 0.0]]), "z": jnp.array([[0.0, 1.0, -1.0], [2.0, 0.5, 4.0]])}
A = jnp.array([0.7, -1.3])


@pytest.fixture(scope="module")
def batched():
    return jax.jit(lambda starts, a: minimise(quadratic, starts, a, FitOptions(), batched=True))(STARTS, A)


def test_every_start_of_every_problem_reaches_its_minimum(batched):
    assert isinstance(batched, Solution)
    assert batched.status.shape == batched.objectives.shape == (2, 3) and batched.best.shape == (2,)
    assert np.all(np.asarray(batched.status) == Status.CONVERGED)
    a = np.asarray(A)
    np.testing.assert_allclose(np.asarray(batched.value["x"]), np.repeat(a[:, None], 3, axis=1), atol=1e-6)
    np.testing.assert_allclose(np.asarray(batched.best_value["z"]), a**2, atol=1e-6)
    np.testing.assert_allclose(np.asarray(batched.objectives), 3.0, rtol=1e-12)


def test_one_problem_without_a_batch_axis_matches_its_row_of_the_batch(batched):
    one = jax.jit(lambda starts, a: minimise(quadratic, starts, a))({k: v[1] for k, v in STARTS.items()}, A[1])
    assert one.status.shape == (3,) and one.best.shape == ()
    np.testing.assert_allclose(np.asarray(one.best_value["x"]), float(A[1]), atol=1e-6)
    np.testing.assert_allclose(np.asarray(one.objectives), np.asarray(batched.objectives[1]), rtol=1e-12)


def test_the_solution_is_differentiated_at_its_optimum_not_through_the_loops():
    """With a value `shift` the function closes over, x* = (a + shift) / 2 and z* = a^2: dx*/da = dx*/dshift = 1/2,
    dz*/da = 2a, dz*/dshift = 0; and d f*/da = 2 (a - x*) + 40 a (a^2 - z*) = a - shift (the envelope theorem)."""
    starts = {"x": jnp.array([0.0, 2.0]), "z": jnp.array([1.0, -1.0])}

    def best(a, shift):
        solution = minimise(lambda y, a: quadratic(y, a) + (y["x"] - shift) ** 2, starts, a)
        return solution.best_value["x"], solution.best_value["z"], solution.take_best(solution.objectives)

    (dx, dz, df) = jax.jit(jax.jacrev(best, argnums=(0, 1)))(0.7, 0.1)
    np.testing.assert_allclose(np.asarray(dx), [0.5, 0.5], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(dz), [1.4, 0.0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(np.asarray(df), [0.6, -0.6], rtol=1e-6)


def test_bad_starts_are_refused_when_traced():
    with pytest.raises(ValueError, match="leading axis of starts"):
        minimise(quadratic, {"x": jnp.array(0.0), "z": jnp.array(1.0)}, 0.7)
    with pytest.raises(ValueError, match="T=2 problems"):
        minimise(quadratic, STARTS, jnp.ones(3), batched=True)


@jax.custom_jvp
def _phantom(y, c):
    """0, with a derivative of c that no step can cash in: a stand-in for a gradient that working precision cannot
    follow (a ratio of vanishing numbers)."""
    return jnp.zeros_like(y)


@_phantom.defjvp
def _phantom_jvp(primals, tangents):
    y, c = primals
    return jnp.zeros_like(y), c * tangents[0]


def test_a_stall_with_a_gradient_far_above_the_tolerance_is_stuck_not_converged():
    """Starting at the minimum of (y - 1)^2 with a phantom slope c added to the gradient, no step lowers the
    objective: with c = 1e-6 (ten times the tolerance, what working precision can hide) the start is STALLED and
    counts as converged; with c = 1e3 it is STUCK, and does not."""
    fn = lambda y, c: jnp.sum((y - 1.0) ** 2 + _phantom(y, c))  # noqa: E731
    starts = jnp.ones((3, 1, 1))  # three problems, one start each, at y = 1
    c = jnp.array([0.0, 1e-6, 1e3])
    solution = minimise(fn, starts, c, FitOptions(), batched=True)
    assert [Status(int(s)) for s in np.asarray(solution.status).ravel()] == [Status.CONVERGED, Status.STALLED,
                                                                             Status.STUCK]  # fmt: skip
    assert np.asarray(solution.converged).ravel().tolist() == [True, True, False]
    assert not Status.STUCK.is_converged and Status.STUCK.label == "stuck"
    # a tighter tol asks for more precision: a stall that the default would keep is not made stuck by it
    tight = minimise(fn, starts, c, FitOptions(tol=1e-13), batched=True)
    assert [Status(int(s)) for s in np.asarray(tight.status).ravel()][1:] == [Status.STALLED, Status.STUCK]
