"""Degenerate fits are non-answers, and `--law auto` reads the table (issue 56)."""

import json
import re

import numpy as np
import pandas as pd
import pytest

import camel_jax as cj
from camel_jax.cli import main
from camel_jax.cli.fit import _print_params
from camel_jax.fitting._degenerate import DEGENERATE_HINT, degenerate_parameters

# a parameter line of `camel-jax fit`: "  name: value ..."
PARAMETER_LINE = re.compile(r"^  (\w+): (.*)$")
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")


def assert_no_degenerate_numbers(text: str) -> None:
    """No parameter line prints `inf`/`nan` or a number beyond 1e6 in absolute value."""
    for line in text.splitlines():
        match = PARAMETER_LINE.match(line)
        if not match:
            continue
        value = match.group(2)
        assert not re.search(r"(?<![A-Za-z])-?(inf|nan)(?![A-Za-z])", value), line
        numbers = [float(x) for x in NUMBER.findall(value.split("  (not identified")[0])]
        assert all(abs(x) <= 1e6 for x in numbers), line


def test_the_checker_catches_what_it_must():
    with pytest.raises(AssertionError):
        assert_no_degenerate_numbers("  K: [0.5, inf]")
    with pytest.raises(AssertionError):
        assert_no_degenerate_numbers("  E: -2.98e18")
    with pytest.raises(AssertionError):
        assert_no_degenerate_numbers("  C: 1.2  95% [-1.1e35, 1.357]")
    with pytest.raises(AssertionError):
        assert_no_degenerate_numbers("  K: [0.5, 3e7]")
    assert_no_degenerate_numbers("  C: degenerate (at an infinite limit)\n  beta: [0.3, 0.2]  95% [[0.1, 0.1], [1, 2]]")


def test_degenerate_parameters_names_infinite_limits_levels_and_steps():
    N = np.geomspace(7e7, 4.1e8, 12)
    D = 20 * N
    y = np.full(12, 3.0)
    ok = cj.Chinchilla.from_params(A=400.0, B=400.0, E=1.7, alpha=0.34, beta=0.28)
    assert degenerate_parameters(ok, (N, D), y, np.ones(12)) == {}
    step = cj.Chinchilla.from_params(A=400.0, B=400.0, E=1.7, alpha=3.09e4 / 1e3, beta=0.28)
    found = degenerate_parameters(step, (N, D), y, np.ones(12))
    assert list(found) == ["alpha"] and "step inside the trained range" in found["alpha"]
    # the same exponent over a range too narrow for it to act as a step is an estimate
    narrow = (np.full(12, 1e8) * np.linspace(1, 1.01, 12), D)
    assert degenerate_parameters(step, narrow, y, np.ones(12)) == {}
    level = cj.PowerLaw.from_params(E=2.98e18, A=1.0, alpha=0.3)
    found = degenerate_parameters(level, (N,), y, np.ones(12))
    assert list(found) == ["E"] and "1e+06 times the targets' scale" in found["E"]
    # any other coefficient beyond 1e6 in absolute value (DML's K[2] = 3.96e65 on a single-size table)
    found = degenerate_parameters(cj.PowerLaw.from_params(E=2.0, A=3.96e65, alpha=0.3), (N,), y, np.ones(12))
    assert list(found) == ["A"] and "beyond 1e+06 in absolute value" in found["A"]
    assert degenerate_parameters(cj.PowerLaw.from_params(E=2.0, A=9e5, alpha=0.3), (N,), y, np.ones(12)) == {}
    # weights: the trained range is that of the points with weight > 0
    w = np.r_[np.ones(2), np.zeros(10)]
    assert "alpha" not in degenerate_parameters(
        cj.Chinchilla.from_params(A=400.0, B=400.0, E=1.7, alpha=8.0, beta=0.28), (N, D), y, w
    )
    assert "alpha" in degenerate_parameters(
        cj.Chinchilla.from_params(A=400.0, B=400.0, E=1.7, alpha=8.0, beta=0.28), (N, D), y, np.ones(12)
    )
    # a coefficient is judged in the data's units: SODM-like B = 4.3e8 with beta = 0.89 over raw tokens near 1e9 is a
    # term of about 4, an estimate (3Mix's sodm-additive was called degenerate for it); B = 1e20 is a runaway
    assert degenerate_parameters(cj.Chinchilla.from_params(A=400.0, B=4.3e8, E=1.7, alpha=0.34, beta=0.89), (N, D), y,
                                 np.ones(12)) == {}  # fmt: skip
    found = degenerate_parameters(cj.Chinchilla.from_params(A=400.0, B=1e20, E=1.7, alpha=0.34, beta=0.89), (N, D), y,
                                  np.ones(12))  # fmt: skip
    assert list(found) == ["B"] and "in the data's units" in found["B"]


def test_camel_in_the_log_law_limit_is_not_degenerate():
    law = cj.CAMEL.from_params(t=np.full((2, 3), 1 / 2), K=[1.0, 2.0], alpha=[0.3, 0.2], beta=[0.5, 0.4], C=1.5)
    limit = type(law).from_params(**{**law.params(), "beta": np.array([0.5, 1e-9])})
    r = np.full((4, 3), 1 / 3)
    M = np.array([1.0, 2.0, 4.0, 8.0])
    assert bool(np.asarray(limit.log_limit_terms())[1])
    assert not any(name in ("C", "K[1]") for name in degenerate_parameters(limit, (r, M), np.full(4, 3.0), np.ones(4)))


