"""select_law: candidates fitted below the held-out size and ranked by their error there."""

import jax
import numpy as np
import pandas as pd
import pytest
from helpers import random_mixtures

import camel_jax as cj
from camel_jax.experiments._select import law_data


def data_law_world():
    """Runs of a tied CAMELData law whose mixture effect does not shrink with size (sizes 4-12, 3 datasets),
    with a token column (constant: the paper's fixed cooldown) that only some candidates take."""
    true = cj.CAMELData.from_params(
        t=[[0.8, 0.3, 0.1], [0.2, 0.7, 0.9]],
        K=[2.0, 1.5],
        beta=[0.9, 0.6],
        C=1.5,
        G=[0.15, 0.25],
        gamma=[0.5, 0.8],
        tied=True,
        tokens=False,
        capacity_exponent=3.0,
    )
    rng = np.random.default_rng(0)
    sizes = np.repeat([4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0], 12)
    r = np.tile(random_mixtures(rng, 12, 3), (7, 1))  # 12 mixtures, each trained at every size
    y = np.asarray(true(r, sizes))
    return cj.MixtureData(r, y, size=sizes, tokens=np.full(len(sizes), 2e10))


@pytest.fixture(scope="module")
def selection():
    data = data_law_world()
    key = jax.random.key(0)
    laws = {
        "camel-tied": cj.CAMEL.sample_init(key, n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0),
        "camel-data-tied": cj.CAMELData.sample_init(
            key, n_datasets=3, n_domains=2, tied=True, tokens=False, capacity_exponent=3.0
        ),
        "dml-nested": cj.experiments.DMLNested(n_domains=1),
    }
    return cj.experiments.select_law(laws, data, key=jax.random.key(1), restarts=16,
                                     options=cj.FitOptions(max_steps=3000))


# 52 s: five laws' held-out fits; the ranking rules are tested below with stubs
@pytest.mark.slow  # the suite's budget (issue 57)
def test_the_law_that_holds_a_size_free_mixture_effect_wins_by_a_wide_margin(selection):
    winner, table = selection
    assert winner == "camel-data-tied"
    assert list(table.columns[:6]) == list(cj.experiments.SELECT_COLUMNS)
    error = table.set_index("law")["error"]
    assert set(table["test_size"]) == {12.0} and set(table["n_train"]) == {72}
    # noiseless data of its own form: the right law extrapolates to ~0; tied CAMEL cannot hold the effect at all
    assert error["camel-data-tied"] < 0.03
    assert error["camel-tied"] > 0.3 and error["dml-nested"] > 0.3
    assert table.set_index("law")["rank"].to_dict() == {
        name: 1 + int(np.sum(error < error[name])) for name in error.index
    }


def test_laws_get_the_inputs_they_take_and_bad_requests_fail_before_any_fit():
    data = data_law_world()
    camel = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2)
    with_tokens = cj.CAMELData.sample_init(jax.random.key(0), n_datasets=3, n_domains=2)
    assert len(law_data(camel, data, "c").inputs) == 2  # (r, M): the tokens column is dropped
    assert len(law_data(with_tokens, data, "d").inputs) == 3
    no_tokens = cj.MixtureData(data.r, data.y, size=data.size)
    with pytest.raises(ValueError, match="law 'd' takes tokens"):
        cj.experiments.select_law({"d": with_tokens}, no_tokens, key=jax.random.key(0))
    with pytest.raises(ValueError, match="not in the data"):
        cj.experiments.select_law({"c": camel}, data, key=jax.random.key(0), holdout=[20.0])
    with pytest.raises(ValueError, match=">= 2 training sizes"):
        cj.experiments.select_law({"c": camel}, data, key=jax.random.key(0), holdout=[5.0, 12.0])
    with pytest.raises(ValueError, match="`holdout` must be"):
        cj.experiments.select_law({"c": camel}, data, key=jax.random.key(0), holdout="smallest")
    with pytest.raises(ValueError, match="`metric`"):
        cj.experiments.select_law({"c": camel}, data, key=jax.random.key(0), metric="r2")


