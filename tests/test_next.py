"""next_runs: candidates scored by the decision variance their outcome would remove, per FLOP."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from helpers import make_pipeline, random_mixtures

import camel_jax as cj
from camel_jax.mixture._next import greedy_batch


def test_variance_reduction_is_zero_where_members_agree_and_var_q_for_q_itself():
    rng = np.random.default_rng(0)
    q = rng.normal(size=64)
    F = np.stack([q, np.full(64, 3.0), 0.5 * q + rng.normal(size=64), rng.normal(size=64)], axis=1)
    score = cj.mixture.variance_reduction(q, F, 0.0)
    np.testing.assert_allclose(score[0], np.var(q, ddof=1), rtol=1e-12)  # observing q itself removes all of it
    assert score[1] == 0.0  # members agree: nothing to learn
    assert np.all(score[2:] < score[0]) and np.all(score >= 0)
    noisy = cj.mixture.variance_reduction(q, F, 1.0)
    assert np.all(noisy <= score + 1e-15) and noisy[0] < score[0]
    # by hand: Cov^2 / (Var + s^2)
    c = np.cov(q, F[:, 2])
    np.testing.assert_allclose(noisy[2], c[0, 1] ** 2 / (c[1, 1] + 1.0), rtol=1e-12)


def test_greedy_batch_conditions_on_its_choices_and_keeps_the_budget():
    rng = np.random.default_rng(1)
    q = rng.normal(size=128)
    F = np.stack([q + 0.1 * rng.normal(size=128)] * 2 + [rng.normal(size=128) + 0.3 * q], axis=1)
    picks = greedy_batch(q, F, 0.0, [1.0, 1.0, 1.0], budget=10.0, batch=3)
    first, second = picks[0][0], picks[1][0]
    assert {first, second} != {0, 1}  # a copy of a noiselessly measured run tells nothing new
    sds = [sd for _, _, sd in picks]
    assert sds == sorted(sds, reverse=True) and sds[0] < np.std(q, ddof=1)
    assert [c for c, _, _ in greedy_batch(q, F, 0.0, [5.0, 5.0, 1.0], budget=1.0, batch=3)] == [2]
    assert greedy_batch(q, F, 0.0, [5.0, 5.0, 5.0], budget=1.0, batch=3) == []
    # noisy runs are worth repeating; without replacement (a backtest's design runs) each is chosen once at most
    noisy = greedy_batch(q, F[:, 2:], 1.0, [1.0], budget=10.0, batch=4)
    assert [c for c, _, _ in noisy] == [0, 0, 0, 0]
    once = greedy_batch(q, F, 1.0, [1.0, 1.0, 1.0], budget=10.0, batch=5, replace=False)
    assert sorted(c for c, _, _ in once) == [0, 1, 2]


def agreeing_ensemble(B=24):
    """A batch of CAMEL laws that all predict the same loss at one measured run (r0, M0)."""
    laws = jax.vmap(lambda k: cj.CAMEL.sample_init(k, n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0))(
        jax.random.split(jax.random.key(0), B)
    )
    r0, M0 = jnp.asarray([[0.5, 0.3, 0.2]]), jnp.asarray([6.0])
    at_run = jax.vmap(lambda law: law(r0, M0)[0])(laws)
    laws = eqx.tree_at(lambda law: law.C1, laws, laws.C1 - at_run + 2.0)  # loss_scale 1: C1 is the level
    return cj.BootstrapResult.of_laws(laws), np.asarray(r0[0]), float(M0[0])


def candidates_table(r, size, cost):
    r = np.atleast_2d(r)
    return pd.DataFrame({"r_a": r[:, 0], "r_b": r[:, 1], "r_c": r[:, 2], "size": size, "flops": cost})


def test_next_runs_prefers_the_target_and_ignores_a_measured_run():
    boot, r0, M0 = agreeing_ensemble()
    rng = np.random.default_rng(2)
    r = random_mixtures(rng, 8, 3)
    table = candidates_table(np.vstack([r0, r]), [M0] + [4.0, 5.0, 6.0, 8.0] * 2, 1.0)
    key = jax.random.key(3)
    first = cj.next_runs(boot, table, budget=100.0, target_size=20.0, key=key, batch=9, noise=0.0)
    assert 0 not in first.index  # the members agree there: zero score, never chosen
    assert list(first.columns[-len(cj.mixture.NEXT_COLUMNS) :]) == list(cj.mixture.NEXT_COLUMNS)
    assert first["cumulative_cost"].iloc[-1] <= 100.0
    r_star = first.attrs["recommended"]
    at_target = pd.concat([table, candidates_table(r_star, 20.0, 1.0)], ignore_index=True)
    again = cj.next_runs(boot, at_target, budget=100.0, target_size=20.0, key=key, batch=1, noise=0.0)
    assert again.index[0] == len(table)  # q itself, measured without noise: the most a run can remove
    np.testing.assert_allclose(again["score"].iloc[0], again.attrs["sd_before"] ** 2, rtol=1e-9)
    np.testing.assert_allclose(again["sd_after"].iloc[0], 0.0, atol=1e-6 * again.attrs["sd_before"])
    repeat = cj.next_runs(boot, at_target, budget=100.0, target_size=20.0, key=key, batch=1, noise=0.0)
    pd.testing.assert_frame_equal(again, repeat)  # the same key, the same answer


def test_next_runs_on_a_batched_pipeline_within_budget_and_bad_input():
    pipes = make_pipeline(batch=6)
    rng = np.random.default_rng(4)
    sizes = np.tile([4.0, 8.0, 12.0, 20.0], 5)
    table = candidates_table(random_mixtures(rng, 20, 3), sizes, 6.0 * sizes**3)
    before = table.copy()
    out = cj.next_runs(pipes, table, budget=3 * 6.0 * 12.0**3, target_size=20.0, key=jax.random.key(0), batch=3,
                       noise=1e-3, reference=[0.2, 0.3, 0.5])  # fmt: skip
    pd.testing.assert_frame_equal(table, before)
    assert 1 <= len(out) <= 3 and out["cumulative_cost"].iloc[-1] <= 3 * 6.0 * 12.0**3
    assert np.all(np.diff(out["sd_after"]) <= 1e-12)
    once = cj.next_runs(pipes, table, budget=1e12, target_size=20.0, key=jax.random.key(0), batch=30, noise=1e-3,
                        replace=False, reference=[0.2, 0.3, 0.5])  # fmt: skip
    assert len(once) >= 2 and once.index.is_unique  # every candidate at most once
    boxed = cj.next_runs(pipes, table, budget=1e9, target_size=20.0, key=jax.random.key(0), noise=1e-3,
                         reference=[0.2, 0.3, 0.5], max_shift=0.2)  # fmt: skip
    ratio = boxed.attrs["recommended"] / np.array([0.2, 0.3, 0.5])
    assert np.all((ratio > 0.8 - 1e-6) & (ratio < 1.2 + 1e-6))  # the recommendation stays in the trust region
    with pytest.raises(ValueError, match="`noise`"):
        cj.next_runs(pipes, table, budget=1e9, target_size=20.0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="`budget`"):
        cj.next_runs(pipes, table, budget=-1.0, target_size=20.0, key=jax.random.key(0), noise=0.0)
    with pytest.raises(ValueError, match="flops"):
        cj.next_runs(pipes, table.assign(flops=-1.0), budget=1e9, target_size=20.0, key=jax.random.key(0), noise=0.0)
    with pytest.raises(ValueError, match="batched"):
        cj.next_runs(make_pipeline(), table, budget=1e9, target_size=20.0, key=jax.random.key(0), noise=0.0)