def test_the_cli_prints_degenerate_parameters_as_such_never_as_numbers(capsys):
    out = {
        "params": {"K": [0.5, float("inf")], "C": -7.0e21, "beta": [0.3, 3.09e4], "t": [[0.5, 0.5], [0.5, 0.5]]},
        "intervals_95": {"C": [-1.1e35, 1.357], "K": [[0.1, 0.2], [1.0, float("inf")]], "t": [[[0.4, 0.4], [0.4, 0.4]],
                         [[0.6, 0.6], [0.6, 0.6]]], "beta": [[0.1, 1.0], [0.5, 5e4]]},  # fmt: skip
        "summary": {"not_identified": []},
        "degenerate": {"K[1]": "at an infinite limit", "C": "below minus 1e+06 times the targets' scale (...)",
                       "beta[1]": "so large that its term changes by a factor e^5e4 (a step ...)"},  # fmt: skip
        "degenerate_advice": "fit --law sodm-additive, the next best of --law auto's held-out ranking",
    }
    _print_params(out)
    text = capsys.readouterr().out
    assert_no_degenerate_numbers(text)
    assert "K: [0.5, degenerate (at an infinite limit)]" in text
    assert "C: degenerate (below minus" in text
    assert "warning: degenerate fit (3 parameter(s)" in text and "--law sodm-additive" in text
    assert "t: [[0.5, 0.5]," in text  # a finite parameter keeps its value and its interval


def test_the_log_law_limit_prints_no_infinity(capsys):
    out = {
        "params": {"K": [0.5, 1e30], "C": -1e30, "alpha": [0.2, 1e-12], "beta": [0.3, 1e-12]},
        "summary": {"not_identified": []},
        "log_limit": {"terms": [1], "params": {"reference_size": 2.0, "C1": 3.0, "b": [0.1, 0.2]},
                      "not_identified": []},
    }
    _print_params(out)
    text = capsys.readouterr().out
    assert_no_degenerate_numbers(text)
    assert "C: degenerate (minus infinite in the log-law limit)" in text


def _percentile_with_limits(values: np.ndarray, q: float) -> np.ndarray:
    """The linear-interpolation percentile along axis 0, by hand: an end that interpolates an infinite order
    statistic (with a positive weight) is that infinity."""
    x = np.sort(values, axis=0)
    h = q / 100 * (len(x) - 1)
    lo, frac = int(np.floor(h)), h - np.floor(h)
    a, b = x[lo], x[min(lo + 1, len(x) - 1)]
    with np.errstate(invalid="ignore"):
        mid = a + frac * (b - a)
    return np.where(np.isinf(a) & (frac < 1), a, np.where(np.isinf(b) & (frac > 0), b, mid))


