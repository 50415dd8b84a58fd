"""The `camel-jax` command line (also `python -m camel_jax`).

    camel-jax demo                       the end-to-end demo (offline)
    camel-jax fit runs.csv               fit a mixture law to a CSV -> JSON with intervals, .npz, figure
    camel-jax optimize fit.npz --size 20 optimal mixture for a target size from a saved fit or pipeline
    camel-jax design --sizes 4,5,6 ...   choose runs under a FLOPs budget -> CSV

A problem with the user's input (a missing file or column, bad values) exits with code 2 and one line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__

LAWS = ("camel", "camel-tied", "camel-data", "camel-data-tied", "sodm-additive", "sodm-joint", "dml", "chinchilla",
        "power", "auto")  # fmt: skip
# The candidates of `--law auto`, chosen by held-out error at the largest size (camel-data* need a tokens column).
AUTO_LAWS = ("camel-tied", "camel", "sodm-additive", "camel-data", "camel-data-tied")
TOKEN_LAWS = ("chinchilla", "sodm-additive", "sodm-joint", "camel-data", "camel-data-tied")


class UserError(Exception):
    """A problem with the command line's input, reported as one line with exit code 2."""


def _floats(text: str, name: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"--{name} must be comma-separated numbers; got {text!r}") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="camel-jax", description="Data-mixture scaling laws in JAX.")
    parser.add_argument("--version", action="version", version=f"camel-jax {__version__}")
    sub = parser.add_subparsers(dest="command")

    demo = sub.add_parser("demo", help="run the end-to-end demo on data shipped in the package (offline)")
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--out", default="camel-demo", help="folder for the figures (default ./camel-demo)")
    demo.add_argument("--quick", action="store_true", help="fewer bootstrap resamples and held-out splits")

    fit = sub.add_parser("fit", help="fit a law to a CSV of runs; write JSON (with intervals), .npz and a figure")
    fit.add_argument("csv", help="the runs table")
    auto = f"auto (default): the lowest held-out error at the largest size among {', '.join(AUTO_LAWS)}"
    fit.add_argument("--law", choices=LAWS, default="auto", help=f"the law; {auto}")
    fit.add_argument("--mixture", help="comma-separated mixture columns (default: every column starting with r_)")
    fit.add_argument("--size", help="model-size column (default: 'size' if present)")
    fit.add_argument("--tokens", help="tokens column (default: 'tokens' if present and the law uses it)")
    fit.add_argument("--target", default="loss", help="loss column (default 'loss')")
    fit.add_argument("--domains", type=int, default=3, help="CAMEL/DML intrinsic domains k (default 3)")
    fit.add_argument("--capacity-exponent", type=float, default=1.0, help="tied CAMEL: capacity ~ M^c (default 1)")
    fit.add_argument("--restarts", type=int, default=32)
    fit.add_argument("--resamples", type=int, default=200, help="bootstrap resamples for the intervals (0: none)")
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--out", default="camel-fit", help="output prefix (default camel-fit: .json, .npz, .png)")

    opt = sub.add_parser("optimize", help="optimal mixture for a target size from a saved fit or pipeline")
    opt.add_argument("saved", help="a .npz written by `camel-jax fit` (minimizes the loss), or camel_jax.save of a "
                     "pipeline or of a fit_pipeline result (its calibrated verdict)")  # fmt: skip
    opt.add_argument(
        "--size", type=float, default=None, help="target model size, in the units of the fit (not for a dml fit)"
    )
    opt.add_argument("--tokens", type=float, default=None, help="training tokens at the target size (for a fit of "
                     "a token-aware law: camel-data*, sodm-* with tokens)")  # fmt: skip
    opt.add_argument("--objective", default=None, help="pipeline objective: balanced|math|code|knowledge")
    opt.add_argument("--weights", default=None, help="pipeline weights as name=w,name=w (instead of --objective)")
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

    _next_parser(sub)
    _design_parser(sub)
    return parser


def _design_parser(sub: Any) -> None:
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


