"""The one loader for the real measurements in ../shared/data/external (tests and notebooks only).

Each loader skips the calling test with a clear reason when the folder is absent; the package itself never
depends on these files.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(os.environ.get("CAMEL_SHARED", Path(__file__).resolve().parents[1].parent / "shared")) / "data" / "external"


def path(dataset: str) -> Path:
    """Folder of one external data set; skips the test (or raises FileNotFoundError outside pytest) if absent."""
    folder = ROOT / dataset
    if not folder.is_dir():
        reason = f"external data set {dataset!r} not found at {folder} (set CAMEL_SHARED to the shared/ folder)"
        try:
            import pytest
        except ImportError:  # pragma: no cover
            raise FileNotFoundError(reason) from None
        pytest.skip(reason)
    return folder


def epoch_chinchilla() -> pd.DataFrame:
    """Epoch AI's Chinchilla points as Epoch fit them: the 5 highest losses dropped (240 rows), D = C / (6N)."""
    df = pd.read_csv(path("epoch_chinchilla") / "svg_extracted_data.csv")
    df = df[df["loss"] < np.sort(df["loss"].to_numpy())[-5]]
    return pd.DataFrame(
        {
            "N": df["Model Size"].to_numpy(float),
            "D": df["Training FLOP"].to_numpy(float) / (6 * df["Model Size"].to_numpy(float)),
            "loss": df["loss"].to_numpy(float),
        }
    )


def gadre2024() -> pd.DataFrame:
    return pd.read_csv(path("gadre2024") / "models.csv")


def dmsl_shukor2025() -> pd.DataFrame:
    return pd.read_csv(path("dmsl_shukor2025") / "dmsl_llm_slimpajama.csv")


def mixinglaws_ye2024(name: str = "5Mix") -> pd.DataFrame:
    return pd.read_csv(path("mixinglaws_ye2024") / f"{name}_long.csv")


# --- the real-data decision backtests (issue 13): (train runs, candidate runs, mixture columns, weightings) -----


def dmsl_decision() -> tuple[pd.DataFrame, pd.DataFrame, list[str], dict[str, dict[str, float]]]:
    """dmsl_shukor2025 at each run's largest token count: train on sizes <= 1.235B, choose among the four mixtures
    trained at 2.718B. Weightings: each of the 7 SlimPajama validation losses, and their unweighted mean."""
    df = dmsl_shukor2025()
    mixture = [c for c in df.columns if c.startswith("weight_")]
    last = df.loc[df.groupby(mixture + ["model_size"])["n_tokens"].idxmax()].reset_index(drop=True)
    domains = [c.removeprefix("weight_") for c in mixture]
    weightings = {d: {f"{d}_loss": 1.0} for d in domains} | {"mean": {f"{d}_loss": 1.0 for d in domains}}
    big = last["model_size"] > 2e9
    return last[~big], last[big], mixture, weightings


def mixinglaws_decision() -> tuple[pd.DataFrame, pd.DataFrame, list[str], dict[str, dict[str, float]]]:
    """mixinglaws_ye2024 5Mix at step 20k: train on 70M-410M (26 mixtures each), choose among the six 1B runs.
    Weighting: the validation loss weighted by the source's valid_weight.json (one `loss` column per run)."""
    import json

    df = mixinglaws_ye2024("5Mix")
    weights = json.loads((path("mixinglaws_ye2024") / "valid_weight.json").read_text())
    df = df[(df["step"].astype(str) == "20000") & (df["run_id"] < 900)]
    df = df.assign(w=df["valid_domain"].map(weights))
    keys = ["model_size_label", "nonembedding_params", "train_mixture"]
    total = df.assign(wl=df["loss"] * df["w"]).groupby(keys)[["wl", "w"]].sum().reset_index()
    total["loss"] = total["wl"] / total["w"]
    r = np.array([[float(x) for x in m.split("-")] for m in total["train_mixture"]])
    mixture = [f"r{j}" for j in range(r.shape[1])]
    total = total.drop(columns=["wl", "w"]).assign(**{c: r[:, j] for j, c in enumerate(mixture)})
    big = total["model_size_label"] == "1B"
    return total[~big].reset_index(drop=True), total[big].reset_index(drop=True), mixture, {"weighted": {"loss": 1.0}}