def test_an_interval_reaching_the_log_law_limit_ends_there_and_prints_unbounded(capsys):
    """Before: a resample whose term sat in the log-law limit put its stand-ins into the intervals (C's lower end
    -1.3e34, K's upper 1e23 on the default world's runs), printed as estimates."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    betas = [[0.9 + 0.1 * rng.normal(), 1.5 + 0.1 * rng.normal()] for _ in range(40)]
    betas[7][1] = 1e-12  # resample 7's second term in the log-law limit
    laws = [cj.CAMEL.from_params(t=np.array([[0.8, 0.3, 0.1], [0.2, 0.7, 0.9]]), K=[1.0 + 0.1 * i / 40, 0.6],
                                 beta=b, C=1.5 - 0.01 * i, tied=True, capacity_exponent=3.0)
            for i, b in enumerate(betas)]  # fmt: skip
    boot = cj.BootstrapResult.of_laws(jax.tree.map(lambda *leaves: jnp.stack(leaves), *laws))
    got = boot.interval(0.95)
    plain = {k: np.stack([np.asarray(law.params()[k], dtype=float) for law in laws]) for k in got}
    expected = {k: v.copy() for k, v in plain.items()}
    expected["C"][7], expected["K"][7, 1], expected["alpha"][7, 1], expected["beta"][7, 1] = -np.inf, np.inf, 0, 0
    for name, (low, high) in got.items():
        np.testing.assert_allclose(low, _percentile_with_limits(expected[name], 2.5), rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(high, _percentile_with_limits(expected[name], 97.5), rtol=1e-12, err_msg=name)
    assert got["C"][0] == -np.inf and got["K"][1][1] == np.inf
    assert got["beta"][0][1] < min(b[1] for b in betas if b[1] > 1e-6)  # pulled toward the limit's 0
    # without a resample in a limit, the intervals are numpy's percentiles of `params()`, as before
    clean = cj.BootstrapResult.of_laws(jax.tree.map(lambda *leaves: jnp.stack(leaves), *(laws[:7] + laws[8:])))
    for name, (low, high) in clean.interval(0.9).items():
        values = np.delete(plain[name], 7, axis=0)
        np.testing.assert_allclose([low, high], np.percentile(values, [5, 95], axis=0), rtol=1e-12, err_msg=name)
    # the command line prints the ends at the limit as unbounded (or 0), never the stand-ins
    out = {"params": {k: np.asarray(laws[0].params()[k]).tolist() for k in got},
           "intervals_95": {k: [np.asarray(lo).tolist(), np.asarray(hi).tolist()] for k, (lo, hi) in got.items()},
           "summary": {"not_identified": []}}  # fmt: skip
    _print_params(out)
    text = capsys.readouterr().out
    assert_no_degenerate_numbers(text)
    assert re.search(r"  C: 1\.5  95% \[unbounded, [\d.]+\]", text), text


def test_a_point_at_zero_to_working_precision_is_not_outside_its_interval():
    """The default world's camel-tied fit warned that K[1] = 2.5e-41 (a term switched off) lay outside its interval
    [5.0e-41, unbounded]: both are 0 to working precision. K[0] = 0.095 below [0.118, unbounded] is outside."""
    from camel_jax.cli.fit import _outside

    inf = float("inf")
    params = {"K": [0.095, 2.5e-41, 1.7076], "C": 2.2404}
    intervals = {"K": [[0.118, 5.0e-41, 1.96e-41], [inf, inf, inf]], "C": [-inf, 2.2424]}
    assert _outside(params, intervals) == ["K[0]"]
    assert _outside({"C": 2.2425}, {"C": [-inf, 2.2424]}) == ["C"]  # 4e-5 relative: outside
    assert _outside({"C": 2.2424 * (1 + 1e-12)}, {"C": [-inf, 2.2424]}) == []  # rounding: inside


def test_the_problem_sentence_names_the_way_out():
    assert "token-aware law" in DEGENERATE_HINT and "--law auto" in DEGENERATE_HINT


def _single_size_table(path, rng, P=40, n=4):
    r = rng.dirichlet(np.ones(n) * 0.7, P)
    truth = cj.LogLinear.from_params(A=3.0, b=[-0.02, -0.01, 0.015, -0.005], eps=0.01)
    y = np.asarray(truth(r)) * np.exp(rng.normal(0, 0.002, P))
    pd.DataFrame(r, columns=[f"r_{j}" for j in range(n)]).assign(loss=y).to_csv(path, index=False)


@pytest.mark.slow  # two held-out fits and a final fit: ~1 min on the shared 2-core machine
def test_auto_on_a_single_size_table_compares_laws_of_the_mixture(tmp_path, capsys):
    _single_size_table(tmp_path / "runs.csv", np.random.default_rng(0))
    code = main(["fit", str(tmp_path / "runs.csv"), "--restarts", "4", "--resamples", "0", "--out",
                 str(tmp_path / "fit")])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0, text
    line = next(x for x in text.splitlines() if x.startswith("--law auto: held-out MAPE"))
    assert "of 40 mixtures held out" in line and "one size: laws of the mixture" in line
    assert "log-linear" in line and "dml" in line and "camel-mixture" in line and "fitting " in line
    assert_no_degenerate_numbers(text)


def test_auto_refuses_one_size_with_varying_tokens(tmp_path, capsys):
    rng = np.random.default_rng(1)
    r = rng.dirichlet(np.ones(3), 12)
    frame = pd.DataFrame(r, columns=["r_a", "r_b", "r_c"]).assign(tokens=np.repeat([1e9, 2e9, 4e9], 4), loss=3.0)
    frame.to_csv(tmp_path / "runs.csv", index=False)
    code = main(["fit", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "fit")])
    err = capsys.readouterr().err
    assert code == 2 and "one model size and 3 token budgets" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "fit.json").exists()


@pytest.mark.slow  # four held-out fits and a final fit
def test_auto_drops_a_constant_tokens_column_and_says_so(tmp_path, capsys):
    rng = np.random.default_rng(2)
    r = rng.dirichlet(np.ones(3), 24)
    size = np.repeat([1.0, 2.0, 4.0], 8)
    t = np.array([[0.6, 0.3, 0.1], [0.4, 0.7, 0.9]])  # [k, n], each dataset's column on the simplex
    truth = cj.CAMEL.from_params(t=t, K=[1.0, 0.7], alpha=[0.3, 0.2], beta=[0.5, 0.4], C=1.5)
    y = np.asarray(truth(r, size)) * np.exp(rng.normal(0, 0.002, 24))
    frame = pd.DataFrame(r, columns=["r_a", "r_b", "r_c"]).assign(size=size, tokens=2e10, loss=y)
    frame.to_csv(tmp_path / "runs.csv", index=False)
    code = main(["fit", str(tmp_path / "runs.csv"), "--restarts", "4", "--resamples", "0", "--out",
                 str(tmp_path / "fit")])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0, text
    assert "column 'tokens' holds one value in every row" in text
    line = next(x for x in text.splitlines() if x.startswith("--law auto: held-out MAPE"))
    assert "mixtures held out at random" in line and "camel-data" not in line
    assert_no_degenerate_numbers(text)


@pytest.mark.slow  # four held-out fits (camel-data among them: minutes of compile on a shared machine)
def test_auto_with_two_sizes_holds_out_the_largest_token_budget_among_laws_that_read_tokens(tmp_path, capsys):
    rng = np.random.default_rng(3)
    r = np.repeat(rng.dirichlet(np.ones(3), 4), 6, axis=0)
    size = np.tile(np.repeat([1e8, 3e8], 3), 4)
    tokens = size * np.tile([10.0, 20.0, 40.0], 8)
    truth = cj.SODMAdditive.from_params(E=1.5, A=300.0, alpha=0.3, B=2000.0, beta=0.35, C=[2.0, 3.0, 4.0],
                                        gamma=[0.3, 0.5, 0.7])  # fmt: skip
    y = np.asarray(truth(r, size, tokens)) * np.exp(rng.normal(0, 0.002, 24))
    frame = pd.DataFrame(r, columns=["r_a", "r_b", "r_c"]).assign(size=size, tokens=tokens, loss=y)
    frame.to_csv(tmp_path / "runs.csv", index=False)
    # a mixture's three budgets at one size read as one run's checkpoints: every one kept (the default is the last)
    code = main(["fit", str(tmp_path / "runs.csv"), "--checkpoint", "all", "--restarts", "4", "--resamples", "0",
                 "--out", str(tmp_path / "fit")])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0, text
    line = next(x for x in text.splitlines() if x.startswith("--law auto: held-out MAPE"))
    assert "each size's largest token budget held out (8 of 24 rows)" in line and "laws that read them" in line
    assert "camel-tied" not in line and "camel-free" not in line  # laws that ignore a varying column: not candidates
    assert_no_degenerate_numbers(text)


def test_held_out_fits_draw_a_bar_over_the_laws_on_a_terminal_only(monkeypatch):
    # the fits of `--law auto` on a held-out split (`held_out_rows`): one bar step per candidate law, on stderr
    import io
    import sys

    import jax

    from camel_jax.experiments._select import held_out_rows

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    rng = np.random.default_rng(4)
    r = rng.dirichlet(np.ones(3), 16)
    truth = cj.LogLinear.from_params(A=3.0, b=[-0.02, -0.01, 0.015], eps=0.01)
    y = np.asarray(truth(r)) * np.exp(rng.normal(0, 0.002, 16))
    law = cj.LogLinear.sample_init(jax.random.key(0), n_datasets=3)
    laws, inputs = {"first": law, "second": law}, {"first": (r,), "second": (r,)}
    test = np.arange(16) % 4 == 0
    for stream in (Terminal(), io.StringIO()):
        monkeypatch.setattr(sys, "stderr", stream)
        _, table = held_out_rows(laws, inputs, y, test, key=jax.random.key(1), restarts=2, progress=True)
        monkeypatch.undo()
        assert set(table["law"]) == {"first", "second"}
        if isinstance(stream, Terminal):
            drawn = stream.getvalue()
            assert drawn.count("\r") == 3 and "held-out fits (first)" in drawn and "held-out fits (second)" in drawn
            assert "0/2 laws" in drawn and "1/2 laws" in drawn and drawn.endswith("2/2 laws\n"), drawn
        else:
            assert stream.getvalue() == ""


class _FakeFit:
    """What `--law auto`'s check reads of a fit of several targets: the best start's status and the degenerate
    parameters."""

    def __init__(self, status, degenerate=()):
        self.best_status, self.n_targets, self._degenerate = np.asarray(status), len(status), degenerate

    def degenerate_by_target(self):
        return [{"E": "below minus 1e+06 times the targets' scale"} if t in self._degenerate else {}
                for t in range(self.n_targets)]  # fmt: skip


def test_auto_replaces_a_pick_unconverged_or_degenerate_on_a_quarter_of_the_targets(tmp_path, capsys, monkeypatch):
    """Issue 56, without compiling a law: auto's pick with the best start at the step cap (or degenerate) on more
    than a quarter of the targets is replaced by the next candidate that does better; never by one that does not."""
    import argparse

    import camel_jax.cli.fit as cli_fit
    import camel_jax.fitting._fit as fit_module
    from camel_jax.cli import _parser
    from camel_jax.cli._common import read_table
    from camel_jax.solver._options import Status

    rng = np.random.default_rng(5)
    frame = pd.DataFrame(rng.dirichlet(np.ones(3), 12), columns=["r_a", "r_b", "r_c"])
    frame.assign(size=np.repeat([1.0, 2.0, 4.0], 4), l1=3.0, l2=3.1, l3=3.2, l4=3.3).to_csv(tmp_path / "runs.csv",
                                                                                          index=False)  # fmt: skip
    ok, cap = int(Status.CONVERGED), int(Status.MAX_STEPS)
    ranking = ["sodm-additive", "camel-tied", "camel-free"]

    def run(results, law="sodm-additive"):
        fitted = []

        def fake(template, *args, **kwargs):
            fitted.append(type(template).__name__)
            return results[type(template).__name__ if type(template).__name__ in results else law]

        monkeypatch.setattr(fit_module, "fit", fake)
        parsed = _parser().parse_args(["fit", str(tmp_path / "runs.csv"), "--target", "l1,l2,l3,l4"])
        args = argparse.Namespace(**(vars(parsed) | {"law": law, "auto_ranking": ranking}))
        source = read_table(args)
        chosen, _, result = cli_fit._auto_fallback(args, source, None, results["pick"], None)
        return chosen.law, result, fitted, capsys.readouterr().out

    # 3 of 4 targets at the step cap (one of them degenerate): the next candidate, converged, is taken
    pick, good = _FakeFit([cap, cap, ok, cap], degenerate=[0]), _FakeFit([ok, ok, ok, ok])
    law, result, fitted, text = run({"pick": pick, "CAMEL": good})
    assert law == "camel-tied" and result is good and fitted == ["CAMEL"], text
    assert "sodm-additive's best start is unconverged (max steps) or degenerate on 3 of 4 targets" in text
    assert "fitting camel-tied, the next by held-out error" in text
    # every candidate as bad: the pick stays (its problems() say why), after trying each
    law, result, fitted, text = run({"pick": pick, "CAMEL": _FakeFit([cap, cap, cap, cap])})
    assert law == "sodm-additive" and result is pick and len(fitted) == 2 and "keeping sodm-additive" in text
    # one of 4 targets (a quarter): the pick stands, nothing else is fitted
    one = _FakeFit([cap, ok, ok, ok])
    law, result, fitted, text = run({"pick": one, "CAMEL": good})
    assert law == "sodm-additive" and result is one and fitted == [] and text == ""


@pytest.mark.slow  # two final fits (camel-tied compiles): ~1 min on the shared 2-core machine
def test_auto_fits_the_next_candidate_when_its_pick_does_not_converge_on_every_run(tmp_path, capsys, monkeypatch):
    """Issue 56: auto's pick, fitted on every run, with its best start at the step cap on more than a quarter of the
    targets is not the answer: the next law of auto's ranking is fitted and kept when it converges."""
    import argparse

    import equinox as eqx

    import camel_jax.cli.fit as cli_fit
    import camel_jax.fitting._fit as fit_module
    from camel_jax.solver._options import Status

    rng = np.random.default_rng(4)
    r = rng.dirichlet(np.ones(3), 24)
    size = np.repeat([1.0, 2.0, 4.0], 8)
    t = np.array([[0.6, 0.3, 0.1], [0.4, 0.7, 0.9]])
    truth = cj.CAMEL.from_params(t=t, K=[1.0, 0.7], alpha=[0.3, 0.2], beta=[0.5, 0.4], C=1.5)
    y = np.asarray(truth(r, size)) * np.exp(rng.normal(0, 0.002, 24))
    frame = pd.DataFrame(r, columns=["r_a", "r_b", "r_c"]).assign(size=size, loss_1=y, loss_2=1.1 * y)
    frame.to_csv(tmp_path / "runs.csv", index=False)

    def ranked(args, data):  # auto's held-out ranking, without its held-out fits
        return argparse.Namespace(**(vars(args) | {"law": "log-linear-size", "collinearity_said": True,
                                                   "auto_ranking": ["log-linear-size", "camel-tied"]})), data

    real_fit = fit_module.fit

    def capped(template, *args, **kwargs):  # the pick's every start stops at the step cap
        result = real_fit(template, *args, **kwargs)
        if type(template).__name__ == "LogLinear":
            result = eqx.tree_at(lambda x: x.status, result, np.full(np.shape(result.status), int(Status.MAX_STEPS)))
        return result

    monkeypatch.setattr(cli_fit, "_choose_law", ranked)
    monkeypatch.setattr(fit_module, "fit", capped)
    code = main(["fit", str(tmp_path / "runs.csv"), "--target", "loss_1,loss_2", "--restarts", "4",
                 "--resamples", "0", "--no-calibrate", "--out", str(tmp_path / "fit")])  # fmt: skip
    captured = capsys.readouterr()
    text = captured.out
    assert code == 0, captured.err
    assert "log-linear-size's best start is unconverged (max steps) or degenerate on 2 of 2 targets" in text, text
    assert "fitting camel-tied, the next by held-out error" in text
    saved = json.loads((tmp_path / "fit.json").read_text())
    assert saved["law_name"] == "camel-tied" and set(saved["best_status"]) <= {"converged", "stalled"}