@pytest.mark.slow  # its own benchmark and pipeline fits compile anew
def test_camel_data_runs_through_the_pipeline_bootstrap_save_and_optimizer(tmp_path):
    from camel_jax import simulate

    world = simulate.make_world(jax.random.key(0))
    runs = world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), [4.0, 5.0, 6.0, 8.0], noise=0.002,
                      key=jax.random.key(1))  # fmt: skip
    losses = [c for c in runs.columns if c.startswith("loss_")]
    fits = cj.fit_benchmarks(runs, losses=losses, benchmarks=["acc_mmlu"], names=["mmlu"], key=jax.random.key(2),
                             restarts=2)  # fmt: skip
    law = cj.CAMELData.sample_init(jax.random.key(3), n_datasets=5, n_domains=2, tied=True, tokens=False,
                                   capacity_exponent=3.0)  # fmt: skip
    out = cj.fit_pipeline(world.mixture_data(runs, losses[0]), fits, {"mmlu": 1.0}, law=law, key=jax.random.key(4),
                          n_resamples=4, restarts=2)  # fmt: skip
    assert isinstance(out.pipeline.loss_laws["mmlu"], cj.CAMELData) and out.pipelines.batch_shape == (4,)
    back = cj.load(cj.save(out.pipelines, tmp_path / "pipes"))
    r = np.asarray(simulate.REFERENCE)[None, :]
    np.testing.assert_array_equal(back.score(r, np.full(1, 20.0)), out.pipelines.score(r, np.full(1, 20.0)))
    result = cj.optimal_mixture(out, 5, key=jax.random.key(5), model_size=20.0, robust="mean",
                                reference=simulate.REFERENCE, max_shift=0.2)  # fmt: skip
    assert abs(float(np.sum(result.r)) - 1) < 1e-6 and result.decision is not None


def test_a_law_whose_held_out_fit_did_not_converge_ranks_after_every_law_whose_fits_did(monkeypatch):
    """The ranking rule alone, on given held-out tables: an unconverged fit's error describes where its starts
    stopped, so a lower error does not lift it above a converged law; a failed fit (NaN) ranks last."""
    from camel_jax.experiments import _select

    errors = {"stopped-short": (0.1, False), "finished": (0.5, True), "finished-worse": (0.9, True),
              "failed": (np.nan, True)}  # fmt: skip

    def table(law, data, train, test, **kwargs):
        error, converged = errors[law]
        return pd.DataFrame({"repeat": [0], "test_size": test, "n_train": [72], "error": [error],
                             "converged": [converged], "error_se": [0.01]})  # fmt: skip

    monkeypatch.setattr(_select, "extrapolation_error", table)
    winner, ranked = cj.experiments.select_law({name: name for name in errors}, data_law_world(), key=jax.random.key(0))
    assert winner == "finished"
    assert ranked.set_index("law")["rank"].to_dict() == {
        "finished": 1, "finished-worse": 2, "stopped-short": 3, "failed": 4}  # fmt: skip
    # when no law's fits converged, the error alone ranks them
    errors.update({"finished": (0.5, False), "finished-worse": (0.9, False)})
    winner, _ = cj.experiments.select_law({name: name for name in errors}, data_law_world(), key=jax.random.key(0))
    assert winner == "stopped-short"


def test_the_converged_column_is_the_best_starts_status_whose_predictions_are_scored(monkeypatch):
    """A fit whose best start stopped at the step cap while another start converged is reported unconverged."""
    import dataclasses

    from camel_jax.experiments import _evaluate

    real_fit = _evaluate.fit

    def fit_with_a_converged_worse_start(*args, **kwargs):
        result = real_fit(*args, **kwargs)
        objectives = np.asarray(result.objectives)  # [T, R]
        best = np.argmin(objectives, axis=-1)
        status = np.full(objectives.shape, int(cj.Status.CONVERGED))
        status[np.arange(len(best)), best] = int(cj.Status.MAX_STEPS)
        return dataclasses.replace(result, status=status, converged=status == int(cj.Status.CONVERGED))

    monkeypatch.setattr(_evaluate, "fit", fit_with_a_converged_worse_start)
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0)
    data = law_data(law, data_law_world(), "c")
    options = cj.FitOptions(max_steps=20, polish=0)
    table = cj.experiments.extrapolation_error(law, data, [4.0, 5.0, 6.0], 12.0, key=jax.random.key(1), restarts=2,
                                               options=options)
    assert len(table) == 1 and not table["converged"].any()
