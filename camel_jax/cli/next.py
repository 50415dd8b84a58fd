"""`camel-jax next --fit saved --candidates runs.csv`: the candidate runs that would most sharpen the decision, per
FLOP."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import (
    UserError,
    _best_starts,
    _check_destination,
    _floats,
    _load_fit,
    _mixture_names,
    _read_csv,
    _training_data,
    _warn_extrapolation,
    _warn_unreliable,
)
from ._names import DeferredModule

if TYPE_CHECKING:
    import numpy as np
else:
    np = DeferredModule("numpy")  # imported when work starts: `--help` stays fast


def add_parser(sub: Any) -> None:
    nxt = sub.add_parser("next", help="the candidate runs that would most sharpen the decision, per FLOP -> CSV")
    nxt.add_argument("--fit", required=True, help="a .npz of `camel-jax fit` (bootstrapped here; its mixture names, "
                     "size and tokens columns are the candidates'), or camel_jax.save of a fit_pipeline result, a "
                     "batched pipeline or a BootstrapResult")  # fmt: skip
    nxt.add_argument("--candidates", required=True, help="CSV of runs not yet trained (e.g. `camel-jax design --fit`): "
                     "the fit's mixture columns, its size column (and tokens column, for a token-aware law), and "
                     "flops (default 6 N D from a params or size column of parameter counts, and tokens)")  # fmt: skip
    nxt.add_argument("--mixture", default=None, help="the candidates' mixture columns, in the fit's dataset order "
                     "(default: the columns the fit was made on, matched by name)")  # fmt: skip
    nxt.add_argument("--budget", type=float, required=True, help="FLOPs the next runs may spend")
    nxt.add_argument("--size", type=float, required=True, help="the target model size the decision is for, in the "
                     "fit's units (parameter counts when the fit used them)")  # fmt: skip
    nxt.add_argument("--tokens", type=float, default=None, help="training tokens at the target size, for a "
                     "token-aware law (default: the fitted runs' tokens-for-size line at --size)")  # fmt: skip
    nxt.add_argument("--batch", type=int, default=1, help="at most this many runs (default 1)")
    nxt.add_argument("--replicates", action="store_true", help="allow a run to be proposed more than once (a "
                     "replicate with fresh noise); by default the batch's runs are distinct")  # fmt: skip
    nxt.add_argument("--noise", type=float, default=None, help="sd of one measured outcome (default: the fit's rms "
                     "residual, or a fit_pipeline result's score noise; required for a saved pipeline or "
                     "bootstrap)")  # fmt: skip
    nxt.add_argument("--weights", default=None, help="a fit of several targets: the objective, `mean` (default), a "
                     "target's name, or name=w pairs")  # fmt: skip
    nxt.add_argument("--reference", default=None, help="score the gain over this mixture (comma-separated)")
    nxt.add_argument("--resamples", type=int, default=200, help="bootstrap resamples of a `fit` .npz (default 200)")
    nxt.add_argument("--seed", type=int, default=0)
    nxt.add_argument("--out", default=None, help="also write the chosen runs to this CSV")


def run(args: argparse.Namespace) -> None:
    import jax

    from ..mixture._next import next_runs

    for name in ("budget", "size"):
        value = getattr(args, name)
        if not (np.isfinite(value) and value > 0):
            raise UserError(f"--{name} must be a positive number; got {value}")
    if args.tokens is not None and not (np.isfinite(args.tokens) and args.tokens > 0):
        raise UserError(f"--tokens must be a positive number; got {args.tokens}")
    if args.noise is not None and not (np.isfinite(args.noise) and args.noise >= 0):
        raise UserError(f"--noise must be >= 0; got {args.noise}")
    if args.batch < 1:
        raise UserError(f"--batch must be >= 1; got {args.batch}")
    if args.out:
        _check_destination(Path(args.out))
    candidates = _read_csv(args.candidates)
    reference = np.asarray(_floats(args.reference, "reference")) if args.reference else None
    saved = _load_fit(args.fit)
    _warn_extrapolation(saved, args.size)
    _warn_unreliable(saved, args.fit)
    context = _context(saved, args.fit)
    candidates, size, tokens = _candidate_table(candidates, context, args)
    columns = _candidate_columns(saved, candidates, args.candidates, args.mixture, size, tokens)
    if reference is not None:
        from ..mixture._optimize import _reference_mixture

        reference = _reference_mixture(reference, len(columns))
    target_tokens = _target_tokens(args, context)
    weights = _objective(args, saved)
    key = jax.random.key(args.seed)
    ensemble, noise = _ensemble_of(args, saved, key, weights)
    out = next_runs(ensemble, candidates, budget=args.budget, target_size=args.size, key=key, batch=args.batch,
                    replace=args.replicates, reference=reference, noise=noise, mixture=columns, size=size,
                    tokens=tokens if target_tokens is not None else None, target_tokens=target_tokens)  # fmt: skip
    _print_runs(args, saved, columns, out, size, tokens if target_tokens is not None else None)
    if args.out:
        out.to_csv(args.out, index=True, index_label="candidate_row")
        print(f"wrote {args.out}")


def _print_runs(args: argparse.Namespace, saved: Any, columns: list[str], out: Any, size: str, tokens: Any) -> None:
    """The recommendation today, then each proposed run with what it is expected to do to the decision: the
    variance it removes per FLOP, the decision's sd after it, and whether the expected change of the decision is
    above the noise of one measured run (below it, more runs stop paying)."""
    names = _mixture_names(saved, len(columns))
    what = "gain over the reference" if args.reference else "predicted outcome at the recommendation"
    sd, noise = out.attrs["sd_before"], out.attrs["noise"]
    print(f"decision ({what}) sd today {sd:.4g}; recommended mixture at size {args.size:g}: "
          + ", ".join(f"{name} {x:.4f}" for name, x in zip(names, out.attrs["recommended"])))  # fmt: skip
    if out.empty:
        print("no candidate within the budget would change the decision's uncertainty")
        return
    stop = None
    for _, row in out.iterrows():
        run = f"size {row[size]:g}" + (f", tokens {row[tokens]:.4g}" if tokens else "")
        mixture = ", ".join(f"{c} {row[c]:.3f}" for c in columns)
        pays = row["shift"] >= noise
        if not pays and stop is None:
            stop = int(row["order"])
        print(f"  {int(row['order'])}. candidate row {row.name}: {run}, {mixture}; cost {row['cost']:.3g} FLOPs; "
              f"removes {row['score']:.3g} of the decision's variance ({row['score_per_flop']:.3g} per FLOP), sd "
              f"after {row['sd_after']:.4g}; expected change of the decision {row['shift']:.3g} "
              + ("(above" if pays else "(below") + f" the noise floor {noise:.3g})")  # fmt: skip
    if stop is None:
        print(f"every proposed run is expected to move the decision by more than one run's noise ({noise:.3g}): "
              "more runs still pay")  # fmt: skip
    else:
        print(f"more runs stop paying from run {stop} on: its expected change of the decision is below the noise of "
              f"one measured run ({noise:.3g}); train the runs before it, refit, and ask again")  # fmt: skip


def _context(saved: Any, path: str) -> Any:
    """The conventions of a `camel-jax fit` behind `saved` (None for a saved pipeline or bootstrap)."""
    from ._common import _training_data
    from ._loop import fit_context

    fitted = _training_data(saved)
    if fitted is None or len(fitted.inputs) < 2 or np.ndim(fitted.inputs[0]) != 2:
        return None
    return fit_context(saved, path)


def _candidate_table(candidates: Any, context: Any, args: argparse.Namespace) -> tuple[Any, str, str | None]:
    """(the candidates, with a flops column computed as 6 N D when they have none; their size column; their tokens
    column, for a token-aware fit), with the fit's column names."""
    from ..experiments._design import active_params, size_units

    if len(candidates) == 0:
        raise UserError(f"{args.candidates} has no rows: no candidate runs to choose from")
    size = context.size if context is not None and context.size in candidates.columns else "size"
    tokens = None
    if context is not None and context.token_aware:
        tokens = context.tokens if context.tokens in candidates.columns else "tokens"
        if tokens not in candidates.columns:
            raise UserError(f"{args.candidates} has no tokens column {context.tokens!r}: this fit's law also takes "
                            "training tokens, so each candidate is a (mixture, size, tokens) run")  # fmt: skip
    if size not in candidates.columns:
        raise UserError(f"{args.candidates} has no size column {size!r}; available columns: "
                        f"{list(map(str, candidates.columns))}")  # fmt: skip
    if context is not None:
        sizes = candidates[size].to_numpy(float)
        if np.all(np.isfinite(sizes)) and size_units(sizes) != context.units:
            theirs = "parameter counts" if context.units == "params" else "the paper's size index"
            raise UserError(f"{args.candidates}: column {size!r} is not in the fit's units ({theirs}, "
                            f"{context.sizes.min():.4g} to {context.sizes.max():.4g})")  # fmt: skip
        if size_units(np.asarray([args.size])) != context.units:
            raise UserError(f"--size {args.size:g} is not in the fit's units: its sizes run from "
                            f"{context.sizes.min():.4g} to {context.sizes.max():.4g}")  # fmt: skip
    if "flops" not in candidates.columns:
        column = tokens or ("tokens" if "tokens" in candidates.columns else None)
        if column is None:
            raise UserError(f"{args.candidates} has no flops column and no tokens column to compute it (6 N D)")
        params = (candidates["params"].to_numpy(float) if "params" in candidates.columns
                  else active_params(candidates[size].to_numpy(float)))  # fmt: skip
        candidates = candidates.assign(flops=6.0 * params * candidates[column].to_numpy(float))
        print(f"flops: 6 N D from {'params' if 'params' in candidates.columns else size!r} and {column!r}")
    return candidates, size, tokens