@pytest.mark.parametrize("log_linear_error, winner, failed", [(1.5, "camel-mixture", 0.0), (1.1, "log-linear", 0.0),
                                                              (1.5, "camel-mixture", 0.2), (1.5, "log-linear", 0.5)])
def test_auto_on_one_size_compares_camel_mixture_by_the_one_standard_error_rule(
    tmp_path, capsys, monkeypatch, log_linear_error, winner, failed
):
    """The single-size candidates include CAMEL's law of the mixture (`camel-mixture`), and the one-standard-error
    rule counts its free parameters: within one standard error of it the smaller log-linear law wins. A candidate
    unconverged or degenerate on some targets is kept up to the final fit's share (a quarter) and passed over
    beyond it. Fast: the held-out fits are replaced by given errors (the fits: the slow test above and
    tests/test_camel_mixture.py)."""
    from camel_jax.cli import _parser
    from camel_jax.cli import fit as cli_fit
    from camel_jax.cli._common import read_table
    from camel_jax.experiments import _select
    from camel_jax.laws import n_free_parameters

    seen = {}

    def held_out(laws, inputs, y, test, *, key, restarts=16, options=None, progress=False, weights=None):
        seen.update(laws=dict(laws), inputs=dict(inputs), test=np.asarray(test))
        errors = {"camel-mixture": 1.0, "log-linear": log_linear_error, "dml": 2.0}
        frame = pd.DataFrame({"law": list(errors), "error": list(errors.values()), "error_se": 0.2,
                              "converged": True, "degenerate": False, "failed_share": [failed, 0.0, 0.0]})  # fmt: skip
        return "camel-mixture", frame

    monkeypatch.setattr(_select, "held_out_rows", held_out)
    _single_size_table(tmp_path / "runs.csv", np.random.default_rng(0))
    args = _parser().parse_args(["fit", str(tmp_path / "runs.csv"), "--restarts", "4"])
    chosen, _ = cli_fit._choose_law(args, read_table(args))
    line = capsys.readouterr().out.strip()
    assert set(seen["laws"]) == {"log-linear", "dml", "camel-mixture"} == set(cli_fit.AUTO_MIXTURE_LAWS)
    assert type(seen["laws"]["camel-mixture"]).__name__ == "CAMELMixture"
    assert len(seen["inputs"]["camel-mixture"]) == 1 and seen["test"].sum() == 10  # a quarter of 40 mixtures
    sizes = {name: n_free_parameters(law) for name, law in seen["laws"].items()}
    assert sizes["log-linear"] < sizes["camel-mixture"]  # 6 vs 3 * 4 + 3 + 3 + 3 + 1 = 22 (k = 3, n = 4)
    assert chosen.law == winner and f"fitting {winner} on every run" in line
    assert "camel-mixture 1.000%" in line and "one size: laws of the mixture" in line
    assert ("within one standard error" in line) == (winner == "log-linear" and failed == 0.0)
    said = {0.0: "camel-mixture 1.000%, ", 0.2: "camel-mixture 1.000% (20% of the targets unconverged or degenerate)",
            0.5: "camel-mixture 1.000% (unconverged or degenerate on 50% of the targets)"}[failed]
    assert said in line, line


