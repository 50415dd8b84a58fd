"""Experiment design: FLOPs, perturbed mixtures, allocation orders and budgets, sampled designs."""

import jax
import numpy as np
import pandas as pd
import pytest

from camel_jax.experiments import _design

SIZES = [4.0, 5.0, 6.0, 7.0, 8.0, 10.0]
COST = np.array(SIZES) ** 3


def test_flops_is_six_n_d():
    np.testing.assert_allclose(_design.flops([1e9, 2e9], 2e10), [1.2e20, 2.4e20])


def test_perturbed_mixtures_sum_to_one_and_move_only_as_specified():
    ref = np.array([0.35, 0.25, 0.15, 0.10, 0.15])
    rows = _design.perturbed_mixtures(ref, 0.2)
    assert rows.shape == (11, 5)
    np.testing.assert_allclose(rows.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(rows[0], ref)
    for j in range(5):
        for row, factor in ((rows[1 + 2 * j], 1.2), (rows[2 + 2 * j], 0.8)):
            assert abs(row[j] - factor * ref[j]) < 1e-15
            others = np.delete(np.arange(5), j)
            ratio = row[others] / ref[others]
            np.testing.assert_allclose(ratio, ratio[0], rtol=1e-13)  # the rest rescaled proportionally
    with pytest.raises(ValueError, match="outside"):
        _design.perturbed_mixtures([0.9, 0.1], 0.2)


@pytest.mark.parametrize("strategy", _design.STRATEGIES)
@pytest.mark.parametrize("budget", [0.0, 500.0, 3000.0, 9000.0, 1e9])
def test_allocation_never_exceeds_budget_or_availability(strategy, budget):
    counts = _design.allocate(strategy, SIZES, COST, budget, 11)
    assert counts @ COST <= budget
    assert np.all(counts <= 11) and np.all(counts >= 0)
    if budget >= 11 * COST.sum():
        assert np.all(counts == 11)


def test_allocation_follows_the_documented_order_for_six_sizes():
    budget = 5 * COST.sum()
    got = {s: _design.allocate(s, SIZES, COST, budget, 11).tolist() for s in _design.STRATEGIES}
    # worked by hand from the module's table: a strict priority order over the sizes 0..5
    assert got["rectangle"] == [5, 5, 5, 5, 5, 5]
    assert got["triangle"][0] >= got["triangle"][1] >= got["triangle"][-1]
    assert got["inverted_triangle"][-1] >= got["inverted_triangle"][-2] >= got["inverted_triangle"][0]
    assert got["hourglass"][0] > got["hourglass"][2] and got["hourglass"][-1] > got["hourglass"][3]
    assert got["diamond"][2] > got["diamond"][0] and got["diamond"][3] > got["diamond"][-1]
    # the first visits of each order, with a budget for exactly 3 runs of unit cost
    first = {s: _design.allocate(s, SIZES, np.ones(6), 3.0, 11).tolist() for s in _design.STRATEGIES}
    assert first["rectangle"] == [1, 1, 1, 0, 0, 0]
    assert first["triangle"] == [2, 1, 0, 0, 0, 0]  # round 0: size 0; round 1: sizes 0, 1
    assert first["inverted_triangle"] == [0, 0, 0, 0, 1, 2]  # round 0: size 5; round 1: sizes 4, 5
    assert first["diamond"] == [0, 1, 1, 1, 0, 0]  # round 0: sizes 2, 3; round 1: sizes 1..4
    assert first["hourglass"] == [2, 0, 0, 0, 0, 1]  # round 0: sizes 0, 5; round 1 starts at size 0


def test_allocation_bad_arguments():
    with pytest.raises(ValueError, match="unknown strategy"):
        _design.allocate("square", SIZES, COST, 10.0, 11)
    with pytest.raises(ValueError, match="strictly increasing"):
        _design.allocate("rectangle", SIZES[::-1], COST, 10.0, 11)


def test_sample_design_draws_the_allocation_uniformly():
    runs = pd.DataFrame(
        {"size": np.repeat(SIZES, 11), "flops": np.repeat(COST, 11), "mixture": np.tile(np.arange(11), 6)}
    )
    budget = 3 * COST.sum()
    mask = _design.sample_design("hourglass", runs, budget, jax.random.key(0))
    counts = np.array([mask[runs["size"].to_numpy() == s].sum() for s in SIZES])
    np.testing.assert_array_equal(counts, _design.allocate("hourglass", SIZES, COST, budget, 11))
    assert np.array_equal(mask, _design.sample_design("hourglass", runs, budget, jax.random.key(0)))
    assert not np.array_equal(mask, _design.sample_design("hourglass", runs, budget, jax.random.key(1)))
    picks = np.stack([_design.sample_design("rectangle", runs, budget, jax.random.key(i)) for i in range(300)])
    frequency = picks[:, runs["size"].to_numpy() == 4.0].mean(axis=0)  # 3 of 11 mixtures each time
    assert np.all(np.abs(frequency - 3 / 11) < 0.1)
