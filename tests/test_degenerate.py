"""`degenerate_batch` (a bootstrap's resampled laws checked at once) is `degenerate_parameters` law by law. That a
bootstrap's degenerate laws travel into the loss decision is tested in test_loss_decision (it reuses its fit)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import CASES, known_tied_camel, make_case

import camel_jax as cj
from camel_jax.fitting._degenerate import degenerate_batch, degenerate_parameters


def _stack(laws):
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *laws)


def _targets(case):
    return np.asarray(case.law(*case.inputs), dtype=float)


@pytest.mark.parametrize("name", CASES)
def test_a_batch_of_every_law_is_checked_as_each_law_alone(name):
    case = make_case(name)
    y = _targets(case)
    weights = np.ones((2, y.shape[-1]))
    weights[1, ::2] = 0.0  # the second law's own weights: another trained range
    found = degenerate_batch(_stack([case.law, case.law]), case.inputs, y, weights)
    alone = [degenerate_parameters(case.law, case.inputs, y, w) for w in weights]
    assert found == alone


def _tied_camel_variants():
    """A known tied CAMEL law and four of its limits: a size exponent that steps inside the trained sizes, a
    coefficient and a level the solver ran to, and an infinite level (`from_params` refuses it: set on the leaf)."""
    law = known_tied_camel()
    p = {k: np.asarray(v, dtype=float) for k, v in law.params().items()}
    base = {"t": p["t"], "K": p["K"], "beta": p["beta"], "C": float(p["C"])}
    structure = {"tied": True, "capacity_exponent": 3.0}
    step = cj.CAMEL.from_params(**(base | {"beta": np.array([0.9, 3.0e4])}), **structure)
    runaway = cj.CAMEL.from_params(**(base | {"K": np.array([1.0e12, 0.6])}), **structure)
    level = cj.CAMEL.from_params(**(base | {"C": -1.0e12}), **structure)
    infinite = eqx.tree_at(lambda one: one.C1, law, jnp.asarray(np.inf))
    return [law, step, runaway, level, infinite]


def test_limits_in_a_batch_are_found_as_each_law_alone():
    rng = np.random.default_rng(0)
    r, M = rng.dirichlet(np.ones(3), size=24), np.repeat([2.0, 4.0, 8.0], 8)
    y = np.asarray(known_tied_camel()(r, M), dtype=float)
    laws = _tied_camel_variants()
    found = degenerate_batch(_stack(laws), (r, M), y, np.ones(len(y)))
    assert found == [degenerate_parameters(law, (r, M), y, np.ones(len(y))) for law in laws]
    assert found[0] == {}
    assert "beta[1]" in found[1] and "step" in found[1]["beta[1]"]
    assert "K[0]" in found[2] and "C" in found[3] and "at an infinite limit" in found[4].values()
