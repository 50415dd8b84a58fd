"""Old names of the score's side (issue 33: "objective" now means only the fit objective) keep working for one
release: each warns with a `DeprecationWarning` naming the new name and gives what the new name gives; an old and a
new keyword together are a `TypeError`; no old name is in `__all__`."""

import dataclasses
import json
import operator
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from helpers import make_pipeline

import camel_jax as cj
from camel_jax import simulate

KEY = jax.random.key(0)


@pytest.mark.parametrize(
    "namespace, old, new",
    [("camel_jax", "OBJECTIVES", "BENCHMARK_WEIGHTS"), ("camel_jax", "objective_draws", "mixture.score_draws"),
     ("camel_jax.plot", "objective_vs_size", "score_vs_size")],
)  # fmt: skip
def test_old_module_names_warn_and_are_the_new_objects(namespace, old, new):
    if namespace == "camel_jax.plot":
        pytest.importorskip("matplotlib")
    import importlib

    module = importlib.import_module(namespace)
    with pytest.warns(DeprecationWarning, match=f"{namespace}.{old} is deprecated: use {namespace}.{new}"):
        value = getattr(module, old)
    assert value is operator.attrgetter(new)(module)  # score_draws moved to camel_jax.mixture (issue 58)
    assert old not in getattr(module, "__all__", ()) and old not in vars(module)
    with pytest.raises(AttributeError, match="no attribute 'OBJECTIVE'"):
        module.OBJECTIVE  # a typo is still an AttributeError


# Issue 58: the top level holds the core; the building blocks and the experiment tools moved to their namespaces.
MOVED = {
    "fitting": [
        "data_template", "objective", "huber", "resample_weights", "implicit_solution", "DerivativeStatus",
        "fit_derivative_status", "calibrate_decision", "DecisionCalibration", "replicate_noise", "replicate_weights",
    ],
    "mixture": [
        "fit_benchmark_laws", "BenchmarkFits", "BENCHMARK_OPTIONS", "PROXY_OPTIONS", "AscentOptions",
    "mixture_derivative_status", "implicit_mixture", "pick_influence", "PickInfluence", "influence_text",
        "project_capped_simplex", "mixture_path", "score_draws", "VERDICTS", "variance_reduction", "NEXT_COLUMNS",
        "EXPORT_FORMATS",
    ],
    "experiments": [
        "flops", "perturbed_mixtures", "allocate", "sample_design", "STRATEGIES", "extrapolation_error", "compare_laws",
        "select_domains", "training_masks", "heldout_benchmark_error", "DMLNested", "select_law", "SELECT_COLUMNS",
        "backtest", "BACKTEST_METHODS", "BACKTEST_STRATEGIES", "BACKTEST_COLUMNS", "ADAPTIVE", "AdaptiveOptions",
        "backtest_observed", "OBSERVED_METHODS", "OBSERVED_COLUMNS", "spearman",
    ],
}


@pytest.mark.parametrize("namespace, name", [(ns, n) for ns, names in MOVED.items() for n in names])
def test_a_moved_name_warns_naming_its_new_place_and_is_the_same_object(namespace, name):
    module = getattr(cj, namespace)
    new = rf"camel_jax\.{namespace}\.{name} "
    with pytest.warns(DeprecationWarning, match=rf"camel_jax\.{name} is deprecated: use {new}"):
        old = getattr(cj, name)
    assert old is getattr(module, name) and name in module.__all__
    assert name not in cj.__all__ and name not in vars(cj)


def test_the_new_places_warn_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = {namespace: [getattr(getattr(cj, namespace), name) for name in names]
                 for namespace, names in MOVED.items()}  # fmt: skip
    assert found["experiments"][MOVED["experiments"].index("backtest")].__name__ == "backtest"


def test_no_deprecated_name_is_public():
    old = {"OBJECTIVES", "objective_draws", "objective_vs_size"}
    assert not old & set(cj.__all__) and not old & set(dir(cj))


def test_old_methods_and_property_forward():
    pipe = make_pipeline(batch=3)
    r, size = jnp.asarray([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]), jnp.full(2, 20.0)
    with pytest.warns(DeprecationWarning, match=r"Pipeline.objective is deprecated: use Pipeline.score"):
        old = pipe.objective(r, size)
    np.testing.assert_array_equal(old, pipe.score(r, size))
    world = simulate.make_world(KEY)
    weights = cj.BENCHMARK_WEIGHTS["math"]
    mixture = jnp.asarray(simulate.REFERENCE)
    with pytest.warns(DeprecationWarning, match=r"World.objective is deprecated: use World.score"):
        old = world.objective(mixture, 20.0, weights)
    np.testing.assert_array_equal(old, world.score(mixture, 20.0, weights))
    with pytest.warns(DeprecationWarning, match=r"World.true_objective is deprecated: use World.true_score"):
        true = world.true_objective(20.0, weights)
    np.testing.assert_array_equal(true(mixture), world.true_score(20.0, weights)(mixture))


