"""`camel-jax design --sizes ... --budget ...`: choose (size, mixture) runs under a FLOPs budget with one of the
paper's five sampling strategies; write them to a CSV."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import UserError, _check_destination, _floats, configure_jax
from ._names import DeferredModule

if TYPE_CHECKING:
    import numpy as np
else:
    np = DeferredModule("numpy")  # imported when work starts: `--help` stays fast


def add_parser(sub: Any) -> None:
    design = sub.add_parser("design", help="choose (size, mixture) runs under a FLOPs budget -> CSV")
    design.add_argument("--sizes", required=True, help="model sizes, comma-separated, increasing, in the fit's units: "
                        "parameter counts (e.g. 1.2e8,3.1e8; any size >= 1e4 reads as a count) or the paper's size "
                        "index (e.g. 4,5,6,7,8,10: about 1.47e5 M^3 active parameters); with --fit, the units of "
                        "the fit's size column")  # fmt: skip
    design.add_argument("--budget", type=float, required=True, help="compute budget (FLOPs, or the units of --costs)")
    design.add_argument(
        "--strategy", default="hourglass", help="rectangle|triangle|inverted_triangle|diamond|hourglass"
    )
    design.add_argument("--fit", default=None, help="a `camel-jax fit` .npz: the design inherits its mixture column "
                        "names, size and tokens columns and units, and is centred on its runs' mean mixture "
                        "(unless --reference)")  # fmt: skip
    design.add_argument("--costs", default=None, help="cost of one run per size (default 6 N D)")
    design.add_argument("--params", default=None, help="active parameters per size (default: the sizes themselves "
                        "when they are parameter counts, else the paper's architecture)")  # fmt: skip
    design.add_argument("--tokens", type=float, default=None, help="tokens per run for 6 N D (default 2e10; with "
                        "--fit of a token-aware law, the fitted runs' tokens-for-size line)")  # fmt: skip
    design.add_argument("--names", default=None, help="the mixture columns to write, comma-separated (default: the "
                        "fit's, else r_0, r_1, ...)")  # fmt: skip
    design.add_argument("--mixtures", type=int, default=11, help="mixtures per size when there is no reference "
                        "(--names alone): drawn uniformly on the simplex (default 11)")  # fmt: skip
    design.add_argument("--reference", default=None, help="reference mixture: runs get its +-20%% perturbations")
    design.add_argument("--seed", type=int, default=0)
    design.add_argument("--out", default="design.csv", help="output CSV (default design.csv)")


def run(args: argparse.Namespace) -> None:
    import jax
    import pandas as pd

    from ..experiments._design import STRATEGIES, sample_design

    if args.strategy not in STRATEGIES:
        raise UserError(f"unknown strategy {args.strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if not (np.isfinite(args.budget) and args.budget > 0):
        raise UserError(f"--budget must be a positive number; got {args.budget:g}")
    if args.tokens is not None and not (np.isfinite(args.tokens) and args.tokens > 0):
        raise UserError(f"--tokens must be a positive number of tokens; got {args.tokens:g}")
    _check_destination(Path(args.out))
    if args.fit:
        configure_jax()  # a saved fit is read in float64, as by every other subcommand
    sizes = np.asarray(_floats(args.sizes, "sizes"))
    repeated = sorted({s for s in sizes.tolist() if sizes.tolist().count(s) > 1})
    if repeated:
        raise UserError(f"--sizes must list each size once; {repeated[0]:g} is repeated")
    if len(sizes) == 0 or not np.all(np.isfinite(sizes) & (sizes > 0)):
        raise UserError(f"--sizes must be positive numbers; got {args.sizes!r}")
    context = _context(args, sizes)
    tokens = np.full(len(sizes), 20e9 if args.tokens is None else args.tokens)
    if args.tokens is None and context is not None and context.token_aware:
        tokens = context.tokens_at(sizes)
        print("tokens per run: the fitted runs' tokens-for-size line (" + ", ".join(
            f"{s:g}: {t:.3g}" for s, t in zip(sizes, tokens)) + "); --tokens sets one count for every run")  # fmt: skip
    params, costs = _costs(args, sizes, tokens)
    columns, mixtures = _mixtures(args, context)
    size_column = context.size if context is not None else "size"
    tokens_column = context.tokens if context is not None and context.tokens else "tokens"
    n_mix = len(mixtures)
    runs = pd.DataFrame(
        {
            size_column: np.repeat(sizes, n_mix),
            tokens_column: np.repeat(tokens, n_mix),
            "mixture": np.tile(np.arange(n_mix), len(sizes)),
            "params": np.repeat(params, n_mix),
            "flops": np.repeat(costs, n_mix),
        }
    )
    for j, column in enumerate(columns):
        runs[column] = np.tile(mixtures[:, j], len(sizes))
    mask = sample_design(args.strategy, runs, args.budget, jax.random.key(args.seed), size=size_column)
    chosen = runs[mask.astype(bool)].reset_index(drop=True)
    chosen.to_csv(args.out, index=False)
    per_size = chosen.groupby(size_column).size().reindex(sizes, fill_value=0)
    print(
        f"{args.strategy}: {len(chosen)} runs, {chosen['flops'].sum():.4g} of {args.budget:.4g} budget; per size: "
        + ", ".join(f"{s:g}: {c}" for s, c in per_size.items())
    )
    print(f"wrote {args.out} (mixture columns {', '.join(columns)})")


def _costs(args: argparse.Namespace, sizes: np.ndarray, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(active parameters per size, NaN with --costs; the cost of one run per size), checked against --budget."""
    from ..experiments._design import active_params, size_units

    if args.costs:
        costs = np.asarray(_floats(args.costs, "costs"))
        if costs.shape != sizes.shape:
            raise UserError(f"--costs needs one value per size ({len(sizes)}); got {len(costs)}")
        params = np.full(len(sizes), np.nan)
    else:
        params = np.asarray(_floats(args.params, "params")) if args.params else active_params(sizes)
        if params.shape != sizes.shape:
            raise UserError(f"--params needs one value per size ({len(sizes)}); got {len(params)}")
        if not np.all(np.isfinite(params) & (params > 0)):
            raise UserError(f"--params must be positive numbers; got {args.params!r}")
        costs = 6.0 * params * tokens
        if size_units(sizes) == "index" and not args.params:
            counts = ", ".join(f"{p:.3g}" for p in params)
            print(f"sizes {args.sizes} read as the paper's size index (active parameters ~1.47e5 M^3: {counts}); "
                  "give parameter counts to size runs by them")  # fmt: skip
    bad = ~(np.isfinite(costs) & (costs > 0))
    if bad.any():
        what = "--costs" if args.costs else "the cost 6 N D (--params, --tokens)"
        raise UserError(f"{what} must be > 0 (FLOPs of one run); size {sizes[bad][0]:g} costs {costs[bad][0]:g}")
    if np.all(np.isfinite(costs)) and np.all(costs > 0) and args.budget < costs.min():
        raise UserError(
            f"--budget {args.budget:.4g} is below the cheapest run ({costs.min():.4g} at size "
            f"{sizes[int(np.argmin(costs))]:g}): no run fits; raise --budget"
        )
    return params, costs