def _next_parser(sub: Any) -> None:
    nxt = sub.add_parser("next", help="the candidate runs that would most sharpen the decision, per FLOP -> CSV")
    nxt.add_argument("--fit", required=True, help="a .npz of `camel-jax fit` (bootstrapped here), or camel_jax.save "
                     "of a fit_pipeline result, a batched pipeline or a BootstrapResult")  # fmt: skip
    nxt.add_argument("--candidates", required=True, help="CSV of runs not yet trained: r_* columns, size, flops")
    nxt.add_argument("--mixture", default=None, help="the candidates' mixture columns, in the fit's dataset order "
                     "(default: the columns the fit was made on, matched by name)")  # fmt: skip
    nxt.add_argument("--budget", type=float, required=True, help="FLOPs the next runs may spend")
    nxt.add_argument("--size", type=float, required=True, help="the target model size the decision is for")
    nxt.add_argument("--batch", type=int, default=1, help="at most this many runs (default 1)")
    nxt.add_argument("--noise", type=float, default=None, help="sd of one measured outcome (default: the fit's rms "
                     "residual, or a fit_pipeline result's objective noise; required for a saved pipeline or "
                     "bootstrap)")  # fmt: skip
    nxt.add_argument("--reference", default=None, help="score the gain over this mixture (comma-separated)")
    nxt.add_argument("--resamples", type=int, default=200, help="bootstrap resamples of a `fit` .npz (default 200)")
    nxt.add_argument("--seed", type=int, default=0)
    nxt.add_argument("--out", default=None, help="also write the chosen runs to this CSV")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if args.command in ("demo", "fit", "optimize", "next"):
            configure_jax()
        if args.command == "demo":
            from ._demo import run_demo

            _check_destination(Path(args.out) / "figure")

            run_demo(seed=args.seed, out=args.out, quick=args.quick)
        elif args.command == "fit":
            _fit(args)
        elif args.command == "optimize":
            _optimize(args)
        elif args.command == "next":
            _next(args)
        elif args.command == "design":
            _design(args)
    except UserError as error:
        print(f"camel-jax {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"camel-jax {args.command}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, KeyError, FileNotFoundError, OSError) as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"camel-jax {args.command}: error: {message}", file=sys.stderr)
        return 2
    return 0


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


def _read_csv(path: str):
    import pandas as pd

    if not Path(path).is_file():
        raise UserError(f"no such file: {path}")
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
    from ._save import _write_temporary

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


def _law_template(args: argparse.Namespace, table: _Table):
    """A template of `args.law` for the columns of `table` (reference scales: their geometric means)."""
    import jax

    from . import laws

    key = jax.random.key(args.seed)
    n, size_scale, tokens_scale = len(table.mixture), table.scale(table.size), table.scale(table.tokens)
    if args.law in ("camel", "camel-tied"):
        tied = args.law == "camel-tied"
        return laws.CAMEL.sample_init(
            key,
            n_datasets=n,
            n_domains=args.domains,
            tied=tied,
            capacity_exponent=args.capacity_exponent,
            size_scale=size_scale,
        )
    if args.law in ("camel-data", "camel-data-tied"):
        return laws.CAMELData.sample_init(
            key,
            n_datasets=n,
            n_domains=args.domains,
            tied=args.law == "camel-data-tied",
            capacity_exponent=args.capacity_exponent,
            size_scale=size_scale,
            tokens_scale=tokens_scale,
        )
    if args.law == "dml":
        return laws.DML.sample_init(key, n_datasets=n, n_domains=args.domains)
    if args.law in ("sodm-additive", "sodm-joint"):
        cls = laws.SODMAdditive if args.law == "sodm-additive" else laws.SODMJoint
        return cls.sample_init(
            key, n_datasets=n, tokens=table.tokens is not None, size_scale=size_scale, tokens_scale=tokens_scale
        )
    if args.law == "chinchilla":
        return laws.Chinchilla.sample_init(key, size_scale=size_scale, tokens_scale=tokens_scale)
    return laws.PowerLaw.sample_init(key, scale=size_scale)


@dataclasses.dataclass
class _Table:
    """The columns a `fit` uses, validated: the law's `inputs`, the target `y`, and what the report names."""

    inputs: tuple[Any, ...]
    y: Any
    mixture: list[str]
    size: str | None
    tokens: str | None
    data: Any = None  # the MixtureData, for laws of the mixture

    def scale(self, column: str | None) -> float:
        """The geometric mean of the size or tokens column (a law's reference scale), 1 without the column."""
        if column is None:
            return 1.0
        values = self.inputs[self.inputs_index(column)]
        return float(np.exp(np.mean(np.log(np.asarray(values)))))

    def inputs_index(self, column: str) -> int:
        names = (["__mixture"] if self.mixture else []) + [c for c in (self.size, self.tokens) if c is not None]
        return names.index(column)


