"""`optimize`'s availability caps and exports: `--available CSV --max-epochs E --target-tokens D` caps each share
at E x tokens / D (the binding caps named, the unconstrained pick shown beside the capped one with what the caps
cost), and `--export FORMAT[,FORMAT] --out PREFIX` writes the mixture by name for a trainer (PREFIX.<suffix>)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import UserError, _check_destination, _read_csv, _training_data, _write_outputs, saved_problems
from ._names import EXPORT_FORMATS, DeferredModule

if TYPE_CHECKING:
    import numpy as np
else:
    np = DeferredModule("numpy")  # imported when work starts: `--help` stays fast

# The columns that name a dataset in --available and --paths (one of them); the value columns.
NAME_COLUMNS = ("dataset", "domain", "name")
# A share within this of its cap (relative) holds the cap: the ascent's bounds hold exactly.
BINDING = 1e-6
LEVEL = 0.95


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`optimize`'s flags for availability caps and exports."""
    group = parser.add_argument_group("availability caps and exports to trainers")
    group.add_argument("--available", default=None, help="CSV of the tokens each dataset has: a dataset column "
                       f"({', '.join(NAME_COLUMNS)}) and a tokens column, matched to the fit's datasets by name; "
                       "caps each share at max-epochs x tokens / target-tokens")  # fmt: skip
    group.add_argument("--max-epochs", type=float, default=None,
                       help="passes allowed over each dataset's tokens (with --available; default 1)")  # fmt: skip
    group.add_argument("--target-tokens", type=float, default=None,
                       help="tokens of the run the mixture is for (with --available; default --tokens)")  # fmt: skip
    group.add_argument("--export", default=None, help="write the mixture for a trainer: "
                       f"{', '.join(EXPORT_FORMATS)} (comma-separated for several), to --out PREFIX + "
                       + ", ".join(EXPORT_FORMATS.values()))  # fmt: skip
    group.add_argument("--paths", default=None, help="CSV of each dataset's path for --export: a dataset column "
                       "and a path column (Megatron prefixes; OLMo-core, Levanter, nanotron paths); placeholders "
                       "without")  # fmt: skip
    if "--out" not in parser._option_string_actions:  # another part of `optimize` may already write to --out PREFIX
        group.add_argument("--out", default=None, help="prefix of the files written")