def _context(args: argparse.Namespace, sizes: np.ndarray) -> Any:
    """The saved fit's conventions (None without --fit), with --sizes checked against its units."""
    if args.fit is None:
        return None
    from ..experiments._design import size_units
    from ._common import _load_fit
    from ._loop import fit_context

    context = fit_context(_load_fit(args.fit), args.fit)
    if size_units(sizes) != context.units:
        theirs = "parameter counts" if context.units == "params" else "the paper's size index"
        raise UserError(
            f"--sizes {args.sizes} are not in the fit's units: its sizes ({context.sizes.min():.4g} to "
            f"{context.sizes.max():.4g}) are {theirs}; give --sizes in the same units"
        )
    return context


def _mixtures(args: argparse.Namespace, context: Any) -> tuple[list[str], np.ndarray]:
    """(the mixture columns to write, the mixtures [m, n]): the reference's +-20% perturbations (--reference, else
    the fit's mean mixture), or with --names alone `--mixtures` draws on the simplex."""
    import jax

    from ..experiments._design import perturbed_mixtures

    names = [c.strip() for c in args.names.split(",") if c.strip()] if args.names else None
    if names is not None and len(set(names)) != len(names):
        raise UserError(f"--names lists a column twice: {names}")
    if context is not None:
        if names is not None and names != context.columns:
            raise UserError(f"--names {names} differ from the fit's mixture columns {context.columns}: drop --names "
                            "(the design writes the fit's)")  # fmt: skip
        names = context.columns
    reference = np.asarray(_floats(args.reference, "reference")) if args.reference else None
    if reference is None and context is not None:
        reference = context.centre()
        print("reference: the fitted runs' mean mixture (" + ", ".join(
            f"{c} {x:.4f}" for c, x in zip(context.columns, reference)) + "); --reference sets another")  # fmt: skip
    if reference is not None:
        if names is not None and len(names) != len(reference):
            raise UserError(f"--reference has {len(reference)} shares for {len(names)} mixture columns {names}")
        try:
            mixtures = perturbed_mixtures(reference)
        except ValueError as error:
            raise UserError(f"--reference: {error}") from None
        return names or [f"r_{j}" for j in range(len(reference))], mixtures
    if names is None:
        raise UserError("the design needs its mixtures: --fit FIT.npz (its columns and mean mixture), --reference "
                        "0.4,0.3,... (its +-20% perturbations) or --names web,code,... (random mixtures)")  # fmt: skip
    if args.mixtures < 1:
        raise UserError(f"--mixtures must be >= 1; got {args.mixtures}")
    draws = jax.random.dirichlet(jax.random.key(args.seed + 1), np.ones(len(names)), (args.mixtures,))
    return names, np.asarray(draws, dtype=float)
