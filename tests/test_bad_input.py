"""Hostile files and bad input: one row per case, each a clear error naming the culprit before any compute.

API cases assert the exception type and that the message names the argument, column or file problem. CLI cases
assert exit code 2, a single line on stderr (no traceback) and no output file left behind.
"""

import sys
import zipfile
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from helpers import known_tied_camel, tamper

import camel_jax as cj
from camel_jax import cli, simulate
from camel_jax.cli import fit as fit_command
from camel_jax.data import _checks as data_checks
from camel_jax.experiments._select import simplest_within
from camel_jax.laws import _checks

R5 = np.random.default_rng(0).dirichlet(np.ones(5), 12)
SIZES = np.repeat([4.0, 6.0, 8.0], 4)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small runs table, a saved CAMEL fit, a saved DML fit and a saved pipeline (cheap fits: the point here
    is the files, not the fits)."""
    folder = tmp_path_factory.mktemp("bad")
    world = simulate.default_world(jax.random.key(0))
    runs = world.runs(cj.experiments.perturbed_mixtures([0.35, 0.25, 0.15, 0.1, 0.15]), [4.0, 6.0, 8.0])
    table = runs.rename(columns={"loss_val0": "loss"})[[f"r_{d}" for d in world.datasets] + ["size", "loss"]]
    table.to_csv(folder / "runs.csv", index=False)
    data = world.mixture_data(runs, "loss_val0")
    camel = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=2, tied=True, capacity_exponent=3.0)
    cj.save(cj.fit(camel, data.inputs, data.y, key=jax.random.key(0), restarts=2, options=cj.FitOptions(max_steps=20)), folder / "camel.npz")
    dml = cj.DML.sample_init(jax.random.key(0), n_datasets=5, n_domains=1)
    at_6 = np.asarray(data.size) == 6.0
    dml_fit = cj.fit(dml, (data.r[at_6],), data.y[at_6], key=jax.random.key(0), restarts=2, options=cj.FitOptions(max_steps=20))
    cj.save(dml_fit, folder / "dml.npz")
    laws = {"mmlu": known_tied_camel()}
    bench = {"mmlu": cj.LossToBenchmark.from_params(k=[1.0], A=0.7, B=-2.0, C=0.25)}
    cj.save(cj.Pipeline(laws, bench, {"mmlu": 1.0}), folder / "pipeline.npz")
    return folder, table, data


# --- load(): a file chooses no code --------------------------------------------------------------------------


@pytest.mark.parametrize("class_name", ["antigravity:Fly", "this:Law", "os:system", "camel_jax.cli:main"])
def test_load_never_imports_the_class_a_file_names(files, tmp_path, class_name):
    folder, _, _ = files
    path = tamper(folder / "camel.npz", tmp_path / "x.npz", lambda m: m["law"].update({"class": class_name}))
    module = class_name.partition(":")[0]
    was_loaded = module in sys.modules
    with pytest.raises(ValueError, match="unknown law class .*laws="):
        cj.load(path)
    assert (module in sys.modules) == was_loaded  # nothing was imported


def test_a_named_user_law_loads_and_an_unnamed_one_cannot_be_saved(files, tmp_path):
    class MyPowerLaw(cj.PowerLaw):
        pass

    law = MyPowerLaw.from_params(E=1.0, A=2.0, alpha=0.5)
    x = jnp.linspace(1.0, 10.0, 8)
    result = cj.fit(law, (x,), law(x), key=jax.random.key(0), restarts=2, options=cj.FitOptions(max_steps=5, polish=0))
    with pytest.raises(TypeError, match="is not one camel-jax ships: pass it as `save\\(..., laws="):
        cj.save(result, tmp_path / "mine.npz")
    assert not list(tmp_path.iterdir())  # the failed save left nothing behind
    path = cj.save(result, tmp_path / "mine.npz", laws={"tests:MyPowerLaw": MyPowerLaw})
    with pytest.raises(ValueError, match="unknown law class 'tests:MyPowerLaw'"):
        cj.load(path)  # no registry: what one caller allowed is not allowed for the next
    loaded = cj.load(path, laws={"tests:MyPowerLaw": MyPowerLaw})
    assert type(loaded.law) is MyPowerLaw


LOAD_CASES = {
    "huge n_domains": (lambda m: m["law"]["structure"].update({"n_domains": 4000}), None, "trailing shape"),
    "out-of-range int": (lambda m: m["law"]["structure"].update({"n_domains": 10**12}), None, "out of range"),
    "zero domains": (lambda m: m["law"]["structure"].update({"n_domains": 0}), None, "n_domains"),
    "string structure": (lambda m: m["law"]["structure"].update({"tied": "yes"}), None, "unexpected value"),
    "nan exponent": (lambda m: m["law"]["structure"].update({"capacity_exponent": float("nan")}), None, "non-finite"),
    "many inputs": (lambda m: m.update({"n_inputs": 10**9}), None, "n_inputs"),
    "unknown kind": (lambda m: m.update({"kind": "Exploit"}), None, "unknown object kind"),
    "newer format": (lambda m: m.update({"format_version": 99}), None, "upgrade camel-jax"),
    "non-finite law": (None, lambda a: a.update({"leaf_0": np.full_like(a["leaf_0"], np.nan)}), "non-finite"),
    "string leaf": (None, lambda a: a.update({"leaf_0": np.array(["x"] * a["leaf_0"].size)}), "dtype"),
    "wrong shape": (None, lambda a: a.update({"leaf_0": np.zeros((7, 7, 7))}), "trailing shape"),
    "missing leaf": (None, lambda a: a.pop(f"leaf_{len(a) - 1}"), "stored .* arrays"),
}


@pytest.mark.parametrize("case", list(LOAD_CASES))
def test_load_refuses_tampered_files(files, tmp_path, case):
    folder, _, _ = files
    edit_meta, edit_leaf, message = LOAD_CASES[case]
    path = tamper(folder / "camel.npz", tmp_path / "x.npz", edit_meta, edit_leaf)
    with pytest.raises(ValueError, match=message):
        cj.load(path)


def broken_files(folder, tmp_path):
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes((folder / "camel.npz").read_bytes()[:300])
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    npy = tmp_path / "array.npy"
    np.save(npy, np.zeros(3))
    compressed = tmp_path / "compressed.npz"
    with zipfile.ZipFile(folder / "camel.npz") as src, zipfile.ZipFile(compressed, "w", zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
    bad_json = tamper(folder / "camel.npz", tmp_path / "json.npz")
    with np.load(bad_json) as stored:
        arrays = {n: stored[n] for n in stored.files}
    arrays["__meta__"] = np.array("{not json")
    np.savez(bad_json, **arrays)
    return {"truncated": truncated, "empty": empty, "npy": npy, "compressed": compressed, "bad json": bad_json}


def test_load_refuses_files_that_are_not_camel_jax_results(files, tmp_path):
    folder, _, _ = files
    for name, path in broken_files(folder, tmp_path).items():
        with pytest.raises(ValueError, match="camel_jax.save|compressed"):
            cj.load(path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        cj.load(tmp_path / "missing.npz")


def test_load_accepts_a_string_only_where_the_law_declares_it(tmp_path):
    """SODM's `mixture_chart` is a string in a file's structure (its law declares the values in `CHOICES`); any
    other string value, there or elsewhere, is refused before a law is built."""
    sodm = cj.save(cj.load(Path(__file__).parent / "data" / "format4_sodmadditive_fit.npz"), tmp_path / "sodm.npz")
    assert cj.load(sodm).law.mixture_chart == "log"
    for key, value in (("mixture_chart", "bogus"), ("tokens", "log")):
        path = tamper(sodm, tmp_path / f"{key}.npz", lambda m: m["law"]["structure"].update({key: value}))
        with pytest.raises(ValueError, match="unexpected value"):
            cj.load(path)


def test_old_format_names_of_shipped_laws_still_load(files, tmp_path):
    folder, _, _ = files
    old = "camel_jax.laws._camel:CAMEL"
    path = tamper(folder / "camel.npz", tmp_path / "old.npz", lambda m: m["law"].update({"class": old}))
    assert isinstance(cj.load(path).law, cj.CAMEL)


# --- the API: arguments and data -----------------------------------------------------------------------------


def camel5():
    return cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=2, tied=True, capacity_exponent=3.0)


def pipeline():
    return cj.Pipeline(
        {"mmlu": known_tied_camel()},
        {"mmlu": cj.LossToBenchmark.from_params(k=[1.0], A=0.7, B=-2.0, C=0.25)},
        {"mmlu": 1.0},
    )


def frame_with(**columns):
    df = pd.DataFrame(R5, columns=[f"r_{j}" for j in range(5)])
    df["size"], df["loss"] = SIZES, 3.0
    for name, value in columns.items():
        df[name] = value
    return df


def duplicated_columns():
    df = frame_with()
    return pd.concat([df, df[["size"]]], axis=1)


y12 = jnp.full(12, 3.0)


def batched_pipeline():
    return jax.tree.map(lambda a: jnp.stack([a, 1.01 * a]), pipeline())


def candidates():
    r = R5[:, :3] / R5[:, :3].sum(1, keepdims=True)
    return pd.DataFrame({"r_a": r[:, 0], "r_b": r[:, 1], "r_c": r[:, 2], "size": SIZES, "flops": 1.0})


def one_mixture_data():
    return cj.MixtureData(np.tile(R5[:1], (12, 1)), y12, size=SIZES)
API_CASES = {
    # severe 2: a dataset never observed
    "all-zero mixture column": (
        lambda: cj.MixtureData.from_frame(frame_with(r_0=0.0, r_1=R5[:, 0] + R5[:, 1]), mixture=[f"r_{j}" for j in range(5)], target="loss", size="size"),
        ValueError,
        "'r_0' is zero in every row",
    ),
    # severe 3: target sizes
    "model_size 0": (lambda: cj.optimal_mixture(pipeline(), 3, key=jax.random.key(0), model_size=0.0), ValueError, "model_size"),
    "model_size -3": (lambda: cj.optimal_mixture(pipeline(), 3, key=jax.random.key(0), model_size=-3.0), ValueError, "model_size"),
    "model_size nan": (lambda: cj.optimal_mixture(pipeline(), 3, key=jax.random.key(0), model_size=np.nan), ValueError, "model_size"),
    "model_size inf": (lambda: cj.optimal_mixture(pipeline(), 3, key=jax.random.key(0), model_size=np.inf), ValueError, "model_size"),
    "mixture_path size 0": (lambda: cj.mixture.mixture_path(pipeline(), [8.0, 0.0], key=jax.random.key(0)), ValueError, "sizes"),
    # severe 4: bounds and benchmark weights
    "nan lower bound": (lambda: cj.optimal_mixture(pipeline(), 3, key=jax.random.key(0), model_size=8.0, lower=[np.nan, 0, 0]), ValueError, "`lower` must be finite"),
    "nan upper bound": (lambda: cj.optimal_mixture(pipeline(), 3, key=jax.random.key(0), model_size=8.0, upper=[1, np.nan, 1]), ValueError, "`upper` must be finite"),
    "lone reference": (lambda: cj.optimal_mixture(pipeline(), 3, key=jax.random.key(0), model_size=8.0, reference=[0.3, 0.3, 0.4]), ValueError, "`reference` is only used with `max_shift`"),
    "nan max_shift": (lambda: cj.optimal_mixture(pipeline(), 3, key=jax.random.key(0), model_size=8.0, reference=[0.3, 0.3, 0.4], max_shift=np.nan), ValueError, "max_shift"),
    "nan benchmark weight": (lambda: cj.Pipeline(pipeline().loss_laws, pipeline().benchmark_laws, {"mmlu": np.nan}), ValueError, "'mmlu' has weight nan"),
    "negative benchmark weight": (lambda: cj.Pipeline(pipeline().loss_laws, pipeline().benchmark_laws, {"mmlu": -1.0}), ValueError, "'mmlu' has a negative weight"),
    "empty benchmark weights": (lambda: cj.Pipeline(pipeline().loss_laws, pipeline().benchmark_laws, {}), ValueError, "`benchmark_weights` is empty"),
    "unknown benchmark": (lambda: cj.Pipeline(pipeline().loss_laws, pipeline().benchmark_laws, {"nonexistent": 0.5}), ValueError, "'nonexistent' has a weight but no loss law"),
    # severe 5: design budgets
    "nan budget": (lambda: cj.experiments.allocate("hourglass", [4, 5, 6], [1.0, 2.0, 3.0], np.nan, 11), ValueError, "`budget` must be finite"),
    "nan cost": (lambda: cj.experiments.allocate("hourglass", [4, 5, 6], [1.0, np.nan, 3.0], 10.0, 11), ValueError, "size 5 costs nan"),
    "duplicated design sizes": (lambda: cj.experiments.allocate("hourglass", [4, 5, 5], 1.0, 10.0, 11), ValueError, "5 is repeated"),
    # severe 6: shapes
    "2-D size column": (lambda: cj.fit(camel5(), (R5, SIZES[:, None]), y12, key=jax.random.key(0)), ValueError, "must be 1-D"),
    "missing mixture column": (lambda: cj.fit(camel5(), (R5[:, :4], SIZES), y12, key=jax.random.key(0)), ValueError, r"\(P, n_datasets\)=\(12, 5\)"),
    # severe 8 and degenerate structures
    "capacity_exponent 0": (lambda: cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=2, tied=True, capacity_exponent=0.0), ValueError, "capacity_exponent"),
    "capacity_exponent nan": (lambda: cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=2, tied=True, capacity_exponent=np.nan), ValueError, "capacity_exponent"),
    "n_domains 0": (lambda: cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=0), ValueError, "n_domains"),
    "size_scale -1": (lambda: cj.Chinchilla.sample_init(jax.random.key(0), size_scale=-1.0), ValueError, "size_scale"),
    # silent coercions
    "restarts 2.5": (lambda: cj.fit(camel5(), (R5, SIZES), y12, key=jax.random.key(0), restarts=2.5), TypeError, "`restarts` must be an integer"),
    "tol -1": (lambda: cj.fit(camel5(), (R5, SIZES), y12, key=jax.random.key(0), options=cj.FitOptions(tol=-1)), ValueError, "`tol`"),
    "max_steps 0": (lambda: cj.fit(camel5(), (R5, SIZES), y12, key=jax.random.key(0), options=cj.FitOptions(max_steps=0)), ValueError, "`max_steps`"),
    "n_resamples -5": (lambda: cj.bootstrap(camel5(), (R5, SIZES), y12, key=jax.random.key(0), n_resamples=-5), ValueError, "`n_resamples`"),
    "n_resamples 2.5": (lambda: cj.bootstrap(camel5(), (R5, SIZES), y12, key=jax.random.key(0), n_resamples=2.5), TypeError, "`n_resamples`"),
    "chunk_size 0": (lambda: cj.bootstrap(camel5(), (R5, SIZES), y12, key=jax.random.key(0), n_resamples=4, chunk_size=0), ValueError, "`chunk_size`"),
    "mixture as a string": (lambda: cj.MixtureData.from_frame(frame_with(), mixture="r_0", target="loss"), TypeError, "got the string 'r_0'"),
    "duplicated columns": (lambda: cj.MixtureData.from_frame(duplicated_columns(), mixture=[f"r_{j}" for j in range(5)], target="loss", size="size"), ValueError, r"duplicated column name\(s\) \['size'\]"),
    # issue 30: errors that pointed the wrong way
    "reference sums to 0.95": (lambda: cj.optimal_mixture(pipeline(), 3, key=jax.random.key(0), model_size=8.0, reference=[0.3, 0.3, 0.35], max_shift=0.2), ValueError, "must sum to 1 .*sum to 0.95"),
    "reference sums to 1.1": (lambda: cj.optimal_mixture(pipeline(), 3, key=jax.random.key(0), model_size=8.0, reference=[0.3, 0.4, 0.4], max_shift=0.2), ValueError, "sum to 1.1"),
    "bootstrap key=1": (lambda: cj.bootstrap(camel5(), (R5, SIZES), y12, key=1, n_resamples=2), TypeError, r"a jax.random key \(e.g. jax.random.key\(0\)\)"),
    "optimal_mixture key=3": (lambda: cj.optimal_mixture(pipeline(), 3, key=3, model_size=8.0), TypeError, "a jax.random key"),
    "next_runs key=0": (lambda: cj.next_runs(batched_pipeline(), candidates(), budget=1.0, target_size=8.0, key=0, noise=0.01), TypeError, "a jax.random key"),
    "gamma_max not a bound": (lambda: cj.CAMELData.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, gamma_max="high"), ValueError, r'`gamma_max` must be a number > 0, None or "default"; got \'high\''),
    "gamma_max without own exponents": (lambda: cj.CAMELData.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tokens=False, data_term="linear", gamma_max=2.0), ValueError, r"`gamma_max` bounds the \"domains\" data term's own exponents"),
    "gamma above gamma_max": (lambda: cj.CAMELData.from_params(t=np.full((2, 3), 0.5), K=[1.0, 0.5], beta=[0.5, 1.0], C=1.0, G=[0.1, 0.1], gamma=[4.0, 0.5], tied=True), ValueError, r"parameter `gamma` = .* exceeds `gamma_max` = 3.0"),
    "mixture_center off the data": (lambda: cj.CAMELData.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, mixture_center=(0.5, 0.5)), ValueError, r"`mixture_center` must be 3 finite shares > 0"),
    "law class, not instance": (lambda: cj.fit(cj.CAMEL, (R5, SIZES), y12, key=jax.random.key(0)), TypeError, r"pass an instance, e.g. CAMEL.sample_init\(.*or CAMEL.from_params"),
    "1-D mixture": (lambda: cj.fit(camel5(), (R5[:, 0], SIZES), y12, key=jax.random.key(0)), ValueError, r"\(P, n_datasets\)=\(12, 5\)"),
    "scalar size": (lambda: cj.fit(camel5(), (R5, 4.0), y12, key=jax.random.key(0)), ValueError, r"inputs\[1\] has shape \(\)"),
    "negative sizes": (lambda: cj.fit(camel5(), (R5, -SIZES), y12, key=jax.random.key(0)), ValueError, r"inputs\[1\] \(model size or tokens\)` must be > 0 .*got -4 at row 0"),
    "mixture rows summing to 2": (lambda: cj.fit(camel5(), (2 * R5, SIZES), y12, key=jax.random.key(0)), ValueError, "row 0 sums to 2"),
    "negative mixture weight": (lambda: cj.fit(camel5(), (R5 * np.r_[-1.0, np.ones(11)][:, None], SIZES), y12, key=jax.random.key(0)), ValueError, "negative weight .* at row 0"),
    "accuracy in percent": (lambda: cj.BenchmarkData(R5[:, :2], np.full(12, 55.0)), ValueError, "accuracies are fractions in \\[0, 1\\]; is it in percent"),
    "accuracy 1.5": (lambda: cj.fit_benchmarks(frame_with(acc=np.r_[1.5, np.full(11, 0.5)]), losses=["r_0", "r_1"], benchmarks=["acc"], key=jax.random.key(0)), ValueError, "column 'acc' \\(accuracy\\) is 1.5 at row 0"),
    "benchmark weights sum to 0": (lambda: cj.Pipeline(pipeline().loss_laws, pipeline().benchmark_laws, {"mmlu": 0.0}), ValueError, "sum to 0: the score is .*constant"),
    "benchmark weights 1e-300": (lambda: cj.Pipeline(pipeline().loss_laws, pipeline().benchmark_laws, {"mmlu": 1e-300}), ValueError, "sum to 1e-300"),
    "fit_pipeline nan weight before fitting": (lambda: cj.fit_pipeline(None, None, {"mmlu": np.nan}, law=camel5(), key=jax.random.key(0)), ValueError, "'mmlu' has weight nan"),
    "fit_pipeline negative weight": (lambda: cj.fit_pipeline(None, None, {"mmlu": -0.5, "math": 1.0}, law=camel5(), key=jax.random.key(0)), ValueError, "'mmlu' has a negative weight"),
    "fit_pipeline on one mixture": (lambda: cj.fit_pipeline(one_mixture_data(), None, {"mmlu": 1.0}, law=camel5(), key=jax.random.key(0)), ValueError, "holds 1 distinct mixture"),
    "next_runs noise nan": (lambda: cj.next_runs(batched_pipeline(), candidates(), budget=1.0, target_size=8.0, key=jax.random.key(0), noise=np.nan), ValueError, "`noise` must be a finite number >= 0"),
    "next_runs empty candidates": (lambda: cj.next_runs(batched_pipeline(), candidates().iloc[:0], budget=1.0, target_size=8.0, key=jax.random.key(0), noise=0.01), ValueError, "`candidates` is empty"),
    "next_runs extra r_ column": (lambda: cj.next_runs(batched_pipeline(), candidates().assign(r_3=0.0), budget=1.0, target_size=8.0, key=jax.random.key(0), noise=0.01), ValueError, r"4 mixture \(r_\*\) column"),
    "test size among training sizes": (lambda: cj.experiments.extrapolation_error(camel5(), cj.MixtureData(R5, y12, size=SIZES), [4.0, 6.0, 8.0], 6.0, key=jax.random.key(0)), ValueError, "held-out size 6 is not beyond the training sizes"),
    "costs vary within a size": (lambda: cj.experiments.sample_design("hourglass", pd.DataFrame({"size": SIZES, "flops": np.arange(12.0) + 1}), 100.0, jax.random.key(0)), ValueError, "column 'flops' varies within size 4"),
    "allocate max_per_size 2.7": (lambda: cj.experiments.allocate("hourglass", [4, 5, 6], [1.0, 2.0, 3.0], 10.0, 2.7), ValueError, "`max_per_size` must be whole numbers"),
    "names of the wrong length": (lambda: cj.fit(camel5(), (R5, SIZES), y12, key=jax.random.key(0), names=["a", "b"]), ValueError, r"`names` needs 5 non-empty strings"),
    "names repeated": (lambda: cj.fit_arrays(camel5(), (R5, SIZES), y12, key=jax.random.key(0), names=["a", "b", "a", "c", "d"]), ValueError, r"`names` repeats \['a'\]"),
    "names as one string": (lambda: cj.fit(camel5(), (R5, SIZES), y12, key=jax.random.key(0), names="abcde"), TypeError, "`names` must be a sequence of column names"),
    "ascent as a dict": (lambda: cj.optimal_mixture(pipeline(), 3, key=jax.random.key(0), model_size=8.0, ascent={"adam_steps": 5}), TypeError, "`ascent` must be an AscentOptions"),
    "ascent steps -1": (lambda: cj.mixture.AscentOptions(adam_steps=-1), ValueError, "AscentOptions.adam_steps"),
    "ascent rate 0": (lambda: cj.mixture.AscentOptions(learning_rate=0.0), ValueError, "AscentOptions.learning_rate"),
    "inits of another structure": (
        lambda: cj.bootstrap(camel5(), (R5, SIZES), y12, key=jax.random.key(0), n_resamples=2, inits=jax.tree.map(lambda a: a[None], cj.CAMEL.sample_init(jax.random.key(1), n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0))),
        ValueError,
        "`inits` must be laws of the same class and structure",
    ),
}  # fmt: skip


def test_names_travel_from_the_array_api_into_the_result_and_its_file(tmp_path):
    law = cj.PowerLaw.from_params(E=2.0, A=5.0, alpha=0.6)
    x = jnp.linspace(1.0, 3.0, 8)
    with pytest.raises(ValueError, match="`names` names the mixture columns of `inputs\\[0\\]` \\[P, N\\]"):
        cj.fit(law, (x,), law(x), key=jax.random.key(0), restarts=2, names=["x"])
    columns = ["r_web", "r_code", "r_books", "r_math", "r_wiki"]
    options = cj.FitOptions(max_steps=5, polish=0)
    result = cj.fit_arrays(camel5(), (R5, SIZES), y12, key=jax.random.key(0), restarts=2, options=options,
                           names=columns)  # fmt: skip
    assert result.names == tuple(columns)
    assert cj.load(cj.save(result, tmp_path / "named.npz")).names == tuple(columns)


def test_a_bad_value_under_the_users_jit_names_itself():
    """Under `equinox.filter_jit` the error is equinox's own (`EquinoxRuntimeError`, the check's message printed
    last); under `jax.jit` the message is in the error's text (JAX wraps it in a callback traceback)."""
    law = cj.PowerLaw.sample_init(jax.random.key(0))
    x = jnp.linspace(1.0, 3.0, 8)
    y = (2.0 + x**-0.5).at[3].set(jnp.nan)

    def run(y):
        return cj.fit_arrays(law, (x,), y, key=jax.random.key(0), restarts=2, options=cj.FitOptions(max_steps=5)).objective

    message = "`y` must be finite (and > 0 under log residuals) where weights > 0"
    with pytest.raises(eqx.EquinoxRuntimeError) as caught:
        eqx.filter_jit(run)(y)
    assert message in str(caught.value)
    with pytest.raises(Exception) as caught:  # an accelerator raises when the result is waited for, not at dispatch
        jax.block_until_ready(jax.jit(run)(y))
    assert message in str(caught.value)


