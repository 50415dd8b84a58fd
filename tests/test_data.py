"""The data layer: every bad input is a ValueError naming column and row; the caller's frame is untouched."""

import warnings

import numpy as np
import pandas as pd
import pytest

import camel_jax as cj


def frame(P=6):
    rng = np.random.default_rng(0)
    r = rng.dirichlet(np.ones(3), P).round(3)
    return pd.DataFrame(
        {
            "web": r[:, 0],
            "code": r[:, 1],
            "math": r[:, 2],
            "size": np.linspace(4, 12, P),
            "tokens": np.full(P, 2e10),
            "loss": rng.uniform(2, 3, P),
            "run": [f"run{i // 2}" for i in range(P)],
            "w": np.ones(P),
        },
        index=[f"row{i}" for i in range(P)],
    )


MIX = ["web", "code", "math"]


def build(df, **kw):
    args = dict(mixture=MIX, target="loss", size="size", tokens="tokens")
    args.update(kw)
    return cj.MixtureData.from_frame(df, **args)


def test_from_frame_gives_arrays_inputs_and_renormalized_rows():
    df = frame()
    data = build(df, group="run", weight="w")
    assert data.r.shape == (6, 3) and data.n_points == 6 and data.n_datasets == 3
    np.testing.assert_allclose(np.sum(data.r, axis=1), 1.0, rtol=0, atol=1e-15)
    assert [x.shape for x in data.inputs] == [(6, 3), (6,), (6,)]
    assert len(build(df, tokens=None).inputs) == 2
    assert len(build(df, tokens=None, size=None).inputs) == 1
    np.testing.assert_array_equal(data.group, [0, 0, 1, 1, 2, 2])
    assert data.columns == ("web", "code", "math")


def test_caller_frame_is_never_mutated():
    df = frame()
    df.loc["row0", "web"] += 0.004  # rounding error, within tolerance: renormalized in the copy only
    before = df.copy(deep=True)
    build(df, group="run", weight="w")
    pd.testing.assert_frame_equal(df, before)


@pytest.mark.parametrize(
    "mutate, kwargs, message",
    [
        (lambda d: d.drop(columns="code"), {}, r"column 'code' not found"),
        (
            lambda d: d.assign(code=d["code"].astype(object).where(d.index != "row2", "n/a")),
            {},
            r"column 'code' has a non-numeric value 'n/a' at row 'row2'",
        ),
        (
            lambda d: d.assign(loss=d["loss"].where(d.index != "row3", np.nan)),
            {},
            r"column 'loss' has a missing or infinite value .* at row 'row3'",
        ),
        (
            lambda d: d.assign(size=d["size"].where(d.index != "row1", np.inf)),
            {},
            r"column 'size' has a missing or infinite value .* at row 'row1'",
        ),
        (
            lambda d: d.assign(web=d["web"].where(d.index != "row4", -0.1)),
            {},
            r"mixture column 'web' has a negative weight -0.1 at row 'row4'",
        ),
        (
            lambda d: d.assign(math=d["math"].where(d.index != "row5", d["math"] + 0.05)),
            {},
            r"mixture columns \['web', 'code', 'math'\] at row 'row5' sum to",
        ),
        (
            lambda d: d.assign(size=d["size"].where(d.index != "row2", 0.0)),
            {},
            r"column 'size' \(size\) must be > 0; got 0.0 at row 'row2'",
        ),
        (
            lambda d: d.assign(tokens=d["tokens"].where(d.index != "row0", -5.0)),
            {},
            r"column 'tokens' \(tokens\) must be > 0; got -5.0 at row 'row0'",
        ),
        (
            lambda d: d.assign(loss=d["loss"].where(d.index != "row1", -0.2)),
            {},
            r"column 'loss' \(target\) must be > 0; got -0.2 at row 'row1'",
        ),
        (lambda d: d.iloc[:0], {}, r"empty"),
        (
            lambda d: d.assign(w=d["w"].where(d.index != "row3", -1.0)),
            {"weight": "w"},
            r"column 'w' \(weights\) must be >= 0; got -1.0 at row 'row3'",
        ),
        (lambda d: d.assign(w=0.0), {"weight": "w"}, r"column 'w' \(weights\) is zero in every row"),
        (
            lambda d: d.assign(run=d["run"].where(d.index != "row4", None)),
            {"group": "run"},
            r"column 'run' \(group\) has a missing value at row 'row4'",
        ),
        (lambda d: d, {"target": "accuracy"}, r"column 'accuracy' not found"),
    ],
)
def test_bad_data_names_column_and_row(mutate, kwargs, message):
    df = mutate(frame())
    with pytest.raises(ValueError, match=message):
        build(df, **kwargs)


