"""Unit-free fits and decisions (issue 56): the loss in other units (x1e6, x1e-6) or the sizes in other units
(parameters or billions) give the same fit, the same predictions in the new units and the same pick; starts given
in any units are solved in the units the fit sets from the data."""

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import camel_jax as cj
from camel_jax import simulate
from camel_jax.fitting._units import data_units, starts_in_data_units
from camel_jax.mixture._optimize import best_start

# (loss unit, size unit) pairs against (1, 1): a loss in micro-units and in mega-units, sizes in billions
UNITS = [(1e6, 1.0), (1e-6, 1.0), (1.0, 1e9)]


def world_table(seed: int = 0, sizes=(2.0, 4.0, 8.0)):
    """A simulated table (the reference mixture and 11 flat-Dirichlet ones at three sizes, 0.1% noise)."""
    world = simulate.default_world(jax.random.key(seed))
    mixtures = np.vstack([simulate.REFERENCE, np.random.default_rng(seed).dirichlet(np.ones(5), 11)])
    runs = world.runs(mixtures, list(sizes), noise=0.001, key=jax.random.key(100 + seed))
    data = world.mixture_data(runs, "loss_val0")
    r, M = (np.asarray(a) for a in data.inputs)
    return r, M, np.asarray(data.y)


class ScaledLoss(eqx.Module):
    """r -> -scale x law(r, size): a loss objective in units `scale` (an array: one compiled ascent for all)."""

    law: cj.CAMEL
    size: jax.Array
    scale: jax.Array

    def __call__(self, r):
        return -self.scale * self.law(r[None], self.size[None])[0]


def flat_optimum_law():
    """Tied CAMEL with 2 intrinsic domains over 5 datasets: the loss depends on a mixture through two weighted sums
    only, so its optima form a face of the simplex, where the point an ascent reaches depends on its path (the
    issue's x1e6 pick moved from [0.435, 0.431, 0.104, 0.02, 0.011] to [0.47, 0.309, 0.114, 0.044, 0.063])."""
    t = np.array([[0.8, 0.7, 0.3, 0.2, 0.5], [0.2, 0.3, 0.7, 0.8, 0.5]])  # each dataset over the 2 domains
    return cj.CAMEL.from_params(t=t, K=[1.0, 0.8], beta=[0.9, 1.1], C=1.5, tied=True, capacity_exponent=3.0)


def ascent_pick(law, size, scale):
    """The mixture `optimal_mixture`'s ascent reaches on law's loss in units `scale` (8 starts; one compiled
    program for every scale), and its converged flag."""
    steps = cj.mixture.AscentOptions().steps(np.zeros(5), np.ones(5))
    z0 = 0.5 * jax.random.normal(jax.random.key(0), (8, 5))
    r, value, _, converged = steps.ascend(ScaledLoss(law, size, scale), z0)
    best = best_start(value)
    return r[best], value[best], converged[best]


def test_the_ascent_reaches_the_same_mixture_in_any_units_of_the_loss():
    # before the ascent divided the score by its size at the starts, Adam's epsilon, the polish's first step and
    # its KKT rule read the loss's units, and the argmax over starts of equal value read the last bit: on this face
    # of optima the x1e6 pick moved by 0.22 and the x1e-6 pick by 0.43
    law, size = flat_optimum_law(), jnp.asarray(20.0)
    run = jax.jit(lambda scale: ascent_pick(law, size, scale))
    picks = {}
    for scale in (1.0, 1e6, 1e-6):
        r, value, converged = run(jnp.asarray(scale))
        picks[scale] = np.asarray(r)
        assert bool(converged)
        np.testing.assert_allclose(float(value) / scale, -float(law(r[None], size[None])[0]), rtol=1e-12)
    for scale in (1e6, 1e-6):
        np.testing.assert_allclose(picks[scale], picks[1.0], atol=1e-6, err_msg=f"loss x{scale:g}")


