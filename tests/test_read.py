"""`read_runs`, the one reader: every public table with mixtures in ../shared/data/external read as shipped, by one
call and by one `camel-jax fit`; the one-line messages for the mistakes users make with real tables, before any
compute; names that travel from the table to the fit, the bootstrap and the saved file."""

from __future__ import annotations

import json
import warnings

import jax
import numpy as np
import pandas as pd
import pytest
import shared_data

import camel_jax as cj
from camel_jax import cli
from camel_jax.data import ReadNote, read_runs
from camel_jax.fitting import _fit as fit_module
from camel_jax.io._save import saved_reader


def read(source, **kwargs):
    """`read_runs` and the notes it said."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = read_runs(source, **kwargs)
    return data, [str(w.message) for w in caught if issubclass(w.category, ReadNote)]


def long_table() -> pd.DataFrame:
    """Two sizes x three mixtures (a column of shares) x two checkpoints x two validation domains."""
    rows = []
    for size in (1e8, 4e8):
        for mix, (a, b) in {"0.5-0.5": (0.5, 0.5), "0.25-0.75": (0.25, 0.75), "0.75-0.25": (0.75, 0.25)}.items():
            for step in (1000, 2000):
                for domain, offset in (("web", 0.0), ("code", 1.0)):
                    loss = 2 + offset + 10 / np.log(size) + 0.3 * a + 0.1 * (2000 / step)
                    rows.append({"mix": mix, "params": size, "step": step, "tokens": step * 1e6, "valid": domain,
                                 "loss": loss})  # fmt: skip
    return pd.DataFrame(rows)


def wide_table() -> pd.DataFrame:
    r = np.array([[0.5, 0.5], [0.2, 0.8], [0.8, 0.2], [0.5, 0.5], [0.2, 0.8], [0.8, 0.2]])
    size = np.array([1e8, 1e8, 1e8, 4e8, 4e8, 4e8])
    return pd.DataFrame({"r_web": r[:, 0], "r_code": r[:, 1], "size": size, "loss": 3 - 0.1 * np.log10(size) + r[:, 0]})


# --- the one-line messages, before any compute ---------------------------------------------------------------------


def test_long_table_without_domain_is_the_pooled_target_mistake():
    with pytest.raises(ValueError, match=r"same mixture, size, tokens and step have different targets .*is 'valid' a "
                       r"validation-domain column\? \(domain='valid'"):  # fmt: skip
        read_runs(long_table(), mixture="mix", size="params")


def test_long_table_gives_one_target_per_domain_by_name():
    df = long_table()
    data, notes = read(df, mixture="mix", size="params", domain="valid", names="web,code")
    assert data.targets == ("web", "code") and data.columns == ("web", "code") and data.y.shape == (2, 6)
    # the final checkpoint of each run, against the table itself
    last = df[(df["step"] == 2000)]
    for t, domain in enumerate(("web", "code")):
        expected = last[last["valid"] == domain]
        np.testing.assert_allclose(np.sort(np.asarray(data.y[t])), np.sort(expected["loss"].to_numpy()), rtol=1e-12)
    assert notes == []
    df.loc[0, "loss"] = 99.0  # the caller's table is never modified by the read
    assert long_table().drop(index=0).equals(df.drop(index=0))


def test_checkpoints_final_nearest_all():
    df = long_table()
    final = read_runs(df, mixture="mix", size="params", domain="valid")
    np.testing.assert_array_equal(np.asarray(final.tokens), 2e9)
    near = read_runs(df, mixture="mix", size="params", domain="valid", checkpoint=1.05e9)
    np.testing.assert_array_equal(np.asarray(near.tokens), 1e9)
    with pytest.raises(ValueError, match=r"no run has a checkpoint within 10% of 5e\+09"):
        read_runs(df, mixture="mix", size="params", domain="valid", checkpoint=5e9)
    every = read_runs(df, mixture="mix", size="params", domain="valid", checkpoint="all")
    assert every.y.shape == (2, 12) and every.group is not None
    # the two checkpoints of one run share its group, and runs differ
    groups = np.asarray(every.group)
    assert len(np.unique(groups)) == 6 and all(np.sum(groups == g) == 2 for g in np.unique(groups))
    assert near.columns == ("d0", "d1")  # the header 'mix' does not split into two names


def test_percent_shares_are_read_with_a_note():
    df = wide_table()
    df[["r_web", "r_code"]] *= 100
    data, notes = read(df)
    assert any("sum to 100" in n and "percent" in n for n in notes), notes
    np.testing.assert_allclose(np.asarray(data.r), wide_table()[["r_web", "r_code"]].to_numpy(), rtol=1e-12)


def test_rows_off_the_simplex_refused_or_rescaled_by_name():
    df = wide_table()
    df.loc[2, "r_web"] = 0.8199  # sums to 1.0199
    with pytest.raises(ValueError, match=r"at row 2 sum to 1.0199, not 1 .*normalize=True \(--normalize\)"):
        read_runs(df)
    data, notes = read(df, normalize=True)
    assert any("rescaled" in n and "rows 2" in n for n in notes), notes
    np.testing.assert_allclose(np.asarray(data.r)[2], [0.8199 / 1.0199, 0.2 / 1.0199], rtol=1e-12)


def test_duplicates_merged_or_refused_naming_the_separating_column():
    df = wide_table()
    data, notes = read(pd.concat([df, df.iloc[[1]]], ignore_index=True))
    assert data.n_points == 6 and any("1 exact duplicate row(s) merged (e.g. row 6)" in n for n in notes), notes
    replicate = df.iloc[[1]].assign(loss=df["loss"].iloc[1] + 0.01)
    seeded = pd.concat([df.assign(seed=0), replicate.assign(seed=1)], ignore_index=True)
    with pytest.raises(ValueError, match=r"rows 1 and 6: loss .*replicate runs told apart by 'seed'\? \(run='seed'"):
        read_runs(seeded)
    assert read_runs(seeded, run="seed").n_points == 7
    # no column tells them apart: repeated measurements of one configuration, kept as replicate runs
    data, notes = read(pd.concat([df, replicate], ignore_index=True))
    assert data.n_points == 7 and any("kept as replicate runs" in n and "rows 1 and 6" in n for n in notes), notes
    np.testing.assert_allclose(np.sort(np.asarray(data.y)), np.sort(pd.concat([df, replicate])["loss"].to_numpy()))


def test_zero_column_refused_in_read_runs_and_in_fit_on_arrays():
    df = wide_table().assign(r_math=0.0)
    with pytest.raises(ValueError, match="'r_math' is zero in every row"):
        read_runs(df)
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True)
    r = np.column_stack([df["r_web"], df["r_code"], df["r_math"]])
    inputs, y = (r, df["size"].to_numpy()), df["loss"].to_numpy()
    with pytest.raises(ValueError, match=r"dataset 2 \(column 2 of inputs\[0\]\) is zero in every run.*keep_unused"):
        cj.fit(law, inputs, y, key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"dataset 'math' is zero in every run"):
        cj.fit(law, inputs, y, key=jax.random.key(0), names=["web", "code", "math"])


def test_missing_target_values_get_weight_zero_by_target():
    df = wide_table().assign(code_loss=lambda d: d["loss"] + 1.0)
    df.loc[3, "code_loss"] = np.nan
    data, notes = read(df, target="*loss")
    assert data.targets == ("loss", "code_loss") and data.y.shape == (2, 6)
    np.testing.assert_array_equal(np.asarray(data.weight), [[1] * 6, [1, 1, 1, 0, 1, 1]])
    assert any("1 missing target value(s) (code_loss) get weight 0" in n for n in notes), notes


def test_shares_columns_by_glob_and_strings_by_separator():
    df = wide_table().rename(columns={"r_web": "weight_web", "r_code": "weight_code"})
    assert read_runs(df, mixture="weight_*").columns == ("weight_web", "weight_code")
    text = wide_table().assign(**{"web,code": lambda d: [f"{a},{b}" for a, b in zip(d["r_web"], d["r_code"])]})
    data = read_runs(text.drop(columns=["r_web", "r_code"]))  # found, and named by its header
    assert data.columns == ("web", "code")
    np.testing.assert_allclose(np.asarray(data.r), wide_table()[["r_web", "r_code"]].to_numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="no column matches 'mix_\\*' \\(mixture=\\)"):
        read_runs(df, mixture="mix_*")


# --- every public table with mixtures, read as shipped ------------------------------------------------------------


def test_dmsl_as_shipped():
    path = shared_data.path("dmsl_shukor2025") / "dmsl_llm_slimpajama.csv"
    data, notes = read(path)
    assert any("dmsl format" in n for n in notes)
    assert data.columns[0] == "weight_arxiv" and len(data.columns) == 7 and len(data.targets) == 8
    raw = pd.read_csv(path)
    # the final checkpoint of one run (its mixture and size), from the raw table
    weights = raw[list(data.columns)].to_numpy()
    run = raw[np.all(np.isclose(weights, weights[0]), axis=1) & (raw["model_size"] == raw["model_size"].iloc[0])]
    last = run[run["n_tokens"] == run["n_tokens"].max()].iloc[0]
    r, size = np.asarray(data.r), np.asarray(data.size)
    match = np.flatnonzero(np.all(np.isclose(r, weights[0], atol=1e-12), axis=1) & (size == last["model_size"]))
    assert len(match) == 1
    np.testing.assert_allclose(np.asarray(data.y)[:, match[0]], last[list(data.targets)].to_numpy(float), rtol=1e-12)
    every, notes = read(path, checkpoint="all")
    assert every.n_points == len(raw) and any("missing target value" in n for n in notes)
    assert int(np.sum(np.asarray(every.weight) == 0)) == int(raw[list(every.targets)].isna().sum().sum())


@pytest.mark.parametrize("name, datasets, targets, points", [
    ("2Mix", ("Github", "Pile-CC"), 2, 10), ("3Mix", ("Github", "Books3", "Pile-CC"), 3, 41),
    ("5Mix", ("d0", "d1", "d2", "d3", "d4"), 22, 110), ("ct", ("Pile", "Python"), 23, 5),
])  # fmt: skip
def test_mixinglaws_as_shipped(name, datasets, targets, points):
    path = shared_data.path("mixinglaws_ye2024") / f"{name}_long.csv"
    data, notes = read(path)
    assert data.columns == datasets and len(data.targets) == targets and data.n_points == points
    raw = pd.read_csv(path)
    raw = raw[raw["train_mixture"].notna() & pd.to_numeric(raw["tokens"], errors="coerce").notna()]
    one = raw[raw["run_id"] == raw["run_id"].iloc[0]]
    one = one[one["nonembedding_params"] == one["nonembedding_params"].iloc[0]]
    last = one[one["tokens"] == one["tokens"].max()]
    shares = [float(x) for x in last["train_mixture"].iloc[0].split("-")]
    p = np.flatnonzero(
        np.isclose(np.asarray(data.size), last["nonembedding_params"].iloc[0])
        & np.isclose(np.asarray(data.tokens), last["tokens"].iloc[0])
        & np.all(np.isclose(np.asarray(data.r), shares), axis=1)
    )
    assert len(p) == 1
    for domain, loss in zip(last["valid_domain"], last["loss"]):
        assert float(data.y[data.targets.index(domain), p[0]]) == pytest.approx(loss, rel=1e-12)


@pytest.mark.parametrize("split", ["train_mixture_1m.csv:train_pile_loss_1m.csv",
                                   "test_mixture_1m.csv:test_pile_loss_1m.csv",
                                   "test_mixture_60m.csv:test_pile_loss_60m.csv"])  # fmt: skip
def test_regmix_pairs_as_shipped(split):
    folder = shared_data.path("regmix_liu2024")
    mixture, loss = (folder / f for f in split.split(":"))
    data, _ = read((mixture, loss), format="regmix")
    raw_mixture, raw_loss = pd.read_csv(mixture), pd.read_csv(loss)
    assert data.n_points == len(raw_mixture) and len(data.columns) == 17 and len(data.targets) == 13
    joined = raw_mixture.merge(raw_loss, on="index")
    np.testing.assert_allclose(np.asarray(data.y), joined[list(data.targets)].to_numpy(float).T, rtol=1e-12)


def olmix_folder(tmp_path):
    rng = np.random.default_rng(0)
    r = rng.dirichlet(np.ones(3), size=12).round(3)
    ratios = pd.DataFrame({"run_id": [f"run{i}" for i in range(12)], "name": "swarm", "dclm": r[:, 0],
                           "code": r[:, 1], "math": 1 - r[:, 0] - r[:, 1]})  # fmt: skip
    bpb = 1.0 + 0.3 * (1 - r) @ np.array([[1.0, 0.2], [0.1, 1.0], [0.3, 0.4]])
    metrics = pd.DataFrame({"run_id": [f"run{i}" for i in range(11, -1, -1)], "hellaswag_bpb": bpb[::-1, 0],
                            "arc_bpb": bpb[::-1, 1]})  # fmt: skip
    ratios.to_csv(tmp_path / "ratios.csv", index=False)
    metrics.to_csv(tmp_path / "metrics.csv", index=False)
    return tmp_path, r, bpb


def test_olmix_pair_joined_on_the_run(tmp_path):
    folder, r, bpb = olmix_folder(tmp_path)
    data, notes = read(folder)
    assert any("olmix format" in n for n in notes)
    assert data.columns == ("dclm", "code", "math") and data.targets == ("hellaswag_bpb", "arc_bpb")
    np.testing.assert_allclose(np.asarray(data.y), bpb.T, rtol=1e-12)  # joined by run_id, not by position


# --- one CLI command per table: every target in one compiled program -------------------------------------------------


@pytest.fixture
def count_fits(monkeypatch):
    """How many compiled fits the command ran, and the shape of each one's targets."""
    shapes = []
    original = fit_module.fit_compiled

    def counted(law, inputs, y, *args):
        shapes.append(tuple(np.shape(y)))
        return original(law, inputs, y, *args)

    monkeypatch.setattr(fit_module, "fit_compiled", counted)
    return shapes


