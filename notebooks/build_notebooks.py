"""Write the notebooks from their cells and execute them (outputs are committed).

    python notebooks/build_notebooks.py            # write and execute every notebook at full size
    CAMEL_QUICK=1 python notebooks/build_notebooks.py 04   # reduced sizes, only notebooks whose name has "04"

CI executes the committed notebooks with CAMEL_QUICK=1 (tests/test_notebooks.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent

SETUP = """\
%matplotlib inline
import os, sys, time
import jax, jax.numpy as jnp, numpy as np, pandas as pd
jax.config.update("jax_enable_x64", True)
import matplotlib
matplotlib.rcParams["figure.dpi"] = 90
import camel_jax as cj
from camel_jax import plot, simulate
QUICK = os.environ.get("CAMEL_QUICK") == "1"  # CI runs every notebook with reduced sizes
sys.path.insert(0, os.path.abspath("../tests"))  # the one loader for ../shared/data/external
print("camel-jax", cj.__version__, "| jax", jax.__version__, "|", jax.devices(), "| quick" if QUICK else "| full size")
"""

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {}

NOTEBOOKS["01_quickstart"] = [
    (
        "md",
        "# Quickstart: fit CAMEL, bootstrap it, extrapolate\n\nA table of training runs (mixture, model size, loss) becomes a `MixtureData`; `fit` runs a vmapped multi-start L-BFGS on a Huber loss of log residuals; `bootstrap` refits thousands of resamples as one compiled program. The runs here come from the package's simulated world (`camel_jax.simulate`), so the truth is known.",
    ),
    ("code", SETUP),
    (
        "code",
        """\
world = simulate.default_world(jax.random.key(0))
reference = np.array([0.35, 0.25, 0.15, 0.10, 0.15])
runs = world.runs(cj.perturbed_mixtures(reference), [4, 5, 6, 7, 8, 10, 12], noise=0.002, key=jax.random.key(1))
runs.head(3)""",
    ),
    (
        "md",
        "Validate and convert the table (every problem would be a `ValueError` naming column and row). We fit on sizes 4-10 and hold out size 12. The tied law (the theorem's exponents, capacity ~ M^3 for the paper's scale index) with k=2 intrinsic domains: with k=3 one domain is redundant on these data and its exponent runs away (`cj.select_domains` chooses k by held-out error).",
    ),
    (
        "code",
        """\
train, test = runs[runs["size"] <= 10], runs[runs["size"] == 12]
data = world.mixture_data(train, "loss_val0")
held_out = world.mixture_data(test, "loss_val0")
law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=2, tied=True, capacity_exponent=3.0)
result = cj.fit(law, data.inputs, data.y, key=jax.random.key(0), restarts=32)
result.summary()""",
    ),
    (
        "code",
        """\
boot = cj.bootstrap(result.law, data.inputs, data.y, key=jax.random.key(1), n_resamples=50 if QUICK else 1000,
                    inits=result.laws, strata=np.asarray(data.size), progress=False)
low, high = boot.interval(0.95)["beta"]
pd.DataFrame({"beta": np.asarray(result.law.params()["beta"]), "low": low, "high": high})""",
    ),
    (
        "code",
        """\
pred = result.predict(*held_out.inputs)
print(f"held-out (M=12) MAPE: {100 * float(jnp.mean(jnp.abs(pred / held_out.y - 1))):.3f}%")
lo, hi = boot.prediction_interval(*held_out.inputs)
print(f"95% bootstrap band covers {np.mean((held_out.y >= lo) & (held_out.y <= hi)):.0%} of the held-out runs")
plot.loss_vs_size(data, result, bootstrap=boot, held_out=held_out, extend_to=20, mixtures=[0, 1, 2, 3])""",
    ),
]

NOTEBOOKS["02_epoch_chinchilla"] = [
    (
        "md",
        "# Epoch AI's Chinchilla replication\n\nBesiroglu et al. (2024) refit Hoffmann et al.'s Approach 3 on 240 points digitised from the Chinchilla paper: Huber (delta=1e-3) on log residuals, summed, from a 4,500-point grid of starts, with 4,000 bootstrap resamples for standard errors. Their best objective is 1.0182740e-3 with alpha 0.3478, beta 0.3659, E 1.817 (their scipy fit); standard errors alpha .0154, beta .0206, E .026. Data: `../shared/data/external/epoch_chinchilla` (not shipped: no license).",
    ),
    ("code", SETUP),
    (
        "code",
        """\
import shared_data
df = shared_data.epoch_chinchilla()
inputs, y = (df["N"].to_numpy(), df["D"].to_numpy()), df["loss"].to_numpy()
grid = cj.Chinchilla.hoffmann_grid()  # alpha, beta in {0 -> 1e-3, .5, 1, 1.5, 2}, log E in {-1..1}, log A, log B in {0..25}
t0 = time.perf_counter()
result = cj.fit(cj.Chinchilla.sample_init(jax.random.key(0)), inputs, y, key=jax.random.key(0), inits=grid, options=cj.FitOptions(prescreen=64))
print(f"4,500-point grid, best 64 optimized: {time.perf_counter() - t0:.1f} s (compile included)")
print(f"objective {float(result.objective):.7e} (Epoch: 1.0182740e-03)")
{k: round(float(v), 4) for k, v in result.law.params().items()}""",
    ),
    (
        "code",
        """\
