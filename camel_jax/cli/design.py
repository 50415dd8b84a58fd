"""`camel-jax design --sizes ... --budget ...`: choose (size, mixture) runs under a FLOPs budget with one of the
paper's five sampling strategies; write them to a CSV."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import UserError, _check_destination, _floats
from ._names import DeferredModule

if TYPE_CHECKING:
    import numpy as np
else:
    np = DeferredModule("numpy")  # imported when work starts: `--help` stays fast


def add_parser(sub: Any) -> None:
    design = sub.add_parser("design", help="choose (size, mixture) runs under a FLOPs budget -> CSV")
    design.add_argument("--sizes", required=True, help="model sizes, comma-separated, increasing (e.g. 4,5,6,7,8,10)")
    design.add_argument("--budget", type=float, required=True, help="compute budget (FLOPs, or the units of --costs)")
    design.add_argument(
        "--strategy", default="hourglass", help="rectangle|triangle|inverted_triangle|diamond|hourglass"
    )
    design.add_argument("--costs", default=None, help="cost of one run per size (default 6 N D, N from --params)")
    design.add_argument("--params", default=None, help="active parameters per size (default: the paper's architecture)")
    design.add_argument("--tokens", type=float, default=20e9, help="tokens per run for 6 N D (default 2e10)")
    design.add_argument("--mixtures", type=int, default=11, help="mixtures available per size (default 11)")
    design.add_argument("--reference", default=None, help="reference mixture: runs get its +-20%% perturbations")
    design.add_argument("--seed", type=int, default=0)
    design.add_argument("--out", default="design.csv", help="output CSV (default design.csv)")


def run(args: argparse.Namespace) -> None:
    import jax
    import pandas as pd

    from ..experiments._design import STRATEGIES, perturbed_mixtures, sample_design
    from ..experiments._simulate import paper_active_params

    if args.strategy not in STRATEGIES:
        raise UserError(f"unknown strategy {args.strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if not (np.isfinite(args.budget) and args.budget > 0):
        raise UserError(f"--budget must be a positive number; got {args.budget:g}")
    _check_destination(Path(args.out))
    sizes = np.asarray(_floats(args.sizes, "sizes"))
    repeated = sorted({s for s in sizes.tolist() if sizes.tolist().count(s) > 1})
    if repeated:
        raise UserError(f"--sizes must list each size once; {repeated[0]:g} is repeated")
    if args.costs:
        costs = np.asarray(_floats(args.costs, "costs"))
        if costs.shape != sizes.shape:
            raise UserError(f"--costs needs one value per size ({len(sizes)}); got {len(costs)}")
        params = np.full(len(sizes), np.nan)
    else:
        params = np.asarray(_floats(args.params, "params")) if args.params else np.asarray(paper_active_params(sizes))
        if params.shape != sizes.shape:
            raise UserError(f"--params needs one value per size ({len(sizes)}); got {len(params)}")
        costs = 6.0 * params * args.tokens
    bad = ~(np.isfinite(costs) & (costs > 0))
    if bad.any():
        what = "--costs" if args.costs else "the cost 6 N D (--params, --tokens)"
        raise UserError(f"{what} must be > 0 (FLOPs of one run); size {sizes[bad][0]:g} costs {costs[bad][0]:g}")
    if np.all(np.isfinite(costs)) and np.all(costs > 0) and args.budget < costs.min():
        raise UserError(
            f"--budget {args.budget:.4g} is below the cheapest run ({costs.min():.4g} at size "
            f"{sizes[int(np.argmin(costs))]:g}): no run fits; raise --budget"
        )
    if args.reference:
        mixtures = perturbed_mixtures(_floats(args.reference, "reference"))
    else:
        mixtures = None
    n_mix = len(mixtures) if mixtures is not None else args.mixtures
    runs = pd.DataFrame(
        {
            "size": np.repeat(sizes, n_mix),
            "mixture": np.tile(np.arange(n_mix), len(sizes)),
            "params": np.repeat(params, n_mix),
            "flops": np.repeat(costs, n_mix),
        }
    )
    if mixtures is not None:
        for j in range(mixtures.shape[1]):
            runs[f"r_{j}"] = np.tile(mixtures[:, j], len(sizes))
    mask = sample_design(args.strategy, runs, args.budget, jax.random.key(args.seed))
    chosen = runs[mask.astype(bool)].reset_index(drop=True)
    chosen.to_csv(args.out, index=False)
    per_size = chosen.groupby("size").size().reindex(sizes, fill_value=0)
    print(
        f"{args.strategy}: {len(chosen)} runs, {chosen['flops'].sum():.4g} of {args.budget:.4g} budget; per size: "
        + ", ".join(f"{s:g}: {c}" for s, c in per_size.items())
    )
    print(f"wrote {args.out}")