def test_a_fit_of_the_loss_in_other_units_is_the_same_fit():
    # LogLinear of the mixture and size (a quick law); the units are static structure, so each compiles its own
    # fit: CI fits x1e6 only (the slow test below: x1e-6 and sizes in billions too, with tied CAMEL and its pick)
    r, M, y = world_table()
    law = cj.LogLinear.sample_init(jax.random.key(0), n_datasets=5, size=True)
    at = np.full(len(M), 16.0)
    fits = {}
    for unit in (1.0, 1e6):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cj.FitWarning)
            fits[unit] = cj.fit(law, (r, M), y * unit, key=jax.random.key(0), restarts=4)
    base, other = fits[1.0], fits[1e6]
    assert int(base.best_status) == cj.Status.CONVERGED
    assert other.law.loss_scale == base.law.loss_scale * 1e6  # the data set the units
    # the best start's optimum (a start short of its stopping rule may stop elsewhere: its path in the last bits is
    # no more determined by the units than by the order of a sum; at XLA's optimization level 0 the two optima
    # differed by 1.6e-9 relative, the stopping rule's noise)
    np.testing.assert_allclose(float(other.objective), float(base.objective), rtol=1e-7)
    np.testing.assert_allclose(np.asarray(other.predict(r, at)) / 1e6, np.asarray(base.predict(r, at)), rtol=1e-6)


@pytest.mark.slow  # tied CAMEL's fit and decision compiled once per units (about a minute each on 2 cores)
def test_tied_camel_fit_and_decision_in_other_units():
    r, M, y = world_table()
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=2, tied=True)
    out = {}
    for loss_unit, size_unit in [(1.0, 1.0), *UNITS]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cj.FitWarning)
            result = cj.fit(law, (r, M * size_unit), y * loss_unit, key=jax.random.key(0), restarts=4)
        predicted = np.asarray(result.predict(r, np.full(len(M), 16.0 * size_unit))) / loss_unit
        pick = cj.decide_loss(result, key=jax.random.key(1), size=16.0 * size_unit, support="simplex", restarts=8)
        out[loss_unit, size_unit] = predicted, np.asarray(pick.mixture)
    for units in UNITS:
        np.testing.assert_allclose(out[units][0], out[1.0, 1.0][0], rtol=1e-6, err_msg=str(units))
        np.testing.assert_allclose(out[units][1], out[1.0, 1.0][1], atol=1e-6, err_msg=str(units))


def raw_unit_grid():
    """A Chinchilla table in raw parameters and tokens, and two starts built with `from_params` in raw units."""
    rng = np.random.default_rng(0)
    N, D = 10 ** rng.uniform(8, 10, 30), 10 ** rng.uniform(9.5, 11, 30)
    y = 1.7 + 400 / N**0.34 + 2000 / D**0.28
    grid = cj.Chinchilla.from_params(E=[1.0, 2.0], A=[100.0, 1e4], alpha=[0.3, 0.5], B=[1e3, 1e5], beta=[0.2, 0.4])
    return N, D, y, grid


def test_starts_in_raw_units_are_moved_to_the_data_units_as_the_same_functions():
    N, D, y, grid = raw_unit_grid()
    units = data_units(grid, (N, D), y)
    assert (units["size_scale"], units["tokens_scale"]) == (1e9, 1e10)
    moved = starts_in_data_units(grid, (N, D), y)
    assert moved.structure() == units
    for name, value in grid.params().items():
        np.testing.assert_allclose(moved.params()[name], value, rtol=1e-12, err_msg=name)
    # to the rounding of the raw-unit starts themselves (their level E + A + B is 1e4 times the loss there)
    np.testing.assert_allclose(jax.vmap(lambda law: law(N, D))(moved), jax.vmap(lambda law: law(N, D))(grid),
                               rtol=1e-9)  # fmt: skip
    # already in the data's units: returned as they are
    assert starts_in_data_units(moved, (N, D), y) is moved


def test_starts_that_cannot_be_re_expressed_are_kept_as_given():
    # a tied CAMEL start in the log-law limit (beta = 0: the paper's K infinite) has no finite parameters to rebuild
    r, M, y = world_table()
    start = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=2, tied=True)
    start = eqx.tree_at(lambda law: law.raw_beta, start, jnp.array([0.0, 1.0]))
    starts = jax.tree.map(lambda leaf: leaf[None], start)
    assert data_units(starts, (r, M), y)["size_scale"] == 2.0  # the smallest size: not the start's
    assert starts_in_data_units(starts, (r, M), y) is starts


def test_starts_that_carry_units_are_solved_in_them():
    # warm starts from another fit carry that fit's units: they are not moved (a pipeline's resamples and folds
    # start from the point fit as it was solved); a start without units of its own is moved
    N, D, y, grid = raw_unit_grid()
    chosen = grid.in_units(size_scale=1e8, tokens_scale=1e9)  # units of their own, not the data's (1e9, 1e10)
    assert starts_in_data_units(chosen, (N, D), y) is chosen
    assert starts_in_data_units(grid, (N, D), y).structure()["size_scale"] == 1e9
