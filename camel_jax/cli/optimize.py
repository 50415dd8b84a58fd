"""`camel-jax optimize saved.npz --size M`: the optimal mixture under a saved fit or pipeline, with the verdict of a
batched pipeline against a reference."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from . import _export as export
from ._common import (
    UserError,
    _check_decidable,
    _existing_file,
    _floats,
    _mixture_names,
    _warn_extrapolation,
    _warn_unreliable,
)
from ._names import DeferredModule

if TYPE_CHECKING:
    import numpy as np
else:
    np = DeferredModule("numpy")  # imported when work starts: `--help` stays fast


def add_parser(sub: Any) -> None:
    opt = sub.add_parser("optimize", help="optimal mixture for a target size from a saved fit or pipeline")
    opt.add_argument("saved", help="a .npz written by `camel-jax fit` (minimizes the loss), or camel_jax.save of a "
                     "pipeline or of a fit_pipeline result (its calibrated verdict)")  # fmt: skip
    opt.add_argument(
        "--size", type=float, default=None, help="target model size, in the units of the fit (not for a dml fit)"
    )
    opt.add_argument("--tokens", type=float, default=None, help="training tokens at the target size (for a fit of "
                     "a token-aware law: camel-data*, sodm-* with tokens)")  # fmt: skip
    opt.add_argument("--weights", default=None, help="a saved pipeline's benchmark weights (the score it maximizes): "
                     "a name, balanced|math|code|knowledge (default balanced), or benchmark=w,benchmark=w")  # fmt: skip
    # --objective NAME, the deprecated name of --weights NAME (issue 33): hidden, still accepted with a note.
    opt.add_argument("--objective", default=None, help=argparse.SUPPRESS)
    opt.add_argument(
        "--reference",
        default=None,
        help="reference mixture (comma-separated): the trust region's centre with --max-shift; with a batched "
        "pipeline, also the verdict: does the chosen mixture beat it?",
    )
    opt.add_argument("--max-shift", type=float, default=None, help="trust region: r_j within ref_j (1 +- shift)")
    opt.add_argument("--lower", default=None, help="per-dataset lower bounds (comma-separated)")
    opt.add_argument("--upper", default=None, help="per-dataset upper bounds (comma-separated)")
    opt.add_argument("--seed", type=int, default=0)
    export.add_arguments(opt)


def run(args: argparse.Namespace) -> None:
    import jax

    from ..fitting._fit import FitResult
    from ..io._save import load
    from ..mixture._optimize import check_model_size
    from ..mixture._pipeline import Pipeline, PipelineFit

    _existing_file(args.saved)
    saved = load(args.saved)
    if not isinstance(saved, (FitResult, Pipeline, PipelineFit)):
        raise UserError(f"{args.saved} holds a {type(saved).__name__}; save a FitResult, Pipeline or PipelineFit")
    _check_decidable(saved, args.saved)
    _deprecated_objective(args)
    if isinstance(saved, FitResult) and args.weights:
        raise UserError(
            f"{args.saved} is a loss fit: `optimize` minimizes its predicted loss, and --weights (benchmark weights) "
            "applies only to a saved pipeline; drop it"
        )
    verdict = isinstance(saved, PipelineFit) and saved.pipelines is not None
    verdict = verdict or (isinstance(saved, Pipeline) and bool(saved.batch_shape))
    if args.reference and args.max_shift is None and not verdict:
        raise UserError(
            "--reference is only used with --max-shift (the trust region), or for the verdict of a batched pipeline "
            "(one saved with its resamples): give --max-shift"
        )
    takes_size = not (isinstance(saved, FitResult) and len(saved.inputs) == 1)
    if takes_size and args.size is None:
        raise UserError("--size is required: the target model size, in the units of the fit")
    if not takes_size and args.size is not None:
        raise UserError(f"a {type(saved.law).__name__} fit describes the one size it was fitted at: drop --size")  # type: ignore[union-attr]
    if args.size is not None:
        check_model_size(args.size, "--size")
        _warn_extrapolation(saved, args.size)
    _check_tokens(saved, args)
    bounds = _bounds(args)
    exporting = export.prepare(args, saved, bounds)  # --available's caps into the bounds; --export checked
    _warn_unreliable(saved, args.saved)
    key = jax.random.key(args.seed)
    solve = _optimize_fit if isinstance(saved, FitResult) else _optimize_pipeline
    result = solve(saved, args, exporting.bounds, key)
    r = np.atleast_2d(np.asarray(result.r)).mean(axis=0)
    names = _mixture_names(saved, len(r))
    print("optimal mixture: " + ", ".join(f"{name} {x:.4f}" for name, x in zip(names, r)))
    print(f"KKT residual {float(np.max(np.asarray(result.kkt_residual))):.2e}")
    exporting.finish(result, lambda free_bounds: solve(saved, args, free_bounds, key))


def _deprecated_objective(args: argparse.Namespace) -> None:
    """--objective NAME is --weights NAME, with a one-line note on stderr."""
    if args.objective is None:
        return
    print("camel-jax optimize: note: --objective is deprecated: use --weights NAME", file=sys.stderr)
    if args.weights:
        raise UserError("give --weights only: --objective is its deprecated name")
    args.weights = args.objective


def _check_tokens(saved: Any, args: argparse.Namespace) -> None:
    """--tokens is needed by a fit of a token-aware law (inputs (r, size, tokens)) and refused by any other."""
    from ..fitting._fit import FitResult

    takes_tokens = isinstance(saved, FitResult) and len(saved.inputs) == 3
    if takes_tokens and args.tokens is None:
        seen = np.asarray(saved.inputs[2])
        raise UserError(
            f"this fit's law ({type(saved.law).__name__}) also takes training tokens: pass --tokens, the tokens of "
            f"the run at --size (the fit saw {seen.min():.3g} to {seen.max():.3g})"
        )
    if not takes_tokens and args.tokens is not None:
        raise UserError("this saved result takes no tokens: drop --tokens")
    if args.tokens is not None and not (np.isfinite(args.tokens) and args.tokens > 0):
        raise UserError(f"--tokens must be a positive number; got {args.tokens:g}")


def _bounds(args: argparse.Namespace) -> dict[str, Any]:
    """`optimal_mixture`'s bound keywords from --lower, --upper, --reference and --max-shift."""
    bounds: dict[str, Any] = {}
    if args.lower:
        bounds["lower"] = _floats(args.lower, "lower")
    if args.upper:
        bounds["upper"] = _floats(args.upper, "upper")
    if args.max_shift is not None:
        if not args.reference:
            raise UserError("--max-shift needs --reference")
        if not (np.isfinite(args.max_shift) and 0 < args.max_shift <= 1):
            raise UserError(f"--max-shift is a fraction of the reference in (0, 1] (0.2 for +-20%); got "
                            f"{args.max_shift:g}")  # fmt: skip
        bounds |= {"reference": _floats(args.reference, "reference"), "max_shift": args.max_shift}
    return bounds