@dataclasses.dataclass
class Exporting:
    """What `optimize` was asked to cap and export, checked before any compute; `bounds` are the optimizer's
    bounds with the caps in them, `free_bounds` those without."""

    args: argparse.Namespace
    saved: Any
    names: list[str]
    bounds: dict[str, Any]
    free_bounds: dict[str, Any]
    caps: dict[str, float] | None = None
    available: dict[str, float] | None = None
    target_tokens: float | None = None
    max_epochs: float | None = None
    formats: tuple[str, ...] = ()
    paths: dict[str, str] | None = None

    def finish(self, result: Any, solve: Callable[[dict[str, Any]], Any], decision: Any = None) -> None:
        """After the capped pick (`result`): the caps beside the unconstrained pick (`solve(free_bounds)`, run
        quietly) and their cost, the repetition note, and the exports."""
        mixture = dict(zip(self.names, _mean_mixture(result)))
        summary: dict[str, Any] = {}
        if self.caps is not None:
            summary = self._report_caps(result, mixture, solve)
        if self.formats:
            self._write(result, mixture, summary, decision)

    def _report_caps(self, result: Any, mixture: dict[str, float], solve: Callable) -> dict[str, Any]:
        from ..mixture._export import repetitions

        assert self.caps is not None and self.available is not None and self.target_tokens is not None
        # a cap binds where the pick (any resample's, for one pick per resample) holds it
        picks = np.asarray(result.r, dtype=float).reshape(-1, len(self.names))
        binding = [name for j, name in enumerate(self.names) if np.any(picks[:, j] >= self.caps[name] * (1 - BINDING))]
        free = result
        if binding:
            with contextlib.redirect_stdout(io.StringIO()):  # its own lines are the capped run's, printed above
                free = solve(self.free_bounds)
        free_mixture = dict(zip(self.names, _mean_mixture(free)))
        epochs = f"{self.max_epochs:g} epoch{'s' if self.max_epochs != 1 else ''}"
        print(f"availability caps: at most {epochs} of each dataset's tokens, in a run of {self.target_tokens:.4g} "
              "tokens")  # fmt: skip
        width = max(len("dataset"), *(len(name) for name in self.names))
        print(f"  {'dataset':<{width}}  {'available':>10}  {'cap':>7}  {'unconstrained':>13}  {'capped':>7}")
        for name in self.names:
            mark = "  binding" if name in binding else ""
            print(f"  {name:<{width}}  {self.available[name]:>10.4g}  {self.caps[name]:>7.4f}  "
                  f"{free_mixture[name]:>13.4f}  {mixture[name]:>7.4f}{mark}")  # fmt: skip
        if not binding:
            print("binding caps: none (the unconstrained pick is within every cap; the caps cost nothing)")
            cost: dict[str, Any] = {"value": 0.0}
        else:
            print(f"binding caps: {', '.join(binding)}")
            cost = self._cost(result, free)
        repeated = {n: e for n, e in repetitions(mixture, self.available, self.target_tokens).items() if e > 1 + 1e-9}
        if repeated:
            listed = ", ".join(f"{name} {e:.3g} epochs" for name, e in repeated.items())
            print(f"note: the capped pick repeats data ({listed}); the law does not model repeated data: its "
                  "prediction treats the repeats as fresh tokens")  # fmt: skip
        return {"unconstrained": free_mixture, "binding_caps": binding, "cost_of_caps": cost}

    def _cost(self, result: Any, free: Any) -> dict[str, Any]:
        """The objective at the capped pick minus at the unconstrained one: the predicted loss (a rise) for a loss
        fit, the score (a fall) for a pipeline; with its band across resamples when the result has them."""
        from ..fitting._fit import FitResult

        loss = isinstance(self.saved, FitResult)
        sign, what = (-1.0, "predicted loss") if loss else (1.0, "predicted score")
        draws = self._cost_draws(result, free)
        point = sign * (float(np.mean(np.asarray(result.value))) - float(np.mean(np.asarray(free.value))))
        capped = sign * float(np.mean(np.asarray(result.value)))
        unconstrained = sign * float(np.mean(np.asarray(free.value)))
        line = f"cost of the caps: {what} {point:+.4g}"
        cost: dict[str, Any] = {"objective": what, "value": point, "capped": capped, "unconstrained": unconstrained}
        if draws is None:
            why = "a loss fit has no resamples" if loss else "this pipeline has no resamples"
            print(f"{line} (capped {capped:.5g}, unconstrained {unconstrained:.5g}); a point value, no band: {why}")
            return cost
        low, high = np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
        print(f"{line} [{low:+.4g}, {high:+.4g}] ({LEVEL:.0%} of {len(draws)} resamples; capped {capped:.5g}, "
              f"unconstrained {unconstrained:.5g})")  # fmt: skip
        return cost | {"low": float(low), "high": float(high), "level": LEVEL, "resamples": len(draws)}

    def _cost_draws(self, result: Any, free: Any) -> np.ndarray | None:
        """Per resample, capped minus unconstrained score: from the per-resample picks, or, for one pick over a
        batched pipeline (its verdict), the pipeline's resamples scored at both picks."""
        value, free_value = np.asarray(result.value), np.asarray(free.value)
        if value.ndim and value.size > 1:
            return (value - free_value).reshape(-1)
        pipelines = _batched_pipeline(self.saved, self.args) if result.decision is not None else None
        if pipelines is None:
            return None
        import jax.numpy as jnp

        r = jnp.stack([jnp.asarray(result.r), jnp.asarray(free.r)])
        scores = np.asarray(pipelines.score(r, jnp.full((2,), float(self.args.size))))
        return (scores[..., 0] - scores[..., 1]).reshape(-1)

    def _write(self, result: Any, mixture: dict[str, float], summary: dict[str, Any], decision: Any) -> None:
        from ..mixture._export import EXPORT_FORMATS, export_mixture

        provenance = _provenance(self.saved, self.args, result) | summary
        texts = {
            fmt: export_mixture(
                mixture,
                fmt,
                caps=self.caps,
                paths=self.paths,
                provenance=provenance,
                max_epochs=None if self.caps is None else self.max_epochs,
                decision=result.decision if decision is None else decision,
            )  # fmt: skip
            for fmt in self.formats
        }
        files = {Path(f"{self.args.out}{EXPORT_FORMATS[fmt]}"): text for fmt, text in texts.items()}
        _write_outputs({path: _writer(text) for path, text in files.items()})
        for path in files:
            print(f"wrote {path}")