@pytest.mark.parametrize("case", list(API_CASES))
def test_api_bad_input_is_a_clear_error(case):
    call, error, message = API_CASES[case]
    with pytest.raises(error, match=message):
        call()


def test_the_remembered_shape_check_follows_the_laws_structure_and_every_shape():
    """`fit` checks law(*inputs)'s shape once per (law structure, leaf and input shapes): a law of another static
    structure, leaves or inputs of other shapes are checked anew, and a bad one is still refused."""

    class Tiled(eqx.Module):
        w: jax.Array
        reps: int = eqx.field(static=True)

        def __call__(self, x):
            return jnp.tile(x * jnp.sum(self.w), self.reps)

    x = jnp.linspace(1.0, 2.0, 5)
    before = _checks._output_shape.cache_info()
    assert _checks.output_shape(Tiled(jnp.ones(2), 1), (x,)).shape == (5,)
    assert _checks.output_shape(Tiled(jnp.full(2, 3.0), 1), (x,)).shape == (5,)  # other values: remembered
    after = _checks._output_shape.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 1)
    assert _checks.output_shape(Tiled(jnp.ones(2), 2), (x,)).shape == (10,)  # another static field
    assert _checks.output_shape(Tiled(jnp.ones(2), 1), (x[:3],)).shape == (3,)  # other inputs
    with pytest.raises(ValueError, match=r"law\(\*inputs\) has shape \(10,\), not \(5,\)"):
        data_checks.check_law_inputs(Tiled(jnp.ones(2), 2), (x,))
    data_checks.check_law_inputs(Tiled(jnp.ones(3), 1), (x,))  # leaves of another shape: checked, and fine