def test_held_out_rows_of_several_targets_score_the_mean_of_their_errors():
    """`--law auto` on a split of rows fits every target at once and ranks by the mean of the targets' held-out
    MAPEs: each target's error is its own fit's (as fitted alone), a target's unmeasured rows count nowhere."""
    import jax

    from camel_jax.experiments._select import held_out_rows

    rng = np.random.default_rng(5)
    r = rng.dirichlet(np.ones(3), 16)
    truths = [cj.LogLinear.from_params(A=3.0, b=b, eps=0.01) for b in ([-0.02, -0.01, 0.015], [0.03, -0.05, 0.0])]
    Y = np.stack([np.asarray(t(r)) * np.exp(rng.normal(0, 0.01, 16)) for t in truths])
    weights = np.ones_like(Y)
    weights[1, [0, 5]] = 0.0  # target 1 was not measured on a held-out row and a training row
    law = cj.LogLinear.sample_init(jax.random.key(0), n_datasets=3)
    test = np.arange(16) % 4 == 0
    common = dict(key=jax.random.key(1), restarts=2)
    _, both = held_out_rows({"log-linear": law}, {"log-linear": (r,)}, Y, test, weights=weights, **common)
    alone = [held_out_rows({"log-linear": law}, {"log-linear": (r,)}, Y[t], test, weights=weights[t], **common)[1]
             for t in range(2)]  # fmt: skip
    assert both["error"][0] == pytest.approx(np.mean([a["error"][0] for a in alone]), rel=1e-6)
    assert bool(both["converged"][0]) == all(bool(a["converged"][0]) for a in alone)
    assert both["failed_share"][0] == pytest.approx(np.mean([a["failed_share"][0] for a in alone]))
    with pytest.raises(ValueError, match="`test` must mark some but not all of the 16 rows"):
        held_out_rows({"log-linear": law}, {"log-linear": (r,)}, Y, np.ones(16, bool), **common)