@pytest.fixture(scope="module")
def small_fit():
    """A world's 11 design mixtures at 3 sizes: the benchmark fits and the data of one proxy loss."""
    world = simulate.make_world(jax.random.key(0))
    runs = world.runs(cj.experiments.perturbed_mixtures(simulate.REFERENCE, 0.2), [4.0, 6.0, 8.0], noise=0.002, key=KEY)
    losses = [c for c in runs.columns if c.startswith("loss_")]
    fits = cj.fit_benchmarks(runs, losses=losses, benchmarks=["acc_mmlu", "acc_gsm8k"], names=["mmlu", "gsm8k"],
                             key=jax.random.key(2), restarts=2)  # fmt: skip
    law = cj.CAMEL.sample_init(jax.random.key(3), n_datasets=5, n_domains=2, tied=True, capacity_exponent=3.0)
    return world.mixture_data(runs, losses[0]), fits, law


def test_fit_pipeline_objective_keyword_and_objective_noise(small_fit):
    data, fits, law = small_fit
    weights = {"mmlu": 0.5, "gsm8k": 0.5}
    kw = dict(law=law, key=jax.random.key(4), restarts=2)
    new = cj.fit_pipeline(data, fits, benchmark_weights=weights, **kw)
    with pytest.warns(DeprecationWarning, match=r"fit_pipeline\(objective=...\) is deprecated: use "
                      r"fit_pipeline\(benchmark_weights=...\)"):  # fmt: skip
        old = cj.fit_pipeline(data, fits, objective=weights, **kw)
    for a, b in zip(jax.tree.leaves(old), jax.tree.leaves(new)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    with pytest.warns(DeprecationWarning, match=r"PipelineFit.objective_noise is deprecated: use "
                      r"PipelineFit.score_noise"):  # fmt: skip
        assert new.objective_noise == new.score_noise > 0
    for both in (dict(benchmark_weights=weights, objective=weights), dict(objective=weights)):
        args = (data, fits, weights) if "benchmark_weights" not in both else (data, fits)
        with pytest.raises(TypeError, match="got both `objective` and `benchmark_weights`"):
            cj.fit_pipeline(*args, **both, **kw)


def test_a_saved_fit_holds_the_noise_by_position_not_by_name(small_fit, tmp_path):
    """`save` writes a PipelineFit's leaves in order and never a field's name: the renamed field stays where
    `objective_noise` was (files written before the rename load as they are)."""
    data, fits, law = small_fit
    fitted = cj.fit_pipeline(data, fits, {"mmlu": 0.5, "gsm8k": 0.5}, law=law, key=jax.random.key(4), restarts=2)
    names = [field.name for field in dataclasses.fields(cj.PipelineFit)]
    assert names.index("score_noise") == 5 and "objective_noise" not in names  # objective_noise's place
    path = cj.save(fitted, tmp_path / "fit.npz")
    with np.load(path) as stored:
        meta = json.loads(str(stored["__meta__"]))
    assert meta["kind"] == "PipelineFit" and "_noise" not in json.dumps(meta)
    assert cj.load(path).score_noise == fitted.score_noise


def test_optimal_mixture_and_its_status_take_the_old_keyword():
    def score(r):
        return -jnp.sum((r - jnp.array([0.2, 0.3, 0.5])) ** 2)

    new = cj.optimal_mixture(score, 3, key=KEY)
    with pytest.warns(DeprecationWarning, match=r"optimal_mixture\(objective=...\) is deprecated"):
        old = cj.optimal_mixture(objective=score, n_datasets=3, key=KEY)
    np.testing.assert_array_equal(old.r, new.r)
    with pytest.warns(DeprecationWarning, match=r"mixture_derivative_status\(objective=...\) is deprecated"):
        status = cj.mixture.mixture_derivative_status(new, objective=score)
    assert status == cj.mixture.mixture_derivative_status(new, score)
    with pytest.raises(TypeError, match="got both `objective` and `score`"):
        cj.optimal_mixture(score, 3, key=KEY, objective=score)


def _uniform(runs, *, benchmark_weights, target_size, key):
    return np.full(5, 0.2)


def _old_uniform(runs, *, objective, target_size, key):
    return np.full(5, 0.2)


@pytest.mark.slow  # the suite's 12-minute budget (issue 57): 8 s: a backtest
def test_backtest_objective_keyword_and_old_callables():
    world = simulate.make_world(jax.random.key(1))
    kw = dict(key=KEY, repeats=1)
    new = cj.experiments.backtest(world, {"uniform": _uniform}, benchmark_weights="math", **kw)
    with pytest.warns(DeprecationWarning, match=r"backtest\(objective=...\) is deprecated"):
        old = cj.experiments.backtest(world, {"uniform": _uniform}, objective="math", **kw)
    pd.testing.assert_frame_equal(old, new)
    with pytest.warns(DeprecationWarning, match="a backtest method taking `objective=` is deprecated") as record:
        legacy = cj.experiments.backtest(world, {"uniform": _old_uniform}, benchmark_weights="math", **kw)
    # named at this line, not inside camel_jax: outside __main__ Python would never show it
    assert {w.filename for w in record if w.category is DeprecationWarning} == {__file__}
    pd.testing.assert_frame_equal(legacy, new)
    with pytest.raises(TypeError, match="got both `objective` and `benchmark_weights`"):
        cj.experiments.backtest(world, {"uniform": _uniform}, objective="math", benchmark_weights="math", **kw)


def test_backtest_observed_objectives_keyword():
    rng = np.random.default_rng(0)
    mixtures = rng.dirichlet(np.ones(3), 6)

    def table(sizes):
        size = np.repeat(sizes, len(mixtures))
        r = np.tile(mixtures, (len(sizes), 1))
        loss = 2.0 + r @ np.array([0.1, 0.2, 0.3]) + 1.0 / size
        return pd.DataFrame(r, columns=["a", "b", "c"]).assign(size=size, loss_1=loss, loss_2=loss[::-1])

    train, candidates = table([2.0, 4.0]), table([8.0])
    kw = dict(mixture=["a", "b", "c"], size="size", key=KEY, methods=["best-observed"])
    new = cj.experiments.backtest_observed(train, candidates, weightings=["loss_1", "loss_2"], **kw)
    with pytest.warns(DeprecationWarning, match=r"backtest_observed\(objectives=...\) is deprecated: use "
                      r"backtest_observed\(weightings=...\)"):  # fmt: skip
        old = cj.experiments.backtest_observed(train, candidates, objectives=["loss_1", "loss_2"], **kw)
    pd.testing.assert_frame_equal(old, new)
    assert list(new["weighting"]) == ["loss_1", "loss_2"] and "weighting" in cj.experiments.OBSERVED_COLUMNS
    with pytest.raises(TypeError, match="got both `objectives` and `weightings`"):
        cj.experiments.backtest_observed(train, candidates, objectives=["loss_1"], weightings=["loss_1"], **kw)


def test_the_cli_objective_flag_is_a_hidden_alias_of_weights(tmp_path, capsys):
    from camel_jax import cli

    path = cj.save(make_pipeline(), tmp_path / "pipeline.npz")
    args = ["optimize", str(path), "--size", "20"]
    assert cli.main([*args, "--weights", "math"]) == 0
    new = capsys.readouterr()
    assert "deprecated" not in new.err
    assert cli.main([*args, "--objective", "math"]) == 0
    old = capsys.readouterr()
    note = "camel-jax optimize: note: --objective is deprecated: use --weights NAME\n"
    assert old.out == new.out and old.err.count(note) == 1 and old.err.replace(note, "") == new.err
    assert cli.main([*args, "--objective", "math", "--weights", "math"]) == 2
    assert "give --weights only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["optimize", "--help"])
    assert "--objective" not in capsys.readouterr().out


def test_implicit_mixture_takes_its_score_under_the_old_keyword_with_a_warning():
    def score(r, c):
        return -jnp.sum((r - c) ** 2)

    c = jnp.array([0.2, 0.3, 0.5])
    new = cj.mixture.implicit_mixture(score, c, c)
    with pytest.warns(DeprecationWarning, match=r"implicit_mixture\(objective=...\) is deprecated"):
        old = cj.mixture.implicit_mixture(objective=score, r=c, data=c)
    np.testing.assert_array_equal(np.asarray(old), np.asarray(new))
    with pytest.raises(TypeError, match="both `objective` and `score`"):
        cj.mixture.implicit_mixture(score, c, c, objective=score)