def _fit_columns(args: argparse.Namespace, df: Any) -> _Table:
    """Resolve and validate the columns of `camel-jax fit`; every problem is a one-line `UserError`."""
    from ._io import MixtureData, positive_columns

    uses_mixture = args.law not in ("chinchilla", "power")
    uses_size = args.law != "dml"
    mixture = (
        [c.strip() for c in args.mixture.split(",")]
        if args.mixture
        else [c for c in df.columns if str(c).startswith("r_")]
    )
    if uses_mixture and not mixture:
        raise UserError("no mixture columns: name them with --mixture or prefix them with r_")
    size = args.size or ("size" if "size" in df.columns and uses_size else None)
    if uses_size and size is None:
        raise UserError(f"the {args.law} law needs a model-size column: --size (columns: {list(df.columns)})")
    tokens = args.tokens
    if tokens is None and "tokens" in df.columns and args.law in TOKEN_LAWS:
        tokens = "tokens"
    if args.law in ("chinchilla", "camel-data", "camel-data-tied") and tokens is None:
        raise UserError(f"the {args.law} law needs a tokens column: --tokens")
    if args.target not in df.columns:
        raise UserError(f"column {args.target!r} not found (--target); available columns: {list(df.columns)}")
    if args.law == "dml":
        _check_one_size(args, df)
    if not uses_mixture:
        roles = {"size": size, **({"tokens": tokens} if tokens else {}), "target": args.target}
        columns = positive_columns(df, roles)
        inputs = tuple(columns[role] for role in ("size", "tokens") if role in columns)
        return _Table(inputs, columns["target"], [], size, tokens)
    data = MixtureData.from_frame(
        df, mixture=mixture, target=args.target, size=size if uses_size else None, tokens=tokens
    )
    return _Table(data.inputs, data.y, mixture, size if uses_size else None, tokens, data)


def _check_one_size(args: argparse.Namespace, df: Any) -> None:
    if args.size is not None:
        raise UserError("the dml law describes one model size and takes no --size: filter the table to one size")
    if "size" in df.columns and df["size"].nunique() > 1:
        raise UserError(
            f"the dml law describes one model size, but column 'size' holds {df['size'].nunique()} sizes: "
            "filter the table to one size, or use a law of size and mixture (--law camel-tied)"
        )


def _fit(args: argparse.Namespace) -> None:
    import jax

    from ._checks import check_several_mixtures
    from ._fit import fit
    from ._options import Status
    from ._save import save_to

    if args.restarts < 1:
        raise UserError(f"--restarts must be >= 1; got {args.restarts}")
    if args.resamples < 0:
        raise UserError(f"--resamples must be >= 0 (0: no intervals); got {args.resamples}")
    prefix = Path(args.out)
    _check_destination(prefix, (".json", ".npz", ".png"))
    df = _read_csv(args.csv)
    if args.law == "auto":
        args = _choose_law(args, df)
    table = _fit_columns(args, df)
    if table.data is not None:
        check_several_mixtures(table.data.r, table.data.weight, f"{args.csv}")
    if not getattr(args, "collinearity_said", False):
        _warn_collinear(table)
    template = _law_template(args, table)
    key = jax.random.key(args.seed)
    result = fit(template, table.inputs, table.y, key=key, restarts=args.restarts)
    result = dataclasses.replace(result, names=tuple(table.mixture) or None)
    out = {
        "law": type(result.law).__name__,
        "csv": args.csv,
        "columns": {"mixture": table.mixture, "size": table.size, "tokens": table.tokens, "target": args.target},
        "params": {k: np.asarray(v).tolist() for k, v in result.law.params().items()},
        "summary": {k: v if k == "not_identified" else np.asarray(v).tolist() for k, v in result.summary().items()},
        "best_status": Status(int(result.best_status)).label,
    }
    try:
        boot = _intervals(args, result, table, key, out)
    except KeyboardInterrupt:  # the fit is done: keep it, without intervals
        print("interrupted during the bootstrap: writing the fit without intervals", file=sys.stderr)
        boot = None
    fig = _fit_figure(table, result, boot, out["law"], args.target)
    _write_outputs(
        {
            Path(f"{prefix}.json"): lambda f: f.write(json.dumps(out, indent=2).encode()),
            Path(f"{prefix}.npz"): lambda f: save_to(result, f),
            Path(f"{prefix}.png"): lambda f: fig.savefig(f, format="png", dpi=130, bbox_inches="tight"),
        }
    )
    _print_fit(out, boot)
    print(f"wrote {prefix}.json, {prefix}.npz, {prefix}.png")