def prepare(args: argparse.Namespace, saved: Any, bounds: dict[str, Any]) -> Exporting:
    """Check --available/--max-epochs/--target-tokens and --export/--paths/--out against the saved result's
    datasets, before any compute; the caps go into the bounds (with any --upper, the smaller of the two)."""
    names = _dataset_names(saved)
    plan = Exporting(args, saved, names, dict(bounds), dict(bounds))
    if args.available is None:
        for flag, value in (("--max-epochs", args.max_epochs), ("--target-tokens", args.target_tokens)):
            if value is not None:
                raise UserError(f"{flag} goes with --available (the CSV of each dataset's tokens)")
    else:
        _caps(plan, args)
    if args.export is None:
        if args.paths is not None:
            raise UserError("--paths goes with --export (the paths written into the trainer's config)")
        return plan
    plan.formats = _formats(args.export)
    if plan.names == [f"dataset {j}" for j in range(len(plan.names))]:
        print(f"note: {args.saved} records no dataset names: the export calls them 'dataset 0', 'dataset 1', ...")
    if getattr(args, "out", None) is None:
        raise UserError("--export needs --out PREFIX: the files are written to PREFIX + their suffix")
    _check_destination(Path(args.out), tuple(_suffixes(plan.formats)))
    if args.paths is not None:
        plan.paths = _paths(args.paths, names, plan.formats)
    return plan


def _caps(plan: Exporting, args: argparse.Namespace) -> None:
    from ..mixture._export import availability_caps

    if plan.names == [f"dataset {j}" for j in range(len(plan.names))]:
        raise UserError(f"{args.saved} records no dataset names (saved by an older camel-jax): --available "
                        "matches datasets by name; refit and save it")  # fmt: skip
    target = args.target_tokens if args.target_tokens is not None else getattr(args, "tokens", None)
    if target is None:
        raise UserError("--available needs --target-tokens: the tokens of the run the mixture is for")
    epochs = 1.0 if args.max_epochs is None else args.max_epochs
    available = _named_column(args.available, "--available", ("tokens",))
    try:
        import warnings

        with warnings.catch_warnings():  # said of the pick below, where it applies
            warnings.simplefilter("ignore", UserWarning)
            caps = availability_caps(available, target, epochs, names=plan.names)
    except (TypeError, ValueError) as error:
        raise UserError(f"--available {args.available}: {error}") from None
    upper = np.array([caps[name] for name in plan.names])
    if "upper" in plan.bounds:
        given = np.asarray(plan.bounds["upper"], dtype=float)
        if given.size not in (1, len(upper)):
            raise UserError(f"--upper has {given.size} values for {len(upper)} datasets")
        upper = np.minimum(upper, given)
    plan.bounds["upper"] = upper
    plan.caps, plan.target_tokens, plan.max_epochs = caps, float(target), float(epochs)
    plan.available = {name: float(available[name]) for name in plan.names}


def _named_column(path: str, flag: str, columns: tuple[str, ...]) -> dict[str, Any]:
    """{dataset: value} from a CSV with one name column (NAME_COLUMNS) and one of `columns`, matched by header."""
    table = _read_csv(path)
    named = [c for c in NAME_COLUMNS if c in table.columns]
    valued = [c for c in columns if c in table.columns]
    if len(named) != 1 or len(valued) != 1:
        want = f"one dataset column ({' or '.join(NAME_COLUMNS)}) and one {' or '.join(columns)} column"
        raise UserError(f"{flag} {path} needs {want}; it has {list(table.columns)}")
    names = [str(x).strip() for x in table[named[0]]]
    repeated = sorted({x for x in names if names.count(x) > 1})
    if repeated:
        raise UserError(f"{flag} {path} lists dataset(s) {repeated} more than once")
    values = list(table[valued[0]])
    if valued[0] == "tokens":
        import pandas as pd

        numbers = pd.to_numeric(table["tokens"], errors="coerce")
        bad = [i for i, x in enumerate(numbers) if not np.isfinite(x)]
        if bad:
            raise UserError(f"{flag} {path}: row {bad[0] + 1} ({names[bad[0]]}) has tokens {values[bad[0]]!r}, "
                            "not a number")  # fmt: skip
        values = [float(x) for x in numbers]
    return dict(zip(names, values))


