"""The weak doors of issue 57, each closed: a careless input gets one line before any compute, or a warning that
travels with the result (`FitResult.problems()`) to every decision resting on it; files honour the umask; the
command line prints warnings as `warning:` lines and answers `--help` without importing JAX."""

import dataclasses
import io
import os
import stat
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from helpers import known_tied_camel, tamper

import camel_jax as cj
from camel_jax import cli, simulate
from camel_jax._progress import progress_bar
from camel_jax.cli import optimize as optimize_cli

SIZES = [4.0, 6.0, 8.0]


@pytest.fixture(scope="module")
def runs():
    """The default world's runs at three sizes (5 datasets, 11 perturbed mixtures each) and one cheap tied CAMEL fit
    of them: the point here is the doors, not the fit."""
    world = simulate.default_world(jax.random.key(0))
    table = world.runs(cj.experiments.perturbed_mixtures([0.35, 0.25, 0.15, 0.1, 0.15]), SIZES)
    data = world.mixture_data(table, "loss_val0")
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=2, tied=True, capacity_exponent=3.0)
    return data, law


def cheap_fit(data, law, weights=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cj.fit(law, data.inputs, data.y, key=jax.random.key(0), restarts=2, weights=weights,
                      options=cj.FitOptions(max_steps=20, polish=0))  # fmt: skip


# --- warnings that travel with the fit ------------------------------------------------------------------------


def test_a_two_size_fit_and_a_one_mixture_fit_say_so_in_problems(runs):
    """Before: both warned at `fit`, but `problems()` was empty, so `optimize` answered with confidence."""
    data, law = runs
    size = np.asarray(data.size)
    two_sizes = cheap_fit(data, law, weights=(size < 8.0).astype(float))
    assert any("2 distinct model sizes" in p for p in two_sizes.problems())
    assert any("2 distinct model sizes" in p for p in two_sizes.summary(identify=False)["problems"])
    first = np.all(np.isclose(np.asarray(data.r), np.asarray(data.r)[0]), axis=1)
    one_mixture = cheap_fit(data, law, weights=first.astype(float))
    assert any("one mixture" in p for p in one_mixture.problems())
    every = cheap_fit(data, law)
    assert not any("distinct model sizes" in p or "one mixture" in p for p in every.problems())


def test_fit_warns_a_design_problem_once(runs):
    data, law = runs
    weights = (np.asarray(data.size) < 8.0).astype(float)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cj.fit(law, data.inputs, data.y, key=jax.random.key(0), restarts=2, weights=weights,
               options=cj.FitOptions(max_steps=20, polish=0))  # fmt: skip
    assert sum("distinct model sizes" in str(w.message) for w in caught) == 1


def test_optimize_prints_a_saved_fits_design_problem_before_its_answer(runs, tmp_path, capsys):
    data, law = runs
    saved = cj.save(cheap_fit(data, law, weights=(np.asarray(data.size) < 8.0).astype(float)), tmp_path / "two.npz")
    capsys.readouterr()
    assert cli.main(["optimize", str(saved), "--size", "8"]) == 0
    out = capsys.readouterr().out
    assert "warning:" in out and out.index("distinct model sizes") < out.index("optimal mixture:")


def test_a_float32_fit_says_its_stopping_rule_is_float32s():
    law = cj.PowerLaw.from_params(E=np.float32(2.0), A=np.float32(5.0), alpha=np.float32(0.6))
    x = jnp.linspace(1.0, 30.0, 20, dtype=jnp.float32)
    init = jax.vmap(lambda k: cj.PowerLaw.sample_init(k))(jax.random.split(jax.random.key(0), 4))
    init = jax.tree.map(lambda a: a.astype(jnp.float32), init)
    with pytest.warns(cj.FitWarning, match="float32"):
        result = cj.fit(law, (x,), law(x), key=jax.random.key(0), inits=init)
    assert any("float32" in p for p in result.problems())
    law = cj.PowerLaw.from_params(E=2.0, A=5.0, alpha=0.6)
    double = cj.fit(law, (x.astype(jnp.float64),), law(x.astype(jnp.float64)), key=jax.random.key(0), restarts=4)
    assert not any("float32" in p for p in double.problems())


def test_target_fit_is_one_target_of_a_fit_of_several(runs):
    data, law = runs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        two = cj.fit(law, data.inputs, jnp.stack([data.y, 1.1 * data.y]), key=jax.random.key(0), restarts=2,
                     options=cj.FitOptions(max_steps=20, polish=0))  # fmt: skip
    for t in (0, 1):
        one = two.target_fit(t)
        assert one.n_targets is None and one.bootstrap is None
        np.testing.assert_array_equal(one.predict(*data.inputs), two.predict(*data.inputs)[t])
        np.testing.assert_array_equal(one.y, two.y[t])
        np.testing.assert_array_equal(one.status, two.status[t])
        assert one.degenerate() == two.degenerate_by_target()[t]
    one = two.target_fit(0)
    assert one.target_fit(0) is one  # a fit of one target is its own target 0
    for bad in (2, -1):
        with pytest.raises(ValueError, match="`t` must be a target index in \\[0, 2\\); got"):
            two.target_fit(bad)
    for bad in (1.0, True):
        with pytest.raises(TypeError, match="`t` must be an integer target index"):
            two.target_fit(bad)


def test_a_degenerate_loss_to_benchmark_fit_travels_with_the_pipeline_to_its_file_and_the_cli(
    runs, tmp_path, capsys, monkeypatch
):
    """Before: `fit_pipeline` kept the proxy-loss fit's problems only; a loss-to-benchmark law the solver ran to a
    limit reached no decision, file or command line. And its resampled fits were checked for convergence only."""
    from camel_jax.mixture import _pipeline
    from camel_jax.mixture._pipeline import _benchmark_fit_problems

    data, law = runs
    world = simulate.default_world(jax.random.key(0))
    table = world.runs(cj.experiments.perturbed_mixtures([0.35, 0.25, 0.15, 0.1, 0.15]), SIZES)
    losses = ["loss_val0", "loss_val1"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = cj.fit_benchmarks(table, losses=losses, benchmarks=["acc_mmlu", "acc_gsm8k"], names=["mmlu", "gsm8k"],
                                 key=jax.random.key(1), restarts=2)  # fmt: skip
    assert _benchmark_fit_problems(fits, ["mmlu", "gsm8k"])[1] == ()
    ran_off = fits.result.law.C.at[1].set(1e12)  # gsm8k's level, where a solver that ran to a limit leaves it
    broken = dataclasses.replace(fits, result=dataclasses.replace(fits.result, law=dataclasses.replace(
        fits.result.law, C=ran_off)))  # fmt: skip
    said, degenerate = _benchmark_fit_problems(broken, ["mmlu", "gsm8k"])
    assert degenerate == ("gsm8k",)
    assert any(p.startswith("the loss-to-benchmark fit of gsm8k: degenerate fit: C:") for p in said)
    mmlu = tuple(f"the loss-to-benchmark fit of mmlu: {p}" for p in fits.result.target_fit(0).problems())
    assert said[: len(mmlu)] == mmlu and all("of gsm8k" in p for p in said[len(mmlu) :])  # each its own row's
    assert _benchmark_fit_problems(broken, ["mmlu"]) == (mmlu, ())
    flagged, real = {}, _pipeline.degenerate_batch

    def first_flagged(laws, inputs, y, weights):  # the rule, and each batch's first resample said degenerate
        found = real(laws, inputs, y, weights)
        stage = "loss-to-benchmark" if isinstance(laws, cj.LossToBenchmark) else "proxy-loss"
        flagged[stage] = flagged.get(stage, 0) + 1 + sum(bool(f) for f in found[1:])
        return [{"C": "said by the test"}] + found[1:]

    monkeypatch.setattr(_pipeline, "degenerate_batch", first_flagged)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        piped = cj.fit_pipeline(data, broken, {"mmlu": 0.5, "gsm8k": 0.5}, law=law, key=jax.random.key(2),
                                restarts=2, options=cj.FitOptions(max_steps=20, polish=0, log_residuals=False),
                                n_resamples=2, calibrate=False)  # fmt: skip
    assert piped.benchmark_problems == said and piped.degenerate_benchmarks == ("gsm8k",)
    # both stages' resampled fits are checked, one batch per benchmark, and their count is said with its remedy
    for stage, remedy in [("proxy-loss", "token-aware law"), ("loss-to-benchmark", "two_stage=False")]:
        told = [p for p in piped.resample_problems if f"resampled {stage} fits are degenerate" in p]
        assert len(told) == 1 and told[0].startswith(f"{flagged[stage]} of 4 ") and remedy in told[0], stage
    # 20 steps leave the resampled proxy-loss fits (2 benchmarks x 2 resamples) short of their stopping rule
    late = [p for p in piped.resample_problems if "of 4 resampled proxy-loss fits did not converge (max steps)" in p]
    assert len(late) == 1 and "fit_pipeline(options=" in late[0]
    assert piped.problems() == piped.loss_fit.problems() + list(said) + list(piped.resample_problems)
    saved = cj.save(piped, tmp_path / "piped.npz")
    back = cj.load(saved)
    assert back.benchmark_problems == said and back.degenerate_benchmarks == ("gsm8k",)
    assert back.resample_problems == piped.resample_problems
    capsys.readouterr()
    assert cli.main(["optimize", str(saved), "--size", "8"]) == 0
    out = capsys.readouterr().out
    warned = [line for line in out.splitlines() if "the loss-to-benchmark fit of gsm8k: degenerate fit" in line]
    assert warned and warned[0].startswith("warning: ") and out.index(warned[0]) < out.index("optimal mixture:")
    assert "resampled proxy-loss fits did not converge" in out[: out.index("optimal mixture:")]
    assert "resampled loss-to-benchmark fits are degenerate" in out[: out.index("optimal mixture:")]
    bad = tamper(saved, tmp_path / "bad.npz", edit_meta=lambda m: m.update(degenerate_benchmarks=["hellaswag"]))
    with pytest.raises(ValueError, match="degenerate_benchmarks names \\['hellaswag'\\], not benchmarks"):
        cj.load(bad)
    bad = tamper(saved, tmp_path / "bad2.npz", edit_meta=lambda m: m.update(benchmark_problems="C inf"))
    with pytest.raises(ValueError, match="benchmark_problems must be a list of strings"):
        cj.load(bad)


def test_the_pipelines_resampled_fits_are_degenerate_row_by_row_by_the_rule_of_one_law(runs):
    """Each row of a resampled multi-target fit (benchmark-major: T benchmarks x B resamples) is judged as that law
    alone would be, on its own weights and its benchmark's targets; the count is said once with the remedy."""
    from camel_jax.fitting._degenerate import degenerate_parameters
    from camel_jax.mixture._pipeline import _resample_problems

    data, law = runs
    targets = jnp.stack([data.y, 1.1 * data.y])  # two benchmarks' proxy losses [T, P]
    counts = jnp.asarray(np.random.default_rng(0).integers(0, 3, (2, data.n_points)), targets.dtype)
    weights = jnp.concatenate([counts, counts])  # [T * B, P]: the same 2 resamples for each benchmark
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refit = cj.fit(law, data.inputs, jnp.repeat(targets, 2, axis=0), weights=weights, key=jax.random.key(0),
                       restarts=2, options=cj.FitOptions(max_steps=20, polish=0))  # fmt: skip
    ran_off = refit.law.C1.at[jnp.asarray([1, 2])].set(1e12)  # a level the solver ran to, in rows 1 and 2
    broken = dataclasses.replace(refit, law=dataclasses.replace(refit.law, C1=ran_off))
    for result in (refit, broken):
        alone = [bool(degenerate_parameters(one, data.inputs, targets[i // 2], weights[i]))
                 for i, one in enumerate(result.target_laws())]  # fmt: skip
        said = [p for p in _resample_problems(result, "proxy-loss", "FIX", (targets, "HINT")) if "degenerate" in p]
        assert len(said) == (1 if any(alone) else 0)
        if said:
            assert said[0].startswith(f"{sum(alone)} of 4 resampled proxy-loss fits are degenerate")
            assert said[0].endswith("; HINT")
    assert alone[1] and alone[2]


# --- far extrapolation and a loss that is no loss ---------------------------------------------------------------


def test_a_far_extrapolation_warns_in_the_api_and_a_non_positive_loss_is_no_answer(runs):
    data, law = runs
    fitted = cheap_fit(data, law)
    from camel_jax.mixture._optimize import extrapolation_problem

    assert extrapolation_problem(fitted, 8.0 * 3) is None
    assert "far outside the trained sizes [4, 8]" in extrapolation_problem(fitted, 1e12)
    pipeline = cj.Pipeline({"mmlu": known_tied_camel()}, {"mmlu": cj.LossToBenchmark.from_params(k=[1.0], A=0.7,
                           B=-2.0, C=0.25)}, {"mmlu": 1.0})  # fmt: skip
    r3 = fitted.inputs[0][:, :3] / fitted.inputs[0][:, :3].sum(1, keepdims=True)  # the pipeline's 3 datasets
    fitted_3 = dataclasses.replace(fitted, inputs=(r3, fitted.inputs[1]))
    piped = cj.PipelineFit(pipeline=pipeline, pipelines=None, loss_fit=fitted_3, resamples=None)
    with pytest.warns(UserWarning, match="far outside the trained sizes"):
        cj.optimal_mixture(piped, pipeline.n_datasets, key=jax.random.key(0), model_size=1e12, restarts=2)

    class Ascended:
        value = jnp.asarray(0.25)  # the maximized score is minus the loss: a predicted loss of -0.25

    with pytest.raises(cli.UserError, match="predicts a loss of -0.25 at size 1e"):
        optimize_cli._predicted_loss(Ascended(), "size 1e+12")
    Ascended.value = jnp.asarray(-2.5)
    assert optimize_cli._predicted_loss(Ascended(), "size 8") == 2.5


# --- load ------------------------------------------------------------------------------------------------------


def test_load_refuses_a_law_of_nans_and_a_negative_mixture_and_reads_a_big_endian_file(runs, tmp_path):
    data, law = runs
    fitted = cheap_fit(data, law)
    nan = dataclasses.replace(fitted, law=jax.tree.map(lambda a: a * jnp.nan, fitted.law),
                              objective=jnp.asarray(jnp.nan))  # fmt: skip
    with pytest.raises(ValueError, match="field `law` holds non-finite .* every start of this fit failed"):
        cj.load(cj.save(nan, tmp_path / "nan.npz"))
    r = np.asarray(fitted.inputs[0]).copy()
    r[3] += np.array([-1.0, 0.25, 0.25, 0.25, 0.25])  # still sums to 1, one weight below 0
    shifted = dataclasses.replace(fitted, inputs=(jnp.asarray(r), fitted.inputs[1]))
    with pytest.raises(ValueError, match=r"field `inputs` is invalid: .*negative weight .* row 3"):
        cj.load(cj.save(shifted, tmp_path / "shifted.npz"))
    saved = cj.save(fitted, tmp_path / "fit.npz")
    with np.load(saved) as stored:
        arrays = {k: (v.astype(v.dtype.newbyteorder(">")) if v.dtype.kind in "biuf" else v) for k, v in stored.items()}
    np.savez(tmp_path / "big.npz", **arrays)
    assert np.asarray(jax.tree.leaves(cj.load(tmp_path / "big.npz").law)[0]).dtype.isnative
    big, native = cj.load(tmp_path / "big.npz"), cj.load(saved)
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(big.law), jax.tree.leaves(native.law)))


@pytest.mark.skipif(os.name != "posix", reason="file modes")
def test_files_honour_the_umask_and_keep_an_existing_files_mode(runs, tmp_path):
    data, law = runs
    fitted = cheap_fit(data, law)
    old = os.umask(0o022)
    try:
        fresh = cj.save(fitted, tmp_path / "fresh.npz")
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o644
        os.umask(0o077)
        assert stat.S_IMODE(cj.save(fitted, tmp_path / "private.npz").stat().st_mode) == 0o600
        fresh.chmod(0o640)
        assert stat.S_IMODE(cj.save(fitted, fresh).stat().st_mode) == 0o640
    finally:
        os.umask(old)


# --- internal errors become one line ---------------------------------------------------------------------------


def test_fit_under_a_transform_or_with_one_start_is_one_line(runs):
    data, law = runs
    r, size = (np.asarray(x) for x in data.inputs)
    y = np.asarray(data.y)
    with pytest.raises(TypeError, match="cannot run under jax.jit, jax.vmap or jax.grad: use `fit_arrays`"):
        jax.jit(lambda y: cj.fit(law, (r, size), y, key=jax.random.key(0), restarts=2).objective)(y)
    with pytest.raises(TypeError, match="use `fit_arrays`"):
        jax.vmap(lambda y: cj.fit(law, (r, size), y, key=jax.random.key(0), restarts=2).objective)(np.stack([y, y]))
    with pytest.raises(ValueError, match="`inits` must be a batch of starts"):
        cj.fit(law, (r, size), y, key=jax.random.key(0), inits=law)


def test_careless_arguments_of_the_design_and_protocol_are_one_line(runs):
    data, law = runs
    table = pd.DataFrame({"size": [1.0, 1.0, 2.0, 2.0], "flops": [1.0, 1.0, 2.0, 2.0]})
    with pytest.raises(TypeError, match="`key` must be a jax.random key"):
        cj.experiments.sample_design("rectangle", table, 10.0, 0)
    with pytest.raises(TypeError, match="`budget` must be a number"):
        cj.experiments.allocate("rectangle", [1.0, 2.0], [1.0, 2.0], "100", 3)
    with pytest.raises(ValueError, match="`repeats` must be >= 1"):
        cj.experiments.extrapolation_error(law, data, [4.0, 6.0], 8.0, n_points=10, repeats=0, key=jax.random.key(0))


def test_optimal_mixture_refuses_a_score_of_another_size_a_nan_score_and_a_percent_shift():
    law = known_tied_camel()  # 3 datasets
    size = jnp.asarray([1.0])
    with pytest.raises(ValueError, match="n_datasets=4 .* is `n_datasets` the number of datasets"):
        cj.optimal_mixture(lambda r: -law(r[None], size)[0], 4, key=jax.random.key(0), restarts=2)
    with pytest.raises(ValueError, match="not finite .* at any of the 2 starts"):
        cj.optimal_mixture(lambda r: jnp.nan * r[0], 3, key=jax.random.key(0), restarts=2)
    with pytest.raises(ValueError, match=r"fraction of the reference \(0.2 for \+-20%\); got 20"):
        cj.optimal_mixture(lambda r: -law(r[None], size)[0], 3, key=jax.random.key(0), reference=[0.4, 0.3, 0.3],
                           max_shift=20.0)  # fmt: skip


# --- the data layer --------------------------------------------------------------------------------------------


def test_exact_duplicate_rows_warn_and_a_boolean_column_is_refused():
    table = pd.DataFrame({"r_a": [0.5, 0.2, 0.5], "r_b": [0.5, 0.8, 0.5], "size": [1.0, 2.0, 1.0],
                          "loss": [3.0, 2.5, 3.0]})  # fmt: skip
    with pytest.warns(UserWarning, match=r"1 row\(s\) repeat another row exactly \(e.g. row 0\)"):
        cj.MixtureData.from_frame(table, mixture=["r_a", "r_b"], target="loss", size="size")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cj.MixtureData.from_frame(table.assign(loss=[3.0, 2.5, 3.01]), mixture=["r_a", "r_b"], target="loss",
                                  size="size")  # fmt: skip
    with pytest.raises(ValueError, match="column 'size' holds True/False values"):
        cj.MixtureData.from_frame(table.assign(size=[True, True, True]), mixture=["r_a", "r_b"], target="loss",
                                  size="size")  # fmt: skip


# --- the command line ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved(runs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("doors")
    data, law = runs
    fit_path = cj.save(cheap_fit(data, law), folder / "fit.npz")
    bench = {"mmlu": cj.LossToBenchmark.from_params(k=[1.0], A=0.7, B=-2.0, C=0.25)}
    pipeline = cj.save(cj.Pipeline({"mmlu": known_tied_camel()}, bench, {"mmlu": 1.0}), folder / "pipeline.npz")
    return fit_path, pipeline


def run_cli(argv, capsys):
    capsys.readouterr()
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--max-shift", "20", "--reference", "0.2,0.2,0.2,0.2,0.2"], "--max-shift is a fraction of the reference"),
        (["--weights", "mmlu=0.5,mmlu=0.5"], "--weights names 'mmlu' twice"),
    ],
    ids=["max-shift-percent", "weights-twice"],
)
def test_optimize_refuses_what_it_accepted_without_a_word(saved, capsys, argv, message):
    fit_path, pipeline = saved
    path = pipeline if "--weights" in argv else fit_path
    code, _, err = run_cli(["optimize", str(path), "--size", "8", *argv], capsys)
    assert code == 2 and message in err and len(err.splitlines()) == 1


def test_cli_messages_name_a_folder_and_read_negative_lists(saved, tmp_path, capsys):
    fit_path, _ = saved
    code, _, err = run_cli(["optimize", str(tmp_path), "--size", "8"], capsys)
    assert code == 2 and "is a folder, not a file" in err
    # a list starting with '-' is the option's value, not an option: the bounds' own check answers
    code, _, err = run_cli(["optimize", str(fit_path), "--size", "8", "--lower", "-0.1,0,0,0,0"], capsys)
    assert code == 2 and "expected one argument" not in err and "bounds must lie in [0, 1]" in err
    code, _, err = run_cli(["design", "--sizes", "1,2", "--budget", "10", "--costs", "-1,2",
                            "--out", str(tmp_path / "d.csv")], capsys)  # fmt: skip
    assert code == 2 and err.endswith("--costs must be > 0 (FLOPs of one run); size 1 costs -1")
    candidates = tmp_path / "candidates.csv"
    pd.DataFrame({**{f"r_{j}": [0.2] for j in range(5)}, "size": [4.0], "flops": [-3.0]}).to_csv(candidates)
    code, _, err = run_cli(["next", "--fit", str(fit_path), "--candidates", str(candidates), "--budget", "1",
                            "--size", "8", "--mixture", ",".join(f"r_{j}" for j in range(5))], capsys)  # fmt: skip
    assert code == 2 and "(cost of a run) must be > 0" in err and "(target)" not in err


def test_cli_prints_python_warnings_as_warning_lines(saved, capsys):
    fit_path, _ = saved
    code, out, err = run_cli(["optimize", str(fit_path), "--size", "1000"], capsys)
    lines = [line for line in out.splitlines() if "far outside the trained sizes" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: size 1000")
    assert "UserWarning" not in out + err and "sys.exit(main())" not in out + err


def test_the_parser_imports_no_jax_numpy_or_pandas():
    """`camel-jax --help` and argument errors answer without the libraries the work needs (timings are in the
    issue's note, not asserted here)."""
    code = ("import sys, camel_jax.cli as c; c._parser(); "
            "print(sorted(m for m in ('jax', 'numpy', 'pandas') if m in sys.modules))")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_parsers_law_names_are_the_registry():
    from camel_jax.cli import _names
    from camel_jax.laws._camel import CAPACITY_EXPONENT
    from camel_jax.laws._registry import LAW_NAMES

    assert _names.LAW_NAMES == LAW_NAMES and _names.CAPACITY_EXPONENT == CAPACITY_EXPONENT
    from camel_jax.mixture._export import EXPORT_FORMATS

    assert _names.EXPORT_FORMATS == dict(EXPORT_FORMATS)
    from camel_jax.data._formats import FORMATS

    assert _names.READER_FORMATS == FORMATS


def test_the_progress_bar_draws_counts_on_a_terminal_only():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen, pipe = Terminal(), io.StringIO()
    for done in range(4):
        progress_bar(done, 3, "held-out fits", "laws", stream=screen)
        progress_bar(done, 3, "held-out fits", "laws", stream=pipe)
    assert pipe.getvalue() == ""
    assert screen.getvalue().count("\r") == 4 and screen.getvalue().endswith("3/3 laws\n")
    assert "1/3 laws" in screen.getvalue() and "[" + "#" * 10 + "." * 20 + "]" in screen.getvalue()
