"""Availability caps and exports by name (issue 59): caps from the tokens each dataset has, the mixture written for
each trainer and parsed back (names and weights equal to the pick, summing to exactly 1 in the written decimals, caps
held), bad maps refused naming the dataset, and the cap case through `camel-jax optimize`."""

import json
from decimal import Decimal

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

import camel_jax as cj
from camel_jax import cli

yaml = pytest.importorskip("yaml")

NAMES = ["web", "math", "code"]
# 1e8 tokens of math, at most 4 epochs, a 2e10-token run: math's share is at most 4 x 1e8 / 2e10 = 0.02
AVAILABLE = {"web": 5e10, "math": 1e8, "code": 2e9}
TARGET, EPOCHS = 2e10, 4.0
CAPS = {"web": 1.0, "math": 0.02, "code": 0.4}  # by hand: min(1, 4 x tokens / 2e10)
# a pick with awkward floats, math at its cap
PICK = {"web": 0.6123456789123456, "math": 0.02, "code": 1 - 0.6123456789123456 - 0.02}
PATHS = {"web": "/data/web/part-*.npy", "math": "/data/math/part-*.npy", "code": "/data/code/part-*.npy"}


def written_weights(fmt: str, text: str) -> dict[str, float]:
    """The weights by name, parsed from the file as the trainer would read it (placeholders/paths -> names)."""
    if fmt == "json":
        return json.loads(text)["mixture"]
    if fmt == "megatron":
        words = text.split()  # Megatron reads every whitespace-separated word
        prefixes = {v: k for k, v in PATHS.items()}
        return {prefixes[words[i + 1]]: float(words[i]) for i in range(0, len(words), 2)}
    data = yaml.safe_load(text)
    if fmt == "olmo-core":
        return {s["source_name"]: s["target_ratio"] for s in data["sources"]}
    if fmt == "levanter":
        return data["train_weights"]
    dataset = data["data_stages"][0]["data"]["dataset"]
    prefixes = {v: k for k, v in PATHS.items()}
    return {prefixes[f]: w for f, w in zip(dataset["dataset_folder"], dataset["dataset_weights"], strict=True)}


def exact_sum(weights) -> Decimal:
    """The sum of the written decimals (each float read back is the shortest repr of what was written)."""
    return sum((Decimal(repr(float(w))) for w in weights), Decimal(0))


def test_availability_caps_by_name_and_the_repetition_warning():
    with pytest.warns(UserWarning, match="does not model repeated data"):
        caps = cj.availability_caps(AVAILABLE, TARGET, EPOCHS, names=NAMES)
    assert list(caps) == NAMES
    assert caps == pytest.approx(CAPS, abs=1e-15)
    # a Series, in another order, and one epoch: the caps follow `names`, and at one epoch nothing is said
    series = pd.Series({"code": 2e9, "web": 5e10, "math": 1e8})
    one = cj.availability_caps(series, TARGET, names=NAMES)
    assert list(one) == NAMES and one["math"] == pytest.approx(0.005) and one["web"] == 1.0
    # per-dataset epochs by name
    with pytest.warns(UserWarning, match="the caps of math allow more than one epoch"):
        per = cj.availability_caps(AVAILABLE, TARGET, {"web": 1, "math": 2, "code": 1}, names=NAMES)
    assert per["math"] == pytest.approx(0.01) and per["code"] == pytest.approx(0.1)


@pytest.mark.parametrize(
    "available, target, epochs, message",
    [
        ({"web": 5e10, "code": 2e9}, TARGET, EPOCHS, "no entry for dataset 'math'"),
        ({**AVAILABLE, "books": 1e9}, TARGET, EPOCHS, "'books', which is not a dataset"),
        ({**AVAILABLE, "math": 0.0}, TARGET, EPOCHS, "dataset 'math' must be finite and > 0"),
        ({**AVAILABLE, "math": -1e8}, TARGET, EPOCHS, "dataset 'math' must be finite and > 0"),
        (AVAILABLE, 0.0, EPOCHS, "`target_tokens` must be finite and > 0"),
        (AVAILABLE, TARGET, -1.0, "max_epochs` must be finite and > 0"),
        # 5.2e9 tokens at one epoch cannot fill 2e10: infeasible, and how many epochs would do
        ({"web": 5e9, "math": 1e8, "code": 1e8}, TARGET, 1.0, r"caps sum to 0.26 < 1.*allow 3.846 epochs"),
    ],
)
def test_availability_caps_refuse_bad_input_naming_it(available, target, epochs, message):
    with pytest.raises(ValueError, match=message):
        cj.availability_caps(available, target, epochs, names=NAMES)