def fit_cli(tmp_path, capsys, *argv):
    prefix = tmp_path / "fit"
    code = cli.main(["fit", *map(str, argv), "--restarts", "2", "--resamples", "2", "--out", str(prefix)])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads((prefix.with_suffix(".json")).read_text()), out.out, prefix


# The whole run's 20 minutes (issue 57): 13 s. test_cli_olmix_pair keeps "every target in one program" in CI, and
# the reader tests keep the mixinglaws format.
@pytest.mark.slow
def test_cli_mixinglaws_every_domain_in_one_program(tmp_path, capsys, count_fits):
    path = shared_data.path("mixinglaws_ye2024") / "2Mix_long.csv"
    out, text, prefix = fit_cli(tmp_path, capsys, path, "--law", "camel-tied", "--n-domains", "2")
    assert count_fits == [(2, 10)] and out["targets"] == ["Github", "Pile-CC"]
    assert "Github" in text and "Pile-CC" in text and "mean" in text
    saved = cj.load(prefix.with_suffix(".npz"))
    assert saved.targets == ("Github", "Pile-CC") and saved.names == ("Github", "Pile-CC")
    assert saved_reader(prefix.with_suffix(".npz"))["checkpoint"] == "final"


def test_cli_olmix_pair(tmp_path, capsys, count_fits):
    folder, _, _ = olmix_folder(tmp_path)
    out, _, _ = fit_cli(tmp_path, capsys, folder / "ratios.csv", folder / "metrics.csv", "--format", "olmix",
                        "--law", "dml", "--n-domains", "2")  # fmt: skip
    assert count_fits == [(2, 12)] and out["targets"] == ["hellaswag_bpb", "arc_bpb"]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["dmsl", "3Mix", "5Mix", "ct", "regmix"])
