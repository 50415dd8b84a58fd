"""Study 6 (issue 15): held-out error of the mixture laws across model sizes and token counts, on real tables.

- dmsl_shukor2025: fit every run <= 1.235B (every token count), score the 2.718B runs, 7 domain losses.
- mixinglaws_ye2024 5Mix: fit 70M-410M (every step), score the 1B runs (every step present there).

Laws of (r, M, D) (CAMELData, SODM with tokens) are fitted on every run. Laws of (r, M) cannot tell token counts
apart: they are fitted on each (mixture, size)'s longest run, and every law is also scored on those longest runs
at the held-out size ("final" column), the one comparison all laws share. MAPE in percent; lower is better.

    python benchmarks/study_select_law.py [--restarts 32] [--seeds 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import shared_data  # noqa: E402

import camel_jax as cj  # noqa: E402

jax.config.update("jax_enable_x64", True)


def templates(n: int, size_scale: float, tokens_scale: float, key: jax.Array) -> dict[str, tuple[object, bool]]:
    """{name: (law template, takes tokens)}; k=3 intrinsic domains, capacity ~ parameters (c=1)."""
    camel = dict(n_datasets=n, n_domains=3, size_scale=size_scale)
    data = camel | dict(tokens_scale=tokens_scale)
    sodm = dict(n_datasets=n, size_scale=size_scale, tokens_scale=tokens_scale)
    return {
        "camel-tied": (cj.CAMEL.sample_init(key, tied=True, **camel), False),
        "camel-free": (cj.CAMEL.sample_init(key, **camel), False),
        "sodm-additive": (cj.SODMAdditive.sample_init(key, tokens=False, **sodm), False),
        "camel-data": (cj.CAMELData.sample_init(key, **data), True),
        "camel-data-shared": (cj.CAMELData.sample_init(key, shared_exponents=True, **data), True),
        "camel-data-tied": (cj.CAMELData.sample_init(key, tied=True, **data), True),
        "sodm-additive-D": (cj.SODMAdditive.sample_init(key, **sodm), True),
        "sodm-joint-D": (cj.SODMJoint.sample_init(key, **sodm), True),
    }


def longest(df: pd.DataFrame, mixture: list[str]) -> pd.DataFrame:
    """Each (mixture, size)'s run with the most tokens."""
    return df.loc[df.groupby(mixture + ["size"])["tokens"].idxmax()]


def mape(pred: np.ndarray, y: np.ndarray) -> np.ndarray:
    return 100.0 * np.nanmean(np.abs(pred / np.asarray(y) - 1.0), axis=-1)


def study(name: str, df: pd.DataFrame, mixture: list[str], targets: list[str], test: np.ndarray, args) -> list[dict]:
    """Fit every law on the runs where `~test`, score where `test`; one multi-target fit per law and seed."""
    train_all, test_all = df[~test], df[test]
    train_last, test_last = longest(train_all, mixture), longest(test_all, mixture)
    scale_M = float(np.exp(np.log(train_all["size"]).mean()))
    scale_D = float(np.exp(np.log(train_all["tokens"]).mean()))
    rows = []
    for seed in range(args.seeds):
        key = jax.random.key(seed)
        for law_name, (template, tokens) in templates(len(mixture), scale_M, scale_D, key).items():
            train = train_all if tokens else train_last
            cols = ["size", "tokens"] if tokens else ["size"]

            def inputs(frame: pd.DataFrame, cols=cols) -> tuple[jax.Array, ...]:
                return (jnp.asarray(frame[mixture].to_numpy()),) + tuple(jnp.asarray(frame[c].to_numpy()) for c in cols)

            Y = train[targets].to_numpy().T
            W = np.isfinite(Y).astype(float)  # a few runs lack a loss: weight 0
            result = cj.fit(
                template, inputs(train), np.where(W > 0, Y, 1.0), weights=W, key=key, restarts=args.restarts
            )
            row = {"data": name, "law": law_name, "seed": seed, "n_train": len(train)}
            row["converged"] = float(np.mean(np.asarray(result.converged).any(axis=-1)))
            row["final"] = float(np.mean(mape(np.asarray(result.predict(*inputs(test_last))), test_last[targets].T)))
            if tokens:
                row["all"] = float(np.mean(mape(np.asarray(result.predict(*inputs(test_all))), test_all[targets].T)))
            rows.append(row)
            print(f"  {name:10s} seed {seed} {law_name:18s} final {row['final']:.3f}  all {row.get('all', np.nan):.3f}",
                  flush=True)  # fmt: skip
    rows += nested_dml(name, train_last, test_last, mixture, targets, args)
    return rows


def nested_dml(name, train, test, mixture, targets, args) -> list[dict]:
    """The nested DML baseline (per-mixture power laws in size, then DML) on the longest runs."""
    both_all = pd.concat([train, test])
    errors = []
    for target in targets:
        both = both_all[np.isfinite(both_all[target])]
        data = cj.MixtureData.from_frame(both, mixture=mixture, target=target, size="size")
        sizes = sorted(train["size"].unique())
        mask = both["size"].isin(sizes).to_numpy(float)[None]
        frame = cj.experiments.extrapolation_error(
            cj.experiments.DMLNested(), data, sizes, float(test["size"].iloc[0]), masks=mask, key=jax.random.key(0)
        )
        errors.append(float(frame["error"].mean()))
    return [{"data": name, "law": "dml-nested", "seed": 0, "n_train": len(train), "final": float(np.mean(errors))}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--restarts", type=int, default=32)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="write the per-seed table as CSV")
    args = parser.parse_args()
    rows = []
    df, mixture, losses = shared_data.dmsl_runs()
    rows += study("dmsl", df, mixture, losses, (df["size"] > 2e9).to_numpy(), args)
    runs, mix = shared_data.mixinglaws_runs()
    rows += study("5Mix", runs, mix, ["loss"], (runs["model_size_label"] == "1B").to_numpy(), args)
    table = pd.DataFrame(rows)
    if args.out:
        table.to_csv(args.out, index=False)
    summary = table.groupby(["data", "law"], sort=False)[["final", "all", "converged"]].agg(["mean", "std"])
    print(summary.round(3).to_string())


if __name__ == "__main__":
    main()