@pytest.mark.parametrize("fmt", list(cj.mixture.EXPORT_FORMATS))
def test_each_format_parses_back_to_the_pick_summing_to_one_within_the_caps(fmt):
    provenance = {"fit_hash": "0123abcd", "predicted_loss": 2.31, "interval": [2.2, 2.4]}
    text = cj.export_mixture(PICK, fmt, caps=CAPS, max_epochs=EPOCHS, paths=PATHS, provenance=provenance)
    weights = written_weights(fmt, text)
    assert list(weights) == NAMES  # every dataset named once, in the pick's order
    for name in NAMES:
        assert weights[name] == pytest.approx(PICK[name], abs=1e-12)
        assert weights[name] <= CAPS[name]
    assert exact_sum(weights.values()) == 1
    if fmt == "olmo-core":
        sources = yaml.safe_load(text)["sources"]
        assert [s["paths"] for s in sources] == [[PATHS[n]] for n in NAMES]
        assert {s["max_repetition_ratio"] for s in sources} == {4.0}
        assert {s["max_source_fraction"] for s in sources} == {1.0}
    if fmt != "megatron":  # Megatron reads every word of its file: its record is the json export
        assert "0123abcd" in text and "2.31" in text
    # only the fields the trainer's config declares (read from their sources: OLMo-core v2.5
    # SourceMixtureConfig, Levanter 1.2 LMMixtureDatasetConfig, nanotron DatasetStageArgs/NanosetDatasetsArgs)
    if fmt == "olmo-core":
        fields = {"source_name", "target_ratio", "paths", "max_repetition_ratio", "max_source_fraction"}
        assert set(yaml.safe_load(text)) == {"sources"}
        assert all(set(source) <= fields for source in yaml.safe_load(text)["sources"])
    if fmt == "levanter":
        assert set(yaml.safe_load(text)) == {"configs", "train_weights"}
    if fmt == "nanotron":
        (stage,) = yaml.safe_load(text)["data_stages"]
        assert set(stage) == {"name", "start_training_step", "data"} and stage["start_training_step"] >= 0
        assert set(stage["data"]["dataset"]) == {"dataset_folder", "dataset_weights"}


def test_a_mixture_result_exports_its_mean_pick_and_its_verdict():
    r = jnp.asarray([[0.5, 0.02, 0.48], [0.7, 0.02, 0.28]])  # one pick per resample: the mean is written
    decision = cj.Decision(gain=0.01, gain_low=0.002, gain_high=0.02, p_improve=0.97, value=0.6, value_low=0.58,
                           value_high=0.62, level=0.95, verdict="improves", calibrated=True)  # fmt: skip
    result = cj.MixtureResult(r, jnp.zeros(2), jnp.zeros(2), r, jnp.zeros(2), jnp.zeros(3), jnp.ones(3), decision)
    record = json.loads(cj.export_mixture(result, "json", names=NAMES, caps=CAPS))
    assert record["mixture"] == {"web": 0.6, "math": 0.02, "code": 0.38}
    assert record["decision"]["verdict"] == "improves" and record["decision"]["gain_low"] == 0.002


def test_weights_are_rounded_so_the_written_decimals_sum_to_one():
    thirds = {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}
    record = json.loads(cj.export_mixture(thirds, "json"), parse_float=Decimal)
    assert sum(record["mixture"].values()) == 1  # exact, in decimals
    assert all(abs(w - Decimal(1) / 3) <= Decimal("1e-12") for w in record["mixture"].values())
    # a weight at a cap that rounds up past it is written at most at the cap; another weight takes the rest
    cap = 0.3234567890125  # 13 decimals (in binary a little above): rounding to 12 gives ...013 > cap
    pick = {"a": cap, "b": 0.5, "c": 0.5 - cap}
    text = cj.export_mixture(pick, "json", caps={"a": cap, "b": 1.0, "c": 1.0})
    written = json.loads(text, parse_float=Decimal)["mixture"]
    assert written["a"] <= Decimal(cap) and sum(written.values()) == 1
    # fewer digits: still exact
    coarse = json.loads(cj.export_mixture(thirds, "json", digits=3), parse_float=Decimal)["mixture"]
    assert sorted(coarse.values()) == [Decimal("0.333"), Decimal("0.333"), Decimal("0.334")]


