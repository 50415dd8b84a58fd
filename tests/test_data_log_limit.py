"""CAMELData's log-law limits are coordinates, not degeneracies (issue 56): a capacity term at beta_i -> 0 or a data
term at gamma_i -> 0 is a finite log law, reported by its finite coordinates, never as an infinite K_i, G_i or C."""

import json
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_law_choice import assert_no_degenerate_numbers

import camel_jax as cj
from camel_jax.cli._common import json_text
from camel_jax.cli.fit import _log_limit, _print_params
from camel_jax.fitting._degenerate import degenerate_batch, degenerate_parameters
from camel_jax.fitting._identify import identifiability
from camel_jax.laws._camel_data import LOG_LIMIT_EXPONENT

T = np.array([[0.7, 0.2, 0.1], [0.3, 0.8, 0.9]])  # profiles [k=2, n=3], columns on the simplex
CENTER = (0.4, 0.3, 0.3)
B, H, C1 = np.array([0.12, 0.3]), np.array([0.05, 0.08]), 2.5  # slopes and level, in units of LOSS_SCALE
SIZE_SCALE, TOKENS_SCALE, LOSS_SCALE = 1e8, 1e10, 2.0


def law_at(beta, gamma, b=B, h=H, tokens=True, **units):
    """A tied CAMELData (c = 3) built from its coordinates: b, h, C1 and the exponents as given."""
    units = dict(size_scale=SIZE_SCALE, tokens_scale=TOKENS_SCALE, loss_scale=LOSS_SCALE, mixture_center=CENTER) | units
    return cj.CAMELData(
        t_roots=jnp.sqrt(jnp.asarray(T)),
        root_b=jnp.sqrt(jnp.asarray(b, float)),
        raw_alpha=None,
        raw_beta=jnp.sqrt(jnp.asarray(beta, float)),
        C1=jnp.asarray(C1),
        root_h=jnp.sqrt(jnp.asarray(h, float)),
        raw_gamma=jnp.sqrt(jnp.asarray(gamma, float)),
        tied=True,
        tokens=tokens,
        gamma_max=None,
        **units,
    )


def runs(P=12, seed=0):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(3), P), np.geomspace(5e7, 1e9, P), rng.uniform(5e9, 5e10, P)


def np_law(beta, gamma, r, M, D):
    """The law in NumPy: each term its power law (b / beta) (x^-beta - 1), or its log law -b log x at beta = 0."""
    log_eta = np.log(r @ T.T) - np.log(T @ np.asarray(CENTER))  # [P, k], from the center
    beta, gamma = np.asarray(beta, float), np.asarray(gamma, float)
    total = np.full(len(M), C1)
    for i in range(2):
        z = log_eta[:, i] / (3.0 + beta[i]) + np.log(M / SIZE_SCALE)
        y = log_eta[:, i] + np.log(D / TOKENS_SCALE)
        total += -B[i] * z if beta[i] == 0 else B[i] / beta[i] * np.expm1(-beta[i] * z)
        total += -H[i] * y if gamma[i] == 0 else H[i] / gamma[i] * np.expm1(-gamma[i] * y)
    return LOSS_SCALE * total


def test_the_log_law_limit_is_the_numpy_log_law_and_its_finite_coordinates():
    r, M, D = runs()
    law = law_at([0.0, 0.4], [0.3, 0.0])  # capacity term 0 and data term 1 in the limit
    np.testing.assert_allclose(law(jnp.asarray(r), jnp.asarray(M), jnp.asarray(D)), np_law([0, 0.4], [0.3, 0], r, M, D),
                               rtol=1e-12)  # fmt: skip
    assert np.asarray(law.log_limit_terms()).tolist() == [True, False]
    assert np.asarray(law.log_limit_data_terms()).tolist() == [False, True]
    params = law.params()  # the paper's form: K_0, G_1 infinite, C minus infinite
    assert np.isinf(float(params["K"][0])) and np.isinf(float(params["G"][1])) and float(params["C"]) == -np.inf
    finite = law.log_limit_params()
    np.testing.assert_allclose(finite["b"], LOSS_SCALE * B, rtol=1e-14)
    np.testing.assert_allclose(finite["h"], LOSS_SCALE * H, rtol=1e-14)
    np.testing.assert_allclose(finite["a"], LOSS_SCALE * B / (3.0 + np.array([0.0, 0.4])), rtol=1e-14)
    assert float(finite["kappa"][0]) == 0.0 and float(finite["nu"][1]) == 0.0
    assert float(finite["C1"]) == pytest.approx(LOSS_SCALE * C1, rel=1e-14)
    assert float(finite["reference_size"]) == SIZE_SCALE and float(finite["reference_tokens"]) == TOKENS_SCALE
    np.testing.assert_allclose(finite["reference_mixture"], CENTER)
    # at the reference point every term is 0: the loss is C1
    at = law(jnp.asarray([CENTER]), jnp.asarray([SIZE_SCALE]), jnp.asarray([TOKENS_SCALE]))
    assert float(at[0]) == pytest.approx(float(finite["C1"]), rel=1e-14)