warm = jax.tree.map(lambda a: a[np.argsort(np.asarray(result.objectives))[:4]], result.laws)
n = 300 if QUICK else 4000
t0 = time.perf_counter()
boot = cj.bootstrap(result.law, inputs, y, key=jax.random.key(42), n_resamples=n, inits=warm, chunk_size=1000, progress=False)
print(f"{n} warm-started resamples: {time.perf_counter() - t0:.1f} s")
se = {k: float(np.std(np.asarray(v))) for k, v in boot.params().items()}
pd.DataFrame({"camel-jax": [se["alpha"], se["beta"], se["E"]], "Epoch": [0.0154, 0.0206, 0.026]}, index=["alpha", "beta", "E"]).round(4)""",
    ),
    (
        "code",
        """\
pred = np.asarray(result.predict(*inputs))
plot.predicted_vs_observed(y, pred, title="Chinchilla law on Epoch's 240 points", label="loss")""",
    ),
]

NOTEBOOKS["03_paper_pipeline"] = [
    (
        "md",
        "# The paper's pipeline on a simulated world\n\nMixture -> benchmark-proxy loss (CAMEL) -> accuracy (multi-loss logistic law) -> weighted objective, optimized for a model larger than any fitted one, for the paper's four objectives. The simulated world solves the capacity-allocation problem exactly, so the true optimal mixture is known.",
    ),
    ("code", SETUP),
    (
        "code",
        """\
world = simulate.default_world(jax.random.key(1))
reference = np.array([0.35, 0.25, 0.15, 0.10, 0.15])
train_sizes = [4.0, 5.0, 6.0, 7.0, 8.0, 10.0]
runs = world.runs(cj.perturbed_mixtures(reference), train_sizes, noise=0.002, key=jax.random.key(2))
losses = [f"loss_{v}" for v in world.validation_sets]
benchmarks = list(world.benchmarks)
fits = cj.fit_benchmarks(runs, losses=losses, benchmarks=[f"acc_{b}" for b in benchmarks], names=benchmarks, key=jax.random.key(3), restarts=16)
data = world.mixture_data(runs, losses[0])
law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0)""",
    ),
    (
        "md",
        "One call per objective fits every benchmark's proxy loss and its bootstrap resamples (the same resamples for all benchmarks) and assembles point and batched pipelines. The optimization stays within +-20% of the reference, the region the laws were fitted on.",
    ),
    (
        "code",
        """\
rows = []
region = dict(reference=reference, max_shift=0.2)
objectives = {k: cj.OBJECTIVES[k] for k in (["balanced", "code"] if QUICK else cj.OBJECTIVES)}
for name, weights in objectives.items():
    fitted = cj.fit_pipeline(data, fits, weights, law=law, key=jax.random.key(4), n_resamples=30 if QUICK else 200, strata=np.asarray(data.size))
    point = cj.optimal_mixture(fitted.pipeline, 5, key=jax.random.key(0), model_size=20.0, **region)
    band = np.percentile(np.asarray(cj.optimal_mixture(fitted.pipelines, 5, key=jax.random.key(0), model_size=20.0, **region).r), [2.5, 97.5], axis=0)
    true_f = world.true_objective(20.0, weights)
    truth = cj.optimal_mixture(true_f, 5, key=jax.random.key(0), **region)
    scores = [float(true_f(jnp.asarray(r))) for r in (point.r, truth.r, reference)]
    rows.append({"objective": name, **{d: f"{float(point.r[j]):.3f} [{band[0][j]:.2f},{band[1][j]:.2f}] (true {float(truth.r[j]):.3f})" for j, d in enumerate(simulate.DATASETS)},
                 "gain captured": (scores[0] - scores[2]) / (scores[1] - scores[2])})
pd.DataFrame(rows).set_index("objective")""",
    ),
    (
        "md",
        "In this world every benchmark improves in much the same direction inside the +-20% box, so the objectives can share an optimum at a vertex of the box; the check that matters is that the predicted mixture matches the true one and captures the possible gain.",
    ),
    (
        "code",
        """\
path = cj.mixture_path(fitted.pipelines, [6.0, 10.0, 14.0, 20.0, 30.0], key=jax.random.key(0), datasets=list(simulate.DATASETS), **region)
plot.mixture_vs_size(path, title="Optimal Knowledge-specialized mixture across sizes (95% band)")""",
    ),
]

NOTEBOOKS["04_law_comparison_simulator"] = [
    (
        "md",
        "# Study 1: which law extrapolates? (simulated world, the paper's protocol)\n\nTrain sizes {4,5,6,7,8,10} x 11 perturbed mixtures (66 runs), held-out sizes 12 and 20; n training points drawn uniformly, repeated, each repeat a 0/1 weight mask so that all repeats of a law are one compiled fit. Laws: CAMEL free and tied (k=3, the world's number of intrinsic domains), SODMAdditive, SODMJoint (no token term: one token count) and DMLNested. The outcome was not known in advance.",
    ),
    ("code", SETUP),
    (
        "code",
        """\