def _optimize_fit(saved: Any, args: argparse.Namespace, bounds: dict[str, Any], key: Any) -> Any:
    """The mixture of lowest predicted loss under a saved fit (at --size, or at the one fitted size)."""
    import jax.numpy as jnp

    from ..mixture._optimize import optimal_mixture

    law = saved.law
    n = law.structure().get("n_datasets")
    if n is None:
        raise UserError(f"a {type(law).__name__} fit has no mixture to optimize")
    if args.size is None:
        result = optimal_mixture(lambda r: -law(r[None, :])[0], int(n), key=key, **bounds)
        print(f"predicted loss at the fitted size: {_predicted_loss(result, 'the fitted size'):.5g}")
        return result
    size = jnp.asarray([args.size])
    if args.tokens is not None:
        tokens = jnp.asarray([args.tokens])
        result = optimal_mixture(lambda r: -law(r[None, :], size, tokens)[0], int(n), key=key, **bounds)
        where = f"size {args.size:g}, tokens {args.tokens:g}"
        print(f"predicted loss at {where}: {_predicted_loss(result, where):.5g}")
        return result
    result = optimal_mixture(lambda r: -law(r[None, :], size)[0], int(n), key=key, **bounds)
    print(f"predicted loss at size {args.size:g}: {_predicted_loss(result, f'size {args.size:g}'):.5g}")
    return result


