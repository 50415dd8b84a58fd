# %% [markdown]
# # Study 1: which law extrapolates? (simulated world, the paper's protocol)
#
# Train sizes {4,5,6,7,8,10} x 11 perturbed mixtures (66 runs), held-out sizes 12 and 20; n training points drawn
# uniformly, repeated, each repeat a 0/1 weight mask so that all repeats of a law are one compiled fit. Laws: CAMEL
# free and tied (k=3, the world's number of intrinsic domains), SODMAdditive, SODMJoint (no token term: one token
# count) and DMLNested. The outcome was not known in advance.

# %%
# %matplotlib inline
import os
import sys
import time

import jax
import matplotlib

import camel_jax as cj
from camel_jax import plot, simulate

jax.config.update("jax_enable_x64", True)
matplotlib.rcParams["figure.dpi"] = 90
QUICK = os.environ.get("CAMEL_QUICK") == "1"  # CI runs every notebook with reduced sizes
sys.path.insert(0, os.path.abspath("../tests"))  # the one loader for ../shared/data/external
print("camel-jax", cj.__version__, "| jax", jax.__version__, "|", jax.devices(), "| quick" if QUICK else "| full size")

# %%
world = simulate.default_world(jax.random.key(0))
runs = world.runs(
    cj.experiments.perturbed_mixtures([0.35, 0.25, 0.15, 0.10, 0.15]),
    [4, 5, 6, 7, 8, 10, 12, 20],
    noise=0.002,
    key=jax.random.key(1),
)
data = world.mixture_data(runs, "loss_val0")
key = jax.random.key(0)
laws = {
    "CAMEL tied": cj.CAMEL.sample_init(key, n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0),
    "CAMEL free": cj.CAMEL.sample_init(key, n_datasets=5, n_domains=3),
    "SODMAdditive": cj.SODMAdditive.sample_init(key, n_datasets=5, tokens=False),
    "SODMJoint": cj.SODMJoint.sample_init(key, n_datasets=5, tokens=False),
    "DMLNested": cj.experiments.DMLNested(restarts=8),
}
if QUICK:  # CI: the three laws and the sizes n >= 42 that the checks below read (the .ci/run budget)
    laws = {k: laws[k] for k in ("CAMEL tied", "SODMAdditive", "DMLNested")}
n_points = [42, 66] if QUICK else [18, 24, 30, 36, 42, 48, 54, 60, 66]  # the paper's protocol
repeats = 3 if QUICK else 20
t0 = time.perf_counter()
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "fewer points than parameters" is expected at n=18
    table = cj.experiments.compare_laws(
        laws, data, [4, 5, 6, 7, 8, 10], [12, 20], n_points=n_points, repeats=repeats, key=key, restarts=8
    )
print(f"{len(table)} fits scored in {time.perf_counter() - t0:.0f} s")
summary = table.groupby(["test_size", "law", "n_points"])["error"].mean().unstack("n_points").round(3)
# the headline (study 1), with n >= 42 points: one size step out (M=12) tied CAMEL is within 0.3% and beats
# DML by a wide margin (0.19 vs 0.37, 0.18 vs 0.30 at CI size when written); at M=20 SODMAdditive beats tied CAMEL
# (0.34 vs 0.81, 0.38 vs 0.82)
many = [n for n in n_points if n >= 42]
at12, at20 = summary.loc[12.0, many], summary.loc[20.0, many]
assert (at12.loc["CAMEL tied"] < 0.3).all() and (at12.loc["CAMEL tied"] < 0.8 * at12.loc["DMLNested"]).all(), at12
assert (at20.loc["SODMAdditive"] < 0.75 * at20.loc["CAMEL tied"]).all(), at20
summary

# %%
plot.law_comparison(table, title="Held-out MAPE (%) by law, simulated world")