world = simulate.default_world(jax.random.key(0))
runs = world.runs(cj.perturbed_mixtures([0.35, 0.25, 0.15, 0.10, 0.15]), [4, 5, 6, 7, 8, 10, 12, 20], noise=0.002, key=jax.random.key(1))
data = world.mixture_data(runs, "loss_val0")
key = jax.random.key(0)
laws = {
    "CAMEL tied": cj.CAMEL.sample_init(key, n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0),
    "CAMEL free": cj.CAMEL.sample_init(key, n_datasets=5, n_domains=3),
    "SODMAdditive": cj.SODMAdditive.sample_init(key, n_datasets=5, tokens=False),
    "SODMJoint": cj.SODMJoint.sample_init(key, n_datasets=5, tokens=False),
    "DMLNested": cj.DMLNested(restarts=8),
}
n_points = [18, 42, 66] if QUICK else [18, 24, 30, 36, 42, 48, 54, 60, 66]  # the paper's protocol
repeats = 3 if QUICK else 20
t0 = time.perf_counter()
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "fewer points than parameters" is expected at n=18
    table = cj.compare_laws(laws, data, [4, 5, 6, 7, 8, 10], [12, 20], n_points=n_points, repeats=repeats, key=key, restarts=8)
print(f"{len(table)} fits scored in {time.perf_counter() - t0:.0f} s")
summary = table.groupby(["test_size", "law", "n_points"])["error"].mean().unstack("n_points").round(3)
summary""",
    ),
    ("code", """plot.law_comparison(table, title="Held-out MAPE (%) by law, simulated world")"""),
]

NOTEBOOKS["05_real_mixtures"] = [
    (
        "md",
        "# Study 2: the laws on real mixture data\n\n**dmsl_shukor2025** (SlimPajama, 7 domains): fit sizes up to 1.235B, score the 2.718B runs, per-domain losses. Version A uses each run's largest token count with size-only laws (the SOURCE notes that tokens per parameter fall from 164 at 122M to 38 from 680M up, which biases such laws); version B uses all token counts with the token-aware SODM laws.\n\n**mixinglaws_ye2024** 5Mix: fit 70M-410M at step 20k (26 mixtures each), score the six 1B runs at step 20k; the target is the total loss weighted by `valid_weight.json`. Neither data set ships with the package (no license).",
    ),
    ("code", SETUP),
    (
        "code",
        """\
import json, warnings, shared_data
warnings.simplefilter("ignore")
dmsl = shared_data.dmsl_shukor2025()
mix_cols = [c for c in dmsl.columns if c.startswith("weight_")]
domains = ["arxiv", "book", "c4", "github", "commoncrawl", "stackexchange", "wikipedia"]
if QUICK:
    domains = ["c4"]
last = dmsl.loc[dmsl.groupby(mix_cols + ["model_size"])["n_tokens"].idxmax()].reset_index(drop=True)
key = jax.random.key(0)
sizes = np.sort(last["model_size"].unique())
def score(pred, y):
    return 100 * float(np.mean(np.abs(np.asarray(pred) / np.asarray(y) - 1)))

def dmsl_laws(tokens):
    scale = float(np.exp(np.mean(np.log(sizes))))
    out = {
        "CAMEL tied k=3": cj.CAMEL.sample_init(key, n_datasets=7, n_domains=3, tied=True, size_scale=scale),
        "CAMEL free k=3": cj.CAMEL.sample_init(key, n_datasets=7, n_domains=3, size_scale=scale),
        "SODMAdditive": cj.SODMAdditive.sample_init(key, n_datasets=7, tokens=tokens, size_scale=scale, tokens_scale=1e10),
        "SODMJoint": cj.SODMJoint.sample_init(key, n_datasets=7, tokens=tokens, size_scale=scale, tokens_scale=1e10),
    }
    keep = ("CAMEL tied k=3", "SODMAdditive") if QUICK else out  # CI checks one law of each kind
    return {k: v for k, v in out.items() if k in keep and not (tokens and k.startswith("CAMEL"))}

rows = []
for version, frame, tokens in (("A: largest D", last, False),) + (() if QUICK else (("B: all D", dmsl, True),)):
    for domain in domains:
        target = f"{domain}_loss"
        part = frame.dropna(subset=[target])
        train, test = part[part["model_size"] < 2e9], part[part["model_size"] > 2e9]
        kw = dict(mixture=mix_cols, target=target, size="model_size", tokens="n_tokens" if tokens else None)
        d_train, d_test = cj.MixtureData.from_frame(train, **kw), cj.MixtureData.from_frame(test, **kw)
        for name, law in dmsl_laws(tokens).items():
            res = cj.fit(law, d_train.inputs, d_train.y, key=key, restarts=8 if QUICK else 16)
            rows.append({"data": "dmsl " + version, "target": domain, "law": name, "heldout_mape": score(res.predict(*d_test.inputs), d_test.y)})
dmsl_table = pd.DataFrame(rows).pivot_table(index=["data", "target"], columns="law", values="heldout_mape").round(3)
dmsl_table""",
    ),
    (
        "code",
        """\
mixing = shared_data.mixinglaws_ye2024("5Mix")
weights = json.load(open(shared_data.path("mixinglaws_ye2024") / "valid_weight.json"))
mixing = mixing[(mixing["step"].astype(str) == "20000") & (mixing["run_id"] < 900)]
mixing = mixing.assign(w=mixing["valid_domain"].map(weights))
total = mixing.groupby(["model_size_label", "nonembedding_params", "train_mixture"]).apply(
    lambda g: np.sum(g["loss"] * g["w"]) / np.sum(g["w"]), include_groups=False).rename("loss").reset_index()
r = np.array([[float(x) for x in m.split("-")] for m in total["train_mixture"]])
for j in range(5):
    total[f"r{j}"] = r[:, j]