def _target_tokens(args: argparse.Namespace, context: Any) -> float | None:
    """The tokens at the target size (a token-aware fit): --tokens, else the fitted runs' tokens-for-size line."""
    if context is None or not context.token_aware:
        if args.tokens is not None:
            raise UserError("this fit's law takes no tokens: drop --tokens")
        return None
    if args.tokens is not None:
        return float(args.tokens)
    tokens = float(context.tokens_at([args.size])[0])
    print(f"tokens at size {args.size:g}: {tokens:.4g}, on the fitted runs' tokens-for-size line (--tokens sets it)")
    return tokens


def _objective(args: argparse.Namespace, saved: Any) -> Any:
    """The weight of each target of a fit of several validation losses (`target_weights`), None for one target."""
    from ..mixture._objective import parse_weights, target_weights
    from ._common import _training_data

    fitted = _training_data(saved)
    if fitted is None or np.ndim(fitted.y) != 2:
        if args.weights is not None and fitted is not None:
            raise UserError("--weights weighs the targets of a fit of several losses; this fit has one: drop it")
        return None
    targets = getattr(fitted, "targets", None) or [f"target {t}" for t in range(np.shape(fitted.y)[0])]
    try:
        return target_weights(targets, parse_weights(args.weights) if args.weights else None)
    except ValueError as error:
        raise UserError(str(error)) from None