def _choose_law(args: argparse.Namespace, df: Any) -> argparse.Namespace:
    """`--law auto` (the default): every `AUTO_LAWS` candidate the table can feed, fitted below the largest size
    and scored there (`select_law`); prints the ranking and returns `args` with the winner. With fewer than 4
    sizes (3 to train on, 1 to score) it fits tied CAMEL, as before `auto` existed."""
    import jax

    from ._select import select_law
    from .laws._base import n_free_parameters

    size = args.size or "size"
    if size not in df.columns or df[size].nunique() < 4:  # below 3 training sizes, a held-out score says little
        print("--law auto: fewer than 4 model sizes, too few to hold one out: fitting camel-tied")
        return argparse.Namespace(**(vars(args) | {"law": "camel-tied"}))
    tokens = args.tokens or ("tokens" if "tokens" in df.columns else None)
    names = [name for name in AUTO_LAWS if tokens is not None or name not in TOKEN_LAWS]
    base = _fit_columns(argparse.Namespace(**(vars(args) | {"law": "camel-data" if tokens else "camel-tied"})), df)
    laws = {name: _law_template(argparse.Namespace(**(vars(args) | {"law": name})), base) for name in names}
    _warn_collinear(base)
    try:
        best, table = select_law(laws, base.data, key=jax.random.key(args.seed), restarts=min(args.restarts, 16))
    except ValueError as error:
        raise UserError(f"--law auto: {error}") from None
    mean = table.groupby("law", sort=False)["error"].mean().sort_values()
    held_out = ", ".join(f"{s:.4g}" for s in sorted(table["test_size"].unique()))
    print(f"--law auto: held-out MAPE at size {held_out}: " + ", ".join(f"{n} {e:.3f}%" for n, e in mean.items()))
    se = float(table.loc[table["law"] == best, "error_se"].mean())
    winner = simplest_within(mean.to_dict(), {name: n_free_parameters(law) for name, law in laws.items()}, best, se)
    if winner != best:
        print(
            f"--law auto: {winner} ({mean[winner]:.3f}%) is within one standard error ({se:.3f}%, over the held-out "
            f"runs) of {best} ({mean[best]:.3f}%): the difference is noise, so the simpler law "
            f"({n_free_parameters(laws[winner])} vs {n_free_parameters(laws[best])} free parameters) is fitted"
        )
    print(f"--law auto: fitting {winner} on every run")
    return argparse.Namespace(**(vars(args) | {"law": winner, "collinearity_said": True}))


def simplest_within(errors: dict[str, float], n_params: dict[str, int], best: str, se: float) -> str:
    """The one-standard-error rule: among the laws whose held-out error is within `se` of the best law's, the one
    with the fewest free parameters (ties: the lower error). Without a finite `se`, the best law."""
    if not np.isfinite(se):
        return best
    close = [name for name, e in errors.items() if np.isfinite(e) and e <= errors[best] + se]
    return min(close, key=lambda name: (n_params[name], errors[name]))


# Correlation of log tokens with log size above which a law of both cannot tell their effects apart.
COLLINEAR = 0.99


def _warn_collinear(table: _Table) -> None:
    """Say so when the tokens column is (nearly) a function of the size column."""
    if table.tokens is None or table.size is None:
        return
    size = np.log(np.asarray(table.inputs[table.inputs_index(table.size)], dtype=float))
    tokens = np.log(np.asarray(table.inputs[table.inputs_index(table.tokens)], dtype=float))
    if np.ptp(size) == 0 or np.ptp(tokens) == 0:
        return
    corr = float(np.corrcoef(size, tokens)[0, 1])
    if abs(corr) > COLLINEAR:
        print(
            f"warning: tokens and size are collinear in this table (correlation of their logs {corr:.4f}): a law "
            "of both cannot separate their effects; predictions off that line (other tokens per parameter) are not "
            "supported by these data"
        )