def test_json_round_trips_exactly(tmp_path):
    path = tmp_path / "pick.mixture.json"
    text = cj.export_mixture(PICK, "json", path, caps=CAPS, decision={"gain": 0.01, "verdict": "improves"})
    assert path.read_text() == text
    back = cj.read_mixture(path)
    assert list(back) == NAMES and back == json.loads(text)["mixture"]
    # what was written reads back bit for bit, and writing it again changes nothing
    again = tmp_path / "again.mixture.json"
    cj.export_mixture(back, "json", again, caps=CAPS, decision={"gain": 0.01, "verdict": "improves"})
    assert cj.read_mixture(again) == back and again.read_text() == text
    assert json.loads(text)["decision"] == {"gain": 0.01, "verdict": "improves"}
    # the YAML formats that key weights by name read back to the same numbers
    for fmt in ("olmo-core", "levanter"):
        other = tmp_path / f"pick{cj.mixture.EXPORT_FORMATS[fmt]}"
        cj.export_mixture(PICK, fmt, other)
        assert cj.read_mixture(other) == back


def test_names_that_yaml_would_misread_are_quoted():
    tricky = ["true", "1e3", "Pile-CC: 2", 'say "hi"', "ünï # not a comment"]
    pick = dict(zip(tricky, [0.2] * 5))
    for fmt in ("olmo-core", "levanter"):
        data = yaml.safe_load(cj.export_mixture(pick, fmt))
        names = [s["source_name"] for s in data["sources"]] if fmt == "olmo-core" else list(data["train_weights"])
        assert names == tricky


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"paths": {"web": "/w", "code": "/c"}}, "`paths` has no entry for dataset 'math'"),
        ({"paths": {**PATHS, "books": "/b"}}, "gives a path for 'books', which is not a dataset"),
        ({"caps": {"web": 1.0, "math": 0.01, "code": 1.0}}, "dataset 'math' has weight 0.02 above its cap 0.01"),
        ({"caps": {"web": 1.0, "code": 1.0}}, "`caps` has no entry for dataset 'math'"),
        ({"names": ["web", "math", "books"]}, "`mixture` has no entry for dataset 'books'"),
        ({"names": ["web", "math"]}, "gives a weight for 'code', which is not a dataset"),
    ],
)
def test_bad_maps_are_refused_naming_the_dataset(kwargs, message):
    with pytest.raises(ValueError, match=message):
        cj.export_mixture(PICK, "olmo-core", **kwargs)


def test_bad_mixtures_and_prefixes_are_refused():
    with pytest.raises(ValueError, match="sum to 0.9"):
        cj.export_mixture({"a": 0.5, "b": 0.4}, "json")
    with pytest.raises(ValueError, match="dataset 'b' must be finite and >= 0"):
        cj.export_mixture({"a": 1.5, "b": -0.5}, "json")
    with pytest.raises(ValueError, match="prefix of dataset 'math' contains whitespace"):
        cj.export_mixture(PICK, "megatron", paths={**PATHS, "math": "/data/my math"})
    with pytest.raises(ValueError, match="unknown export format 'olmo'"):
        cj.export_mixture(PICK, "olmo")
    with pytest.raises(TypeError, match="needs `names`"):
        cj.export_mixture(np.array([0.5, 0.5]), "json")


@pytest.fixture(scope="module")
def saved_fit(tmp_path_factory):
    """A saved fit whose law is known (a two-term DML that wants about 42% math): no fitting, so the test runs
    only `optimize`."""
    truth = cj.DML.from_params(t=np.array([[-1.0, -4.0, 0.0], [-3.0, 0.0, -1.0]]), S=np.ones(2), C=np.ones(2),
                               K=np.array([1.0, 0.6]))  # fmt: skip
    r = jnp.asarray(np.random.default_rng(0).dirichlet(np.ones(3), 16))
    one = jnp.ones(1)
    fit = cj.FitResult(law=truth, objective=jnp.zeros(()), laws=jax.tree.map(lambda x: x[None], truth),
                       objectives=0 * one, converged=one > 0, n_steps=jnp.ones(1, int), grad_norm=0 * one,
                       status=jnp.full(1, int(cj.Status.CONVERGED)), n_failed=jnp.zeros((), int), inputs=(r,),
                       y=truth(r), weights=jnp.ones(16), names=tuple(NAMES))  # fmt: skip
    folder = tmp_path_factory.mktemp("export")
    pd.DataFrame({"dataset": NAMES, "tokens": [AVAILABLE[n] for n in NAMES]}).to_csv(folder / "tokens.csv", index=False)
    pd.DataFrame({"domain": NAMES, "path": [PATHS[n] for n in NAMES]}).to_csv(folder / "paths.csv", index=False)
    return cj.save(fit, folder / "fit.npz"), truth, folder