def test_below_1e_6_a_term_is_its_log_law_over_the_trained_range_and_not_degenerate():
    """The threshold: at exponents under 1e-6 each term differs from its log law by about u / 2 relative, u =
    beta |z| (|z| <= 3 here: sizes 5e7-1e9, tokens 5e9-5e10), far below any fit's noise; its K (G) is already beyond
    1e6 (b, h of order 1), the gap that CAMEL's 1e-8 would leave."""
    r, M, D = runs()
    small = 5e-7  # in the gap CAMEL's 1e-8 would leave: K_0 = b_0 / small = 3e6
    assert small < LOG_LIMIT_EXPONENT
    law = law_at([small, 0.4], [0.3, small], b=[1.5, 0.3], h=[0.05, 1.2])
    assert np.asarray(law.log_limit_terms()).tolist() == [True, False]
    assert np.asarray(law.log_limit_data_terms()).tolist() == [False, True]
    log_law = law_at([0.0, 0.4], [0.3, 0.0], b=[1.5, 0.3], h=[0.05, 1.2])
    gap = np.abs(np.asarray(law(*map(jnp.asarray, (r, M, D)))) - np.asarray(log_law(*map(jnp.asarray, (r, M, D)))))
    assert np.max(gap) / LOSS_SCALE < 1e-5  # terms of order 1, deviating by about 1e-6 |z|^2 / 2
    params = law.params()
    assert float(params["K"][0]) > 1e6 and float(params["G"][1]) > 1e6
    y = np.asarray(law(*map(jnp.asarray, (r, M, D))))
    assert degenerate_parameters(law, (r, M, D), y, np.ones(len(y))) == {}


def test_in_units_moves_a_law_in_its_log_law_limit_exactly():
    r, M, D = runs(seed=1)
    law = law_at([0.0, 0.4], [0.3, 0.0])
    for units in (dict(loss_scale=1e-3), dict(size_scale=3e9, tokens_scale=1.0), dict(mixture_center=None),
                  dict(mixture_center=(0.1, 0.1, 0.8), size_scale=1.0, loss_scale=10.0)):  # fmt: skip
        moved = law.in_units(**units)
        assert all(moved.structure()[k] == v for k, v in units.items())
        np.testing.assert_allclose(moved(r, M, D), np_law([0, 0.4], [0.3, 0], r, M, D), rtol=1e-12)
        np.testing.assert_allclose(moved.log_limit_terms(), law.log_limit_terms())
    linear = cj.CAMELData.from_params(t=T, K=[0.5, 0.2], beta=[0.3, 0.5], C=1.0, d=[0.02, -0.01, 0.0], tied=True,
                                      tokens=False, data_term="linear", mixture_center=CENTER)  # fmt: skip
    moved = linear.in_units(loss_scale=1e3, size_scale=1e9, mixture_center=(0.2, 0.2, 0.6))
    np.testing.assert_allclose(moved(r, M), linear(r, M), rtol=1e-12)
    assert not np.asarray(linear.log_limit_data_terms()).any()
    with pytest.raises(ValueError, match="takes its units"):
        law.in_units(capacity_exponent=1.0)


def test_terms_in_the_log_law_limit_are_not_degenerate_but_a_beta_step_is():
    r, M, D = runs(seed=2)
    w = np.ones(len(M))
    law = law_at([0.0, 0.4], [0.3, 0.0])
    y = np.asarray(law(r, M, D))
    assert degenerate_parameters(law, (r, M, D), y, w) == {}
    none_off = law_at([1e-30, 0.4], [0.3, 0.0], b=[0.0, 0.3])  # a term off (b = 0) in the limit: K = 0 / 0
    assert degenerate_parameters(none_off, (r, M, D), y, w) == {}
    step = law_at([0.0, 2e4], [0.3, 0.0])  # beta_1: a step inside the trained sizes (a factor 20 apart)
    found = degenerate_parameters(step, (r, M, D), y, w)
    assert "beta[1]" in found and "a step inside the trained range" in found["beta[1]"]
    assert not {"C", "K[0]", "G[1]"} & set(found)
    runaway = law_at([0.0, 0.4], [0.3, 0.0], b=[1e9, 0.3])  # a log-law slope the solver ran to
    found = degenerate_parameters(runaway, (r, M, D), y, w)
    assert "b[0]" in found and "K[0]" not in found


def _fit_stand_in(law, r, M, D, targets=None):
    """What `camel-jax fit`'s report reads of a result: its law, its targets and its identifiability."""
    y = np.asarray(law(r, M, D)) if targets is None else None
    ident = lambda coordinates: identifiability(law, (r, M, D), y, np.ones(len(M)), coordinates=coordinates)  # noqa: E731
    return types.SimpleNamespace(law=law, n_targets=targets, identifiability=ident), y