def _best_starts(result: Any, n: int = 4) -> Any:
    """The n lowest-objective starts of a fit (a batched law): warm starts for its bootstrap."""
    import jax

    return jax.tree.map(lambda a: a[np.argsort(np.asarray(result.objectives))[:n]], result.laws)


def _intervals(args: argparse.Namespace, result: Any, table: _Table, key: Any, out: dict[str, Any]) -> Any:
    """Bootstrap intervals (warm-started from the 4 best starts) into `out`; None with --resamples 0."""

    from ._bootstrap import bootstrap

    if args.resamples == 0:
        return None
    warm = _best_starts(result)
    boot = bootstrap(result.law, table.inputs, table.y, key=key, n_resamples=args.resamples, inits=warm, progress=True)
    out["intervals_95"] = {
        k: [np.asarray(lo).tolist(), np.asarray(hi).tolist()] for k, (lo, hi) in boot.interval(0.95).items()
    }
    out["bootstrap_resamples"] = boot.n_resamples  # fewer than asked if Ctrl-C stopped the bootstrap
    out["outside_interval"] = _outside(out["params"], out["intervals_95"])
    return boot


def _fit_figure(table: _Table, result: Any, boot: Any, law_name: str, target: str) -> Any:
    """Loss against size per mixture (laws of mixture and size), else predicted against observed."""
    from . import plot
    from ._io import MixtureData

    if table.data is None or table.size is None:
        return plot.predicted_vs_observed(table.y, result.predict(*table.inputs), title=f"{law_name} fit", label=target)
    data = table.data
    groups = np.unique(np.round(np.asarray(data.r), 9), axis=0, return_inverse=True)[1].ravel()
    with_groups = MixtureData(r=data.r, y=data.y, size=data.size, tokens=data.tokens, group=groups)
    if data.tokens is None:
        return plot.loss_vs_size(with_groups, result.law, bootstrap=boot)
    return plot.loss_vs_size(with_groups, _token_path(result.law, data), bootstrap=None)


def _print_fit(out: dict[str, Any], boot: Any) -> None:
    s = out["summary"]
    print(
        f"{out['law']}: objective {float(s['objective']):.4g}, R^2 {float(s['r2']):.5f}, "
        f"MAPE {float(s['mape_percent']):.3f}%, {int(s['n_converged'])}/{s['n_starts']} starts converged, "
        f"best start: {out['best_status']}"
    )
    if boot is not None:
        print(f"  bootstrap: {int(np.sum(np.asarray(boot.converged)))}/{boot.n_resamples} resamples converged")
    if out["best_status"] not in ("converged", "stalled"):
        print(
            "  warning: the best start did not converge; the intervals below describe where the resamples "
            "stopped, not what the data determine"
        )
    _print_params(out)


def _outside(params: dict[str, Any], intervals: dict[str, Any]) -> list[str]:
    """The parameter elements whose point estimate lies outside their own bootstrap interval."""
    from ._identify import element_names

    names = []
    for name, value in params.items():
        low, high = (np.asarray(v, dtype=float) for v in intervals[name])
        point = np.asarray(value, dtype=float)
        outside = ~((low <= point) & (point <= high))
        names += [n for n, o in zip(element_names(name, value), np.ravel(outside)) if o]
    return names


def _print_params(out: dict[str, Any]) -> None:
    """Each parameter with its 95% interval; elements the data do not determine are said to be so."""
    from ._identify import element_names

    def show(value):
        return np.array2string(np.asarray(value), precision=4, separator=", ")

    free = set(out["summary"]["not_identified"])
    for name, value in out["params"].items():
        interval = out.get("intervals_95", {}).get(name)
        text = show(value) + (f"  95% [{show(interval[0])}, {show(interval[1])}]" if interval is not None else "")
        loose = [n for n in element_names(name, value) if n in free]
        if loose:
            text += f"  (not identified by these data: {', '.join(loose)})"
        print(f"  {name}: {text}")
    outside = out.get("outside_interval", [])
    if outside:
        print(f"  warning: point estimate outside its own interval for {', '.join(outside)}")


def _token_path(law: Any, data: Any):
    """A token-aware law drawn against size along the table's own tokens-for-size line (log tokens regressed on
    log size), so the curves pass through the runs (for the figure only)."""
    import jax.numpy as jnp

    log_size, log_tokens = np.log(np.asarray(data.size)), np.log(np.asarray(data.tokens))
    slope = np.polyfit(log_size, log_tokens, 1)[0] if np.ptp(log_size) > 0 else 0.0
    intercept = float(np.mean(log_tokens - slope * log_size))
    return lambda r, size: law(r, size, jnp.exp(intercept + slope * jnp.log(size)))