train, test = total[total["model_size_label"] != "1B"], total[total["model_size_label"] == "1B"]
print(f"5Mix at step 20k: {len(train)} training runs (70M-410M), {len(test)} held-out 1B runs")
kw = dict(mixture=[f"r{j}" for j in range(5)], target="loss", size="nonembedding_params")
d_train, d_test = cj.MixtureData.from_frame(train, **kw), cj.MixtureData.from_frame(test, **kw)
scale = float(np.exp(np.mean(np.log(np.asarray(d_train.size)))))
laws = {
    "CAMEL tied k=3": cj.CAMEL.sample_init(key, n_datasets=5, n_domains=3, tied=True, size_scale=scale),
    "CAMEL free k=3": cj.CAMEL.sample_init(key, n_datasets=5, n_domains=3, size_scale=scale),
    "SODMAdditive": cj.SODMAdditive.sample_init(key, n_datasets=5, tokens=False, size_scale=scale),
    "SODMJoint": cj.SODMJoint.sample_init(key, n_datasets=5, tokens=False, size_scale=scale),
}
if QUICK:  # CI checks one law of each kind
    laws = {k: laws[k] for k in ("CAMEL tied k=3", "SODMAdditive")}
mix_rows = []
for name, law in laws.items():
    res = cj.fit(law, d_train.inputs, d_train.y, key=key, restarts=8 if QUICK else 32)
    mix_rows.append({"law": name, "train_mape": float(res.summary()["mape_percent"]), "heldout_1B_mape": score(res.predict(*d_test.inputs), d_test.y)})
dml = cj.extrapolation_error(cj.DMLNested(restarts=8), cj.MixtureData.from_frame(total.assign(g=total["train_mixture"]), group="g", **kw),
                             [], sorted(set(np.asarray(d_test.size).tolist()))[0], masks=np.asarray(total["model_size_label"] != "1B", float)[None, :], key=key)
mix_rows.append({"law": "DMLNested", "train_mape": np.nan, "heldout_1B_mape": float(dml["error"].iloc[0])})
pd.DataFrame(mix_rows).set_index("law").round(3)""",
    ),
    (
        "md",
        "## The decision on real data: which held-out run would each law have trained?\n\n`cj.backtest_observed` fits each method on the smaller runs and lets it pick among mixtures trained at a larger size: dmsl's four 2.7B runs (8 objectives: each validation loss and their mean), 5Mix's 1B runs, and RegMix's 256 60M runs ranked from 512 1M runs. `regret_share` is the pick's regret over the candidates' range (a random pick averages ~0.5 with 4 candidates). The README's table averages 5 fit seeds with 32 restarts (`benchmarks/study_observed.py`).",
    ),
    (
        "code",
        """\
frames = []
methods = ["camel", "best-observed"] if QUICK else list(cj.OBSERVED_METHODS)
train, candidates, mixture, objectives = shared_data.dmsl_decision()
if QUICK:
    objectives = {"mean": objectives["mean"]}
frames.append(cj.backtest_observed(train, candidates, mixture=mixture, size="model_size", objectives=objectives,
                                   methods=methods, key=key, restarts=4 if QUICK else 32, name="dmsl 2.7B"))
train, candidates, mixture, objectives = shared_data.mixinglaws_decision()
frames.append(cj.backtest_observed(train, candidates, mixture=mixture, size="nonembedding_params", methods=methods,
                                   objectives=objectives, key=key, restarts=4 if QUICK else 32, name="5Mix 1B"))
if not QUICK and (shared_data.ROOT / "regmix_liu2024").is_dir():  # 512 runs x 17 datasets: full runs only
    train, candidates, at_1m, mixture, objectives = shared_data.regmix_decision()
    frames.append(cj.backtest_observed(train, candidates, mixture=mixture, size="size", objectives=objectives,
                                       methods=["camel", "sodm"], key=key, restarts=4 if QUICK else 32,
                                       name="RegMix 60M"))
observed = pd.concat(frames, ignore_index=True)
observed.groupby(["data", "method"], sort=False)[["regret_share", "spearman"]].mean().round(3)""",
    ),
    (
        "md",
        "## A law for mixture effects that do not shrink with size: CAMELData, chosen by held-out error\n\nIn dmsl the per-domain spread across mixtures barely shrinks from 122M to 1.2B parameters, which CAMEL's K_i / (eta_i^alpha_i M^beta_i) cannot hold. `cj.CAMELData` adds a per-domain data term sum_i G_i / (eta_i D)^gamma_i: each intrinsic domain's loss also falls with the tokens it receives. `cj.select_law` fits every candidate on all runs below the largest size and ranks them by their error there (never by the training objective); laws of (r, M) get the same runs without the token column. The README's study 6 (`benchmarks/study_select_law.py`) runs all 7 dmsl losses with 32 restarts and 3 seeds.",
    ),
    (
        "code",
        """\
def candidates(n, scale_M, scale_D, full):
    base = dict(n_datasets=n, n_domains=3, size_scale=scale_M)
    out = {"camel-tied": cj.CAMEL.sample_init(key, tied=True, **base),
           "camel-data": cj.CAMELData.sample_init(key, tokens_scale=scale_D, **base),
           "sodm-additive-D": cj.SODMAdditive.sample_init(key, n_datasets=n, size_scale=scale_M, tokens_scale=scale_D)}
    if full:
        out |= {"camel-free": cj.CAMEL.sample_init(key, **base),
                "camel-data-tied": cj.CAMELData.sample_init(key, tied=True, tokens_scale=scale_D, **base),
                "sodm-joint-D": cj.SODMJoint.sample_init(key, n_datasets=n, size_scale=scale_M, tokens_scale=scale_D)}
    return out