def regmix_decision() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, list[str], dict[str, dict[str, float]]]:
    """regmix_liu2024: train on the 512 1M-parameter runs, rank the 256 held-out mixtures trained at 60M.
    Returns (train, candidates at 60M, the same candidates at 1M, mixture columns, weightings); the weighting is
    the Pile-CC validation loss, the paper's target. The 60M token count is not stated: sizes are parameters."""
    folder = path("regmix_liu2024")

    def runs(mix: str, loss: str, size: float) -> pd.DataFrame:
        table = pd.read_csv(folder / mix).merge(pd.read_csv(folder / loss), on="index")
        table.columns = [c.removeprefix("train_the_pile_").removeprefix("metric/the_pile_") for c in table.columns]
        return table.assign(size=size)

    train = runs("train_mixture_1m.csv", "train_pile_loss_1m.csv", 1e6)
    mixture = [c for c in pd.read_csv(folder / "train_mixture_1m.csv").columns if c != "index"]
    mixture = [c.removeprefix("train_the_pile_") for c in mixture]
    test_60m = runs("test_mixture_60m.csv", "test_pile_loss_60m.csv", 6e7)
    test_1m = runs("test_mixture_1m.csv", "test_pile_loss_1m.csv", 1e6)
    return train, test_60m, test_1m, mixture, {"pile_cc": {"pile_cc_val_loss": 1.0}}


# --- held-out law selection across token counts (issue 15): every run, with its tokens -------------------------


def dmsl_runs() -> tuple[pd.DataFrame, list[str], list[str]]:
    """dmsl_shukor2025, every (mixture, size, token count) run: (runs with `size` and `tokens`, mixture columns,
    the 7 SlimPajama validation-loss columns)."""
    df = dmsl_shukor2025().rename(columns={"model_size": "size", "n_tokens": "tokens"})
    mixture = [c for c in df.columns if c.startswith("weight_")]
    losses = [f"{c.removeprefix('weight_')}_loss" for c in mixture]
    return df, mixture, losses


def dmsl_held_out() -> tuple[pd.DataFrame, pd.DataFrame, list[str], list[str]]:
    """dmsl_shukor2025's longest run per mixture and size, split for extrapolation: (the runs at 122M-1.2B, the
    four at 2.718B, mixture columns, the 7 validation-loss columns), with `size` and `tokens` as `dmsl_runs`."""
    df, mixture, losses = dmsl_runs()
    longest = df.loc[df.groupby(mixture + ["size"])["tokens"].idxmax()]
    return longest[longest["size"] < 2e9], longest[longest["size"] > 2e9], mixture, losses


def mixinglaws_runs(name: str = "5Mix") -> tuple[pd.DataFrame, list[str]]:
    """mixinglaws_ye2024 `name` (5Mix, 3Mix, 2Mix), every (run, step): the validation loss weighted by
    valid_weight.json, with `size` (non-embedding parameters), `tokens` (step x 2^20) and `run_id` (>= 900: the
    paper's optimised mixtures). Rows whose step is not a number (3Mix's 'last') are left out."""
    import json

    df = mixinglaws_ye2024(name)
    df = df[pd.to_numeric(df["step"], errors="coerce").notna()]
    weights = json.loads((path("mixinglaws_ye2024") / "valid_weight.json").read_text())
    df = df.assign(w=df["valid_domain"].map(weights))
    keys = ["model_size_label", "nonembedding_params", "run_id", "train_mixture", "step", "tokens"]
    total = df.assign(wl=df["loss"] * df["w"]).groupby(keys)[["wl", "w"]].sum().reset_index()
    total["loss"] = total["wl"] / total["w"]
    r = np.array([[float(x) for x in m.split("-")] for m in total["train_mixture"]])
    mixture = [f"r{j}" for j in range(r.shape[1])]
    total = total.drop(columns=["wl", "w"]).assign(**{c: r[:, j] for j, c in enumerate(mixture)})
    total = total.rename(columns={"nonembedding_params": "size"}).astype({"size": float, "tokens": float})
    return total, mixture
