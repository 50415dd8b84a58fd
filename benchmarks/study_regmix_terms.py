"""RegMix's own split at full size: camel-mixture with k intrinsic domains, every validation loss, more solver steps.

Issue 56 asks whether a shipped law ranks RegMix's 256 held-out 1M-parameter runs at or above RegMix's published
LightGBM (0.969-0.998; Pile-CC 0.989). Study 10 measured camel-mixture k = 3 on all 13 losses and k = 5 on four of
them on 2 CPU cores, where k = 5 took 15 minutes a loss and its best start stopped at the default step cap on two.
This script fits all 13 losses at once for each k, with a step budget it takes as arguments (on a GPU: 10x the
defaults), and prints per loss the Spearman rank correlation of the best start's predictions with the held-out
losses, the best start's status, how many starts met their stopping rule, the held-out MAPE, and the wall time of
each fit. Fitted on the 512 1M runs of `regmix_liu2024` (`tests/shared_data.regmix_decision`); scored on the 256
held-out 1M runs. Asserts nothing: a study (docs/studies/10_real_tables.md).

Usage: python benchmarks/study_regmix_terms.py [--k 3 5 7] [--restarts 8] [--max-steps 1000] [--polish 1000]
       [--targets N]  (N: the first N losses only, for a quick check)
CAMEL_SHARED names the shared/ folder when it is not beside the repository.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax.experiments._observed import spearman  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import shared_data  # noqa: E402

LIGHTGBM = {"pile_cc": 0.989}  # RegMix's published figure for Pile-CC; its range over the losses is 0.969-0.998


def _tables(n_targets: int | None):
    train, _, test, mixture, _ = shared_data.regmix_decision()
    losses = [c for c in train.columns if c.endswith("_val_loss")][:n_targets]
    columns = mixture + losses
    fit_data = cj.read_runs(train[columns], mixture=mixture, target=losses, size=None, tokens=None)
    test_data = cj.read_runs(test[columns], mixture=mixture, target=losses, size=None, tokens=None)
    return fit_data, test_data, losses


def _one_k(k: int, fit_data, test_data, losses, args) -> None:
    law = cj.law_template("camel-mixture", jax.random.key(0), n_datasets=len(fit_data.columns), n_domains=k)
    options = cj.FitOptions(max_steps=args.max_steps, polish=args.polish)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cj.fit(law, fit_data, key=jax.random.key(args.seed), restarts=args.restarts, options=options)
        jax.block_until_ready(result.objectives)
    seconds = time.perf_counter() - start
    predicted = np.asarray(result.predict(*test_data.inputs))
    y = np.asarray(test_data.y)
    status = np.asarray(result.status)
    converged = np.isin(status, [cj.Status.CONVERGED, cj.Status.STALLED])
    best = np.asarray(result.best_status)
    print(f"\n## camel-mixture k = {k}: {args.restarts} starts, max_steps {args.max_steps}, polish {args.polish}, "
          f"{seconds:.1f} s for {len(losses)} losses", flush=True)  # fmt: skip
    print("| loss | Spearman | held-out MAPE % | best start | starts converged | gradient of best | LightGBM |")
    print("|---|---|---|---|---|---|---|")
    grad = np.asarray(result.grad_norm)
    order = np.argsort(np.asarray(result.objectives), axis=-1)
    for t, loss in enumerate(losses):
        name = loss.removesuffix("_val_loss")
        rho = spearman(predicted[t], y[t])
        mape = 100 * np.mean(np.abs(predicted[t] / y[t] - 1))
        print(f"| {name} | {rho:.4f} | {mape:.3f} | {cj.Status(int(best[t])).name} | "
              f"{int(converged[t].sum())}/{status.shape[-1]} | {grad[t, order[t, 0]]:.1e} | "
              f"{LIGHTGBM.get(name, '')} |", flush=True)  # fmt: skip
    print("problems:", result.problems() or "none")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[3, 5, 7])
    parser.add_argument("--restarts", type=int, default=8)
    parser.add_argument("--max-steps", type=int, default=1000)
    parser.add_argument("--polish", type=int, default=1000)
    parser.add_argument("--targets", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    fit_data, test_data, losses = _tables(args.targets)
    print(f"jax {jax.__version__}, devices {jax.devices()}; {fit_data.y.shape[-1]} runs fitted, "
          f"{test_data.y.shape[-1]} held out, {len(losses)} losses", flush=True)  # fmt: skip
    for k in args.k:
        _one_k(k, fit_data, test_data, losses, args)


if __name__ == "__main__":
    main()
