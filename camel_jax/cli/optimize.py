"""`camel-jax optimize saved.npz --size M`: the optimal mixture under a saved fit or pipeline, with the verdict of a
batched pipeline against a reference."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from . import _export as export
from ._common import (
    UserError,
    _benchmark_weights,
    _check_decidable,
    _check_destination,
    _existing_file,
    _floats,
    _mixture_names,
    _warn_extrapolation,
    _warn_unreliable,
    _write_outputs,
    json_text,
    say_problems,
)
from ._names import DeferredModule, for_command_line

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
                     "a name, balanced|math|code|knowledge (default balanced), or benchmark=w,benchmark=w; for a fit "
                     "of several losses, the objective: mean (default), a target's name, or name=w,name=w")  # fmt: skip
    # --objective NAME, the deprecated name of --weights NAME (issue 33): hidden, still accepted with a note.
    opt.add_argument("--objective", default=None, help=argparse.SUPPRESS)
    opt.add_argument(
        "--reference",
        default=None,
        help="reference mixture (comma-separated): the verdict's baseline (does the pick beat it?), and the trust "
        "region's centre with --max-shift",
    )
    opt.add_argument("--support", choices=("data", "simplex"), default="data", help="a loss fit's search region "
                     "without bounds: data (default: each share within its trained range widened by 25%% of it) or "
                     "simplex (all mixtures; warns about shares outside the trained range)")  # fmt: skip
    opt.add_argument("--out", default=None, help="a loss fit: write the decision to OUT.json (the recommended "
                     "mixture by name, the pick and its band, the gain and its band, the verdict)")  # fmt: skip
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
    if isinstance(saved, FitResult) and args.weights and saved.n_targets is None:
        raise UserError(
            f"{args.saved} is a loss fit: `optimize` minimizes its one predicted loss, and --weights (the "
            "objective over several losses, or a pipeline's benchmark weights) does not apply; drop it"
        )
    decision_out = bool(args.out) and not getattr(args, "export", None)  # with --export, --out is the files' prefix
    if not isinstance(saved, FitResult) and (decision_out or args.support != "data"):
        raise UserError("--out (without --export) and --support apply to a loss fit (`camel-jax fit`); drop them for a "
                        "pipeline")  # fmt: skip
    verdict = isinstance(saved, PipelineFit) and saved.pipelines is not None
    verdict = verdict or (isinstance(saved, Pipeline) and bool(saved.batch_shape))
    verdict = verdict or isinstance(saved, FitResult)  # a loss fit's reference is the verdict's baseline
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
    if args.out:
        _check_destination(Path(f"{args.out}.json"))
    _warn_unreliable(saved, args.saved)
    key = jax.random.key(args.seed)
    if isinstance(saved, FitResult):
        decision = _decide_fit(saved, args, exporting.bounds, key)
        exporting.finish(_loss_result(decision, recommended=True), lambda free: _free_loss_pick(saved, args, free, key),
                         decision=decision.decision)  # fmt: skip
        return
    result = _optimize_pipeline(saved, args, exporting.bounds, key)
    r = np.atleast_2d(np.asarray(result.r)).mean(axis=0)
    names = _mixture_names(saved, len(r))
    print("optimal mixture: " + ", ".join(f"{name} {x:.4f}" for name, x in zip(names, r)))
    print(f"KKT residual {float(np.max(np.asarray(result.kkt_residual))):.2e}")
    exporting.finish(result, lambda free_bounds: _optimize_pipeline(saved, args, free_bounds, key))


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


def _decide_fit(saved: Any, args: argparse.Namespace, bounds: dict[str, Any], key: Any) -> Any:
    """The loss decision of a saved fit (`decide_loss`): the pick of lowest predicted objective inside the support
    region (or the given bounds), its band over the fit's bootstrap, and with --reference the gain and the verdict;
    printed, and with --out written to OUT.json (`loss_record`)."""
    import warnings

    from ..io._save import _fit_hash
    from ..mixture._loss_decision import decide_loss
    from ..mixture._objective import parse_weights
    from .predict import target_names

    if saved.law.structure().get("n_datasets") is None:
        raise UserError(f"a {type(saved.law).__name__} fit has no mixture to optimize")
    reference = np.asarray(_floats(args.reference, "reference")) if args.reference else None
    targets = target_names(args.saved, saved)
    try:
        weights = parse_weights(args.weights) if args.weights else None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            decision = decide_loss(saved, key=key, size=args.size, tokens=args.tokens, reference=reference,
                                   weights=weights, targets=targets, support=args.support, restarts=16,
                                   **{k: v for k, v in bounds.items() if k != "reference"})  # fmt: skip
    except ValueError as error:
        raise UserError(str(error).splitlines()[0]) from None
    said_of_boot = tuple(saved.bootstrap_problems())
    for problem in decision.problems[len(saved.problems()):]:  # the fit's own were said first
        say_problems(args.saved, [problem], "bootstrap" if problem in said_of_boot else "search")
    for warning in caught:
        print(f"warning: {for_command_line(str(warning.message))}")
    for line in loss_lines(decision):
        print(line)
    at = f"size {args.size:g}" if args.size is not None else "the fitted size"
    _predicted_loss(SimpleNamespace(value=-decision.value), at)
    if args.out:
        record = loss_record(decision, law=type(saved.law).__name__, fit_file=args.saved, fit_hash=_fit_hash(saved))
        path = Path(f"{args.out}.json")
        _write_outputs({path: lambda f: f.write((json_text(record) + "\n").encode())})
        print(f"wrote {path}")
    return decision


def _loss_result(decision: Any, recommended: bool) -> Any:
    """A loss decision as the exports read an optimizer's result: the mixture (`recommended`: the one the verdict
    recommends, else the pick) and its value, the negated predicted objective (the optimizer maximizes it)."""
    if recommended and decision.reference is not None and not np.array_equal(decision.recommended, decision.mixture):
        return SimpleNamespace(r=decision.recommended, value=-decision.reference_value, decision=None,
                               problems=decision.problems)  # fmt: skip
    return SimpleNamespace(r=decision.mixture, value=-decision.value, decision=None, problems=decision.problems)


def _free_loss_pick(saved: Any, args: argparse.Namespace, bounds: dict[str, Any], key: Any) -> Any:
    """The pick without the availability caps (`bounds` without them), in the same search region: what the caps
    cost is measured against it."""
    free = argparse.Namespace(**(vars(args) | {"reference": None, "out": None}))
    return _loss_result(_decide_fit(saved, free, bounds, key), recommended=False)


def _sig(x: float, digits: int = 5) -> str:
    """A number with `digits` significant digits, trailing zeros kept (3.0000, not 3)."""
    return "nan" if not np.isfinite(x) else f"{x:#.{digits}g}".rstrip(".")


def _shares(names: Any, r: Any) -> str:
    return ", ".join(f"{name} {x:.4f}" for name, x in zip(names, r))


def loss_lines(decision: Any) -> list[str]:
    """What `optimize` prints for a loss decision: the pick (the line `optimal mixture: ...`), its predicted
    objective, its band, and with a reference the gain with its band, P(improves), the verdict and the recommended
    mixture."""
    names = decision.names
    at = f"size {decision.size:g}" if decision.size is not None else "the fitted size"
    if decision.tokens is not None:
        at += f", tokens {decision.tokens:g}"
    weights = np.asarray(decision.weights, float)
    if len(decision.targets) == 1:
        what = "loss"
    elif len(weights) > 3 and np.allclose(weights, weights[0]):
        what = f"objective (the mean of the {len(weights)} targets' losses)"
    else:
        what = "objective (" + ", ".join(f"{t} {w:.3g}" for t, w in zip(decision.targets, weights) if w > 0) + ")"
    region = {"data": "inside the runs' support (each share within its trained range widened by 25%)",
              "simplex": "over the whole simplex", "bounds": "within the given bounds",
              "given": "within the given support"}[decision.support]  # fmt: skip
    lines = [f"optimal mixture: {_shares(names, decision.mixture)}",
             f"predicted {what} at {at}: {_sig(decision.value)} (searched {region})"]  # fmt: skip
    if len(decision.optima):
        band = ", ".join(f"{n} [{lo:.3f}, {hi:.3f}]" for n, lo, hi in
                         zip(names, decision.mixture_low, decision.mixture_high))  # fmt: skip
        lines.append(f"pick's band ({decision.optima.shape[0]} resamples' optima, "
                     f"{decision.decision.level if decision.decision else 0.95:.0%}): {band}")  # fmt: skip
    else:
        lines.append("pick's band: none (the fit holds no bootstrap: refit with --resamples > 0)")
    if decision.outside:
        lines.append(f"note: outside the trained range: {'; '.join(decision.outside)}")
    d = decision.decision
    if d is not None:
        lines.append(f"reference: predicted {_sig(decision.reference_value)}; the pick's gain (loss reduction) "
                     f"{_sig(d.gain, 3)} [{_sig(d.gain_low, 3)}, {_sig(d.gain_high, 3)}], P(improves) "
                     f"{_sig(d.p_improve, 3)}")  # fmt: skip
        lines.append(d.line())
        which = "the pick" if d.verdict == "improves" else "the reference"
        lines.append(f"recommended ({which}): {_shares(names, decision.recommended)}")
    return lines


def loss_record(decision: Any, *, law: str, fit_file: str, fit_hash: str) -> dict[str, Any]:
    """What `optimize --out PREFIX` writes to PREFIX.json, as a plain dict of JSON values (NaN as null): the
    recommended `mixture` by name (the pick when the verdict is "improves", else the reference), the pick and its
    band, the gain and its band, P(improves), the verdict and its reason, the search region, the law, the fit
    file and its data hash, and the problems of the fit and its bootstrap."""

    def num(x: Any) -> float | None:
        x = float(x)
        return x if np.isfinite(x) else None

    def named(r: Any) -> dict[str, float | None] | None:
        return None if r is None else {n: num(x) for n, x in zip(decision.names, r)}

    d = decision.decision
    improves = d is not None and d.verdict == "improves"
    record: dict[str, Any] = {
        "mixture": named(decision.recommended),
        "recommended": "pick" if improves or decision.reference is None else "reference",
        "pick": named(decision.mixture),
        "pick_band": {n: [num(lo), num(hi)] for n, lo, hi in
                      zip(decision.names, decision.mixture_low, decision.mixture_high)},  # fmt: skip
        "reference": named(decision.reference),
        "size": decision.size,
        "tokens": decision.tokens,
        "objective": {"weights": {t: num(w) for t, w in zip(decision.targets, decision.weights)},
                      "pick": num(decision.value), "reference": num(decision.reference_value)},  # fmt: skip
        "verdict": decision.verdict,
        "gain": None if d is None else num(d.gain),
        "gain_band": None if d is None else [num(d.gain_low), num(d.gain_high)],
        "p_improve": None if d is None else num(d.p_improve),
        "level": None if d is None else d.level,
        "min_gain": None if d is None else num(d.min_gain),
        "reason": None if d is None else d.reason,
        "basis": None if d is None else d.basis,
        "calibrated": decision.calibrated,
        "support": {"kind": decision.support, "lower": named(decision.lower), "upper": named(decision.upper)},
        "outside_trained": list(decision.outside),
        "resamples": int(decision.optima.shape[0]),
        "law": law,
        "fit": str(fit_file),
        "fit_hash": fit_hash,
        "problems": list(decision.problems),
    }
    return record


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