def test_bootstrap_picks_the_converged_flag_of_the_returned_start():
    """The chosen start is the best finite one, and `converged` describes that start."""
    true = known_tied_camel()
    r, M = jnp.asarray(R5[:, :3] / R5[:, :3].sum(1, keepdims=True)), jnp.asarray(SIZES)
    starts = jax.tree.map(lambda a: jnp.stack([a, a.at[...].set(jnp.nan)]), true)  # a good start and a NaN one
    boot = cj.bootstrap(true, (r, M), true(r, M), key=jax.random.key(0), n_resamples=3, inits=starts, progress=False)
    assert np.all(np.isfinite(np.asarray(boot.objectives))) and bool(jnp.all(boot.converged))
    assert np.all(np.asarray(boot.n_failed) == 1)


# --- the CLI: rc 2, one line, nothing written ----------------------------------------------------------------


def run_cli(argv, capsys):
    code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    return code, err


def semicolon_csv(folder, table, tmp_path):
    path = tmp_path / "semi.csv"
    table.to_csv(path, index=False, sep=";")
    return path


def duplicated_csv(folder, table, tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("r_0,r_0,size,loss\n0.5,0.5,4,3.0\n")
    return path


def zero_column_csv(folder, table, tmp_path):
    path = tmp_path / "zero.csv"
    t = table.copy()
    t["r_code"] = t["r_code"] + t["r_math"]
    t["r_math"] = 0.0
    t.to_csv(path, index=False)
    return path


def file_as_folder(folder, table, tmp_path):
    (tmp_path / "a_file").write_text("x")
    return tmp_path / "a_file" / "sub" / "fit"


CLI_CASES = {
    "optimize size 0": (lambda f, t, p: ["optimize", f / "camel.npz", "--size", "0"], "--size"),
    "optimize size -3": (lambda f, t, p: ["optimize", f / "camel.npz", "--size=-3"], "--size"),
    "optimize size nan": (lambda f, t, p: ["optimize", f / "camel.npz", "--size", "nan"], "--size"),
    "optimize without size": (lambda f, t, p: ["optimize", f / "camel.npz"], "--size is required"),
    "optimize dml with size": (lambda f, t, p: ["optimize", f / "dml.npz", "--size", "8"], "drop --size"),
    "short reference": (lambda f, t, p: ["optimize", f / "camel.npz", "--size", "8", "--reference", "0.5,0.5"], "`reference` must be a mixture of length 5"),
    "nan lower": (lambda f, t, p: ["optimize", f / "camel.npz", "--size", "8", "--lower", "nan,0,0,0,0"], "`lower` must be finite"),
    "unknown benchmark weight": (lambda f, t, p: ["optimize", f / "pipeline.npz", "--size", "8", "--weights", "mmlu=0.5,nonexistent=0.5"], "nonexistent"),
    "nan benchmark weight": (lambda f, t, p: ["optimize", f / "pipeline.npz", "--size", "8", "--weights", "mmlu=nan"], "'mmlu' has weight nan"),
    "truncated npz": (lambda f, t, p: ["optimize", broken_files(f, p)["truncated"], "--size", "8"], "camel_jax.save"),
    "empty npz": (lambda f, t, p: ["optimize", broken_files(f, p)["empty"], "--size", "8"], "camel_jax.save"),
    "npy file": (lambda f, t, p: ["optimize", broken_files(f, p)["npy"], "--size", "8"], "camel_jax.save"),
    "odd metadata": (lambda f, t, p: ["optimize", broken_files(f, p)["bad json"], "--size", "8"], "camel_jax.save"),
    "design nan budget": (lambda f, t, p: ["design", "--sizes", "4,5,6", "--budget", "nan", "--out", p / "d.csv"], "budget"),
    "design nan cost": (lambda f, t, p: ["design", "--sizes", "4,5,6", "--budget", "10", "--costs", "1,nan,3", "--out", p / "d.csv"], "costs nan"),
    "design duplicated sizes": (lambda f, t, p: ["design", "--sizes", "4,5,5", "--budget", "1e20", "--out", p / "d.csv"], "repeated"),
    "capacity exponent 0": (lambda f, t, p: ["fit", f / "runs.csv", "--capacity-exponent", "0", "--out", p / "fit"], "capacity_exponent"),
    "capacity exponent nan": (lambda f, t, p: ["fit", f / "runs.csv", "--capacity-exponent", "nan", "--out", p / "fit"], "capacity_exponent"),
    "domains 0": (lambda f, t, p: ["fit", f / "runs.csv", "--n-domains", "0", "--out", p / "fit"], "n_domains"),
    "resamples -5": (lambda f, t, p: ["fit", f / "runs.csv", "--resamples=-5", "--out", p / "fit"], "--resamples"),
    "restarts 0": (lambda f, t, p: ["fit", f / "runs.csv", "--restarts", "0", "--out", p / "fit"], "--restarts"),
    "max-steps 0": (lambda f, t, p: ["fit", f / "runs.csv", "--max-steps", "0", "--out", p / "fit"], "--max-steps must be >= 1"),
    "polish -1": (lambda f, t, p: ["fit", f / "runs.csv", "--polish=-1", "--out", p / "fit"], "--polish must be >= 0"),
    "beta-max 0": (lambda f, t, p: ["fit", f / "runs.csv", "--beta-max", "0", "--out", p / "fit"], "--beta-max must be a finite number > 0"),
    "beta-max on sodm": (lambda f, t, p: ["fit", f / "runs.csv", "--law", "sodm", "--beta-max", "3", "--out", p / "fit"], "sodm-additive has none"),
    "dml over several sizes": (lambda f, t, p: ["fit", f / "runs.csv", "--law", "dml", "--out", p / "fit"], "one model size"),
    "unwritable out": (lambda f, t, p: ["fit", f / "runs.csv", "--out", file_as_folder(f, t, p)], "not a writable folder"),
    "semicolon csv": (lambda f, t, p: ["fit", semicolon_csv(f, t, p), "--out", p / "fit"], "separated by ';'"),
    "duplicated csv columns": (lambda f, t, p: ["fit", duplicated_csv(f, t, p), "--out", p / "fit"], r"duplicated column name\(s\) \['r_0'\]"),
    "all-zero mixture column": (lambda f, t, p: ["fit", zero_column_csv(f, t, p), "--out", p / "fit"], "'r_math' is zero in every row"),
    "missing csv": (lambda f, t, p: ["fit", p / "nope.csv", "--out", p / "fit"], "no such file"),
    # issue 30
    "named weights on a loss fit": (lambda f, t, p: ["optimize", f / "camel.npz", "--size", "8", "--weights", "balanced"], "is a loss fit: .*drop it"),
    "unknown named weights": (lambda f, t, p: ["optimize", f / "pipeline.npz", "--size", "8", "--weights", "poetry"], "unknown benchmark weights 'poetry'"),
    "weights on a loss fit": (lambda f, t, p: ["optimize", f / "camel.npz", "--size", "8", "--weights", "mmlu=1"], "is a loss fit"),
    "weights sum to 0": (lambda f, t, p: ["optimize", f / "pipeline.npz", "--size", "8", "--weights", "mmlu=0"], "sum to 0: the score"),
    "weights of 1e-300": (lambda f, t, p: ["optimize", f / "pipeline.npz", "--size", "8", "--weights", "mmlu=1e-300"], "sum to 1e-300"),
    "tokens for a size fit": (lambda f, t, p: ["optimize", f / "camel.npz", "--size", "8", "--tokens", "1e9"], "takes no tokens"),
    "failed fit": (lambda f, t, p: ["optimize", failed_fit(f, p), "--size", "8"], "every start of this fit failed"),
    "fit on one mixture": (lambda f, t, p: ["fit", one_mixture_csv(f, t, p), "--law", "camel-tied", "--out", p / "fit"], "holds 1 distinct mixture"),
    "fit output is a folder": (lambda f, t, p: ["fit", f / "runs.csv", "--out", folder_at(p / "res.png")], "res.png .*is a folder"),
    "design budget below the cheapest run": (lambda f, t, p: ["design", "--sizes", "4,5,6", "--budget", "1", "--out", p / "d.csv"], "below the cheapest run"),
    "design unwritable out": (lambda f, t, p: ["design", "--sizes", "4,5,6", "--budget", "1e30", "--out", file_as_folder(f, t, p)], "not a writable folder"),
    "next empty candidates": (lambda f, t, p: next_argv(f, p, candidates_csv(t, p, rows=0)), "has no rows"),
    "next candidates missing a column": (lambda f, t, p: next_argv(f, p, candidates_csv(t, p, drop="r_math")), r"4 mixture \(r_\*\) column"),
    "next noise nan": (lambda f, t, p: next_argv(f, p, candidates_csv(t, p)) + ["--noise", "nan"], "--noise must be >= 0"),
    "next unwritable out": (lambda f, t, p: next_argv(f, p, candidates_csv(t, p))[:-2] + ["--out", file_as_folder(f, t, p)], "not a writable folder"),
    "next reference off the simplex": (lambda f, t, p: next_argv(f, p, candidates_csv(t, p)) + ["--reference", "0.2,0.2,0.2,0.2,0.15"], "sum to 0.95"),
}  # fmt: skip


def failed_fit(folder, tmp_path):
    import dataclasses

    fitted = cj.load(folder / "camel.npz")
    nan_law = jax.tree.map(lambda a: a * jnp.nan, fitted.law)
    failed = dataclasses.replace(fitted, law=nan_law, objective=jnp.asarray(jnp.inf))
    return cj.save(failed, tmp_path / "failed.npz")


def one_mixture_csv(folder, table, tmp_path):
    path = tmp_path / "one.csv"
    one = table.copy()
    for c in [c for c in table if c.startswith("r_")]:
        one[c] = table[c].iloc[0]
    one.to_csv(path, index=False)
    return path


def folder_at(path):
    path.mkdir()
    return path.with_suffix("")


def candidates_csv(table, tmp_path, rows=None, drop=None, order=None):
    cand = table.drop(columns=["loss"]).assign(flops=1.0)
    cand = cand.iloc[: rows if rows is not None else len(cand)]
    if drop:
        cand = cand.drop(columns=[drop])
    if order:
        cand = cand[order(list(cand.columns))]
    path = tmp_path / f"cand_{rows}_{drop}_{order is not None}.csv"
    cand.to_csv(path, index=False)
    return path


def next_argv(folder, tmp_path, candidates, fit=None):
    return ["next", "--fit", fit or folder / "camel.npz", "--candidates", candidates, "--budget", "1e30", "--size", "8",
            "--resamples", "4", "--out", tmp_path / "d.csv"]  # fmt: skip


@pytest.mark.parametrize("case", list(CLI_CASES))
def test_cli_bad_input_is_one_line_with_rc_2_and_writes_nothing(files, tmp_path, capsys, case):
    folder, table, _ = files
    argv, message = CLI_CASES[case]
    work = tmp_path / "work"
    work.mkdir()
    before = set(work.rglob("*"))
    code, err = run_cli(argv(folder, table, work), capsys)
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and err.startswith("camel-jax "), err
    assert __import__("re").search(message, err), err
    created = {p for p in set(work.rglob("*")) - before if p.suffix in (".json", ".npz", ".png", ".csv")}
    assert not {p for p in created if p.stem in ("fit", "d")}, created


def test_cli_dml_fit_then_optimize_works(files, capsys):
    folder, _, _ = files
    code = cli.main(["optimize", str(folder / "dml.npz")])
    out = capsys.readouterr().out
    assert code == 0 and "at the fitted size" in out and "optimal mixture" in out


def test_cli_failed_output_write_leaves_no_file_behind(files, tmp_path, monkeypatch, capsys):
    folder, _, _ = files
    import camel_jax.io._save

    def fail(obj, file, **options):
        raise OSError("disk full")

    monkeypatch.setattr(camel_jax.io._save, "save_to", fail)
    code = cli.main(
        ["fit", str(folder / "runs.csv"), "--law", "camel-tied", "--restarts", "2", "--resamples", "0", "--out",
         str(tmp_path / "fit")]  # fmt: skip
    )
    err = capsys.readouterr().err
    assert code == 2 and "disk full" in err
    assert not list(tmp_path.iterdir())


def test_bootstrap_chunks_follow_a_memory_budget_and_ctrl_c_keeps_finished_chunks(monkeypatch):
    import camel_jax.fitting._bootstrap as boot_module

    true = known_tied_camel()
    r = jnp.asarray(R5[:, :3] / R5[:, :3].sum(1, keepdims=True))
    M = jnp.asarray(SIZES)
    small = boot_module._chunk_from_memory(true, 12, 4, 8, 10_000)
    large = boot_module._chunk_from_memory(true, 100_000, 4, 8, 10_000)
    assert small >= 1_000 and large == 1  # 12 rows: thousands of resamples per call; 100k rows: one at a time
    real, calls = boot_module._bootstrap_chunk, []

    def interrupted(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(boot_module, "_bootstrap_chunk", interrupted)
    with pytest.warns(UserWarning, match="returning the 4 of 10 resamples"):
        result = cj.bootstrap(true, (r, M), true(r, M), key=jax.random.key(0), n_resamples=10, chunk_size=2, restarts=2, progress=False)
    assert result.n_resamples == 4 and result.resamples.shape == (4, 12)


# --- issue 30: files ---------------------------------------------------------------------------------------------


def test_names_round_trip_and_files_of_format_1_still_load(files, tmp_path):
    import dataclasses

    folder, _, _ = files
    fitted = cj.load(folder / "camel.npz")
    named = dataclasses.replace(fitted, names=("r_a", "r_b", "r_c", "r_d", "r_e"))
    assert cj.load(cj.save(named, tmp_path / "named.npz")).names == named.names
    # a real file of format 1 (written before names and CAMEL's new coordinates) loads, without names
    old = Path(__file__).parent / "data" / "format1_camel_fit.npz"
    assert cj.load(old).names is None
    wrong = tamper(tmp_path / "named.npz", tmp_path / "w.npz", lambda m: m.update(names=["r_a", "r_b"]))
    with pytest.raises(ValueError, match=r"names \['r_a', 'r_b'\] do not match inputs\[0\]"):
        cj.load(wrong)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("y", lambda y: y.at[3].set(jnp.nan), r"`y` has a non-finite value .*row 3"),
        ("y", lambda y: y[:-1], "`y` must have shape"),
        ("weights", lambda w: w.at[0].set(-1.0), "`weights` must be finite and >= 0"),
        ("weights", lambda w: jnp.zeros_like(w), "`weights` are zero for every point"),
        ("inputs", lambda x: (x[0], x[1].at[2].set(jnp.nan)), r"`inputs\[1\]` has a non-finite value at row 2"),
        ("inputs", lambda x: (x[0], x[1][:-1]), "every array in `inputs` must have the same leading length"),
    ],
)
def test_load_validates_the_fitted_data(files, tmp_path, field, value, message):
    import dataclasses

    folder, _, _ = files
    fitted = cj.load(folder / "camel.npz")
    bad = dataclasses.replace(fitted, **{field: value(getattr(fitted, field))})
    path = cj.save(bad, tmp_path / "bad.npz")
    with pytest.raises(ValueError, match=f"bad.npz: the fitted data are invalid: {message}"):
        cj.load(path)