def _predicted_loss(result: Any, where: str) -> float:
    """The optimum's predicted loss; a loss <= 0 (or not finite) is no answer: the law's form has left what a
    loss can be there (typically a size far beyond the trained ones)."""
    loss = -float(result.value)
    if not (np.isfinite(loss) and loss > 0):
        raise UserError(
            f"the fit predicts a loss of {loss:.4g} at {where}: a loss is > 0, so the law says nothing there (its "
            "form has left its range, typically far beyond the trained sizes); choose a size nearer the data"
        )
    return loss


def _optimize_pipeline(saved: Any, args: argparse.Namespace, bounds: dict[str, Any], key: Any) -> Any:
    """The mixture of highest predicted score (weighted accuracy) under a saved pipeline (or fitted pipeline), at
    --size.

    A saved PipelineFit keeps its own benchmark weights: its calibration and noise are those of that score."""
    from ..mixture._optimize import optimal_mixture
    from ..mixture._pipeline import Pipeline, PipelineFit

    fitted: Any
    if isinstance(saved, PipelineFit):
        if args.weights:
            raise UserError("a saved fit_pipeline result keeps the benchmark weights it was fitted with (its "
                            "calibration and noise are that score's): drop --weights")  # fmt: skip
        fitted, pipeline = saved, saved.pipeline if saved.pipelines is None else saved.pipelines
    else:
        pipeline = Pipeline(saved.loss_laws, saved.benchmark_laws, _benchmark_weights(saved, args), saved.datasets)
        fitted = pipeline
    if not (pipeline.batch_shape and args.reference):
        point = saved.pipeline if isinstance(saved, PipelineFit) else pipeline
        result = optimal_mixture(point, point.n_datasets, key=key, model_size=args.size, **bounds)
        print(f"predicted score at size {args.size:g}: {float(np.mean(np.asarray(result.value))):.5g}")
        return result
    # a batched pipeline and a reference: one mixture (the best mean over resamples) and the verdict against it
    bounds["reference"] = _floats(args.reference, "reference")
    result = optimal_mixture(fitted, pipeline.n_datasets, key=key, model_size=args.size, robust="mean", **bounds)
    decision = result.decision
    assert decision is not None  # a batched pipeline, `robust` and a reference always give one
    print(
        f"predicted score at size {args.size:g}: {decision.value:.5g} "
        f"[{decision.value_low:.5g}, {decision.value_high:.5g}] ({decision.level:.0%}, mean over resamples maximized)"
    )
    print(decision.line())
    return result


def _benchmark_weights(saved: Any, args: argparse.Namespace) -> dict[str, float]:
    """--weights: benchmark=w,... pairs, or a name of BENCHMARK_WEIGHTS (default balanced) restricted to the
    pipeline's benchmarks."""
    from ..mixture._objective import parse_weights
    from ..mixture._pipeline import BENCHMARK_WEIGHTS

    if args.weights and "=" in args.weights:
        try:
            weights = parse_weights(args.weights, "--weights")  # a name given twice is an error, not one copy
        except ValueError as error:
            raise UserError(str(error)) from None
        assert isinstance(weights, dict)  # "=" is in the text
        unknown = sorted(set(weights) - set(saved.loss_laws))
        if unknown:
            raise UserError(
                f"--weights names unknown benchmark(s) {unknown}; the pipeline has {sorted(saved.loss_laws)}"
            )
        return weights
    name = (args.weights or "balanced").strip()
    if name not in BENCHMARK_WEIGHTS:
        raise UserError(f"unknown benchmark weights {name!r}: give one of {sorted(BENCHMARK_WEIGHTS)} or "
                        "benchmark=w pairs")  # fmt: skip
    weights = {b: w for b, w in BENCHMARK_WEIGHTS[name].items() if b in saved.loss_laws}
    left_out = sorted(set(BENCHMARK_WEIGHTS[name]) - set(weights))
    if not weights:
        raise UserError(f"the pipeline has none of the {name} weights' benchmarks; give --weights benchmark=w,...")
    if left_out:
        print(f"note: the pipeline has no law for {left_out}; the {name} score uses the others")
    return weights