@pytest.mark.parametrize("failed, winner", [(0.0, "camel-tied"), (0.25, "camel-tied"), (0.5, "log-linear-size")])
def test_auto_on_four_sizes_scores_every_target_at_the_largest_size(tmp_path, capsys, monkeypatch, failed, winner):
    """On 4+ sizes `--law auto` holds out the largest size and scores as on a split of rows (`held_out_rows`): every
    target fitted ([T, P], a target's missing rows weighted 0), the mean of their held-out MAPEs, a candidate kept
    up to the final fit's share of unconverged or degenerate targets (a quarter) and passed over beyond it, the
    share said. Fast: the held-out fits are replaced by given errors (their scoring: the tests above and below)."""
    from camel_jax.cli import _parser
    from camel_jax.cli import fit as cli_fit
    from camel_jax.cli._common import read_table
    from camel_jax.experiments import _select

    seen = {}

    def held_out(laws, inputs, y, test, *, key, restarts=16, options=None, progress=False, weights=None):
        seen.update(laws=dict(laws), y=np.asarray(y), test=np.asarray(test), weights=np.asarray(weights))
        errors = {"camel-tied": 1.0, "camel-free": 3.0, "sodm-additive": 2.0, "log-linear-size": 1.5}
        frame = pd.DataFrame({"law": list(errors), "error": list(errors.values()), "error_se": 0.2, "converged": True,
                              "degenerate": False, "failed_share": [failed, 0.0, 0.0, 0.0]})  # fmt: skip
        return "camel-tied", frame

    monkeypatch.setattr(_select, "held_out_rows", held_out)
    rng = np.random.default_rng(7)
    size = np.repeat([1e8, 2e8, 4e8, 8e8], 6)
    frame = pd.DataFrame(np.tile(rng.dirichlet(np.ones(3), 6), (4, 1)), columns=["r_a", "r_b", "r_c"])
    frame = frame.assign(size=size, loss_1=3.0 * (size / 1e8) ** -0.1, loss_2=2.0 * (size / 1e8) ** -0.2)
    frame.loc[2, "loss_2"] = np.nan  # target 2 not measured on one run
    frame.to_csv(tmp_path / "runs.csv", index=False)
    args = _parser().parse_args(["fit", str(tmp_path / "runs.csv"), "--target", "loss_1,loss_2", "--restarts", "4"])
    chosen, _ = cli_fit._choose_law(args, read_table(args))
    text = capsys.readouterr().out
    assert set(seen["laws"]) == {"camel-tied", "camel-free", "sodm-additive", "log-linear-size"}  # no tokens column
    assert seen["y"].shape == (2, 24) and seen["weights"].shape == (2, 24)  # every target, not their mean
    assert seen["weights"][1, 2] == 0 and seen["weights"].sum() == 47
    np.testing.assert_array_equal(seen["test"], size == 8e8)
    assert "chosen on the mean of the 2 targets' held-out MAPEs, every target fitted" in text
    line = next(x for x in text.splitlines() if x.startswith("--law auto: held-out MAPE"))
    assert "the largest size (8e+08) held out, fitted on the smaller sizes (6 of 24 rows)" in line, line
    assert chosen.law == winner and f"fitting {winner} on every run" in line
    said = {0.0: "camel-tied 1.000%, ", 0.25: "camel-tied 1.000% (25% of the targets unconverged or degenerate)",
            0.5: "camel-tied 1.000% (unconverged or degenerate on 50% of the targets)"}[failed]
    assert said in line, line