runs, mixture, losses = shared_data.dmsl_runs()
tables = []
for target in ([] if QUICK else losses):  # 2,408 runs x 7 losses: full runs only (CI runs 5Mix)
    data = cj.MixtureData.from_frame(runs.dropna(subset=[target]), mixture=mixture, target=target, size="size", tokens="tokens")
    winner, table = cj.select_law(candidates(7, 1e9, 1e10, not QUICK), data, key=key, restarts=8 if QUICK else 16)
    tables.append(table.assign(data="dmsl 2.7B", target=target))
runs5, mixture5 = shared_data.mixinglaws_runs()
data = cj.MixtureData.from_frame(runs5, mixture=mixture5, target="loss", size="size", tokens="tokens")
winner, table = cj.select_law(candidates(5, 1e8, 1e10, not QUICK), data, key=key, restarts=4 if QUICK else 16)
tables.append(table.assign(data="5Mix 1B", target="loss"))
selection = pd.concat(tables, ignore_index=True)
selection.pivot_table(index=["data", "target"], columns="law", values="error").round(3)""",
    ),
]

NOTEBOOKS["06_sampling_strategies"] = [
    (
        "md",
        "# Study 3: sampling strategies under equal FLOPs budgets\n\nThe paper reports that the hourglass strategy (both extreme sizes first) minimizes extrapolation error. Here: the simulated world with the paper's architecture (active parameters ~1.47e5 M^3, 20B-token cooldowns, cost 6ND), train sizes {4,5,6,7,8,10} x 11 mixtures, held-out size 12, tied CAMEL; each strategy picks runs under the budget (`allocate`, a strict priority order), mixtures are drawn uniformly, repeated.",
    ),
    ("code", SETUP),
    (
        "code",
        """\
world = simulate.default_world(jax.random.key(0))
sizes = [4.0, 5.0, 6.0, 7.0, 8.0, 10.0]
runs = world.runs(cj.perturbed_mixtures([0.35, 0.25, 0.15, 0.10, 0.15]), sizes + [12.0], noise=0.002, key=jax.random.key(1))
data = world.mixture_data(runs, "loss_val0")
cost = runs["flops"].to_numpy()
full = runs.loc[runs["size"] <= 10, "flops"].sum()
budgets = full * (np.array([0.15, 0.4]) if QUICK else np.array([0.1, 0.15, 0.25, 0.4, 0.6]))
repeats = 3 if QUICK else 10
law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0)
per_size_cost = np.array([cost[runs["size"] == s][0] for s in sizes])
plot.sampling_strategies(sizes, per_size_cost, budgets[0], 11, title=f"allocations at {budgets[0]:.2e} FLOPs")""",
    ),
    (
        "code",
        """\
import warnings
frames = []
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for budget in budgets:
        for strategy in cj.STRATEGIES:
            f = cj.extrapolation_error(law, data, sizes, 12.0, repeats=repeats, key=jax.random.key(7), strategy=strategy,
                                       budget=budget, cost=cost, restarts=8 if QUICK else 16)
            frames.append(f.assign(strategy=strategy, budget=budget))
table = pd.concat(frames, ignore_index=True)
print(f"{len(table)} fits in {time.perf_counter() - t0:.0f} s")
summary = table.groupby(["budget", "strategy"])["error"].mean().unstack("strategy")
summary.index = [f"{b:.2e} ({b / full:.0%})" for b in summary.index]
print("held-out MAPE (%) at M=12; lowest per budget:", list(summary.idxmin(axis=1)))
summary.round(3)""",
    ),
    ("code", """plot.strategy_error(table)"""),
]

NOTEBOOKS["07_loss_to_benchmark_gadre"] = [
    (
        "md",
        "# Loss to benchmark on real checkpoints (gadre2024)\n\n104 models (11M-6.9B parameters, three corpora) with 8 validation losses and 46 benchmarks. The paper's protocol: fit on 80% of the checkpoints, score the other 20%, here repeated over 10 seeded splits with both laws scored on the same splits (`cj.heldout_benchmark_error`). The multi-loss law (8 losses) is compared with the single-loss law (c4_val only) on benchmarks with signal (MMLU is at chance here). The full table lives in `../shared`; a 10-benchmark subset ships in the package (MIT).",
    ),
    ("code", SETUP),
    (
        "code",
        """\
import shared_data
df = shared_data.gadre2024()
losses = [c for c in df.columns if c.startswith("loss_")]
benchmarks = ["acc_arc_easy", "acc_hellaswag", "acc_piqa", "acc_lambada_openai", "acc_copa", "acc_winogrande",
              "acc_boolq", "acc_arc_challenge", "acc_openbook_qa", "acc_bigbench_qa_wikidata"]
sets = {"multi-loss": losses, "single-loss (c4_val)": ["loss_c4_val"]}
n_splits = 3 if QUICK else 10
table = cj.heldout_benchmark_error(df, sets, benchmarks, jax.random.key(0), n_splits=n_splits)
per_split = table.groupby(["split", "losses"])["heldout_mae"].mean().unstack()
diff = per_split["multi-loss"] - per_split["single-loss (c4_val)"]
print(f"multi-loss minus single-loss mean held-out MAE over {n_splits} paired splits: {diff.mean():+.4f} "
      f"(standard error {diff.std(ddof=1) / np.sqrt(n_splits):.4f}); multi-loss better on {(diff < 0).sum()}/{n_splits}")