def _optimize(args: argparse.Namespace) -> None:
    import jax

    from ._fit import FitResult
    from ._optimize import check_model_size
    from ._pipeline import Pipeline, PipelineFit
    from ._save import load

    if not Path(args.saved).is_file():
        raise UserError(f"no such file: {args.saved}")
    saved = load(args.saved)
    if not isinstance(saved, (FitResult, Pipeline, PipelineFit)):
        raise UserError(f"{args.saved} holds a {type(saved).__name__}; save a FitResult, Pipeline or PipelineFit")
    _check_decidable(saved, args.saved)
    if isinstance(saved, FitResult) and (args.objective or args.weights):
        raise UserError(
            f"{args.saved} is a loss fit: `optimize` minimizes its predicted loss, and --objective/--weights "
            "(benchmark weights) apply only to a saved pipeline; drop them"
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
    key = jax.random.key(args.seed)
    if isinstance(saved, FitResult):
        result = _optimize_fit(saved, args, bounds, key)
    else:
        result = _optimize_pipeline(saved, args, bounds, key)
    r = np.atleast_2d(np.asarray(result.r)).mean(axis=0)
    names = _mixture_names(saved, len(r))
    print("optimal mixture: " + ", ".join(f"{name} {x:.4f}" for name, x in zip(names, r)))
    print(f"KKT residual {float(np.max(np.asarray(result.kkt_residual))):.2e}")


def _mixture_names(saved: Any, n: int) -> list[str]:
    """The mixture columns a saved result was fitted on (dataset 0, 1, ... for a file without names)."""
    from ._fit import FitResult
    from ._pipeline import PipelineFit

    fitted = saved if isinstance(saved, FitResult) else saved.loss_fit if isinstance(saved, PipelineFit) else None
    names = getattr(fitted, "names", None) or getattr(saved, "datasets", None)
    return list(names) if names is not None and len(names) == n else [f"dataset {j}" for j in range(n)]


def _training_data(saved: Any) -> Any:
    """The FitResult behind a saved result (None for a bare Pipeline)."""
    from ._fit import FitResult
    from ._pipeline import PipelineFit

    return saved if isinstance(saved, FitResult) else saved.loss_fit if isinstance(saved, PipelineFit) else None


def _check_decidable(saved: Any, path: str) -> None:
    """Refuse, before any compute, a saved result that cannot support a decision about mixtures: a fit whose every
    start failed (its chosen law is non-finite), or one made on a single mixture."""
    import jax

    from ._checks import check_several_mixtures

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


# A target size this many times beyond the trained sizes is said to be an extrapolation far from the data.
FAR = 4.0


def _warn_extrapolation(saved: Any, size: float) -> None:
    fitted = _training_data(saved)
    if fitted is None or len(fitted.inputs) < 2:
        return
    sizes = np.asarray(fitted.inputs[1])[np.asarray(fitted.weights).reshape(-1, len(fitted.inputs[1])).max(0) > 0]
    low, high = float(sizes.min()), float(sizes.max())
    if size > FAR * high or size < low / FAR:
        print(
            f"warning: size {size:g} is far outside the trained sizes [{low:g}, {high:g}] ({size / high:.3g}x the "
            "largest): the prediction there rests on the law's form alone, not on data"
        )


def _check_tokens(saved: Any, args: argparse.Namespace) -> None:
    """--tokens is needed by a fit of a token-aware law (inputs (r, size, tokens)) and refused by any other."""
    from ._fit import FitResult

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


def _next(args: argparse.Namespace) -> None:
    import jax

    from ._next import next_runs

    for name in ("budget", "size"):
        value = getattr(args, name)
        if not (np.isfinite(value) and value > 0):
            raise UserError(f"--{name} must be a positive number; got {value}")
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
    columns = _candidate_columns(saved, candidates, args.candidates, args.mixture)
    if reference is not None:
        from ._optimize import _reference_mixture

        reference = _reference_mixture(reference, len(columns))
    key = jax.random.key(args.seed)
    ensemble, noise = _ensemble_of(args, saved, key)
    out = next_runs(ensemble, candidates, budget=args.budget, target_size=args.size, key=key, batch=args.batch,
                    reference=reference, noise=noise, mixture=columns)  # fmt: skip
    names = _mixture_names(saved, len(columns))
    print(f"decision sd today {out.attrs['sd_before']:.4g}; recommended mixture at size {args.size:g}: "
          + ", ".join(f"{name} {x:.4f}" for name, x in zip(names, out.attrs["recommended"])))  # fmt: skip
    if out.empty:
        print("no candidate within the budget would change the decision's uncertainty")
    for _, row in out.iterrows():
        print(f"  {int(row['order'])}. candidate row {row.name}: size {row['size']:g}, cost {row['cost']:.3g} FLOPs, "
              f"sd after {row['sd_after']:.4g}")  # fmt: skip
    if args.out:
        out.to_csv(args.out, index=True, index_label="candidate_row")
        print(f"wrote {args.out}")


def _load_fit(path: str) -> Any:
    """The saved result behind `next`, refused before any compute when it cannot support a decision."""
    from ._save import load

    if not Path(path).is_file():
        raise UserError(f"no such file: {path}")
    saved = load(path)
    _check_decidable(saved, path)
    return saved


def _candidate_columns(saved: Any, candidates: Any, path: str, mixture: str | None = None) -> list[str]:
    """The candidates' mixture columns, matched by name to those the fit was made on (a missing column, or an r_*
    column the fit never saw, is an error naming it), and the table checked, all before the bootstrap."""
    from ._bootstrap import BootstrapResult
    from ._io import MixtureData, match_mixture_columns
    from ._pipeline import Pipeline

    n: Any
    if isinstance(saved, Pipeline):
        n = saved.n_datasets
    else:
        law = saved.laws if isinstance(saved, BootstrapResult) else _training_data(saved).law
        n = law.structure().get("n_datasets") if hasattr(law, "structure") else None
        if n is None:
            raise UserError(f"`next` needs a law of the mixture; this one is a {type(law).__name__}")
    fitted = _training_data(saved) if not isinstance(saved, (Pipeline, BootstrapResult)) else None
    names = getattr(fitted, "names", None) or getattr(saved, "datasets", None)
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
    MixtureData.from_frame(candidates, mixture=columns, target="flops", size="size")
    return columns


def _ensemble_of(args: argparse.Namespace, saved: Any, key: Any) -> tuple[Any, float | None]:
    """The resample ensemble behind `next`, and the outcome noise: a saved ensemble as is; a `fit` .npz
    bootstrapped here (warm-started from its 4 best starts), with its rms residual as the default noise."""

    from ._bootstrap import BootstrapResult, bootstrap
    from ._fit import FitResult
    from ._pipeline import Pipeline, PipelineFit

    if isinstance(saved, PipelineFit):  # its objective's noise is the default
        return saved, args.noise
    if isinstance(saved, (BootstrapResult, Pipeline)):
        if args.noise is None:
            raise UserError(f"--noise is required with a saved {type(saved).__name__} (it holds no residuals)")
        return saved, args.noise
    if not isinstance(saved, FitResult) or len(saved.inputs) != 2 or np.ndim(saved.y) != 1:
        raise UserError(f"{args.fit}: `next` needs one law of (mixture, size), a batched pipeline or a bootstrap")
    if args.resamples < 2:
        raise UserError(f"--resamples must be >= 2; got {args.resamples}")
    residual = np.asarray(saved.y) - np.asarray(saved.predict(*saved.inputs))
    noise = float(np.sqrt(np.average(residual**2, weights=np.asarray(saved.weights))))
    warm = _best_starts(saved)
    boot = bootstrap(saved.law, saved.inputs, saved.y, key=key, n_resamples=args.resamples, inits=warm,
                     weights=saved.weights, progress=False)  # fmt: skip
    return boot, noise if args.noise is None else args.noise


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
        bounds |= {"reference": _floats(args.reference, "reference"), "max_shift": args.max_shift}
    return bounds


def _optimize_fit(saved: Any, args: argparse.Namespace, bounds: dict[str, Any], key: Any) -> Any:
    """The mixture of lowest predicted loss under a saved fit (at --size, or at the one fitted size)."""
    import jax.numpy as jnp

    from ._optimize import optimal_mixture

    law = saved.law
    n = law.structure().get("n_datasets")
    if n is None:
        raise UserError(f"a {type(law).__name__} fit has no mixture to optimize")
    if args.size is None:
        result = optimal_mixture(lambda r: -law(r[None, :])[0], int(n), key=key, **bounds)
        print(f"predicted loss at the fitted size: {-float(result.value):.5g}")
        return result
    size = jnp.asarray([args.size])
    if args.tokens is not None:
        tokens = jnp.asarray([args.tokens])
        result = optimal_mixture(lambda r: -law(r[None, :], size, tokens)[0], int(n), key=key, **bounds)
        print(f"predicted loss at size {args.size:g}, tokens {args.tokens:g}: {-float(result.value):.5g}")
        return result
    result = optimal_mixture(lambda r: -law(r[None, :], size)[0], int(n), key=key, **bounds)
    print(f"predicted loss at size {args.size:g}: {-float(result.value):.5g}")
    return result


def _optimize_pipeline(saved: Any, args: argparse.Namespace, bounds: dict[str, Any], key: Any) -> Any:
    """The mixture of highest predicted weighted accuracy under a saved pipeline (or fitted pipeline), at --size.

    A saved PipelineFit keeps its own objective: its calibration and noise are those of that objective."""
    from ._optimize import optimal_mixture
    from ._pipeline import Pipeline, PipelineFit

    fitted: Any
    if isinstance(saved, PipelineFit):
        if args.objective or args.weights:
            raise UserError("a saved fit_pipeline result keeps the objective it was fitted for (its calibration and "
                            "noise are that objective's): drop --objective/--weights")  # fmt: skip
        fitted, pipeline = saved, saved.pipeline if saved.pipelines is None else saved.pipelines
    else:
        pipeline = Pipeline(saved.loss_laws, saved.benchmark_laws, _benchmark_weights(saved, args), saved.datasets)
        fitted = pipeline
    if not (pipeline.batch_shape and args.reference):
        point = saved.pipeline if isinstance(saved, PipelineFit) else pipeline
        result = optimal_mixture(point, point.n_datasets, key=key, model_size=args.size, **bounds)
        print(f"predicted weighted accuracy at size {args.size:g}: {float(np.mean(np.asarray(result.value))):.5g}")
        return result
    # a batched pipeline and a reference: one mixture (the best mean over resamples) and the verdict against it
    bounds["reference"] = _floats(args.reference, "reference")
    result = optimal_mixture(fitted, pipeline.n_datasets, key=key, model_size=args.size, robust="mean", **bounds)
    decision = result.decision
    assert decision is not None  # a batched pipeline, `robust` and a reference always give one
    print(
        f"predicted weighted accuracy at size {args.size:g}: {decision.value:.5g} "
        f"[{decision.value_low:.5g}, {decision.value_high:.5g}] ({decision.level:.0%}, mean over resamples maximized)"
    )
    print(decision.line())
    return result


def _benchmark_weights(saved: Any, args: argparse.Namespace) -> dict[str, float]:
    """--weights name=w,... or the named --objective, restricted to the pipeline's benchmarks."""
    from ._pipeline import OBJECTIVES

    if args.objective and args.weights:
        raise UserError("give --objective or --weights, not both")
    if args.weights:
        weights = {}
        for item in args.weights.split(","):
            name, _, value = item.partition("=")
            try:
                weights[name.strip()] = float(value)
            except ValueError:
                raise UserError(f"--weights must be name=number pairs; got {item!r}") from None
        unknown = sorted(set(weights) - set(saved.loss_laws))
        if unknown:
            raise UserError(
                f"--weights names unknown benchmark(s) {unknown}; the pipeline has {sorted(saved.loss_laws)}"
            )
        return weights
    name = args.objective or "balanced"
    if name not in OBJECTIVES:
        raise UserError(f"unknown objective {name!r}; choose one of {sorted(OBJECTIVES)}")
    weights = {b: w for b, w in OBJECTIVES[name].items() if b in saved.loss_laws}
    left_out = sorted(set(OBJECTIVES[name]) - set(weights))
    if not weights:
        raise UserError(f"the pipeline has none of the {name} objective's benchmarks; use --weights")
    if left_out:
        print(f"note: the pipeline has no law for {left_out}; the {name} objective uses the others")
    return weights


def _design(args: argparse.Namespace) -> None:
    import jax
    import pandas as pd

    from ._design import STRATEGIES, perturbed_mixtures, sample_design
    from ._simulate import paper_active_params

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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
