"""The decision backtest on measured runs (`backtest_observed`): a well-specified table where the right pick is
known, the baselines' rules, bad input, and the real-data backtests of issue 13 (slow; skipped without ../shared)."""

import jax
import numpy as np
import pandas as pd
import pytest
import shared_data
from helpers import known_tied_camel, random_mixtures

import camel_jax as cj

MIX = ["a", "b", "c"]


def _table(rng, sizes, n_mixtures, noise=0.0):
    law = known_tied_camel()
    r = np.concatenate([random_mixtures(rng, n_mixtures, 3) for _ in sizes])
    size = np.repeat(np.asarray(sizes, float), n_mixtures)
    first = np.asarray(law(r, size)) * (1 + noise * rng.standard_normal(len(size)))
    second = np.asarray(law(r[:, ::-1], size)) * (1 + noise * rng.standard_normal(len(size)))  # a second loss
    return pd.DataFrame(r, columns=MIX).assign(size=size, loss_1=first, loss_2=second)


@pytest.fixture(scope="module")
def tables():
    rng = np.random.default_rng(0)
    train = _table(rng, [2.0, 3.0, 4.0, 6.0], 12)
    candidates = _table(rng, [10.0], 8)
    return train, candidates


WEIGHTINGS = {"one": {"loss_1": 1.0}, "two": {"loss_2": 1.0}, "both": {"loss_1": 1.0, "loss_2": 3.0}}


def test_a_well_specified_law_picks_the_best_candidate(tables):
    train, candidates = tables
    before = (train.copy(), candidates.copy())
    out = cj.experiments.backtest_observed(train, candidates, mixture=MIX, size="size", weightings=WEIGHTINGS,
                               methods=["camel", "best-observed"], key=jax.random.key(0), restarts=8)  # fmt: skip
    pd.testing.assert_frame_equal(train, before[0])  # the user's tables are not modified
    pd.testing.assert_frame_equal(candidates, before[1])
    assert list(out.columns[: len(cj.experiments.OBSERVED_COLUMNS)]) == list(cj.experiments.OBSERVED_COLUMNS)
    assert len(out) == 6
    camel = out[out["method"] == "camel"].set_index("weighting")
    assert np.all(camel["regret_share"] <= 0.05), camel["regret_share"]
    assert np.all(camel["spearman"] >= 0.9), camel["spearman"]
    # the columns agree with each other and with the measured table
    for weighting, row in camel.iterrows():
        w = WEIGHTINGS[weighting]
        measured = sum(v * candidates[c] for c, v in w.items()) / sum(w.values())
        assert row["best_value"] == pytest.approx(measured.min())
        assert row["true_value"] == pytest.approx(measured.loc[row["pick"]])
        assert row["regret"] == pytest.approx(row["true_value"] - row["best_value"])
        np.testing.assert_allclose(candidates.loc[row["pick"], MIX], row[[f"r_{c}" for c in MIX]].to_numpy(float))
    assert (camel["at_size"] == 10.0).all()
    # no candidate was trained at the largest training size: best-observed has no pick, and says so
    observed = out[out["method"] == "best-observed"]
    assert observed["pick"].isna().all() and observed["regret"].isna().all()


def test_best_observed_ranks_candidates_by_their_measurement_at_the_largest_trained_size(tables):
    train, candidates = tables
    at_top = candidates.assign(size=6.0, loss_1=candidates["loss_1"][::-1].to_numpy())  # a reversed measurement
    out = cj.experiments.backtest_observed(pd.concat([train, at_top], ignore_index=True), candidates, mixture=MIX,
                                           size="size",
                               weightings=["loss_1"], methods=["best-observed"], key=jax.random.key(0))  # fmt: skip
    row = out.iloc[0]
    assert row["pick"] == candidates.index[np.argmin(at_top["loss_1"].to_numpy())]
    # ranks of distinct values by argsort twice, independent of the library's tie-aware version
    ranks = [np.argsort(np.argsort(x.to_numpy())) for x in (at_top["loss_1"], candidates["loss_1"])]
    assert row["spearman"] == pytest.approx(np.corrcoef(*ranks)[0, 1])