def test_the_cli_prints_the_finite_coordinates_and_no_infinity(capsys):
    r, M, D = runs(seed=3)
    law = law_at([0.0, 0.4], [0.3, 0.0])
    result, y = _fit_stand_in(law, r, M, D)
    out = {
        "params": {k: np.asarray(v).tolist() for k, v in law.params().items()},
        "summary": {"not_identified": []},
        "degenerate": degenerate_parameters(law, (r, M, D), y, np.ones(len(y))),
    }
    _log_limit(result, None, out)
    json.dumps(out["log_limit"], allow_nan=False)  # every finite coordinate is a number
    assert out["log_limit"]["terms"] == [0] and out["log_limit"]["data_terms"] == [1]
    # the file `fit` writes is strict JSON: the paper-form K_0, G_1 and C (infinite in the limit) are null there
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    written = json.loads(json_text(out), parse_constant=refuse)
    assert written["params"]["C"] is None and written["params"]["K"][0] is None and written["params"]["G"][1] is None
    assert written["params"]["K"][1] == pytest.approx(float(law.params()["K"][1]))
    _print_params(out)
    text = capsys.readouterr().out
    assert_no_degenerate_numbers(text)
    assert "C: degenerate (minus infinite in the log-law limit)" in text
    assert "K: [degenerate (infinite in the log-law limit), " in text
    assert "G: [247.4, degenerate (infinite in the log-law limit)]" in text
    assert "data terms [1] are in their log-law limit" in text and "reference size M0 = 1e+08" in text
    assert "  h: [0.1 , 0.16]" in text and "  b: [0.24, 0.6 ]" in text and "  gamma: [0.3, 0. ]" in text
    # a term switched off (b_1 = 0: K_1 = 0, kappa_1 = 1 / K_1 infinite) is said in words, never printed as a number
    off = law_at([0.0, 0.4], [0.3, 0.0], b=[0.12, 0.0])
    result, y = _fit_stand_in(off, r, M, D)
    out = {"params": {k: np.asarray(v).tolist() for k, v in off.params().items()}, "summary": {"not_identified": []},
           "degenerate": degenerate_parameters(off, (r, M, D), y, np.ones(len(y)))}  # fmt: skip
    _log_limit(result, None, out)
    _print_params(out)
    text = capsys.readouterr().out
    assert_no_degenerate_numbers(text)
    assert "  kappa: [0, term off (K_1 below 1e-6)]" in text


def test_a_fit_of_several_targets_names_each_target_s_terms_in_the_limit():
    r, M, D = runs(seed=4)
    laws = [law_at([0.0, 0.4], [0.3, 0.2]), law_at([0.3, 0.4], [0.3, 0.0])]
    batched = jax.tree.map(lambda *leaves: jnp.stack(leaves), *laws)
    out = {"targets": ["loss_a", "loss_b"]}
    _log_limit(types.SimpleNamespace(law=batched, n_targets=2), None, out)
    block = out["log_limit"]
    assert block["terms"] == {"loss_a": [0]} and block["data_terms"] == {"loss_b": [1]}
    json.dumps(block, allow_nan=False)
    assert np.shape(block["params"]["b"]) == (2, 2)


def test_a_batch_in_and_out_of_the_log_law_limit_is_checked_as_each_law_alone():
    """`degenerate_batch` (a bootstrap's resampled laws at once) on laws at the limit (an infinite K or G: each
    re-expressed in the data's units alone, as `degenerate_parameters` does) and away from it."""
    r, M, D = runs(seed=2)
    laws = [law_at([0.3, 0.4], [0.3, 0.2]), law_at([0.0, 0.4], [0.3, 0.0]), law_at([0.0, 2e4], [0.3, 0.0]),
            law_at([0.0, 0.4], [0.3, 0.0], b=[1e9, 0.3]), law_at([0.3, 0.4], [0.3, 0.2], b=[1e9, 0.3]),
            law_at([0.0, 0.9], [0.3, 0.0])]  # K[1] ~1e7 in raw parameters, ~1 in the data's units  # fmt: skip
    y = np.asarray(laws[0](r, M, D))
    weights = np.ones((len(laws), len(M)))
    weights[1::2, :4] = 0.0  # some laws' own resample weights
    batch = jax.tree.map(lambda *leaves: jnp.stack(leaves), *laws)
    found = degenerate_batch(batch, (r, M, D), y, weights)
    assert found == [degenerate_parameters(law, (r, M, D), y, w) for law, w in zip(laws, weights)]
    assert found[0] == {} and found[1] == {} and "beta[1]" in found[2] and "b[0]" in found[3]
    assert abs(float(laws[5].params()["K"][1])) > 1e6 and "K[1]" not in found[5]  # read in the data's units