def _paths(path: str, names: list[str], formats: tuple[str, ...]) -> dict[str, str]:
    from ..mixture._export import check_paths

    where = _named_column(path, "--paths", ("path", "prefix"))
    try:
        for fmt in formats:
            check_paths(where, names, fmt)
    except (TypeError, ValueError) as error:
        raise UserError(f"--paths {path}: {error}") from None
    return {name: str(where[name]) for name in names}


def _formats(text: str) -> tuple[str, ...]:
    from ..mixture._export import EXPORT_FORMATS

    formats = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [fmt for fmt in formats if fmt not in EXPORT_FORMATS]
    if unknown or not formats:
        raise UserError(f"--export takes {', '.join(EXPORT_FORMATS)} (comma-separated); got {text!r}")
    return formats


def _suffixes(formats: tuple[str, ...]) -> list[str]:
    from ..mixture._export import EXPORT_FORMATS

    return [EXPORT_FORMATS[fmt] for fmt in formats]


def _dataset_names(saved: Any) -> list[str]:
    """The saved result's datasets, in order (dataset 0, 1, ... where it has no names)."""
    from ..fitting._fit import FitResult
    from ._common import _mixture_names

    if isinstance(saved, FitResult):
        n = saved.law.structure().get("n_datasets")
        if n is None:
            raise UserError(f"a {type(saved.law).__name__} fit has no mixture to optimize")
    else:
        n = (saved.pipeline if hasattr(saved, "pipeline") else saved).n_datasets
    return _mixture_names(saved, int(n))


def _mean_mixture(result: Any) -> np.ndarray:
    r = np.asarray(result.r, dtype=float)
    return r.reshape(-1, r.shape[-1]).mean(axis=0)


def _batched_pipeline(saved: Any, args: argparse.Namespace) -> Any:
    """The batched pipeline whose mean score a verdict's pick maximizes (None where there is none)."""
    from ..mixture._pipeline import Pipeline, PipelineFit

    if isinstance(saved, PipelineFit):
        return saved.pipelines
    if isinstance(saved, Pipeline) and saved.batch_shape:
        from ._common import _benchmark_weights

        with contextlib.redirect_stdout(io.StringIO()):  # its note was printed by the run itself
            weights = _benchmark_weights(saved, args)
        return Pipeline(saved.loss_laws, saved.benchmark_laws, weights, saved.datasets)
    return None


def _provenance(saved: Any, args: argparse.Namespace, result: Any) -> dict[str, Any]:
    """Where the mixture comes from: the saved file, its fit's hash and law, the target, the predicted value (and
    its band where the verdict gives one), and the problems it rests on, if any: the fit's, and the decision's or
    the ascent's."""
    from ..fitting._fit import FitResult
    from ..io._save import _fit_hash
    from ..mixture._optimize import result_ascent_problems

    fitted = _training_data(saved)
    out: dict[str, Any] = {"saved": str(args.saved), "kind": type(saved).__name__}
    if fitted is not None:
        out |= {"fit_hash": _fit_hash(fitted), "law": type(fitted.law).__name__}
    out |= {key: getattr(args, key) for key in ("size", "tokens") if getattr(args, key, None) is not None}
    value = float(np.mean(np.asarray(result.value)))
    if isinstance(saved, FitResult):
        out["predicted_loss"] = -value
    else:
        out["predicted_score"] = value
    if result.decision is not None:
        out |= {"predicted_low": result.decision.value_low, "predicted_high": result.decision.value_high,
                "level": result.decision.level}  # fmt: skip
    if getattr(result, "problems", None) is not None:  # a loss decision's: its fit's, bootstrap's and ascent's
        problems = list(result.problems)
    else:  # an optimizer's result: its fit's and its ascent's
        problems = saved_problems(saved)
        problems += result_ascent_problems(getattr(result, "converged", None))
    if problems:
        out["problems"] = list(problems)
    return out


def _writer(text: str) -> Callable[[Any], None]:
    return lambda f: f.write(text.encode("utf-8"))