def test_cli_caps_math_at_two_percent_beside_the_unconstrained_pick(saved_fit, capsys):
    path, truth, folder = saved_fit
    prefix = folder / "mix"
    argv = ["optimize", str(path), "--available", str(folder / "tokens.csv"), "--max-epochs", "4",
            "--target-tokens", "2e10", "--export", ",".join(cj.mixture.EXPORT_FORMATS),
            "--paths", str(folder / "paths.csv"), "--out", str(prefix)]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if line.strip().startswith("math "))
    # dataset, available, cap, unconstrained, capped, "binding"
    assert row[0] == "math" and float(row[2]) == pytest.approx(0.02) and row[-1] == "binding"
    unconstrained, capped = float(row[3]), float(row[4])
    assert unconstrained > 0.1 and capped == pytest.approx(0.02, abs=5e-5)
    assert "binding caps: math" in out and "cost of the caps: predicted loss +" in out and "no band" in out
    assert "the law does not model repeated data" in out and "math 4 epochs" in out
    record = json.loads((folder / "mix.mixture.json").read_text())
    pick = record["mixture"]
    assert list(pick) == NAMES and pick["math"] <= 0.02 and pick["math"] == pytest.approx(0.02, abs=1e-12)
    assert exact_sum(pick.values()) == 1
    assert record["provenance"]["unconstrained"]["math"] > 0.1 and record["provenance"]["binding_caps"] == ["math"]
    assert record["provenance"]["fit_hash"] and record["provenance"]["predicted_loss"] == pytest.approx(
        float(truth(jnp.asarray([[pick[n] for n in NAMES]]))[0]), rel=1e-9
    )
    cost = record["provenance"]["cost_of_caps"]["value"]
    assert cost > 0 and cost == pytest.approx(
        float(truth(jnp.asarray([[pick[n] for n in NAMES]]))[0])
        - float(truth(jnp.asarray([[record["provenance"]["unconstrained"][n] for n in NAMES]]))[0]),
        rel=1e-6,
    )
    # the capped pick is no worse than 300 random mixtures within the caps (the law evaluated directly)
    rng = np.random.default_rng(1)
    others = rng.dirichlet(np.ones(3), 3000)
    others = others[others[:, 1] <= 0.02][:300]
    assert len(others) >= 50
    best = float(truth(jnp.asarray([[pick[n] for n in NAMES]]))[0])
    assert best <= float(np.min(np.asarray(truth(jnp.asarray(others))))) + 1e-9
    # every trainer's file holds the same pick by name
    for fmt, suffix in cj.mixture.EXPORT_FORMATS.items():
        text = (folder / f"mix{suffix}").read_text()
        assert written_weights(fmt, text) == pytest.approx(pick, abs=0) and f"wrote {folder / f'mix{suffix}'}" in out
    sources = yaml.safe_load((folder / "mix.olmo-core.yaml").read_text())["sources"]
    assert [s["paths"] for s in sources] == [[PATHS[n]] for n in NAMES]
    assert [s["max_repetition_ratio"] for s in sources] == [4.0] * 3


