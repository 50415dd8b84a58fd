"""The world zoo and the decision backtest: realism against real-data figures, regret of a perfect method, paired
repeats, one compile per method."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from helpers import traces_of

import camel_jax as cj
from camel_jax import simulate

# The figures the realism targets come from (issue 13): in dmsl_shukor2025 per-domain validation losses spread
# 11-40% (max/min - 1) across mixtures, barely shrinking from 122M to 1.2B parameters; in the CAMEL paper, mixtures
# chosen by different methods differ by 3-5 points of weighted score at the target.
N_WORLDS = 8


@pytest.fixture(scope="module")
def reports():
    worlds = [simulate.make_world(jax.random.key(seed)) for seed in range(N_WORLDS)]
    return [simulate.realism(w, key=jax.random.key(0)) for w in worlds]


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 8 simulated worlds' realism (57 s, shared by the next two)
def test_default_world_losses_spread_like_real_data_and_do_not_vanish_with_size(reports):
    at_10 = np.concatenate([rep["loss_spread"][10.0] for rep in reports])
    assert 5.0 <= np.median(at_10) <= 40.0
    assert np.mean((at_10 >= 3.0) & (at_10 <= 45.0)) >= 0.9
    for rep in reports:
        shrink = rep["loss_spread"][4.0] / rep["loss_spread"][20.0]
        assert np.all(shrink <= 2.0), shrink  # "shrinking by at most 2x from M=4 to M=20"
        assert np.all(shrink >= 1.0)  # capacity still helps: effects shrink a little, as in the real data


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): the 8 worlds' realism fixture
def test_default_world_decision_is_worth_making(reports):
    spread = np.array([rep["score_spread"]["balanced"] for rep in reports])
    gain = np.array([rep["gain"]["balanced"] for rep in reports])
    assert 3.0 <= np.median(spread) <= 10.0, spread
    assert np.median(gain) >= 1.5, gain
    assert np.all(gain > 0)


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): the 8 worlds' realism fixture
def test_weightings_disagree_and_the_optimum_moves_with_size(reports):
    for rep in reports:
        optima = rep["optima"]
        names = list(optima)
        closest = min(np.abs(optima[a] - optima[b]).sum() for a in names for b in names if a < b)
        assert closest > 0.02, closest
    moved = [np.abs(rep["optimum_by_size"][4.0] - rep["optimum_by_size"][20.0]).sum() for rep in reports]
    assert np.median(moved) > 0.05, moved


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 28 s: every world family
def test_zoo_families_and_heteroscedastic_noise():
    key = jax.random.key(3)
    r = jnp.asarray(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2))
    for family in simulate.FAMILIES:
        world = simulate.make_world(key, family)
        L = np.asarray(world.losses(r, jnp.full(r.shape[0], 8.0)))
        assert np.all(np.isfinite(L)) and np.all(L > 0), family
    world = simulate.make_world(key, heteroscedastic=25.0)
    scale = np.asarray(world.noise_scale(jnp.eye(5)))
    assert scale.max() / scale.min() == pytest.approx(25.0)
    runs = world.runs(np.eye(5) * 0.9 + 0.02, [6.0] * 1, noise=0.01, key=key)
    assert len(runs) == 5
    with pytest.raises(ValueError, match="family"):
        simulate.make_world(key, "chinchilla")
    with pytest.raises(ValueError, match="heteroscedastic"):
        simulate.make_world(key, heteroscedastic=0.5)


def test_data_term_uses_the_tokens_trained():
    world = simulate.make_world(jax.random.key(0))
    r = jnp.full((1, 5), 0.2)
    more = world.losses(r, jnp.array([6.0]), jnp.array([40e9]))
    default = world.losses(r, jnp.array([6.0]))
    assert np.all(np.asarray(more) < np.asarray(default))
    capacity = simulate.make_world(jax.random.key(0), "capacity")
    np.testing.assert_array_equal(
        capacity.losses(r, jnp.array([6.0]), jnp.array([40e9])), capacity.losses(r, jnp.array([6.0]))
    )


def _oracle(world, weights):
    truth = cj.optimal_mixture(world.true_score(20.0, weights), 5, key=jax.random.key(7), restarts=32)

    def oracle(runs, *, benchmark_weights, target_size, key):
        oracle.seen.append(runs)
        return np.asarray(truth.r)

    oracle.seen = []
    return oracle


def test_a_method_that_knows_the_truth_has_zero_regret_and_full_capture():
    world = simulate.make_world(jax.random.key(1))
    oracle = _oracle(world, cj.BENCHMARK_WEIGHTS["balanced"])
    table = cj.experiments.backtest(world, {"oracle": oracle, "best": "best-observed"}, key=jax.random.key(0),
                                    repeats=3)
    mine = table[table["method"] == "oracle"]
    assert np.all(np.abs(mine["regret"]) < 1e-6)
    np.testing.assert_allclose(mine["capture"], 1.0, atol=1e-4)
    best = table[table["method"] == "best"]
    assert np.all(best["regret"] > -1e-6)  # nothing beats the true optimum
    assert list(table.columns[: len(cj.experiments.BACKTEST_COLUMNS)]) == list(cj.experiments.BACKTEST_COLUMNS)
    assert [c for c in table.columns if c.startswith("r_")] == [f"r_{d}" for d in world.datasets]


def test_repeats_are_paired_and_budgets_respected():
    world = simulate.make_world(jax.random.key(2))
    a, b = _oracle(world, cj.BENCHMARK_WEIGHTS["math"]), _oracle(world, cj.BENCHMARK_WEIGHTS["math"])
    full = world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), [4.0, 5.0, 6.0, 7.0, 8.0,
                                                                                   10.0])["flops"].sum()
    budgets = [0.3 * full, None]
    table = cj.experiments.backtest(world, {"a": a, "b": b}, key=jax.random.key(0), benchmark_weights="math", repeats=2,
                        budgets=budgets, strategy="hourglass")  # fmt: skip
    assert len(a.seen) == len(b.seen) == 4
    assert [c for c in a.seen[0].columns if c.startswith("acc_")] == [f"acc_{b}" for b in world.benchmarks]
    for x, y in zip(a.seen, b.seen):
        assert x.equals(y)  # same runs, same noise
    assert not a.seen[0].equals(a.seen[1])  # repeats differ (fresh noise and runs)
    cut = table[table["budget"] < full]
    assert np.all(cut["flops"] <= 0.3 * full) and np.all(cut["n_runs"] < 66)
    assert np.all(table.loc[table["budget"] == full, "n_runs"] == 66)


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 56 s of backtest fits
def test_one_compile_per_method_across_repeats_and_budgets():
    world = simulate.make_world(jax.random.key(0))
    full = world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), [4.0, 5.0, 6.0, 7.0, 8.0,
                                                                                   10.0])["flops"].sum()
    with traces_of("fit_compiled") as traces:
        table = cj.experiments.backtest(world, ["camel", "size-agnostic"], key=jax.random.key(0), repeats=2,
                            budgets=[0.5 * full, None], restarts=2)  # fmt: skip
    # one program for the loss-to-benchmark laws (every repeat, budget and benchmark), one for tied CAMEL (shared
    # by size-agnostic): 2 x 2 (budget, repeat) cells and 7 benchmarks each, not 28 programs
    assert len(traces) <= 2, traces
    assert len(table) == 8 and np.all(np.isfinite(table["regret"]))


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 40 s: two backtest worlds
def test_a_new_world_reuses_every_compiled_program():
    # worlds 2 and 3 put their validation losses at other centers (3 and 4 nats, in other orders): the
    # loss-to-benchmark fits run at center 0 and the pipelines hold their laws without one, so the second world
    # traces no fit, no start and no ascent (it compiled 10 programs, 9 s of a 37 s world, before)
    def centers(seed):
        world = simulate.make_world(jax.random.key(seed))
        runs = world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), [4.0, 10.0])
        L = runs[[f"loss_{v}" for v in world.validation_sets]].to_numpy()
        return world, cj.LossToBenchmark.sample_init(jax.random.key(0), n_losses=L.shape[1]).with_data_scales(
            (L,), None)["center"]  # fmt: skip

    (first, c2), (second, c3) = centers(2), centers(3)
    assert c2 != c3
    kw = dict(repeats=2, restarts=2, budgets=[None])
    cj.experiments.backtest(first, ["camel"], key=jax.random.key(0), **kw)
    names = ("fit_compiled", "starts_compiled", "_solve")
    with traces_of(names[0]) as fits, traces_of(names[1]) as starts, traces_of(names[2]) as ascents:
        table = cj.experiments.backtest(second, ["camel"], key=jax.random.key(1), **kw)
    assert (fits, starts, ascents) == ([], [], [])
    assert len(table) == 2 and np.all(np.isfinite(table["regret"]))


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 43 s: three backtests
def test_resampled_bands_and_robust_picks_keep_the_design_and_add_one_program():
    world = simulate.make_world(jax.random.key(0))
    kw = dict(key=jax.random.key(0), repeats=2, restarts=2, max_shift=0.2)
    plain = cj.experiments.backtest(world, ["camel", "best-observed"], **kw)
    with traces_of("fit_compiled") as traces:
        banded = cj.experiments.backtest(world, ["camel", "best-observed"], n_resamples=5, **kw)
    robust = cj.experiments.backtest(world, ["camel", "best-observed"], n_resamples=5, robust="mean", **kw)
    assert len(traces) == 1, traces  # every cell, benchmark and resample: one resampled fit
    picks = [c for c in plain.columns if c.startswith("r_")]
    np.testing.assert_array_equal(banded[picks], plain[picks])  # resampling leaves the point decision alone
    np.testing.assert_array_equal(robust.loc[robust.method == "best-observed", picks],
                                  plain.loc[plain.method == "best-observed", picks])  # fmt: skip  # same runs
    for table in (banded, robust):
        law = table[table.method == "camel"]
        assert np.all(np.isfinite(law[["low", "high"]])) and np.all(law["low"] < law["high"])
        inside = (law["low"] <= law["true_value"]) & (law["true_value"] <= law["high"])
        np.testing.assert_array_equal(law["covered"], inside.astype(float))
        assert table.loc[table.method == "best-observed", ["low", "high", "covered"]].isna().all().all()
    ref = np.asarray(simulate.REFERENCE)
    r = robust.loc[robust.method == "camel", picks].to_numpy()
    assert np.all(r >= 0.8 * ref - 1e-9) and np.all(r <= 1.2 * ref + 1e-9)  # the robust pick keeps the region


def test_bad_arguments_are_named_before_any_compute():
    world = simulate.make_world(jax.random.key(0))
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="unknown method 'scaling'"):
        cj.experiments.backtest(world, ["scaling"], key=key)
    with pytest.raises(ValueError, match="unknown strategy 'square' for method 'camel'"):
        cj.experiments.backtest(world, ["camel"], key=key, strategy="square")
    with pytest.raises(ValueError, match="`budgets`"):
        cj.experiments.backtest(world, ["camel"], key=key, budgets=[-1.0])
    with pytest.raises(ValueError, match="unknown benchmark weights 'poetry'"):
        cj.experiments.backtest(world, ["camel"], key=key, benchmark_weights="poetry")
    with pytest.raises(ValueError, match="`reference`"):
        cj.experiments.backtest(world, ["camel"], key=key, reference=[0.5, 0.5])
    with pytest.raises(TypeError, match="`world`"):
        cj.experiments.backtest("world", ["camel"], key=key)
    with pytest.raises(ValueError, match="`robust` needs resamples"):
        cj.experiments.backtest(world, ["camel"], key=key, robust="mean")
    with pytest.raises(ValueError, match="`robust` must be"):
        cj.experiments.backtest(world, ["camel"], key=key, robust="median", n_resamples=4)
    with pytest.raises(ValueError, match="`level`"):
        cj.experiments.backtest(world, ["camel"], key=key, n_resamples=4, level=95)


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 54 s: adaptive rounds of fits
def test_adaptive_strategy_grows_its_seed_within_budget_and_repeats_under_a_key():
    world = simulate.make_world(jax.random.key(0))
    full = world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), [4.0, 5.0, 6.0, 7.0, 8.0,
                                                                                   10.0])["flops"].sum()
    budgets = [0.3 * full, None]
    methods = {"hourglass": "camel", "adaptive": "camel"}
    kw = dict(key=jax.random.key(0), repeats=2, restarts=2, budgets=budgets, strategy={m: m for m in methods},
              adaptive={"rounds": 2, "n_resamples": 4})  # fmt: skip
    table = cj.experiments.backtest(world, methods, **kw)
    again = cj.experiments.backtest(world, {"adaptive": "camel"}, **kw)
    hourglass, adaptive = (table[table.method == m].reset_index(drop=True) for m in methods)
    cut = adaptive["budget"] < full
    assert np.all(adaptive.loc[cut, "flops"] <= 0.3 * full * (1 + 1e-9))
    # the seed (the hourglass at 25% of the budget) grows: more than half the budget is spent
    assert np.all(adaptive.loc[cut, "flops"] > 0.15 * full)
    assert np.all(adaptive.loc[~cut, "n_runs"] == 66) and np.all(np.isfinite(adaptive["regret"]))
    assert np.all(hourglass.loc[cut, "flops"] <= 0.3 * full * (1 + 1e-9))  # both designs under the same budget
    pd.testing.assert_frame_equal(again, adaptive)  # the same key, the same runs and picks


def test_bad_adaptive_options_are_named_before_any_compute():
    world = simulate.make_world(jax.random.key(0))
    key = jax.random.key(0)
    for options, message in [({"tranches": 2}, "unknown `adaptive` options"), ({"law": "dml"}, "AdaptiveOptions.law"),
                             ({"seed": 0.0}, "AdaptiveOptions.seed"), ({"rounds": 0}, "AdaptiveOptions.rounds"),
                             ({"n_resamples": 1}, "AdaptiveOptions.n_resamples")]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            cj.experiments.backtest(world, {"a": "camel"}, key=key, strategy="adaptive", adaptive=options)
        if "tranches" not in options:  # the typed options refuse the same values when built
            with pytest.raises(ValueError, match=message):
                cj.experiments.AdaptiveOptions(**options)
    with pytest.raises(TypeError, match="`adaptive` must be an AdaptiveOptions"):
        cj.experiments.backtest(world, {"a": "camel"}, key=key, strategy="adaptive", adaptive=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cj.experiments.ADAPTIVE.rounds = 5  # type: ignore[misc]


@pytest.mark.slow  # all seven methods on a full world, each fitting its own laws (several compiles)
def test_every_method_runs_and_no_pick_beats_the_truth():
    world = simulate.make_world(jax.random.key(4))
    table = cj.experiments.backtest(world, key=jax.random.key(0), repeats=2)
    assert set(table["method"]) == set(cj.experiments.BACKTEST_METHODS)
    assert np.all(table["regret"] > -1e-6)
    assert np.all(np.isfinite(table["true_value"]))