@pytest.mark.slow  # two law compiles, 10-20 s on the shared 2-core machine; the fast check is the mocked test above
def test_held_out_size_of_several_targets_ranks_as_the_targets_do_not_as_their_mean():
    """Why `--law auto` fits every target at the held-out size too: two losses move with the mixture in opposite
    directions and their mean does not. A law of the mixture holds each loss out at the largest size best (a power
    law of size alone misses the mixture's +-40%), while on the mean the power law, exact there, wins. Scored per
    target, the ranking is the targets' own, and each target's error is its own fit's."""
    import jax

    from camel_jax.experiments._select import held_out_rows

    rng = np.random.default_rng(6)
    share = np.linspace(0.05, 0.95, 8)
    r = np.tile(np.stack([share, 1 - share], 1), (4, 1))
    size = np.repeat([1.0, 2.0, 4.0, 8.0], 8)
    loss = 2.0 + 3.0 * size**-0.5  # what the mean of the two targets follows
    effect = 0.8 * (r[:, 0] - 0.5)
    Y = np.stack([loss * (1 + effect), loss * (1 - effect)]) * np.exp(rng.normal(0, 0.002, (2, 32)))
    laws = {"log-linear-size": cj.LogLinear.sample_init(jax.random.key(0), n_datasets=2, size=True),
            "power": cj.PowerLaw.sample_init(jax.random.key(0))}  # fmt: skip
    inputs = {"log-linear-size": (r, size), "power": (size,)}
    test = size == 8.0
    common = dict(key=jax.random.key(1), restarts=4)
    winner, per_target = held_out_rows(laws, inputs, Y, test, **common)
    errors = dict(zip(per_target["law"], per_target["error"]))
    assert winner == "log-linear-size" and errors["power"] > 3 * errors["log-linear-size"], errors  # 22.6% vs 4.5%
    # the mean target twice: the shapes of the fit above (no new compile), the error of the mean target's fit
    winner, on_mean = held_out_rows(laws, inputs, np.stack([Y.mean(0)] * 2), test, **common)
    errors = dict(zip(on_mean["law"], on_mean["error"]))
    assert winner == "power" and errors["log-linear-size"] > 10 * errors["power"], errors  # 4.5% vs 0.09%
    assert per_target["converged"].all() and on_mean["converged"].all()