def test_cli_every_public_table(tmp_path, capsys, count_fits, case):
    if case == "dmsl":
        argv = [shared_data.path("dmsl_shukor2025") / "dmsl_llm_slimpajama.csv", "--law", "camel-tied"]
    elif case == "regmix":
        folder = shared_data.path("regmix_liu2024")
        argv = [folder / "test_mixture_60m.csv", folder / "test_pile_loss_60m.csv", "--format", "regmix",
                "--law", "dml"]
    else:
        argv = [shared_data.path("mixinglaws_ye2024") / f"{case}_long.csv", "--law", "camel-tied"]
    # one program for every target (the extrapolation calibration, which refits folds, is not what this checks)
    out, _, _ = fit_cli(tmp_path, capsys, *argv, "--n-domains", "2", "--no-calibrate")
    assert len(count_fits) == 1 and count_fits[0][0] == len(out["targets"]) > 1


def test_cli_long_table_fails_before_choosing_a_law(tmp_path, capsys):
    long_table().to_csv(tmp_path / "long.csv", index=False)
    code = cli.main(["fit", str(tmp_path / "long.csv"), "--mixture", "mix", "--size", "params", "--out",
                     str(tmp_path / "fit")])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 2 and "--law auto" not in captured.out
    assert "is 'valid' a validation-domain column? (domain='valid' / --domain valid)" in captured.err
    assert cli.main(["fit", str(tmp_path / "long.csv"), "--domains", "3"]) == 2
    assert "--domains is now --n-domains" in capsys.readouterr().err


# --- names travel ----------------------------------------------------------------------------------------------------


def test_names_travel_through_fit_bootstrap_and_files(tmp_path):
    runs = long_table().drop(columns="tokens")  # a law of (mixture, size): the checkpoints ordered by step
    data = read_runs(runs, mixture="mix", size="params", step="step", domain="valid", names=["web", "code"])
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=2, n_domains=1, tied=True)
    result = cj.fit(law, data, key=jax.random.key(0), restarts=2)
    assert result.names == ("web", "code") and result.targets == ("web", "code") and result.n_targets == 2
    again = cj.load(cj.save(result, tmp_path / "fit"))
    assert again.names == result.names and again.targets == result.targets
    single = jax.tree.map(lambda leaf: leaf[0], result.law)
    boot = cj.bootstrap(single, data, key=jax.random.key(1), n_resamples=3, inits=result.best_laws(2), progress=False)
    assert boot.names == ("web", "code") and boot.targets == ("web", "code") and np.shape(boot.objectives) == (3, 2)
    assert cj.load(cj.save(boot, tmp_path / "boot")).targets == ("web", "code")
    low, high = boot.interval(0.9)["C"]
    assert np.shape(low) == (2,) and np.all(low <= high)