def test_the_exports_provenance_carries_the_problems_the_mixture_rests_on(saved_fit):
    """The files an export writes name what the mixture rests on: a loss decision's problems (its fit's, its
    bootstrap's, its ascent's) when it has them, else an optimizer result's ascent that stopped short."""
    from types import SimpleNamespace

    from camel_jax.cli._export import _provenance

    path, _, _ = saved_fit
    saved, args = cj.load(path), SimpleNamespace(saved=str(path), size=None, tokens=None)
    clean = SimpleNamespace(r=np.full(3, 1 / 3), value=-1.0, decision=None, converged=np.array(True))
    assert "problems" not in _provenance(saved, args, clean)
    short = SimpleNamespace(r=np.full(3, 1 / 3), value=-1.0, decision=None, converged=np.array([True, False, False]))
    assert _provenance(saved, args, short)["problems"] == [
        "the ascent of 2 of 3 resamples stopped short of its optimum: the pick's band rests on them"
    ]
    said = ("the best start did not converge (max steps)", "the ascent to the pick stopped short of its optimum")
    loss = SimpleNamespace(r=np.full(3, 1 / 3), value=-1.0, decision=None, problems=said)
    assert _provenance(saved, args, loss)["problems"] == list(said)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--available", "{folder}/short.csv", "--target-tokens", "2e10"], "no entry for dataset 'code'"),
        (["--available", "{folder}/tokens.csv"], "--available needs --target-tokens"),
        (["--max-epochs", "4"], "--max-epochs goes with --available"),
        (["--export", "olmo-core"], "--export needs --out"),
        (["--export", "olmo", "--out", "{folder}/x"], "--export takes json, olmo-core"),
        (["--export", "megatron", "--paths", "{folder}/short_paths.csv", "--out", "{folder}/x"],
         "no entry for dataset 'code'"),
        (["--paths", "{folder}/paths.csv"], "--paths goes with --export"),
    ],
)  # fmt: skip
def test_cli_refuses_bad_caps_and_exports_before_compute(saved_fit, capsys, extra, message):
    path, _, folder = saved_fit
    pd.DataFrame({"dataset": ["web", "math"], "tokens": [5e10, 1e8]}).to_csv(folder / "short.csv", index=False)
    pd.DataFrame({"dataset": ["web", "math"], "path": ["/w", "/m"]}).to_csv(folder / "short_paths.csv", index=False)
    argv = ["optimize", str(path), *[part.format(folder=folder) for part in extra]]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "optimal mixture" not in captured.out
    assert not (folder / "x.megatron.txt").exists()


def test_cli_help_lists_the_export_flags(capsys):
    with pytest.raises(SystemExit):
        cli.main(["optimize", "--help"])
    text = capsys.readouterr().out
    assert all(flag in text for flag in ("--available", "--max-epochs", "--target-tokens", "--export", "--paths"))


def test_read_mixture_refuses_files_without_names_or_with_a_name_twice(tmp_path):
    twice = tmp_path / "twice.levanter.yaml"
    twice.write_text('train_weights:\n  "web": 0.5\n  "web": 0.5\n')
    with pytest.raises(ValueError, match=r"names dataset\(s\) \['web'\] more than once"):
        cj.read_mixture(twice)
    megatron = tmp_path / "mix.nanotron.yaml"
    megatron.write_text(cj.export_mixture(PICK, "nanotron"))
    with pytest.raises(ValueError, match="key weights by path"):
        cj.read_mixture(megatron)
    off = tmp_path / "off.mixture.json"
    off.write_text('{"mixture": {"web": 0.5, "math": 0.4}}')
    with pytest.raises(ValueError, match="sum to 0.9"):
        cj.read_mixture(off)


@pytest.mark.slow  # three ascents over 8 resamples and a verdict: about 10 CPU-seconds of compiles
def test_cli_caps_a_batched_pipeline_with_the_cost_band_and_the_verdict(tmp_path, capsys):
    from helpers import make_pipeline

    batched = make_pipeline(batch=8)
    pipeline = cj.Pipeline(batched.loss_laws, batched.benchmark_laws, dict(batched.benchmark_weights), NAMES)
    path = cj.save(pipeline, tmp_path / "pipeline.npz")
    # every cap 0.34 (6.8e9 tokens, one epoch, 2e10 target): a mixture within them has every share in [0.32, 0.34],
    # so unless the optimum happens to lie in that small box, a cap binds
    pd.DataFrame({"name": NAMES, "tokens": [6.8e9] * 3}).to_csv(tmp_path / "tokens.csv", index=False)
    argv = ["optimize", str(path), "--size", "10", "--reference", "0.4,0.3,0.3", "--available",
            str(tmp_path / "tokens.csv"), "--target-tokens", "2e10", "--export", "json",
            "--out", str(tmp_path / "m")]  # fmt: skip
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    record = json.loads((tmp_path / "m.mixture.json").read_text())
    assert max(record["mixture"].values()) <= 0.34 and exact_sum(record["mixture"].values()) == 1
    assert record["decision"]["verdict"] in cj.mixture.VERDICTS and "verdict:" in out
    binding = record["provenance"]["binding_caps"]
    assert binding and f"binding caps: {', '.join(binding)}" in out
    cost = record["provenance"]["cost_of_caps"]
    # the score falls under the caps, in every resample, and the band is printed beside it
    assert cost["resamples"] == 8 and cost["low"] <= cost["value"] <= cost["high"] <= 1e-12
    assert f"cost of the caps: predicted score {cost['value']:+.4g} [{cost['low']:+.4g}, {cost['high']:+.4g}]" in out
    assert "repeats data" not in out  # one epoch: nothing repeated
