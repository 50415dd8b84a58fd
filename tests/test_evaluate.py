"""The extrapolation protocol: masks, one compile per law, exact recovery on a known law, DMLNested, k choice."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import known_tied_camel, traces_of

import camel_jax as cj

SIZES = [4.0, 5.0, 6.0, 7.0, 8.0, 10.0]


def camel_world_data():
    true = known_tied_camel()
    mixtures = cj.experiments.perturbed_mixtures([0.5, 0.3, 0.2])  # 7 mixtures
    sizes = np.array(SIZES + [12.0])
    r = np.tile(mixtures, (len(sizes), 1))
    M = np.repeat(sizes, len(mixtures))
    y = np.asarray(true(jnp.asarray(r), jnp.asarray(M)))
    group = np.tile(np.arange(len(mixtures)), len(sizes))
    return true, cj.MixtureData(r=r, y=y, size=M, group=group)


def test_training_masks_draw_from_the_training_sizes_only():
    _, data = camel_world_data()
    masks = cj.experiments.training_masks(data, SIZES, n_points=18, repeats=5, key=jax.random.key(0))
    assert masks.shape == (5, data.n_points) and np.all(masks.sum(axis=1) == 18)
    assert np.all(masks[:, np.asarray(data.size) == 12.0] == 0)
    assert np.array_equal(masks, cj.experiments.training_masks(data, SIZES, n_points=18, repeats=5,
                                                               key=jax.random.key(0)))
    with pytest.raises(ValueError, match=r"`n_points` must be in \[1, 42\]"):
        cj.experiments.training_masks(data, SIZES, n_points=50, repeats=2, key=jax.random.key(0))


def test_strategy_masks_respect_the_budget():
    _, data = camel_world_data()
    cost = np.asarray(data.size) ** 3
    budget = 2 * np.sum(np.array(SIZES) ** 3)
    masks = cj.experiments.training_masks(
        data, SIZES, n_points=None, repeats=4, key=jax.random.key(1), strategy="hourglass", budget=budget, cost=cost
    )
    assert np.all(masks @ cost <= budget)
    with pytest.raises(ValueError, match="needs a `budget`"):
        cj.experiments.training_masks(data, SIZES, n_points=None, repeats=1, key=jax.random.key(1),
                                      strategy="hourglass")


def test_true_law_extrapolates_exactly_and_repeats_compile_once():
    true, data = camel_world_data()
    template = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0)
    with traces_of("fit_compiled") as traces:
        table = cj.experiments.compare_laws(
            {"camel": template},
            data,
            SIZES,
            12.0,
            n_points=[24, 42],
            repeats=3,
            key=jax.random.key(0),
            options=cj.FitOptions(max_steps=3000),
        )
    assert len(traces) == 1  # every repeat and every n: one program
    assert list(table.columns[:5]) == ["law", "n_points", "repeat", "test_size", "error"]
    assert len(table) == 6 and table["error"].max() < 1e-3  # percent


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 11 s
def test_dml_nested_skips_mixtures_with_fewer_than_three_sizes():
    _, data = camel_world_data()
    masks = cj.experiments.training_masks(data, SIZES, n_points=42, repeats=1, key=jax.random.key(0))
    group = np.asarray(data.group)
    size = np.asarray(data.size)
    masks[0, (group == 0) & (size > 5.0)] = 0.0  # mixture 0 keeps sizes 4 and 5 only
    table = cj.experiments.extrapolation_error(cj.experiments.DMLNested(restarts=8), data, SIZES, 12.0, masks=masks,
                                               key=jax.random.key(0))
    assert int(table["n_skipped"].iloc[0]) == 1
    assert np.isfinite(table["error"]).all() and table["error"].iloc[0] < 5.0


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 14 s
def test_select_domains_returns_a_candidate_and_its_table():
    _, data = camel_world_data()
    best, table = cj.experiments.select_domains(
        [1, 2],
        data,
        SIZES,
        12.0,
        n_points=42,
        repeats=2,
        key=jax.random.key(0),
        capacity_exponent=3.0,
        options=cj.FitOptions(max_steps=2000),
    )
    assert best in (1, 2) and set(table["k"]) == {1, 2}
    assert table.groupby("k")["error"].mean()[2] < table.groupby("k")["error"].mean()[1]  # the truth has k=2


def test_protocol_bad_arguments():
    _, data = camel_world_data()
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2)
    with pytest.raises(ValueError, match="no rows at the held-out size 30"):
        cj.experiments.extrapolation_error(law, data, SIZES, 30.0, n_points=10, repeats=1, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`metric`"):
        cj.experiments.extrapolation_error(law, data, SIZES, 12.0, n_points=10, repeats=1, key=jax.random.key(0),
                                           metric="r2")
