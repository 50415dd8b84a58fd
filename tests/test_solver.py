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