def _npz(path, entries):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return path


def _npy(array, shape=None):
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    data = buffer.getvalue()
    if shape is not None:  # forge the header's declared shape
        data = data.replace(repr(array.shape).encode(), repr(shape).encode().ljust(len(repr(array.shape))), 1)
    return data


def test_load_refuses_deep_metadata_and_huge_declared_arrays_in_one_line(tmp_path):
    deep = "[" * 50_000 + "]" * 50_000
    path = _npz(tmp_path / "deep.npz", {"__meta__.npy": _npy(np.array(deep))})
    with pytest.raises(ValueError, match="nested too deeply") as error:
        cj.load(path)
    assert len(str(error.value).splitlines()) == 1
    meta = _npy(np.array('{"kind": "FitResult"}'))
    huge = _npy(np.zeros(4), shape=(10**6,))
    path = _npz(tmp_path / "huge.npz", {"__meta__.npy": meta, "leaf_0.npy": huge})
    with pytest.raises(ValueError, match=r"leaf_0.npy declares 8000000 bytes of data but holds"):
        cj.load(path)


def test_a_killed_writers_temporary_files_are_removed_by_the_next_save(files, tmp_path):
    import os
    import time

    folder, _, _ = files
    fitted = cj.load(folder / "camel.npz")
    stale, fresh = tmp_path / ".fit.npz.dead.tmp", tmp_path / ".fit.npz.live.tmp"
    for leftover in (stale, fresh):
        leftover.write_bytes(b"partial")
    old = time.time() - 2 * camel_jax_save().STALE_TMP_SECONDS
    os.utime(stale, (old, old))
    cj.save(fitted, tmp_path / "fit.npz")
    assert not stale.exists() and fresh.exists()  # a live writer's file is left alone
    assert cj.load(tmp_path / "fit.npz").names is None


