"""A fit remembers how it was made (`FitResult.options`) and everything that rereads it uses them; `Status` names
itself; `fit` and `fit_arrays` take `weights` the same way (issue 57)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import camel_jax as cj

KEY = jax.random.key(0)
TRUE = cj.PowerLaw.from_params(E=2.0, A=5.0, alpha=0.6)
X = jnp.linspace(1.0, 30.0, 24)
Y = TRUE(X) * (1 + 0.01 * jax.random.normal(jax.random.key(1), (24,)))
OPTIONS = cj.FitOptions(delta=0.1, max_steps=400)


@pytest.fixture(scope="module")
def fitted():
    return cj.fit(TRUE, (X,), Y, key=KEY, restarts=4, options=OPTIONS)


def test_a_fit_keeps_its_options_and_a_saved_file_gives_them_back(fitted, tmp_path):
    assert fitted.options == OPTIONS and fitted.fit_options == OPTIONS
    assert cj.fit(TRUE, (X,), Y, key=KEY, restarts=4).options == cj.FitOptions()
    loaded = cj.load(cj.save(fitted, tmp_path / "fit.npz"))
    assert loaded.options == OPTIONS
    # a fit with a penalty (a function, which no file holds) is saved without its options: defaults on load
    penalized = cj.fit(TRUE, (X,), Y, key=KEY, restarts=4, options=OPTIONS.replace(penalty=lambda law: 0.0 * law.log_E))
    assert cj.load(cj.save(penalized, tmp_path / "penalized.npz")).options is None


def test_a_file_without_options_or_with_bad_ones(fitted, tmp_path):
    import json
    import zipfile

    path = cj.save(fitted, tmp_path / "fit.npz")
    with np.load(path) as stored:
        arrays = {k: stored[k] for k in stored.files}
    meta = json.loads(str(arrays["__meta__"]))
    for options, expected in ((None, None), ({"delta": -1.0}, "invalid options"), ({"nope": 1}, "options must be")):
        meta["options"] = options
        arrays["__meta__"] = np.array(json.dumps(meta))
        other = tmp_path / "other.npz"
        np.savez(other, **arrays)
        assert zipfile.is_zipfile(other)
        if expected is None:
            result = cj.load(other)
            assert result.options is None and result.fit_options == cj.FitOptions()
        else:
            with pytest.raises(ValueError, match=expected):
                cj.load(other)


def test_bootstrap_warm_started_from_a_fit_uses_its_options(fitted):
    kw = dict(key=jax.random.key(3), n_resamples=4, progress=False)
    from_fit = cj.bootstrap(TRUE, (X,), Y, inits=fitted, **kw)
    explicit = cj.bootstrap(TRUE, (X,), Y, inits=fitted.best_laws(4), options=OPTIONS, **kw)
    np.testing.assert_array_equal(from_fit.objectives, explicit.objectives)


def test_status_names_itself():
    assert str(cj.Status.CONVERGED) == "Status.CONVERGED" and f"{cj.Status(4)}" == "Status.MAX_STEPS"
    assert repr(cj.Status(3)) == "<Status.NONFINITE: 3>" and cj.Status.STALLED == 2 and f"{cj.Status.SLOW:d}" == "5"


def test_weights_are_keyword_only_in_fit_and_fit_arrays():
    w = np.ones(24)
    by_keyword = cj.fit_arrays(TRUE, (X,), Y, key=KEY, weights=w, restarts=2, options=OPTIONS)
    with pytest.warns(DeprecationWarning, match=r"fit_arrays\(\.\.\., weights=\.\.\.\)"):
        by_position = cj.fit_arrays(TRUE, (X,), Y, w, key=KEY, restarts=2, options=OPTIONS)
    np.testing.assert_array_equal(by_keyword.objectives, by_position.objectives)
    with pytest.raises(TypeError, match="both by position and by keyword"):
        cj.fit_arrays(TRUE, (X,), Y, w, key=KEY, weights=w)
    with pytest.raises(TypeError):
        cj.fit(TRUE, (X,), Y, w, key=KEY)
