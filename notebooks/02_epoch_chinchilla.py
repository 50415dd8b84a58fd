# %% [markdown]
# # Epoch AI's Chinchilla replication
#
# Besiroglu et al. (2024) refit Hoffmann et al.'s Approach 3 on 240 points digitised from the Chinchilla paper: Huber
# (delta=1e-3) on log residuals, summed, from a 4,500-point grid of starts, with 4,000 bootstrap resamples for
# standard errors. Their best objective is 1.0182740e-3 with alpha 0.3478, beta 0.3659, E 1.817 (their scipy fit);
# standard errors alpha .0154, beta .0206, E .026. Data: `../shared/data/external/epoch_chinchilla` (not shipped: no
# license).

# %%
# %matplotlib inline
import os
import sys
import time

import jax
import matplotlib
import numpy as np
import pandas as pd

import camel_jax as cj
from camel_jax import plot

jax.config.update("jax_enable_x64", True)
matplotlib.rcParams["figure.dpi"] = 90
QUICK = os.environ.get("CAMEL_QUICK") == "1"  # CI runs every notebook with reduced sizes
sys.path.insert(0, os.path.abspath("../tests"))  # the one loader for ../shared/data/external
print("camel-jax", cj.__version__, "| jax", jax.__version__, "|", jax.devices(), "| quick" if QUICK else "| full size")

# %%
import shared_data

df = shared_data.epoch_chinchilla()
inputs, y = (df["N"].to_numpy(), df["D"].to_numpy()), df["loss"].to_numpy()
# alpha, beta in {0 -> 1e-3, .5, 1, 1.5, 2}, log E in {-1..1}, log A, log B in {0..25}
grid = cj.Chinchilla.hoffmann_grid()
t0 = time.perf_counter()
result = cj.fit(
    cj.Chinchilla.sample_init(jax.random.key(0)),
    inputs,
    y,
    key=jax.random.key(0),
    inits=grid,
    options=cj.FitOptions(prescreen=64),
)
print(f"4,500-point grid, best 64 optimized: {time.perf_counter() - t0:.1f} s (compile included)")
print(f"objective {float(result.objective):.7e} (Epoch: 1.0182740e-03)")
fitted = {k: round(float(v), 4) for k, v in result.law.params().items()}
# the headline: Epoch's best objective and their published alpha, beta, E (0.3478, 0.3659, 1.817)
assert abs(float(result.objective) / 1.0182740e-3 - 1) < 1e-5, float(result.objective)
assert abs(fitted["alpha"] - 0.3478) < 0.003 and abs(fitted["beta"] - 0.3659) < 0.003, fitted
assert abs(fitted["E"] - 1.817) < 0.01, fitted
fitted

# %%
warm = jax.tree.map(lambda a: a[np.argsort(np.asarray(result.objectives))[:4]], result.laws)
n = 300 if QUICK else 4000
t0 = time.perf_counter()
boot = cj.bootstrap(
    result.law, inputs, y, key=jax.random.key(42), n_resamples=n, inits=warm, chunk_size=1000, progress=False
)
print(f"{n} warm-started resamples: {time.perf_counter() - t0:.1f} s")
se = {k: float(np.std(np.asarray(v))) for k, v in boot.params().items()}
epoch_se = {"alpha": 0.0154, "beta": 0.0206, "E": 0.026}
# Epoch's standard errors within 20% (300 resamples at CI size carry ~4% sampling error of their own)
assert all(abs(se[k] / epoch_se[k] - 1) < 0.2 for k in epoch_se), se
pd.DataFrame({"camel-jax": [se[k] for k in epoch_se], "Epoch": list(epoch_se.values())}, index=list(epoch_se)).round(4)

# %%
pred = np.asarray(result.predict(*inputs))
plot.predicted_vs_observed(y, pred, title="Chinchilla law on Epoch's 240 points", label="loss")