def test_auto_on_a_size_column_with_one_value_says_it_cannot_extrapolate_in_size(tmp_path, capsys, monkeypatch):
    """A size column with one value (Data Mixing Laws' 2Mix with its 160M runs held out): with varying tokens, one
    line naming the column and its value and exit 2, no fit; with one token count, the laws of the mixture, and
    auto's line says their predictions hold at that size only."""
    from camel_jax.cli import _parser
    from camel_jax.cli import fit as cli_fit
    from camel_jax.cli._common import read_table
    from camel_jax.experiments import _select

    rng = np.random.default_rng(1)
    frame = pd.DataFrame(rng.dirichlet(np.ones(3), 12), columns=["r_a", "r_b", "r_c"]).assign(size=1e8, loss=3.0)
    frame.assign(tokens=np.repeat([1e9, 2e9, 4e9], 4)).to_csv(tmp_path / "runs.csv", index=False)
    code = main(["fit", str(tmp_path / "runs.csv"), "--out", str(tmp_path / "fit")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "one model size ('size' holds 1e+08 in every row) and 3 token budgets" in err
    assert "add runs at a second size" in err and not (tmp_path / "fit.json").exists()

    def held_out(laws, inputs, y, test, *, key, restarts=16, options=None, progress=False, weights=None):
        errors = {"log-linear": 1.0, "dml": 2.0, "camel-mixture": 3.0}
        return "log-linear", pd.DataFrame({"law": list(errors), "error": list(errors.values()), "error_se": 0.1,
                                           "converged": True, "degenerate": False, "failed_share": 0.0})  # fmt: skip

    monkeypatch.setattr(_select, "held_out_rows", held_out)
    frame.to_csv(tmp_path / "one.csv", index=False)
    args = _parser().parse_args(["fit", str(tmp_path / "one.csv")])
    chosen, _ = cli_fit._choose_law(args, read_table(args))
    line = capsys.readouterr().out.strip()
    assert chosen.law == "log-linear" and "one model size (1e+08: predictions at this size only)" in line, line


def test_auto_ranks_a_law_the_sizes_do_not_determine_after_those_they_do(tmp_path, capsys, monkeypatch):
    """On 2 sizes with varying tokens, a law with more size parameters than sizes (sodm-additive: 3) is ranked after
    one the sizes determine (log-linear-size: 1), whatever its held-out error on the split of token budgets (3Mix:
    sodm-additive won that split and held out at the next size at 6.9%, log-linear-size at 4.2%). Fast: the held-out
    fits are replaced by given errors."""
    from camel_jax.cli import _parser
    from camel_jax.cli import fit as cli_fit
    from camel_jax.cli._common import read_table
    from camel_jax.experiments import _select

    def held_out(laws, inputs, y, test, *, key, restarts=16, options=None, progress=False, weights=None):
        errors = {name: (0.5 if name != "log-linear-size" else 2.0) for name in laws}
        frame = pd.DataFrame({"law": list(errors), "error": list(errors.values()), "error_se": 0.1, "converged": True,
                              "degenerate": False, "failed_share": 0.0})  # fmt: skip
        return min(errors, key=errors.get), frame

    monkeypatch.setattr(_select, "held_out_rows", held_out)
    rng = np.random.default_rng(3)
    r = np.repeat(rng.dirichlet(np.ones(3), 4), 6, axis=0)
    size = np.tile(np.repeat([1e8, 3e8], 3), 4)
    tokens = size * np.tile([10.0, 20.0, 40.0], 8)
    frame = pd.DataFrame(r, columns=["r_a", "r_b", "r_c"]).assign(size=size, tokens=tokens, loss=3.0 - 0.1 * r[:, 0])
    frame.to_csv(tmp_path / "runs.csv", index=False)
    args = _parser().parse_args(["fit", str(tmp_path / "runs.csv"), "--checkpoint", "all", "--restarts", "4"])
    chosen, _ = cli_fit._choose_law(args, read_table(args))
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("--law auto: held-out MAPE"))
    assert chosen.law == "log-linear-size" and "fitting log-linear-size on every run" in line, line
    assert "sodm-additive 0.500% (size dependence not determined: 2 sizes for 3 parameters)" in line, line


def test_predict_refuses_another_size_for_a_law_of_the_mixture(tmp_path, capsys):
    """A law that reads no size, fitted on one size, predicts at that size only: `predict` refuses rows at another
    size in one line before any compute (2Mix: log-linear fitted at 70M 'predicted' the 160M runs at 15% error)."""
    rng = np.random.default_rng(0)
    r = rng.dirichlet(np.ones(3), 24)
    loss = 3.0 - 0.2 * np.log(r[:, 0] + 0.05) * 0.1 + rng.normal(0, 0.002, 24)
    frame = pd.DataFrame(r, columns=["r_a", "r_b", "r_c"]).assign(size=1e8, loss=loss)
    frame.to_csv(tmp_path / "runs.csv", index=False)
    code = main(["fit", str(tmp_path / "runs.csv"), "--law", "log-linear", "--restarts", "2", "--resamples", "2",
                 "--no-calibrate", "--out", str(tmp_path / "fit")])  # fmt: skip
    assert code == 0, capsys.readouterr()
    frame.head(4).to_csv(tmp_path / "same.csv", index=False)
    frame.head(4).assign(size=2e8).to_csv(tmp_path / "other.csv", index=False)
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "fit.npz"), str(tmp_path / "same.csv")]) == 0
    assert main(["predict", str(tmp_path / "fit.npz"), str(tmp_path / "other.csv")]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "4 of 4 rows are at a model size the fit was not made at (2e+08; fitted at 1e+08)" in \
        error[0], error  # fmt: skip


def test_the_fit_json_names_each_degenerate_target():
    """A fit of several targets wrote `"degenerate": {}` to its .json whatever its targets were (5Mix: 18 of 22
    degenerate); each element now carries its target's name."""
    from types import SimpleNamespace

    from camel_jax.cli.fit import _named_degenerate

    found = [{"C": "below minus 1e+06 times the targets' scale"}, {}, {"K[1]": "at an infinite limit"}]
    several = SimpleNamespace(n_targets=3, degenerate_by_target=lambda: found)
    assert _named_degenerate(several, ["web", "code", "math"]) == {
        "math: K[1]": "at an infinite limit", "web: C": "below minus 1e+06 times the targets' scale"}
    one = SimpleNamespace(n_targets=None, degenerate=lambda: {"C": "not a number"})
    assert _named_degenerate(one, ["loss"]) == {"C": "not a number"}
