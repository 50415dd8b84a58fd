"""Real data: Epoch AI's Chinchilla replication (Besiroglu et al. 2024) from Hoffmann's 4,500-start grid.

Expected values are Epoch's published ones (arXiv:2404.10102; ../shared/data/external/epoch_chinchilla/SOURCE.md),
never this package's own output: best objective 1.0182740e-3, A=482.01, B=2085.43, E=1.817, alpha=0.3478,
beta=0.3659; bootstrap standard errors (4,000 resamples) alpha .0154, beta .0206, E .026."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import shared_data

import camel_jax as cj

EPOCH_BEST = 1.0182740e-3
EPOCH = {"A": 482.01, "B": 2085.43, "E": 1.817, "alpha": 0.3478, "beta": 0.3659}
EPOCH_SE = {"alpha": 0.0154, "beta": 0.0206, "E": 0.026}


def hoffmann_grid():
    return cj.Chinchilla.hoffmann_grid()


def epoch_data():
    df = shared_data.epoch_chinchilla()
    assert len(df) == 240
    return (df["N"].to_numpy(), df["D"].to_numpy()), df["loss"].to_numpy()


@pytest.fixture(scope="module")
def epoch_fit():
    # Hoffmann's grid prescreened: all 4,500 points evaluated, the best 64 optimized (CI); Epoch's full protocol
    # (every point optimized, about 30 s) is `epoch_full_fit`, in the slow tests
    inputs, y = epoch_data()
    result = cj.fit(cj.Chinchilla.sample_init(jax.random.key(0)), inputs, y, key=jax.random.key(0),
                    inits=hoffmann_grid(), options=cj.FitOptions(prescreen=64))  # fmt: skip
    return inputs, result


@pytest.fixture(scope="module")
def epoch_full_fit():
    # Epoch's protocol: every one of the 4,500 grid points optimized (about 30 s)
    inputs, y = epoch_data()
    result = cj.fit(
        cj.Chinchilla.sample_init(jax.random.key(0)), inputs, y, key=jax.random.key(0), inits=hoffmann_grid()
    )
    return inputs, result


def test_the_objective_at_epochs_published_point_is_epochs_best():
    # the objective itself against Epoch's number: their parameters are published to 4-5 significant digits, and
    # that rounding alone (along a ridge where A trades against alpha and B against beta) raises the objective by
    # 3.7e-4 relative; a wrong Huber delta, sum/mean or log-residual choice changes it by far more than 1e-3
    inputs, y = epoch_data()
    value = cj.fitting.objective(cj.Chinchilla.from_params(**EPOCH), tuple(map(jnp.asarray, inputs)), jnp.asarray(y),
                         jnp.ones(240), cj.FitOptions(delta=1e-3))  # fmt: skip
    assert abs(float(value) - EPOCH_BEST) / EPOCH_BEST < 1e-3, float(value)


def test_prescreened_grid_reaches_epochs_optimum_and_their_parameters(epoch_fit):
    _, result = epoch_fit
    assert result.objectives.shape == (64,)
    p = {k: float(v) for k, v in result.law.params().items()}
    assert float(result.objective) <= EPOCH_BEST * (1 + 1e-7)  # at least as good as Epoch's scipy fit
    assert abs(float(result.objective) - EPOCH_BEST) / EPOCH_BEST < 1e-5
    # Centred on Epoch's published values. The objective is flat along the A-alpha and B-beta ridges (Epoch's own
    # rounded point is 3.7e-4 above the optimum), so points within a tenth of Epoch's standard error are the same
    # fit; a tenth of a standard error is the tolerance (alpha 0.0015, beta 0.0021, E 0.0026).
    for name, se in EPOCH_SE.items():
        assert abs(p[name] - EPOCH[name]) < 0.1 * se, (name, p[name], EPOCH[name])


def test_the_grid_built_in_raw_units_reaches_epochs_optimum(epoch_fit):
    # issue 56: Hoffmann's grid as a user builds it from the paper, in raw parameters and tokens (A up to e^25, the
    # terms 1e4 times the loss there), solved in those units ended at 2.006e-3 with its best start at the step cap;
    # `fit` re-expresses starts in the units it sets from the data, where the grid reaches Epoch's optimum
    inputs, y = epoch_data()
    grids = np.meshgrid([1e-3, 0.5, 1.0, 1.5, 2.0], [1e-3, 0.5, 1.0, 1.5, 2.0], [-1.0, -0.5, 0.0, 0.5, 1.0],
                        np.arange(0.0, 30.0, 5.0), np.arange(0.0, 30.0, 5.0), indexing="ij")  # fmt: skip
    alpha, beta, e, a, b = (g.ravel() for g in grids)
    raw = cj.Chinchilla.from_params(E=np.exp(e), A=np.exp(a), alpha=alpha, B=np.exp(b), beta=beta)
    assert (raw.size_scale, raw.tokens_scale) == (1.0, 1.0)
    result = cj.fit(cj.Chinchilla.sample_init(jax.random.key(0)), inputs, y, key=jax.random.key(0), inits=raw,
                    options=cj.FitOptions(prescreen=64))  # fmt: skip
    assert (result.law.size_scale, result.law.tokens_scale) == (1e9, 1e10)  # the units the data set
    assert int(result.best_status) == cj.Status.CONVERGED
    assert float(result.objective) <= EPOCH_BEST * (1 + 1e-7)
    assert abs(float(result.objective) - EPOCH_BEST) / EPOCH_BEST < 1e-5
    # the same optimum as the grid built in the data's units (the existing fixture), the same parameters
    for name, value in epoch_fit[1].law.params().items():
        np.testing.assert_allclose(result.law.params()[name], value, rtol=1e-6, err_msg=name)


@pytest.mark.slow  # Epoch's full protocol: 4,500 starts optimized; CI checks the prescreened fit against Epoch's values
def test_full_grid_reaches_the_prescreened_optimum(epoch_fit, epoch_full_fit):
    _, result = epoch_fit
    _, full = epoch_full_fit
    assert full.objectives.shape == (4500,)
    assert float(full.objective) <= EPOCH_BEST * (1 + 1e-7)  # at least as good as Epoch's scipy fit
    assert abs(float(result.objective) - float(full.objective)) / float(full.objective) < 1e-9
    for name, value in full.law.params().items():
        np.testing.assert_allclose(result.law.params()[name], value, rtol=1e-4, err_msg=name)


@pytest.mark.slow  # the suite's budget (issue 57): 11 s; the prescreened fit and its parameters stay in CI
def test_warm_started_bootstrap_standard_errors_near_epochs(epoch_fit):
    inputs, result = epoch_fit
    warm = jax.tree.map(lambda a: a[np.argsort(np.asarray(result.objectives))[:4]], result.laws)
    boot = cj.bootstrap(result.law, inputs, result.y, key=jax.random.key(42), n_resamples=300, inits=warm,
                        progress=False)  # fmt: skip
    se = {k: float(np.std(np.asarray(v))) for k, v in boot.params().items()}
    # 300 resamples estimate a standard error to about +-4% (1/sqrt(2 x 300)); Epoch's own 4,000-resample values
    # carry +-1%, and their resampling differs from ours in the seed only: within 30% (the tight, known-answer
    # check of the bootstrap's standard errors is test_bootstrap's sandwich test)
    for name, epoch in EPOCH_SE.items():
        assert abs(se[name] - epoch) / epoch < 0.3, (name, se[name])


@pytest.mark.slow  # 4,000 refits of the 240 points: minutes on a CPU; the 300-resample version above runs in CI
def test_4000_resamples_match_epochs_standard_errors(epoch_fit):
    inputs, result = epoch_fit
    warm = jax.tree.map(lambda a: a[np.argsort(np.asarray(result.objectives))[:4]], result.laws)
    boot = cj.bootstrap(result.law, inputs, result.y, key=jax.random.key(42), n_resamples=4000, inits=warm,
                        chunk_size=1000, progress=False)  # fmt: skip
    se = {k: float(np.std(np.asarray(v))) for k, v in boot.params().items()}
    for name, epoch in EPOCH_SE.items():
        assert abs(se[name] - epoch) / epoch < 0.15, (name, se[name])