table.groupby(["benchmark", "losses"])["heldout_mae"].mean().unstack().round(4)""",
    ),
    (
        "md",
        "Over the 10 full-size splits the multi-loss law wins clearly on LAMBADA, ARC-Easy and BigBench QA-Wikidata, by less on HellaSwag and ARC-Challenge, and ties within 0.001 on the rest (BoolQ, COPA, PIQA, WinoGrande, OpenBookQA), where the other validation losses add nothing to C4's. Both laws are fitted monotone (k >= 0, 0 <= A <= 1): the unconstrained 8-loss law traded large positive and negative weights on these nearly collinear losses, and its verdict against the single-loss law flipped between platforms.",
    ),
    (
        "code",
        """\
test = np.zeros(len(df), bool); test[np.random.default_rng(0).permutation(len(df))[: len(df) // 5]] = True
fits = cj.fit_benchmarks(df, losses=losses, benchmarks=["acc_hellaswag", "acc_lambada_openai"], key=jax.random.key(0), weights=(~test).astype(float))
L = jnp.asarray(df[losses].to_numpy())
pred = np.asarray(fits.laws["acc_lambada_openai"](L))
y = df["acc_lambada_openai"].to_numpy()
print("fitted loss weights k:", dict(zip(losses, np.asarray(fits.laws["acc_lambada_openai"].k).round(3))))
plot.predicted_vs_observed(y[~test], pred[~test], y[test], pred[test], title="LAMBADA: multi-loss law", label="accuracy")""",
    ),
]


NOTEBOOKS["08_decision_backtest"] = [
    (
        "md",
        "# Study 4: does the recommended mixture win? The world zoo and the decision backtest\n\nThe paper's Figure 1 and Tables 1-2 ask whether a law's pick beats simple baselines. Here the truth is known: each world of `simulate.make_world` (default family `capacity_data`: capacity allocation plus a per-domain data term, specialized validation sets and benchmarks) is checked first against the real-data figures its realism targets come from, then `cj.backtest` trains the paper's 66-run design under FLOPs budgets, fits each method and scores its pick at M=20 by the world's true Balanced objective. `regret` is the true optimum minus the pick's true value; `capture` the share of the achievable gain over the paper's reference mixture. CAMEL uses the hourglass strategy, the baselines the rectangle, as in the paper.",
    ),
    ("code", SETUP),
    (
        "code",
        """\
n_worlds = 2 if QUICK else 8
rows = []
for seed in range(n_worlds):
    rep = simulate.realism(simulate.make_world(jax.random.key(seed)), key=jax.random.key(0))
    rows.append({"world": seed, "loss spread at M=10 (%)": np.median(rep["loss_spread"][10.0]),
                 "shrink M=4 -> 20": np.max(rep["loss_spread"][4.0] / rep["loss_spread"][20.0]),
                 "Balanced spread (points)": rep["score_spread"]["balanced"], "optimum - reference (points)": rep["gain"]["balanced"]})
print("real data (dmsl_shukor2025): per-domain spreads 9-40%, shrink 1.0-1.1x from 122M to 1.2B; the paper: picks differ by 3-5 points")
pd.DataFrame(rows).set_index("world").round(2)""",
    ),
    (
        "code",
        """\
methods = ["camel", "size-agnostic", "best-observed"] if QUICK else list(cj.BACKTEST_METHODS)
seeds = range(1) if QUICK else range(6)
fractions = [0.4, 1.0] if QUICK else [0.1, 0.2, 0.4, 0.7, 1.0]
frames = []
for seed in seeds:
    world = simulate.make_world(jax.random.key(seed))
    full = world.runs(cj.perturbed_mixtures(simulate.REFERENCE, 0.2), [4.0, 5.0, 6.0, 7.0, 8.0, 10.0])["flops"].sum()
    t0 = time.perf_counter()
    frame = cj.backtest(world, methods, key=jax.random.key(100 + seed), budgets=[f * full for f in fractions],
                        strategy={"camel": "hourglass", "camel-free": "hourglass"}, repeats=2 if QUICK else 6)
    frames.append(frame.assign(world=seed, fraction=(frame["budget"] / full).round(2)))
    print(f"world {seed}: {time.perf_counter() - t0:.0f} s")
table = pd.concat(frames, ignore_index=True)
summary = table.groupby(["method", "fraction"])[["regret", "capture"]].agg(["mean", "sem"])
(100 * summary.xs("regret", axis=1, level=0)).round(2).unstack("fraction")  # regret in accuracy points""",
    ),
    (
        "code",
        """\
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(6, 3.5))
for method, part in table.groupby("method"):
    curve = part.groupby("fraction")["true_value"].agg(["mean", "sem"])
    ax.errorbar(curve.index, 100 * curve["mean"], yerr=100 * curve["sem"], label=method, marker="o", capsize=2)
ax.set_xlabel("optimization budget (fraction of the 66-run design's FLOPs)")
ax.set_ylabel("true Balanced score of the pick (points)")
ax.legend(fontsize=8); ax.set_title("Figure 1 on the zoo: the pick's true score vs budget")
plt.show()""",
    ),
    (
        "md",
        "How to read this: the law-based methods extrapolate a fit made on a +-20% design to the whole simplex, so their picks can land far outside the mixtures they saw; `best-observed` never leaves the trained mixtures and so cannot capture gains beyond them. The README's table reports the full study (`benchmarks/study_backtest.py`: 20 worlds x 4 repeats, within +-20% of the reference and over the whole simplex) and the default it supports: within the trust region SODMAdditive beats tied CAMEL (in 18 of 20 worlds) and CAMELData (by 0.03 points) on this zoo.",
    ),
    (
        "md",
        "## Tables 1-2: the four objectives\n\nThe paper's Tables 1-2 compare methods on four objectives: Balanced and the three specialized ones (math, code, knowledge: each weights its own benchmarks). Every method here fits the full 66-run design (100% budget) and chooses within +-20% of the reference (`max_shift=0.2`); the same runs and noise draws serve every method and objective, so the comparison is paired. `benchmarks/study_backtest.py --objective X --fractions 1.0` runs the same cell (`one_world`, imported here) for the README's table (20 worlds, within +-20% and over the whole simplex).",
    ),
    (
        "code",
        """\
sys.path.insert(0, os.path.join("..", "benchmarks"))
import study_backtest
objectives = ["balanced", "math"] if QUICK else ["balanced", "math", "code", "knowledge"]
methods = ["camel", "sodm", "best-observed"] if QUICK else list(cj.BACKTEST_METHODS)
parts = []
for objective in objectives:
    for seed in range(1 if QUICK else 6):
        part = study_backtest.one_world("capacity_data", seed, 1 if QUICK else 2, objective, 0.2, fractions=(1.0,), methods=methods)
        parts.append(part.assign(objective=objective))
tables = pd.concat(parts, ignore_index=True)
per_world = tables.groupby(["objective", "method", "seed"])["regret"].mean()
(100 * per_world.groupby(["objective", "method"]).agg(["mean", "sem"])).round(3).unstack("objective")  # regret in points""",
    ),
    (
        "md",
        "## Bands you can trust, and a verdict (issue 14)\n\nA bootstrap band only sees how the fit moves when runs are resampled. `fit_pipeline` now also resamples the loss-to-benchmark stage and calibrates the extrapolation error on held-out sizes (`cj.calibrate`), and `optimal_mixture(fitted, robust=\"mean\", reference=...)` returns a verdict. `benchmarks/study_calibration.py` (imported here) checks, world by world, whether nominal 95% bands cover the world's true loss at M=12 and M=20 (11 mixtures, two validation losses) and the true objective of the pick, and whether an \"improves\" verdict is right. The README's table runs 12 worlds with 100 resamples.",
    ),
    (
        "code",
        """\
import sys
sys.path.insert(0, os.path.join("..", "benchmarks"))
import study_calibration
rows = []
for seed in range(1 if QUICK else 12):
    world_rows, cost = study_calibration.one_world("capacity_data", seed, 20 if QUICK else 100)
    rows += world_rows
cal = pd.DataFrame(rows)
coverage = cal.groupby(["quantity", "size", "band", "world"])["covered"].mean().groupby(["quantity", "size", "band"]).agg(["mean", "sem"])
coverage.round(3)""",
    ),
    (
        "code",
        """\
verdicts = cal.dropna(subset=["verdict"])
verdicts[["quantity", "size", "band", "verdict", "p_improve", "gain", "true_gain"]].round(4).head(12)""",
    ),
]


