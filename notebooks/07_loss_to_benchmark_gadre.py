# %% [markdown]
# # Loss to benchmark on real checkpoints (gadre2024)
#
# 104 models (11M-6.9B parameters, three corpora) with 8 validation losses and 46 benchmarks. The paper's protocol:
# fit on 80% of the checkpoints, score the other 20%, here repeated over 10 seeded splits with both laws scored on the
# same splits (`cj.experiments.heldout_benchmark_error`). The multi-loss law (8 losses) is compared with the
# single-loss law (c4_val only) on benchmarks with signal (MMLU is at chance here). The full table lives in
# `../shared`; a
# 10-benchmark subset ships in the package (MIT).

# %%
# %matplotlib inline
import os
import sys

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np

import camel_jax as cj
from camel_jax import plot

jax.config.update("jax_enable_x64", True)
matplotlib.rcParams["figure.dpi"] = 90
QUICK = os.environ.get("CAMEL_QUICK") == "1"  # CI runs every notebook with reduced sizes
sys.path.insert(0, os.path.abspath("../tests"))  # the one loader for ../shared/data/external
print("camel-jax", cj.__version__, "| jax", jax.__version__, "|", jax.devices(), "| quick" if QUICK else "| full size")

# %%
import shared_data

df = shared_data.gadre2024()
losses = [c for c in df.columns if c.startswith("loss_")]
benchmarks = [
    "acc_arc_easy",
    "acc_hellaswag",
    "acc_piqa",
    "acc_lambada_openai",
    "acc_copa",
    "acc_winogrande",
    "acc_boolq",
    "acc_arc_challenge",
    "acc_openbook_qa",
    "acc_bigbench_qa_wikidata",
]
sets = {"multi-loss": losses, "single-loss (c4_val)": ["loss_c4_val"]}
n_splits = 3 if QUICK else 10
table = cj.experiments.heldout_benchmark_error(df, sets, benchmarks, jax.random.key(0), n_splits=n_splits)
per_split = table.groupby(["split", "losses"])["heldout_mae"].mean().unstack()
diff = per_split["multi-loss"] - per_split["single-loss (c4_val)"]
print(
    f"multi-loss minus single-loss mean held-out MAE over {n_splits} paired splits: {diff.mean():+.4f} "
    f"(standard error {diff.std(ddof=1) / np.sqrt(n_splits):.4f}); multi-loss better on {(diff < 0).sum()}/{n_splits}"
)
per_benchmark = table.groupby(["benchmark", "losses"])["heldout_mae"].mean().unstack()
# the headline (study 9): the multi-loss law beats the single-loss law by more than 3 standard errors of the
# paired difference, on every split (-0.0038, standard error 0.0003, 3/3 at CI size when written), and on LAMBADA
# by a wide margin (0.0095 vs 0.0248)
assert diff.mean() + 3 * diff.std(ddof=1) / np.sqrt(n_splits) < 0 and (diff < 0).all(), diff
lambada = per_benchmark.loc["acc_lambada_openai"]
assert lambada["multi-loss"] < 0.6 * lambada["single-loss (c4_val)"], lambada
per_benchmark.round(4)

# %% [markdown]
# Over the 10 full-size splits the multi-loss law wins clearly on LAMBADA, ARC-Easy and BigBench QA-Wikidata, by less
# on HellaSwag and ARC-Challenge, and ties within 0.001 on the rest (BoolQ, COPA, PIQA, WinoGrande, OpenBookQA), where
# the other validation losses add nothing to C4's. Both laws are fitted monotone (k >= 0, 0 <= A <= 1): the
# unconstrained 8-loss law traded large positive and negative weights on these nearly collinear losses, and its
# verdict against the single-loss law flipped between platforms.

# %%
test = np.zeros(len(df), bool)
test[np.random.default_rng(0).permutation(len(df))[: len(df) // 5]] = True
fits = cj.fit_benchmarks(
    df,
    losses=losses,
    benchmarks=["acc_hellaswag", "acc_lambada_openai"],
    key=jax.random.key(0),
    weights=(~test).astype(float),
)
L = jnp.asarray(df[losses].to_numpy())
pred = np.asarray(fits.laws["acc_lambada_openai"](L))
y = df["acc_lambada_openai"].to_numpy()
k = np.asarray(fits.laws["acc_lambada_openai"].k)
print("fitted loss weights k:", dict(zip(losses, k.round(3))))
assert (k >= 0).all(), k  # fitted monotone: a higher validation loss never raises accuracy
plot.predicted_vs_observed(
    y[~test], pred[~test], y[test], pred[test], title="LAMBADA: multi-loss law", label="accuracy"
)