def camel_jax_save():
    import camel_jax.io._save

    return camel_jax.io._save


def test_bounds_within_rounding_of_the_simplex_are_feasible():
    lower = np.array([0.5, 0.3, 0.2 + 1e-10])
    result = cj.optimal_mixture(pipeline(), 3, key=jax.random.key(0), model_size=8.0, lower=lower, restarts=2,
                                ascent=cj.mixture.AscentOptions(adam_steps=5, polish_steps=5))  # fmt: skip
    assert np.allclose(np.asarray(result.r), lower, atol=1e-9)
    with pytest.raises(ValueError, match="lower bounds sum to 1.0001"):
        cj.optimal_mixture(pipeline(), 3, key=jax.random.key(0), model_size=8.0, lower=[0.5, 0.3, 0.2001])


def test_optimize_says_first_when_the_saved_fit_did_not_converge(files, tmp_path, capsys):
    """A mixture optimized on a fit whose best start stopped at the step cap is where its starts stopped: `optimize`
    (and `next`) say so before the answer; the same file marked converged prints no such warning."""
    import dataclasses

    folder, _, _ = files
    saved = cj.load(folder / "camel.npz")
    for code, name in ((cj.Status.MAX_STEPS, "capped.npz"), (cj.Status.CONVERGED, "ok.npz")):
        status = np.full(np.shape(saved.status), int(code))
        marked = dataclasses.replace(saved, status=status, converged=np.full(status.shape, code.is_converged))
        cj.save(marked, tmp_path / name)
    assert cli.main(["optimize", str(tmp_path / "capped.npz"), "--size", "8"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("warning: ") and printed.index("did not converge") < printed.index("optimal mixture:")
    assert cli.main(["optimize", str(tmp_path / "ok.npz"), "--size", "8"]) == 0
    printed = capsys.readouterr().out
    assert "optimal mixture:" in printed and "did not converge" not in printed


# --- issue 30: the CLI's silent decisions are gone ----------------------------------------------------------------


@pytest.fixture(scope="module")
def cli_fit(files, tmp_path_factory):
    """A `camel-jax fit` (tied CAMEL, cheap) whose .npz carries its mixture column names."""
    folder, _, _ = files
    out = tmp_path_factory.mktemp("cli_fit") / "fit"
    code = cli.main(["fit", str(folder / "runs.csv"), "--law", "camel-tied", "--n-domains", "2", "--restarts", "2",
                     "--resamples", "0", "--out", str(out)])  # fmt: skip
    assert code == 0
    return out


def test_fit_solver_steps_are_flags_and_the_step_cap_advice_names_them(files, tmp_path, capsys):
    """`--max-steps` and `--polish` reach the fit and its saved file (what is not given stays the law's default), and
    the advice of a fit stopped at the step cap names the flags a command-line user can act on; `--beta-max` bounds
    the capacity exponents of the fitted law."""
    from camel_jax.cli._names import COMMAND_LINE_ADVICE
    from camel_jax.laws._base import UNCONVERGED_HINT
    from camel_jax.laws._camel_data import CAMELData

    data_hint = CAMELData.sample_init(jax.random.key(0), n_datasets=3, n_domains=1, tokens=False).unconverged_hint()
    ascent = " ".join(cj.mixture._optimize.ascent_problems(np.zeros(2, bool)))
    for library in COMMAND_LINE_ADVICE:  # the texts the command line rewrites are the library's
        assert library in UNCONVERGED_HINT or library in data_hint or library in ascent, library
    folder, _, _ = files
    argv = ["fit", str(folder / "runs.csv"), "--law", "camel-tied", "--n-domains", "2", "--restarts", "2",
            "--resamples", "0", "--no-calibrate", "--max-steps", "3", "--polish", "0", "--out", str(tmp_path / "capped")]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "did not converge" in printed and "--max-steps" in printed and "FitOptions(" not in printed, printed
    options = cj.load(tmp_path / "capped.npz").fit_options
    assert (options.max_steps, options.polish) == (3, 0)
    assert cli.main(["optimize", str(tmp_path / "capped.npz"), "--size", "8"]) == 0
    printed = capsys.readouterr().out
    assert "did not converge" in printed and "--max-steps" in printed and "FitOptions(" not in printed, printed
    argv = ["fit", str(folder / "runs.csv"), "--law", "camel-tied", "--n-domains", "2", "--restarts", "2",
            "--resamples", "0", "--no-calibrate", "--max-steps", "1500", "--out", str(tmp_path / "longer")]
    assert cli.main(argv) == 0
    capsys.readouterr()
    options = cj.load(tmp_path / "longer.npz").fit_options
    assert (options.max_steps, options.polish) == (1500, cj.FitOptions().polish)
    argv = ["fit", str(folder / "runs.csv"), "--law", "camel-tied", "--n-domains", "2", "--restarts", "2",
            "--resamples", "0", "--no-calibrate", "--beta-max", "2.5", "--out", str(tmp_path / "bounded")]
    assert cli.main(argv) == 0
    capsys.readouterr()
    law = cj.load(tmp_path / "bounded.npz").law
    assert law.beta_max == 2.5 and np.all(np.asarray(law.beta) <= 2.5)


def test_a_fit_file_names_its_columns_and_optimize_prints_named_weights(files, cli_fit, capsys):
    _, table, _ = files
    assert cj.load(f"{cli_fit}.npz").names == tuple(c for c in table if c.startswith("r_"))
    capsys.readouterr()
    assert cli.main(["optimize", f"{cli_fit}.npz", "--size", "8"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("optimal mixture"))
    assert [part.split()[0] for part in line.removeprefix("optimal mixture: ").split(", ")] == list(table.columns[:5])


def test_next_matches_candidate_columns_by_name(files, cli_fit, tmp_path, capsys):
    """Before: the candidates' columns were taken by position, so a reordered table ranked differently."""
    _, table, _ = files
    capsys.readouterr()
    plain = candidates_csv(table, tmp_path)
    reordered = candidates_csv(table, tmp_path, order=lambda columns: columns[::-1])
    outputs = []
    for candidates in (plain, reordered):
        argv = next_argv(None, tmp_path, candidates, fit=f"{cli_fit}.npz")[:-2] + ["--batch", "3"]
        assert cli.main([str(a) for a in argv]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and "candidate row" in outputs[0]
    missing = candidates_csv(table, tmp_path, drop="r_math")
    code, err = run_cli(next_argv(None, tmp_path, missing, fit=f"{cli_fit}.npz"), capsys)
    assert code == 2 and "has no column 'r_math'" in err and len(err.splitlines()) == 1
    extra = tmp_path / "extra.csv"
    pd.read_csv(plain).assign(r_extra=0.0).to_csv(extra, index=False)
    code, err = run_cli(next_argv(None, tmp_path, extra, fit=f"{cli_fit}.npz"), capsys)
    assert code == 2 and "mixture column 'r_extra' the fit never saw" in err


def test_a_failed_write_keeps_the_previous_runs_outputs(files, cli_fit, tmp_path, monkeypatch, capsys):
    """Before: the rollback of a failed write deleted the .json and .npz an earlier run had left at --out."""
    import matplotlib.figure

    folder, _, _ = files
    prefix = tmp_path / "fit"
    for suffix in (".json", ".npz", ".png"):
        Path(f"{prefix}{suffix}").write_bytes(b"earlier run")

    def disk_full(*args, **kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", disk_full)
    code, err = run_cli(["fit", folder / "runs.csv", "--law", "camel-tied", "--n-domains", "2", "--restarts", "2",
                         "--resamples", "0", "--out", prefix], capsys)  # fmt: skip
    assert code == 2 and "No space left" in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.json", "fit.npz", "fit.png"]  # no temporaries
    assert all(Path(f"{prefix}{s}").read_bytes() == b"earlier run" for s in (".json", ".npz", ".png"))


def test_ctrl_c_is_one_line_with_rc_130_and_a_finished_fit_is_kept(files, tmp_path, monkeypatch, capsys):
    folder, _, _ = files

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fit_command, "_intervals", interrupt)
    argv = ["fit", folder / "runs.csv", "--law", "camel-tied", "--n-domains", "2", "--restarts", "2", "--out",
            tmp_path / "fit"]  # fmt: skip
    code, err = run_cli(argv, capsys)
    assert code == 0 and "without intervals" in err and (tmp_path / "fit.npz").is_file()
    monkeypatch.setattr(fit_command, "_fit_columns", interrupt)
    code, err = run_cli(argv[:-1] + [tmp_path / "other"], capsys)
    assert code == 130 and err == "camel-jax fit: interrupted" and not (tmp_path / "other.npz").exists()


@pytest.fixture(scope="module")
def token_fit(files, tmp_path_factory):
    """`camel-jax fit` of a token-aware law on a table with a tokens column."""
    folder = tmp_path_factory.mktemp("tokens")
    world = simulate.default_world(jax.random.key(0))
    runs = world.runs(cj.experiments.perturbed_mixtures([0.35, 0.25, 0.15, 0.1, 0.15]), [4.0, 6.0, 8.0])
    table = runs.rename(columns={"loss_val0": "loss"})[[f"r_{d}" for d in world.datasets] + ["size", "tokens", "loss"]]
    table.to_csv(folder / "runs.csv", index=False)
    code = cli.main(["fit", str(folder / "runs.csv"), "--law", "camel-data-tied", "--n-domains", "2", "--restarts", "2",
                     "--resamples", "0", "--out", str(folder / "fit")])  # fmt: skip
    assert code == 0
    return folder / "fit.npz", table


def test_optimize_a_token_aware_fit_needs_tokens(token_fit, capsys):
    """Before: `camel-jax optimize fit.npz --size 64` failed with 'takes 3 inputs; got 2' and had no --tokens."""
    path, table = token_fit
    capsys.readouterr()
    code, err = run_cli(["optimize", path, "--size", "64"], capsys)
    assert code == 2 and "pass --tokens" in err and len(err.splitlines()) == 1
    assert cli.main(["optimize", str(path), "--size", "64", "--tokens", "1e12"]) == 0
    out = capsys.readouterr().out
    assert "tokens 1e+12" in out and "optimal mixture: r_english" in out and "far outside the trained sizes" in out


def test_the_token_path_of_the_figure_passes_through_the_runs():
    """Before: token-aware laws were drawn at the median token count, flat lines far from every point."""
    size = jnp.asarray([4.0, 4.0, 6.0, 8.0])
    data = cj.MixtureData(np.tile([[0.5, 0.5]], (4, 1)), jnp.ones(4), size=size, tokens=20 * size**1.1)
    path = fit_command._token_path(lambda r, s, t: t, data)
    assert np.allclose(np.asarray(path(None, size)), np.asarray(data.tokens), rtol=1e-12)


def test_auto_prefers_the_simpler_law_within_one_standard_error():
    errors = {"camel-free": 0.158, "camel-tied": 0.163, "sodm-additive": 0.40}
    n_params = {"camel-free": 25, "camel-tied": 12, "sodm-additive": 20}
    assert simplest_within(errors, n_params, "camel-free", se=0.01) == "camel-tied"
    assert simplest_within(errors, n_params, "camel-free", se=0.001) == "camel-free"  # beyond the noise: the best
    assert simplest_within(errors, n_params, "camel-free", se=np.nan) == "camel-free"


def test_collinear_tokens_and_size_are_said(capsys):
    size = np.repeat([4.0, 6.0, 8.0], 2)
    table = fit_command._Table((np.ones((6, 2)) / 2, size, 20 * size), np.ones(6), ["r_a", "r_b"], "size", "tokens")
    fit_command._warn_collinear(table)
    assert "tokens and size are collinear" in capsys.readouterr().out
    table = fit_command._Table((np.ones((6, 2)) / 2, size, 20 * size * np.r_[1, 3, 1, 3, 1, 3]), np.ones(6), ["r_a", "r_b"],
                       "size", "tokens")  # fmt: skip
    fit_command._warn_collinear(table)
    assert capsys.readouterr().out == ""


def test_extrapolation_error_with_its_default_n_points_fits_every_training_run():
    """Before: the default `n_points=None` was a range error."""
    data = cj.MixtureData(R5, 3.0 + 0.1 * R5[:, 0], size=SIZES)
    options = cj.FitOptions(max_steps=3, polish=0)
    frame = cj.experiments.extrapolation_error(camel5(), data, [4.0, 6.0], 8.0, key=jax.random.key(0), restarts=1, options=options)
    assert len(frame) == 1 and int(frame["n_train"].iloc[0]) == 8 and np.isfinite(frame["error_se"].iloc[0])


def test_a_fit_on_one_mixture_says_no_mixture_can_be_recommended():
    with pytest.warns(UserWarning, match="the data hold one mixture"):
        cj.fit(camel5(), (np.tile(R5[:1], (12, 1)), SIZES), y12, key=jax.random.key(0), restarts=1,
               options=cj.FitOptions(max_steps=2, polish=0))  # fmt: skip


def test_next_mixture_names_the_columns_of_an_unnamed_fit(files, tmp_path, capsys):
    """A fit saved without names (format 1, or a fit of arrays): the candidates' columns are named on the command line,
    and a wrong count is an error naming both."""
    folder, table, _ = files
    candidates = candidates_csv(table, tmp_path, order=lambda columns: columns[::-1])
    code, err = run_cli(next_argv(folder, tmp_path, candidates) + ["--mixture", "r_english,r_chinese"], capsys)
    assert code == 2 and "--mixture names 2 column(s); the fit has 5 datasets" in err


def test_a_named_pipeline_keeps_its_columns_and_next_runs_matches_them_by_name(tmp_path):
    """Before: next_runs took the candidates' r_* columns by position, so a reordered table ranked differently."""
    point = pipeline()
    named = cj.Pipeline(point.loss_laws, point.benchmark_laws, {"mmlu": 1.0}, datasets=("r_a", "r_b", "r_c"))
    assert cj.load(cj.save(named, tmp_path / "named.npz")).datasets == ("r_a", "r_b", "r_c")
    ensemble = jax.tree.map(lambda a: jnp.stack([a, 1.01 * a, 0.98 * a]), named)
    table = candidates().assign(size=np.tile([4.0, 8.0, 16.0], 4))

    def rank(frame):
        out = cj.next_runs(ensemble, frame, budget=3.0, target_size=16.0, key=jax.random.key(0), batch=3, noise=1e-4)
        return out.index.tolist(), out["score"].to_numpy()

    index, score = rank(table)
    reordered_index, reordered_score = rank(table[["flops", "r_c", "size", "r_a", "r_b"]])
    assert index == reordered_index and np.allclose(score, reordered_score, rtol=1e-12)
    with pytest.raises(ValueError, match="`candidates` has no column 'r_b'; the fit's mixture columns are"):
        rank(table.drop(columns="r_b"))
    with pytest.raises(ValueError, match="mixture column 'r_d' the fit never saw"):
        rank(table.assign(r_d=0.0))


def test_an_accuracy_below_0_is_said():
    """Noisy accuracies near a chance level of 0 may dip below it (simulated worlds do): fitted, with a warning."""
    with pytest.warns(UserWarning, match=r"is -0.1 at row 11 \(1 value\(s\) below 0\): accuracies are fractions"):
        cj.BenchmarkData(R5[:, :2], np.r_[np.full(11, 0.5), -0.1])