def test_negative_target_is_fine_without_log_residuals():
    df = frame().assign(loss=lambda d: d["loss"] - 5.0)
    data = build(df, positive_target=False)
    assert float(np.max(data.y)) < 0


def test_constructible_from_arrays_with_the_same_checks():
    data = cj.MixtureData(r=[[0.5, 0.5], [0.2, 0.8]], y=[2.0, 3.0], size=[1.0, 2.0])
    assert len(data.inputs) == 2
    with pytest.raises(ValueError, match=r"mixture columns \['r0', 'r1'\] at row 1 sum to 1.3"):
        cj.MixtureData(r=[[0.5, 0.5], [0.5, 0.8]], y=[2.0, 3.0])
    with pytest.raises(ValueError, match=r"shape \(P, n_datasets\)"):
        cj.MixtureData(r=[0.5, 0.5], y=[2.0, 3.0])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"r": [[0.5, np.nan], [0.2, 0.8]]}, r"column 'r1' has a missing or infinite value \(nan\) at row 0"),
        ({"y": [2.0, -3.0]}, r"`y` \(target\) must be > 0; got -3.0 at row 1"),
        ({"y": [2.0, np.inf]}, r"`y` has a missing or infinite value \(inf\) at row 1"),
        ({"size": [1.0, 2.0, 3.0]}, r"`size` must have shape \(2,\), one entry per row"),
        ({"size": ["a", 2.0]}, r"`size` must be numeric"),
        ({"weight": [0.0, 0.0]}, r"`weight` \(weights\) is zero in every row"),
        ({"group": ["run-a", None]}, r"`group` \(group\) has a missing value at row 1"),
        ({"r": np.zeros((0, 2)), "y": []}, r"with P >= 1"),
    ],
)
def test_array_constructor_names_the_argument_and_row(kwargs, message):
    args = {"r": [[0.5, 0.5], [0.2, 0.8]], "y": [2.0, 3.0], **kwargs}
    with pytest.raises(ValueError, match=message):
        cj.MixtureData(**args)


def test_array_constructor_keeps_the_frame_constructors_arrays():
    df = frame()
    from_frame = build(df, group="run", weight="w")
    columns = {name: df[name].to_numpy() for name in ("loss", "w", "size", "tokens", "run")}
    r = df[MIX].to_numpy()
    direct = cj.MixtureData(
        r, columns["loss"], columns["w"], columns["size"], columns["tokens"], columns["run"], columns=MIX
    )
    for name in ("r", "y", "weight", "size", "tokens", "group"):
        np.testing.assert_allclose(getattr(direct, name), getattr(from_frame, name), rtol=1e-15, err_msg=name)
    assert direct.columns == from_frame.columns == tuple(MIX)


def test_benchmark_data_validates_and_exposes_inputs():
    df = pd.DataFrame({"c4": [3.1, 3.4, 2.9], "code": [1.2, 1.5, 1.1], "acc": [0.4, 0.3, 0.5]})
    data = cj.BenchmarkData.from_frame(df, losses=["c4", "code"], target="acc")
    assert data.inputs[0].shape == (3, 2) and data.n_points == 3
    with pytest.raises(ValueError, match=r"column 'acc' has a missing or infinite value .* at row 1"):
        cj.BenchmarkData.from_frame(df.assign(acc=[0.4, np.nan, 0.5]), losses=["c4", "code"], target="acc")
    with pytest.raises(ValueError, match=r"column 'ppl' not found"):
        cj.BenchmarkData.from_frame(df, losses=["c4", "ppl"], target="acc")
    with pytest.raises(ValueError, match=r"column 'L1' has a missing or infinite value \(nan\) at row 0"):
        cj.BenchmarkData([[3.1, np.nan]], [0.4])
    with pytest.raises(ValueError, match=r"`weight` \(weights\) must be >= 0; got -1.0 at row 0"):
        cj.BenchmarkData([[3.1, 1.2]], [0.4], weight=[-1.0])


@pytest.mark.slow  # the suite's budget (issue 57): 10 s: a fit program for one warning
def test_too_few_points_warns_and_recommends_tying():
    data = build(frame())
    law = cj.CAMEL.sample_init(__import__("jax").random.key(0), n_datasets=3, n_domains=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cj.fit(
            law,
            data.inputs[:2],
            data.y,
            key=__import__("jax").random.key(0),
            restarts=2,
            options=__import__("camel_jax").FitOptions(max_steps=3),
        )
    assert any("tied=True" in str(w.message) for w in caught)
