"""A parameter at the bound of its range is the bound, not an estimate (issue 56): `AbstractLaw.at_bounds` names it
and `camel-jax fit` prints and writes it as such (CAMELData's gamma_i at `gamma_max`, a bounded beta_i)."""

import types

import jax
import jax.numpy as jnp
import numpy as np

import camel_jax as cj
from camel_jax.cli.fit import _named_at_bounds, _print_params, _print_targets

T = np.array([[0.7, 0.2, 0.1], [0.3, 0.8, 0.9]])


def data_law(gamma, beta=(0.3, 0.2), beta_max=None):
    """A tied CAMELData with tokens and the default bound on its data exponents (gamma_max = 3)."""
    return cj.CAMELData.from_params(t=T, K=[0.5, 0.3], beta=list(beta), C=2.0, G=[0.4, 0.2], gamma=list(gamma),
                                    tied=True, tokens=True, beta_max=beta_max)  # fmt: skip


def test_at_bounds_flags_exactly_the_elements_at_their_bound():
    assert data_law([0.5, 0.7]).at_bounds() == {}
    found = data_law([3.0, 0.7]).at_bounds()
    assert list(found) == ["gamma"]
    field, bound, at = found["gamma"]
    assert (field, bound) == ("gamma_max", 3.0) and at.tolist() == [True, False]
    # 1% below the bound is an estimate; a bounded beta at its bound is the bound
    assert data_law([2.97, 0.7]).at_bounds() == {}
    found = data_law([0.5, 0.7], beta=(2.0, 0.2), beta_max=2.0).at_bounds()
    assert list(found) == ["beta"] and found["beta"][2].tolist() == [True, False]
    # no bound set: nothing is at it (CAMEL's beta without beta_max)
    camel = cj.CAMEL.from_params(t=T, K=[0.5, 0.3], beta=[5.0, 0.2], C=2.0, tied=True)
    assert camel.at_bounds() == {}


def test_fit_prints_and_writes_a_bound_as_the_bound(capsys):
    law = data_law([3.0, 0.7])
    at = _named_at_bounds(types.SimpleNamespace(law=law, n_targets=None, target_laws=lambda: [law]), [])
    assert at == {"gamma[0]": {"bound": "gamma_max", "value": 3.0}}
    out = {"params": {k: np.asarray(v).tolist() for k, v in law.params().items()}, "summary": {"not_identified": []},
           "intervals_95": {k: [np.asarray(v).tolist()] * 2 for k, v in law.params().items()}, "at_bound": at}
    _print_params(out)
    text = capsys.readouterr().out
    assert "  gamma: [3 (at its bound gamma_max), 0.7]" in text  # no interval: it would collapse onto the bound
    # several targets: each element named with its target, and said in one line
    batched = jax.tree.map(lambda *leaves: jnp.stack(leaves), data_law([0.5, 3.0]), data_law([0.5, 0.7]))
    each = [data_law([0.5, 3.0]), data_law([0.5, 0.7])]
    fitted = types.SimpleNamespace(law=batched, n_targets=2, target_laws=lambda: each)
    at = _named_at_bounds(fitted, ["loss_a", "loss_b"])
    assert at == {"loss_a: gamma[1]": {"bound": "gamma_max", "value": 3.0}}
    summary = {"objective": [1.0, 1.0], "r2": [0.9, 0.9], "mape_percent": [1.0, 1.0], "n_converged": [4, 4],
               "n_starts": 4}
    _print_targets({"law_name": "camel-data", "law": "CAMELData", "targets": ["loss_a", "loss_b"], "summary": summary,
                    "best_status": ["converged"] * 2, "at_bound": at}, None)  # fmt: skip
    text = capsys.readouterr().out
    assert "1 parameter element(s) at the bound of their range" in text
    assert "loss_a: gamma[1] (at its bound gamma_max = 3)" in text