def test_one_training_size_predicts_at_that_size_and_skips_nested_dml(tables):
    train, candidates = tables
    one = train[train["size"] == 6.0]
    out = cj.experiments.backtest_observed(one, candidates, mixture=MIX, size="size", weightings=["loss_1"],
                               methods=["camel", "dml", "size-agnostic"], key=jax.random.key(1))  # fmt: skip
    assert list(out["method"]) == ["camel", "size-agnostic"]
    assert (out["at_size"] == 6.0).all()
    # camel and size-agnostic share one fit: at a single size they are the same prediction
    assert out["pick"].nunique() == 1 and out["spearman"].nunique() == 1


def test_spearman_handles_ties_and_missing_values():
    assert cj.experiments.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert cj.experiments.spearman([1, 2, np.nan, 4], [4, 3, 0, 1]) == pytest.approx(-1.0)
    assert cj.experiments.spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(np.corrcoef([1.5, 1.5, 3], [1, 2, 3])[0, 1])
    assert np.isnan(cj.experiments.spearman([1, np.nan], [1, 2]))


@pytest.mark.parametrize(
    "change, kwargs, message",
    [
        (lambda t, c: (t, c.drop(columns="loss_2")), {}, r"`candidates` has no loss column\(s\) \['loss_2'\]"),
        (lambda t, c: (t, c.assign(loss_1=np.r_[np.nan, c["loss_1"][1:]])), {}, r"'loss_1'.*at row 0"),
        (lambda t, c: (t.assign(a=t["a"] + 0.5), c), {}, r"`train` row 0: mixture columns"),
        (lambda t, c: (t.assign(size=-t["size"]), c), {}, r"column 'size' \(size\) must be > 0"),
        (lambda t, c: (t, c), {"methods": ["camel", "oracle"]}, r"unknown method\(s\) \['oracle'\]"),
        (lambda t, c: (t, c), {"weightings": "loss_1"}, r"got the string 'loss_1'"),
        (lambda t, c: (t, c), {"weightings": {"x": {"loss_1": -1.0}}}, r"weighting 'x'"),
    ],
)
def test_bad_input_is_named_before_any_fit(tables, change, kwargs, message):
    train, candidates = change(*tables)
    args = {"weightings": ["loss_1", "loss_2"], "methods": ["camel"]} | kwargs
    with pytest.raises((ValueError, TypeError), match=message):
        cj.experiments.backtest_observed(train, candidates, mixture=MIX, size="size", key=jax.random.key(0), **args)


def test_missing_training_losses_only_drop_that_run_from_that_loss(tables):
    train, candidates = tables
    holes = train.assign(loss_2=np.where(np.arange(len(train)) % 5 == 0, np.nan, train["loss_2"]))
    out = cj.experiments.backtest_observed(holes, candidates, mixture=MIX, size="size", weightings=["loss_2"],
                               methods=["camel"], key=jax.random.key(0), restarts=8)  # fmt: skip
    assert out["regret_share"].iloc[0] <= 0.05


# --- the real-data backtests (issue 13) ------------------------------------------------------------------------


@pytest.mark.slow  # two real tables (regmix: 512 runs x 17 datasets), read from ../shared
def test_real_data_backtests_run_and_laws_beat_chance():
    train, candidates, mixture, weightings = shared_data.dmsl_decision()
    dmsl = cj.experiments.backtest_observed(train, candidates, mixture=mixture, size="model_size",
                                            weightings=weightings,
                                methods=["camel", "sodm"], key=jax.random.key(0), restarts=8)  # fmt: skip
    assert len(dmsl) == 2 * len(weightings) and np.all(dmsl["regret"] >= 0)
    # four candidates: a random pick has expected regret share ~0.5 in every weighting
    assert dmsl["regret_share"].mean() < 0.3
    train, candidates, _, mixture, weightings = shared_data.regmix_decision()
    regmix = cj.experiments.backtest_observed(train, candidates, mixture=mixture, size="size", weightings=weightings,
                                  methods=["sodm"], key=jax.random.key(0), restarts=8)  # fmt: skip
    assert regmix["spearman"].iloc[0] > 0.8  # 256 candidates: chance is ~0 +- 0.06