NOTEBOOKS["09_adaptive_design"] = [
    (
        "md",
        "# Choose the next runs: adaptive, compute-aware experiment design\n\nThe paper fixes a sampling strategy (rectangle, triangle, inverted triangle, diamond, hourglass) before any run is trained and leaves adaptive allocation to future work. `cj.next_runs` asks, for every run not yet trained, how much its outcome would sharpen the decision at the target size, per FLOP; the backtest strategy `\"adaptive\"` trains in rounds: an hourglass seed at 25% of the budget, then tranches chosen by `next_runs` from bootstrap refits to the runs so far. This notebook shows one decision step on a simulated world, then measures the strategy against the five static ones.",
    ),
    ("code", SETUP),
    (
        "md",
        "**One step.** Train the hourglass design at 25% of the paper's 66-run design's FLOPs, fit the end-to-end pipeline with bootstrap resamples, and rank the 66 - n runs not yet trained (`replace=False`: each is one run of the design, trained once). The decision quantity q is, in each resample, the predicted Balanced score at the recommended mixture at M=20 (within +-20% of the reference, the README's trust region) minus the reference's; a candidate's score is the variance of q its outcome would remove, Cov(q, f_c)^2 / (Var(f_c) + noise^2) (the ensemble-Kalman reading of expected variance reduction; Cohn, Ghahramani & Jordan 1996), and the batch is built greedily per FLOP.",
    ),
    (
        "code",
        """\
world = simulate.make_world(jax.random.key(3))
sizes = [4.0, 5.0, 6.0, 7.0, 8.0, 10.0]
design = world.runs(cj.perturbed_mixtures(simulate.REFERENCE, 0.2), sizes, noise=0.002, key=jax.random.key(1), tokens=simulate.COOLDOWN_TOKENS)
full = float(design["flops"].sum())
import warnings
seed = cj.sample_design("hourglass", design, 0.25 * full, jax.random.key(2)).astype(bool)
trained, candidates = design[seed].reset_index(drop=True), design[~seed].reset_index(drop=True)
losses = [f"loss_{v}" for v in world.validation_sets]
weights = cj.OBJECTIVES["balanced"]

def fit_on(runs, key):
    warnings.filterwarnings("ignore", message="fitting .* free parameters")  # a 25% design is small by design
    bench = cj.fit_benchmarks(runs, losses=losses, benchmarks=[f"acc_{b}" for b in world.benchmarks], names=list(world.benchmarks), key=key, restarts=8)
    law = cj.CAMEL.sample_init(key, n_datasets=5, n_domains=3, tied=True, capacity_exponent=3.0)
    return cj.fit_pipeline(world.mixture_data(runs, losses[0]), bench, weights, law=law, key=key, n_resamples=16 if QUICK else 64, strata=runs["size"].to_numpy())

fitted = fit_on(trained, jax.random.key(4))
region = dict(reference=simulate.REFERENCE, max_shift=0.2)
step = cj.next_runs(fitted, candidates, budget=0.25 * full, target_size=20.0, key=jax.random.key(5), batch=12, replace=False, **region)
print(f"{len(trained)} runs trained ({trained['flops'].sum() / full:.0%} of the design's FLOPs); sd of the gain today {100 * step.attrs['sd_before']:.3f} points")
step[["size", "order", "score", "cost", "cumulative_cost", "sd_after"]].assign(
    score=100 * step["score"] / step.attrs["sd_before"] ** 2, sd_after=100 * step["sd_after"], cost=step["cost"] / full, cumulative_cost=step["cumulative_cost"] / full
).rename(columns={"score": "score (% of today's Var)", "sd_after": "sd after (points)", "cost": "cost (share)", "cumulative_cost": "cumulative (share)"}).round(4)""",
    ),
    (
        "md",
        "`sd_after` is the model's own forecast of the decision's spread once those runs are measured: the linear-Gaussian reading of the resample ensemble, which assumes the outcomes land where the members say. Train them (query the world: the design holds their noisy outcomes), refit, and compare the forecast with what the refit's resamples say. They need not agree: the refit's bootstrap sees different data, and a bootstrap of a few runs per size is itself noisy; the backtest below measures what the choice is worth in regret.",
    ),
    (
        "code",
        """\
chosen = candidates.iloc[step.index]
refit = fit_on(pd.concat([trained, chosen], ignore_index=True), jax.random.key(4))
after = cj.next_runs(refit, candidates.drop(step.index), budget=0.25 * full, target_size=20.0, key=jax.random.key(5), batch=1, **region)
print(f"sd of the gain: before {100 * step.attrs['sd_before']:.3f}, forecast {100 * step['sd_after'].iloc[-1]:.3f}, after the refit {100 * after.attrs['sd_before']:.3f} points")
true_f = world.true_objective(20.0, weights)
for name, r in [("before", step.attrs["recommended"]), ("after", after.attrs["recommended"])]:
    print(f"recommended {name}: {np.round(r, 3)}, true gain over the reference {100 * float(true_f(jnp.asarray(r)) - true_f(jnp.asarray(simulate.REFERENCE))):+.2f} points")""",
    ),
    (
        "md",
        "**The backtest.** `cj.backtest(..., strategy=\"adaptive\")` repeats that loop in every (budget, repeat) cell: the hourglass seed, then `rounds` tranches of what is left, all cells fitted as one batched program per round. Below, tied CAMEL on the runs each strategy chooses, at equal FLOPs budgets; the full design (every run) is the yardstick. `regret` is the true optimum minus the pick's true value, over the whole simplex.",
    ),
    (
        "code",
        """\
strategies = ("hourglass", "adaptive") if QUICK else (*cj.STRATEGIES, "adaptive")
fractions = [0.25, 0.5]
frames = []
for seed in range(1 if QUICK else 3):
    w = simulate.make_world(jax.random.key(seed))
    t0 = time.perf_counter()
    frame = cj.backtest(w, {s: "camel" for s in strategies}, key=jax.random.key(100 + seed), budgets=[f * full for f in fractions] + [None],
                        strategy={s: s for s in strategies}, repeats=1 if QUICK else 3, restarts=2 if QUICK else 4,
                        adaptive={"rounds": 2 if QUICK else 3, "n_resamples": 8 if QUICK else 16})
    frames.append(frame.assign(world=seed, fraction=(frame["budget"] / full).round(2), spent=frame["flops"] / full))
    print(f"world {seed}: {time.perf_counter() - t0:.0f} s")
table = pd.concat(frames, ignore_index=True)
table.loc[table["fraction"] >= 1, "method"] = "full design"
table = table.drop_duplicates(subset=["method", "fraction", "world", "repeat"])
(table.assign(regret=100 * table["regret"]).groupby(["method", "fraction"])[["regret", "spent"]].agg(["median", "mean"]).round(3))""",
    ),
    (
        "md",
        "A few worlds are noise: the README's table runs `benchmarks/study_adaptive.py` (20 worlds x 3 repeats of the default family and of the misspecified `sodm` family) and says, with standard errors over worlds, whether adaptive reaches the full design's median regret at half its FLOPs (the paper's 50% saving) and how it compares with hourglass at equal FLOPs.",
    ),
]

def build(name: str, cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src) for kind, src in cells
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def execute(nb: nbformat.NotebookNode, timeout: int = 3600) -> None:
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()


if __name__ == "__main__":
    wanted = sys.argv[1:]
    for name, cells in NOTEBOOKS.items():
        if wanted and not any(w in name for w in wanted):
            continue
        nb = build(name, cells)
        if os.environ.get("CAMEL_NO_EXECUTE") != "1":
            execute(nb)
        nbformat.write(nb, HERE / f"{name}.ipynb")
        print("wrote", name)