def _candidate_columns(
    saved: Any, candidates: Any, path: str, mixture: str | None = None, size: str = "size", tokens: str | None = None
) -> list[str]:
    """The candidates' mixture columns, matched by name to those the fit was made on (a missing column, or an r_*
    column the fit never saw, is an error naming it), and the table checked, all before the bootstrap."""
    from ..data._containers import MixtureData, match_mixture_columns, positive_columns
    from ..fitting._bootstrap import BootstrapResult
    from ..mixture._pipeline import Pipeline

    n: Any
    if isinstance(saved, Pipeline):
        n = saved.n_datasets
    else:
        law = saved.laws if isinstance(saved, BootstrapResult) else _training_data(saved).law
        n = law.structure().get("n_datasets") if hasattr(law, "structure") else None
        if n is None:
            raise UserError(f"`next` needs a law of the mixture; this one is a {type(law).__name__}")
    fitted = _training_data(saved) if not isinstance(saved, (Pipeline, BootstrapResult)) else None
    names = getattr(fitted, "names", None) or getattr(saved, "datasets", None) or getattr(saved, "names", None)
    if len(candidates) == 0:
        raise UserError(f"{path} has no rows: no candidate runs to choose from")
    if mixture is not None:
        columns = [c.strip() for c in mixture.split(",") if c.strip()]
        if len(columns) != n:
            raise UserError(f"--mixture names {len(columns)} column(s); the fit has {n} datasets")
        if names is not None and columns != list(names):
            pairs = ", ".join(f"{c} as {f}" for c, f in zip(columns, names) if c != f)
            print(f"note: --mixture reads the candidates' {pairs} (the fit's columns, in its order)")
    else:
        columns = match_mixture_columns(candidates, names, int(n), path)
    positive_columns(candidates, {"cost of a run": "flops"})  # named as what it is, before the table's checks
    MixtureData.from_frame(candidates, mixture=columns, target="flops", size=size, tokens=tokens)
    return columns


