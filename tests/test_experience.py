"""The user's experience: CLI, save/load round trips, plots rendered to PNG (the demo: test_demo_figures.py)."""

import dataclasses
import json
import subprocess
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from helpers import known_tied_camel, make_case

import camel_jax as cj  # noqa: E402
from camel_jax import cli, plot, simulate  # noqa: E402
from camel_jax.cli import fit as cli_fit  # noqa: E402


@pytest.fixture(scope="module")
def runs_csv(tmp_path_factory):
    world = simulate.default_world(jax.random.key(0))
    runs = world.runs(
        cj.experiments.perturbed_mixtures([0.35, 0.25, 0.15, 0.1, 0.15]), [4.0, 6.0, 8.0,
                                                                           10.0], noise=0.002, key=jax.random.key(1)
    )
    table = runs.rename(columns={"loss_val0": "loss"})[
        [c for c in runs.columns if c.startswith("r_")] + ["size", "tokens", "loss"]
    ]
    path = tmp_path_factory.mktemp("cli") / "runs.csv"
    table.to_csv(path, index=False)
    return path


# 59 s: the CLI's fit and optimize; the loop and decision tests run both at CI size
@pytest.mark.slow  # suite budget (issue 57)
def test_cli_fit_then_optimize(runs_csv, tmp_path, capsys):
    prefix = tmp_path / "fit"
    argv = ["fit", str(runs_csv), "--law", "camel-tied", "--resamples", "20", "--restarts", "8", "--out", str(prefix),
            "--influence"]  # fmt: skip
    assert cli.main(argv) == 0
    section = capsys.readouterr().out.split("which runs the ")
    # the influence section: the runs ranked by how far leaving each out moves the prediction (or why it cannot)
    assert len(section) == 2 or "influence of each run: not available" in section[0]
    if len(section) == 2:
        assert section[1].startswith("prediction[0] rests on") and "row " in section[1]
    out = json.loads((tmp_path / "fit.json").read_text())
    assert out["law"] == "CAMEL" and set(out["intervals_95"]) == {"t", "K", "alpha", "beta", "C"}
    assert (tmp_path / "fit.png").stat().st_size > 10_000 and (tmp_path / "fit.npz").exists()
    assert (
        cli.main(
            [
                "optimize",
                str(tmp_path / "fit.npz"),
                "--size",
                "20",
                "--reference",
                "0.35,0.25,0.15,0.1,0.15",
                "--max-shift",
                "0.2",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    pairs = [part.split() for part in printed.split("optimal mixture: ")[1].splitlines()[0].split(", ")]
    mixture = np.array([float(x) for _, x in pairs])
    # the printed mixture is `optimal_mixture` on the loaded fit (to the 4 printed decimals), and its printed loss
    # is the law's at that mixture
    law = cj.load(tmp_path / "fit.npz").law
    reference = np.array([0.35, 0.25, 0.15, 0.1, 0.15])
    size = jnp.asarray([20.0])
    expected = cj.optimal_mixture(lambda r: -law(r[None, :], size)[0], 5, key=jax.random.key(0),
                                  reference=reference, max_shift=0.2)  # fmt: skip
    np.testing.assert_allclose(mixture, np.asarray(expected.r), atol=5.1e-5)
    loss = float(printed.split("predicted loss at size 20: ")[1].split()[0])
    assert loss == pytest.approx(float(law(jnp.asarray(expected.r)[None, :], size)[0]), rel=1e-4)
    # and it is no worse than the reference or any of 200 random mixtures inside the trust region
    rng = np.random.default_rng(0)
    shift = 0.2 * reference * rng.uniform(-1, 1, (200, 5))
    shift = shift - reference * shift.sum(axis=1, keepdims=True)  # sums to 0: stays on the simplex
    shift = shift * np.minimum(1, np.min(0.2 * reference / np.abs(shift), axis=1, keepdims=True))  # within +-20%
    inside = np.vstack([reference, reference + shift])
    others = np.asarray(law(jnp.asarray(inside), jnp.full(len(inside), 20.0)))
    assert loss <= others.min() + 1e-4, (loss, others.min())
    runs = pd.read_csv(runs_csv)
    columns = [c for c in runs.columns if c.startswith("r_")]
    assert [name for name, _ in pairs] == columns  # the weights are named by the fit's columns
    candidates = runs[columns].drop_duplicates().head(6).assign(size=[12.0, 16.0, 20.0] * 2)
    candidates = candidates.assign(flops=6.0 * candidates["size"] ** 3)
    candidates.to_csv(tmp_path / "candidates.csv", index=False)
    budget = str(6.0 * 20.0**3 + 6.0 * 16.0**3)
    argv = [
        "next",
        "--fit",
        str(tmp_path / "fit.npz"),
        "--candidates",
        str(tmp_path / "candidates.csv"),
        "--budget",
        budget,
        "--size",
        "20",
        "--batch",
        "2",
        "--resamples",
        "20",
        "--out",
        str(tmp_path / "next.csv"),
    ]
    assert cli.main(argv) == 0
    assert "recommended mixture at size 20" in capsys.readouterr().out
    chosen = pd.read_csv(tmp_path / "next.csv")
    assert 1 <= len(chosen) <= 2 and chosen["cumulative_cost"].iloc[-1] <= float(budget)
    assert set(chosen["candidate_row"]) <= set(range(6)) and np.all(np.diff(chosen["sd_after"]) <= 1e-12)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fit", "missing.csv"], "no such file: missing.csv"),
        (["fit", "{csv}", "--target", "lost"], "column 'lost' not found"),
        (["fit", "{csv}", "--mixture", "r_english,r_nope"], "column 'r_nope' not found"),
        (["fit", "{bad}"], "column 'loss' has a non-numeric value 'oops' at row 2"),
        (["fit", "{notokens}", "--law", "camel-data"], "the camel-data-tied law needs a tokens column: --tokens"),
        (["design", "--sizes", "4,5,x", "--budget", "1e20"], "--sizes must be comma-separated numbers"),
        (["design", "--sizes", "4,5", "--budget", "1e20", "--strategy", "circle"], "unknown strategy 'circle'"),
        (["optimize", "missing.npz", "--size", "20"], "no such file"),
        (["next", "--fit", "missing.npz", "--candidates", "{csv}", "--budget", "1e20", "--size", "20"], "no such file"),
        (["next", "--fit", "x.npz", "--candidates", "{csv}", "--budget", "-1", "--size", "20"], "--budget must be"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(argv, message, runs_csv, tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    table = pd.read_csv(runs_csv).astype({"loss": object})
    table.loc[2, "loss"] = "oops"
    table.to_csv(bad, index=False)
    notokens = tmp_path / "notokens.csv"
    pd.read_csv(runs_csv).drop(columns="tokens").to_csv(notokens, index=False)
    argv = [a.format(csv=runs_csv, bad=bad, notokens=notokens) for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err


@pytest.mark.slow  # fits and cross-validates every --law auto candidate, each a compile of its own
def test_cli_fit_law_auto_ranks_every_candidate_by_held_out_error(runs_csv, tmp_path, capsys):
    prefix = tmp_path / "auto"
    argv = ["fit", str(runs_csv), "--law", "auto", "--resamples", "0", "--restarts", "4", "--out", str(prefix)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    line = printed.split("--law auto: held-out MAPE, ")[1].splitlines()[0]
    assert "the largest size (10) held out" in line
    from camel_jax.laws._registry import LAWS

    tokens_vary = pd.read_csv(runs_csv)["tokens"].nunique() > 1  # then the candidates are the laws that read tokens
    expected = [n for n in cli_fit.AUTO_LAWS if (LAWS[n].tokens != "never" if tokens_vary else "camel-data" not in n)]
    ranking, winner = line.split("; fitting ")[0], line.split("; fitting ")[1].split()[0]
    assert all(f" {name} " in ranking for name in expected), (expected, ranking)
    best = min(expected, key=lambda name: ranking.index(f" {name} "))  # listed best first
    # the lowest held-out error, or a simpler law within one standard error of it
    assert winner == best or "within one standard error" in line
    law = json.loads((tmp_path / "auto.json").read_text())["law"]
    assert law == cj.laws.law_entry(winner).cls.__name__


def test_cli_design_writes_a_runs_table_within_budget(tmp_path, capsys):
    out = tmp_path / "design.csv"
    budget = 2e20
    assert (
        cli.main(
            [
                "design",
                "--sizes",
                "4,5,6,7,8,10",
                "--budget",
                str(budget),
                "--strategy",
                "hourglass",
                "--reference",
                "0.35,0.25,0.15,0.1,0.15",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    table = pd.read_csv(out)
    assert table["flops"].sum() <= budget and {"size", "mixture", "flops", "r_0"} <= set(table.columns)


def test_module_entry_point_and_help():
    for argv in (["--version"], ["fit", "--help"], ["optimize", "--help"], ["design", "--help"], ["demo", "--help"]):
        out = subprocess.run([sys.executable, "-m", "camel_jax", *argv], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and ("camel-jax" in out.stdout or "usage" in out.stdout)


def small_fit():
    true = known_tied_camel()
    r = jnp.asarray(np.random.default_rng(0).dirichlet(np.ones(3), 24))
    M = jnp.repeat(jnp.arange(4.0, 10.0), 4)
    return (
        true,
        (r, M),
        cj.fit(true, (r, M), true(r, M), key=jax.random.key(0), restarts=4, options=cj.FitOptions(max_steps=100)),
    )


def same_tree(a, b):
    return jax.tree.structure(a) == jax.tree.structure(b) and all(
        np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))
    )


def same_fields(a, b, where="result"):
    """Every field of `a` equals `b`'s, static fields (e.g. `log_residuals`, a law's `tied`) included, recursively
    through Modules, tuples and dicts; arrays equal to the bit, in dtype and shape."""
    assert type(a) is type(b), (where, type(a), type(b))
    if isinstance(a, eqx.Module):
        for field in dataclasses.fields(a):
            same_fields(getattr(a, field.name), getattr(b, field.name), f"{where}.{field.name}")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same_fields(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            same_fields(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (jax.Array, np.ndarray)):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True), where
    else:
        assert a == b, (where, a, b)


def test_save_load_round_trips_every_field_of_a_fit_with_non_default_options(tmp_path):
    # every option that a result records away from its default: residuals on the loss scale, uneven weights with
    # a zero, a law with a static field set (PowerLaw's scale)
    true = cj.PowerLaw.from_params(E=2.0, A=5.0, alpha=0.6, scale=10.0)
    x = jnp.linspace(1.0, 30.0, 12)
    options = cj.FitOptions(max_steps=60, log_residuals=False, delta=0.05, polish=0)
    result = cj.fit(
        true, (x,), true(x), key=jax.random.key(3), restarts=3, weights=np.linspace(0, 2, 12), options=options
    )
    assert result.log_residuals is False
    same_fields(result, cj.load(cj.save(result, tmp_path / "fit")))


def test_save_load_round_trips_exactly(tmp_path):
    true, inputs, result = small_fit()
    assert same_tree(result, cj.load(cj.save(result, tmp_path / "fit")))
    same_fields(result, cj.load(tmp_path / "fit.npz"))
    # the same bootstrap as test_every_plot_renders_a_nontrivial_png's: one compiled program serves both
    boot = cj.bootstrap(
        true,
        inputs,
        true(*inputs),
        key=jax.random.key(1),
        n_resamples=8,
        inits=result.laws,
        options=cj.FitOptions(max_steps=50),
        progress=False,
    )
    assert same_tree(boot, cj.load(cj.save(boot, tmp_path / "boot.npz")))
    same_fields(boot, cj.load(tmp_path / "boot.npz"))
    pipe = cj.Pipeline(
        {"mmlu": result.law}, {"mmlu": cj.LossToBenchmark.from_params(k=[1.0], A=0.7, B=-2.0, C=0.25)}, {"mmlu": 1.0}
    )
    back = cj.load(cj.save(pipe, tmp_path / "pipe"))
    assert same_tree(pipe, back) and back.benchmark_weights == pipe.benchmark_weights
    same_fields(pipe, back)
    data_law = make_case("CAMELData_tied_shared").law  # a law with two derived exponents and no tokens input
    pipe = cj.Pipeline({"mmlu": data_law}, pipe.benchmark_laws, {"mmlu": 1.0})
    assert same_tree(pipe, cj.load(cj.save(pipe, tmp_path / "data_law")))
    same_fields(pipe, cj.load(tmp_path / "data_law.npz"))


def test_load_refuses_newer_formats_and_unknown_laws(tmp_path):
    _, _, result = small_fit()
    path = cj.save(result, tmp_path / "fit")
    with np.load(path) as stored:
        arrays = {k: stored[k] for k in stored.files}
    meta = json.loads(str(arrays["__meta__"]))
    for change, message in (
        ({"format_version": 99}, "format version 99"),
        ({"law": {**meta["law"], "class": "nowhere:Law"}}, "unknown law class 'nowhere:Law'"),
    ):
        np.savez(tmp_path / "edited.npz", **{**arrays, "__meta__": np.array(json.dumps({**meta, **change}))})
        with pytest.raises(ValueError, match=message):
            cj.load(tmp_path / "edited.npz")


def rendered(fig, path):
    plot.save_figure(fig, str(path))
    image = matplotlib.image.imread(path)
    return path.stat().st_size > 8_000 and float(np.std(image[..., :3])) > 0.02


def test_every_plot_renders_a_nontrivial_png(tmp_path):
    true, (r, M), result = small_fit()
    boot = cj.bootstrap(
        true,
        (r, M),
        true(r, M),
        key=jax.random.key(1),
        n_resamples=8,
        inits=result.laws,
        options=cj.FitOptions(max_steps=50),
        progress=False,
    )
    data = cj.MixtureData(r=r, y=true(r, M), size=M, group=np.tile(np.arange(4), 6))
    table = pd.DataFrame(
        {
            "law": ["a", "a", "b", "b"] * 2,
            "n_points": [10, 20] * 4,
            "test_size": [12.0] * 8,
            "error": np.linspace(0.1, 1, 8),
        }
    )
    strategies = pd.DataFrame(
        {"strategy": ["rectangle", "hourglass"] * 4, "budget": [1e18] * 4 + [1e19] * 4, "error": np.linspace(0.2, 1, 8)}
    )
    path = pd.DataFrame(
        {
            "size": [4.0, 4.0, 20.0, 20.0],
            "dataset": ["a", "b", "a", "b"],
            "weight": [0.3, 0.7, 0.4, 0.6],
            "low": [0.2, 0.6, 0.3, 0.5],
            "high": [0.4, 0.8, 0.5, 0.7],
        }
    )
    figures = {
        "pvo": plot.predicted_vs_observed(np.arange(5.0), np.arange(5.0) + 0.1, np.arange(2.0), np.arange(2.0)),
        "loss": plot.loss_vs_size(data, result, bootstrap=boot, extend_to=20.0),
        "path": plot.mixture_vs_size(path),
        "strategies": plot.sampling_strategies([4, 5, 6, 7, 8, 10], np.array([4, 5, 6, 7, 8, 10.0]) ** 3, 5000.0, 11),
        "strategy_error": plot.strategy_error(strategies),
        "laws": plot.law_comparison(table),
    }
    for name, fig in figures.items():
        assert rendered(fig, tmp_path / f"{name}.png"), name
