"""What every subcommand shares: the one-line user error, JAX's set-up, reading CSVs, all-or-none writes, and
the checks on a saved result before a decision is drawn from it."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys  # noqa: F401
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._names import READER_FORMATS, DeferredModule, for_command_line

if TYPE_CHECKING:
    import numpy as np
else:
    np = DeferredModule("numpy")  # imported when work starts: `--help` stays fast


class UserError(Exception):
    """A problem with the command line's input, reported as one line with exit code 2."""


def _floats(text: str, name: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--{name} must be comma-separated numbers; got {text!r}") from None


def configure_jax() -> Path | None:
    """float64, and JAX's persistent compilation cache so that a second run reuses the first one's programs.

    The cache lives in `$CAMEL_JAX_CACHE_DIR` (default `$XDG_CACHE_HOME/camel-jax/jax`, i.e.
    `~/.cache/camel-jax/jax`); `CAMEL_JAX_CACHE_DIR=off` disables it, and an unwritable folder runs without it.
    JAX's own `JAX_COMPILATION_CACHE_DIR`, when set, is in force from the first compile on and is left as it is.
    Returns the folder in use, or None. Call it before anything is compiled."""
    import jax

    jax.config.update("jax_enable_x64", True)
    setting = os.environ.get("CAMEL_JAX_CACHE_DIR", "").strip()
    if setting.lower() == "off":
        return None
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return Path(os.environ["JAX_COMPILATION_CACHE_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = Path(setting) if setting else base / "camel-jax" / "jax"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(folder, os.W_OK | os.X_OK):
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # the demo's many small programs too
    return folder


def _existing_file(path: str) -> None:
    """A file to read: a folder, or nothing at the path, is a one-line error saying which."""
    if Path(path).is_dir():
        raise UserError(f"{path} is a folder, not a file: give the file's path")
    if not Path(path).is_file():
        raise UserError(f"no such file: {path}")


def _read_csv(path: str):
    import pandas as pd

    _existing_file(path)
    try:
        header = pd.read_csv(path, header=None, nrows=1, dtype=str).iloc[0].tolist()
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, IndexError) as error:
        message = str(error).splitlines()[0] if str(error) else "empty file"
        raise UserError(f"cannot read {path} as CSV: {message}") from None
    repeated = sorted({h for h in header if header.count(h) > 1})
    if repeated:
        raise UserError(f"{path} has duplicated column name(s) {repeated}: rename them so each is unique")
    if len(df.columns) == 1 and any(sep in str(df.columns[0]) for sep in ";\t|"):
        raise UserError(
            f"{path} has a single column {str(df.columns[0])[:60]!r}: camel-jax reads comma-separated files; "
            "is this one separated by ';', tabs or '|'?"
        )
    return df


def _check_destination(prefix: Path, suffixes: tuple[str, ...] = ("",)) -> None:
    """Fail before any compute when the outputs (`prefix` + each suffix) cannot be written."""
    folder = prefix.parent if str(prefix.parent) else Path(".")
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"cannot write the outputs to {folder}/ (--out {prefix}): not a writable folder")
    for suffix in suffixes:
        path = Path(f"{prefix}{suffix}")
        if path.is_dir():
            raise UserError(f"cannot write {path} (--out {prefix}): it is a folder")


def _write_outputs(files: dict[Path, Any]) -> None:
    """Write every output or none: each to a temporary file beside it, and only when all are written are they
    renamed into place. A failure removes only this run's temporary files: earlier outputs at the same paths stay."""
    from ..io._save import _write_temporary

    written: dict[Path, Path] = {}
    try:
        for path, write in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            written[path] = _write_temporary(path, write)
        for path, tmp in written.items():
            os.replace(tmp, path)
    except BaseException:
        for tmp in written.values():
            tmp.unlink(missing_ok=True)
        raise


def _best_starts(result: Any, n: int = 4) -> Any:
    """The n best starts of a fit (converged first; a batched law): warm starts for its bootstrap."""
    return result.best_laws(min(n, int(np.shape(result.objectives)[-1])))


def _mixture_names(saved: Any, n: int) -> list[str]:
    """The mixture columns a saved result was fitted on (dataset 0, 1, ... for a file without names)."""
    from ..fitting._fit import FitResult
    from ..mixture._pipeline import PipelineFit

    fitted = saved if isinstance(saved, FitResult) else saved.loss_fit if isinstance(saved, PipelineFit) else None
    names = getattr(fitted, "names", None) or getattr(saved, "datasets", None)
    return list(names) if names is not None and len(names) == n else [f"dataset {j}" for j in range(n)]


def _training_data(saved: Any) -> Any:
    """The FitResult behind a saved result (None for a bare Pipeline)."""
    from ..fitting._fit import FitResult
    from ..mixture._pipeline import PipelineFit

    return saved if isinstance(saved, FitResult) else saved.loss_fit if isinstance(saved, PipelineFit) else None


def _check_decidable(saved: Any, path: str) -> None:
    """Refuse, before any compute, a saved result that cannot support a decision about mixtures: a fit whose every
    start failed (its chosen law is non-finite), or one made on a single mixture."""
    import jax

    from ..data._checks import check_several_mixtures

    fitted = _training_data(saved)
    if fitted is None:
        return
    leaves = [np.asarray(leaf) for leaf in jax.tree.leaves(fitted.law)]
    if not all(np.isfinite(leaf).all() for leaf in leaves):
        raise UserError(f"{path}: every start of this fit failed (its law is not finite): refit before deciding")
    if len(fitted.inputs) and np.ndim(fitted.inputs[0]) == 2:
        try:
            check_several_mixtures(fitted.inputs[0], fitted.weights, path)
        except ValueError as error:
            raise UserError(str(error)) from None


def saved_problems(saved: Any) -> list[str]:
    """What makes the saved fit behind a result unreliable: a FitResult's `problems()`, a PipelineFit's (its
    proxy-loss fit's and its score's loss-to-benchmark fits'); [] for a bare Pipeline."""
    from ..mixture._pipeline import PipelineFit

    if isinstance(saved, PipelineFit):
        return saved.problems()
    fitted = _training_data(saved)
    return [] if fitted is None or fitted.status is None else fitted.problems()


def _warn_unreliable(saved: Any, path: str) -> None:
    """Say, before the answer, what makes the saved fit behind it unreliable (`saved_problems`: a best start that
    did not converge, R^2 <= 0, a degenerate parameter): a mixture optimized on an unconverged law is where its
    starts stopped, not the law's optimum, and must not read as an answer."""
    say_problems(path, saved_problems(saved))


def say_problems(path: Any, problems: Sequence[str], rests_on: str = "fit") -> None:
    """Print each problem of the saved `rests_on` at `path` before the answer that rests on it, the solver's options
    named by their command-line flags."""
    for problem in problems:
        print(f"warning: {path}: {for_command_line(problem)}; what follows rests on that {rests_on}")


def _warn_extrapolation(saved: Any, size: float) -> None:
    """Say so when the target size is far outside the trained sizes (`mixture._optimize.extrapolation_problem`)."""
    from ..mixture._optimize import extrapolation_problem

    problem = extrapolation_problem(_training_data(saved), size)
    if problem is not None:  # a warning: printed once as `warning: ...` by `main`, though the library warns it too
        warnings.warn(problem, stacklevel=2)


def _load_fit(path: str) -> Any:
    """The saved result behind `next`, refused before any compute when it cannot support a decision."""
    from ..io._save import load

    _existing_file(path)
    saved = load(path)
    _check_decidable(saved, path)
    return saved


# --- the one reader of every subcommand (camel_jax.data.read_runs) ------------------------------------------------

# The flags of `read_runs`, as every subcommand that reads runs takes them; stored in a fit's JSON and .npz so that
# later commands read new rows the same way (`reader_options`).
READER_FLAGS = (
    "mixture", "size", "tokens", "target", "domain", "step", "checkpoint", "names", "normalize", "format", "run"
)  # fmt: skip


def add_reader_flags(parser: Any, *, table: str = "table") -> None:
    """The `read_runs` flags on a subcommand's parser (`read_table(args)` reads them)."""

    parser.add_argument("--mixture", help="the mixture: comma-separated columns, a glob ('weight_*'), or one "
                        "column of shares joined by '-', ',' or ' ' (default: the r_* columns, else the format's)")
    parser.add_argument("--size", help="model-size column (default: 'size' if present)")
    parser.add_argument("--tokens", help="training-tokens column (default: 'tokens' if present and the law uses it)")
    parser.add_argument("--target", help="loss column(s): a name, comma-separated names or a glob ('*_loss'); several "
                        "are fitted together (default 'loss', else the format's)")  # fmt: skip
    parser.add_argument("--domain", help=f"column naming each row's validation domain (a long {table}): one target "
                        "per domain")  # fmt: skip
    parser.add_argument("--step", help="training-step column (orders the checkpoints without --tokens)")
    parser.add_argument("--checkpoint", default="final", help="final (each run's last checkpoint, default), a token "
                        "count (the nearest checkpoint), or all (every checkpoint; runs resampled whole)")  # fmt: skip
    parser.add_argument("--names", help="comma-separated dataset names (for a column of shares)")
    parser.add_argument("--normalize", action="store_true", help="rescale mixtures whose shares sum off 1")
    parser.add_argument("--format", choices=READER_FORMATS,
                        help="a published format (default: recognized from the columns)")  # fmt: skip
    parser.add_argument("--run", help="column identifying the training run (tells replicate runs apart)")


def reader_options(args: Any) -> dict[str, Any]:
    """The `read_runs` keywords given on the command line (None where not given), as stored in a fit's files."""
    return {flag: getattr(args, flag, None) for flag in READER_FLAGS}


def table_source(paths: Any) -> Any:
    """What `read_runs` reads from the positional paths: one file or folder, or a pair of files (olmix, regmix)."""
    paths = [paths] if isinstance(paths, str) else list(paths)
    if len(paths) > 2:
        raise UserError(f"give one table (or a pair of files for --format olmix/regmix); got {len(paths)} paths")
    for path in paths:
        if not Path(path).exists():
            raise UserError(f"no such file: {path}")
    return paths[0] if len(paths) == 1 else tuple(paths)


def read_table(args: Any, paths: Any = None, **overrides: Any) -> Any:
    """Read the runs a subcommand was given (`args.csv`, or `paths`) with its reader flags (`add_reader_flags`),
    through `camel_jax.data.read_runs`: its notes are printed as `note: ...`, its errors become one-line
    `UserError`s. `overrides` replace flags (e.g. a saved fit's `reader_options`). Returns a `MixtureData`."""
    import warnings

    from ..data._read import ReadNote, read_runs

    options = reader_options(args) | overrides
    source = table_source(args.csv if paths is None else paths)
    options["checkpoint"] = options.get("checkpoint") or "final"
    options["normalize"] = bool(options.get("normalize"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ReadNote)
        try:
            data = read_runs(source, **options)
        except (ValueError, TypeError) as error:
            raise UserError(str(error).strip().splitlines()[0]) from None
    for warning in caught:
        if issubclass(warning.category, ReadNote):
            print(f"note: {warning.message}")
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return data


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


def json_text(record: Any) -> str:
    """`record` as strict JSON text (indent 2), as `fit` and `optimize` write it: a non-finite number (a paper-form
    parameter at an infinite limit, an interval without a finite end, an undefined statistic) is written as null.
    Python's default `Infinity` and `NaN` are not JSON, and strict readers (jq, JavaScript, most JSON libraries)
    refuse the file; the record's own keys (`log_limit`, `degenerate`, `at_bound`) say what stands at such a place."""
    return json.dumps(_finite(record), indent=2, allow_nan=False)


def _finite(value: Any) -> Any:
    """`value` with every non-finite float, at any depth of dicts, lists and tuples, replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value
