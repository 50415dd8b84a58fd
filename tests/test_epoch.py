"""Real data: Epoch AI's Chinchilla replication (Besiroglu et al. 2024) from Hoffmann's 4,500-start grid."""

import jax
import numpy as np
import pytest
import shared_data

import camel_jax as cj

EPOCH_BEST = 1.0182740e-3


def hoffmann_grid():
    return cj.Chinchilla.hoffmann_grid()


@pytest.fixture(scope="module")
def epoch_fit():
    df = shared_data.epoch_chinchilla()
    assert len(df) == 240
    inputs = (df["N"].to_numpy(), df["D"].to_numpy())
    grid = hoffmann_grid()
    result = cj.fit(
        cj.Chinchilla.sample_init(jax.random.key(0)),
        inputs,
        df["loss"].to_numpy(),
        key=jax.random.key(0),
        inits=grid,
        options=cj.FitOptions(prescreen=64),
    )
    return df, inputs, result


def test_prescreened_grid_reaches_epochs_optimum(epoch_fit):
    _, _, result = epoch_fit
    p = {k: float(v) for k, v in result.law.params().items()}
    assert float(result.objective) <= 1.01828e-3
    assert abs(float(result.objective) - EPOCH_BEST) / EPOCH_BEST < 1e-5
    assert abs(p["alpha"] - 0.3473) < 0.001 and abs(p["beta"] - 0.3672) < 0.0015 and abs(p["E"] - 1.817) < 0.002


def test_warm_started_bootstrap_standard_errors_near_epochs(epoch_fit):
    _, inputs, result = epoch_fit
    y = result.y
    warm = jax.tree.map(lambda a: a[np.argsort(np.asarray(result.objectives))[:4]], result.laws)
    boot = cj.bootstrap(result.law, inputs, y, key=jax.random.key(42), n_resamples=300, inits=warm, progress=False)
    se = {k: float(np.std(np.asarray(v))) for k, v in boot.params().items()}
    # Epoch's 4,000-resample standard errors: alpha .0154, beta .0206, E .026 (300 resamples here: within 30%)
    for name, epoch in (("alpha", 0.0154), ("beta", 0.0206), ("E", 0.026)):
        assert abs(se[name] - epoch) / epoch < 0.3, (name, se[name])


@pytest.mark.slow
def test_full_grid_and_4000_resamples():
    df = shared_data.epoch_chinchilla()
    inputs = (df["N"].to_numpy(), df["D"].to_numpy())
    result = cj.fit(
        cj.Chinchilla.sample_init(jax.random.key(0)),
        inputs,
        df["loss"].to_numpy(),
        key=jax.random.key(0),
        inits=hoffmann_grid(),
    )
    assert float(result.objective) <= 1.01828e-3
    warm = jax.tree.map(lambda a: a[np.argsort(np.asarray(result.objectives))[:4]], result.laws)
    boot = cj.bootstrap(
        result.law,
        inputs,
        result.y,
        key=jax.random.key(42),
        n_resamples=4000,
        inits=warm,
        chunk_size=1000,
        progress=False,
    )
    se = {k: float(np.std(np.asarray(v))) for k, v in boot.params().items()}
    for name, epoch in (("alpha", 0.0154), ("beta", 0.0206), ("E", 0.026)):
        assert abs(se[name] - epoch) / epoch < 0.15, (name, se[name])