def _ensemble_of(args: argparse.Namespace, saved: Any, key: Any, weights: Any = None) -> tuple[Any, float | None]:
    """The resample ensemble behind `next`, and the outcome noise: a saved ensemble as is; a `fit` .npz
    bootstrapped here (warm-started from its 4 best starts), with its rms residual as the default noise. A fit of
    several targets: each target bootstrapped on the same resamples, read as their weighted sum (`weights`)."""
    import jax
    import jax.numpy as jnp

    from ..fitting._bootstrap import BootstrapResult, bootstrap
    from ..fitting._fit import FitResult
    from ..mixture._next import WeightedTargets
    from ..mixture._pipeline import Pipeline, PipelineFit

    if isinstance(saved, PipelineFit):  # its score's noise is the default
        return saved, args.noise
    if isinstance(saved, (BootstrapResult, Pipeline)):
        if args.noise is None:
            raise UserError(f"--noise is required with a saved {type(saved).__name__} (it holds no residuals)")
        return saved, args.noise
    if not isinstance(saved, FitResult) or len(saved.inputs) not in (2, 3) or np.ndim(saved.inputs[0]) != 2:
        raise UserError(f"{args.fit}: `next` needs a law of (mixture, size) or (mixture, size, tokens), a batched "
                        "pipeline or a bootstrap")  # fmt: skip
    if args.resamples < 2:
        raise UserError(f"--resamples must be >= 2; got {args.resamples}")
    y, fitted_weights = np.asarray(saved.y), np.asarray(saved.weights)
    residual = y - np.asarray(saved.predict(*saved.inputs))
    if weights is None:
        noise = float(np.sqrt(np.average(residual**2, weights=fitted_weights)))
        warm = _best_starts(saved)
        boot = bootstrap(saved.law, saved.inputs, saved.y, key=key, n_resamples=args.resamples, inits=warm,
                         weights=saved.weights, progress=False, options=saved.fit_options)  # fmt: skip
        return boot, noise if args.noise is None else args.noise
    # several targets: the objective's residual is the weighted sum of the targets'
    objective_residual = np.asarray(weights) @ np.where(fitted_weights > 0, residual, 0.0)
    noise = float(np.sqrt(np.mean(objective_residual**2)))
    warm = _best_starts(saved)  # [T, k, ...]
    laws, resamples = [], None
    for t in range(y.shape[0]):
        one = jax.tree.map(lambda leaf, t=t: leaf[t], warm)
        boot = bootstrap(jax.tree.map(lambda leaf, t=t: leaf[t], saved.law), saved.inputs, y[t], key=key,
                         n_resamples=args.resamples, inits=one, weights=fitted_weights[t], resamples=resamples,
                         progress=False, options=saved.fit_options)  # fmt: skip
        resamples = boot.resamples
        laws.append(boot.laws)
    stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves, axis=1), *laws)  # [B, T, ...]
    B = np.shape(np.asarray(resamples))[0]
    combined = WeightedTargets(stacked, jnp.broadcast_to(jnp.asarray(weights), (B, len(weights))))
    return BootstrapResult.of_laws(combined), noise if args.noise is None else args.noise
