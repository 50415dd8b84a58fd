"""`camel-jax fit runs.csv`: fit a registered law (or the `auto` choice) to a CSV; write JSON with intervals, the
fit's .npz and a figure, all or none."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..laws._camel import CAPACITY_EXPONENT
from ..laws._registry import LAW_NAMES, LAWS, law_entry
from ._common import UserError, _best_starts, _check_destination, _read_csv, _write_outputs

# The candidates of `--law auto`, chosen by held-out error at the largest size (camel-data* need a tokens column).
AUTO_LAWS = ("camel-tied", "camel-free", "sodm-additive", "camel-data-free", "camel-data-tied")
# What `--law` takes: every registered name and alias (the same law as everywhere in camel-jax), or auto.
LAW_CHOICES = (*LAW_NAMES, "auto")


def add_parser(sub: Any) -> None:
    fit = sub.add_parser("fit", help="fit a law to a CSV of runs; write JSON (with intervals), .npz and a figure")
    fit.add_argument("csv", help="the runs table")
    auto = f"auto (default): the lowest held-out error at the largest size among {', '.join(AUTO_LAWS)}"
    fit.add_argument("--law", choices=LAW_CHOICES, default="auto", help=f"the law (camel = camel-tied, camel-data = "
                     f"camel-data-tied, sodm = sodm-additive); {auto}")  # fmt: skip
    fit.add_argument("--mixture", help="comma-separated mixture columns (default: every column starting with r_)")
    fit.add_argument("--size", help="model-size column (default: 'size' if present)")
    fit.add_argument("--tokens", help="tokens column (default: 'tokens' if present and the law uses it)")
    fit.add_argument("--target", default="loss", help="loss column (default 'loss')")
    fit.add_argument("--domains", type=int, default=3, help="CAMEL/DML intrinsic domains k (default 3)")
    fit.add_argument("--capacity-exponent", type=float, default=CAPACITY_EXPONENT,
                     help="tied CAMEL: capacity ~ M^c (default 3, the paper's scale index)")
    fit.add_argument("--restarts", type=int, default=32)
    fit.add_argument("--resamples", type=int, default=200, help="bootstrap resamples for the intervals (0: none)")
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--out", default="camel-fit", help="output prefix (default camel-fit: .json, .npz, .png)")
    fit.add_argument("--influence", action="store_true", help="also print which runs move the prediction at the "
                     "largest trained size most (approximate leave-one-run-out, one Hessian, no refits)")  # fmt: skip


def _law_template(args: argparse.Namespace, table: _Table):
    """A template of the registered law `args.law` for the columns of `table` (reference scales: their geometric
    means; `fit` sets the final units from the data)."""
    import jax

    from ..laws import law_template

    return law_template(
        args.law,
        jax.random.key(args.seed),
        n_datasets=len(table.mixture),
        n_domains=args.domains,
        capacity_exponent=args.capacity_exponent,
        size_scale=table.scale(table.size),
        tokens_scale=table.scale(table.tokens),
        tokens=table.tokens is not None,
    )


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
    from ..fitting._io import MixtureData, positive_columns

    entry = law_entry(args.law)
    uses_mixture, uses_size = entry.mixture, entry.size
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
    if tokens is None and "tokens" in df.columns and entry.tokens != "never":
        tokens = "tokens"
    if (entry.tokens == "required" or entry.name.startswith("camel-data")) and tokens is None:
        raise UserError(f"the {args.law} law needs a tokens column: --tokens")
    if args.target not in df.columns:
        raise UserError(f"column {args.target!r} not found (--target); available columns: {list(df.columns)}")
    if not uses_size:
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


def run(args: argparse.Namespace) -> None:
    import jax

    from ..fitting._fit import fit
    from ..io._save import save_to
    from ..solver._checks import check_several_mixtures
    from ..solver._options import Status

    if args.restarts < 1:
        raise UserError(f"--restarts must be >= 1; got {args.restarts}")
    if args.resamples < 0:
        raise UserError(f"--resamples must be >= 0 (0: no intervals); got {args.resamples}")
    prefix = Path(args.out)
    _check_destination(prefix, (".json", ".npz", ".png"))
    df = _read_csv(args.csv)
    if args.law == "auto":
        args = _choose_law(args, df)
    args = argparse.Namespace(**(vars(args) | {"law": law_entry(args.law).name}))  # an alias: its registered name
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
        "law_name": args.law,
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
    _log_limit(result, boot, out)
    _write_outputs(
        {
            Path(f"{prefix}.json"): lambda f: f.write(json.dumps(out, indent=2).encode()),
            Path(f"{prefix}.npz"): lambda f: save_to(result, f),
            Path(f"{prefix}.png"): lambda f: fig.savefig(f, format="png", dpi=130, bbox_inches="tight"),
        }
    )
    _print_fit(out, boot)
    if args.influence:
        _print_influence(result, table)
    print(f"wrote {prefix}.json, {prefix}.npz, {prefix}.png")


def _choose_law(args: argparse.Namespace, df: Any) -> argparse.Namespace:
    """`--law auto` (the default): every `AUTO_LAWS` candidate the table can feed, fitted below the largest size
    and scored there (`select_law`); prints the ranking and returns `args` with the winner. With fewer than 4
    sizes (3 to train on, 1 to score) it fits tied CAMEL, as before `auto` existed."""
    import jax

    from ..experiments._select import select_law, simplest_within
    from ..laws._base import n_free_parameters

    size = args.size or "size"
    if size not in df.columns or df[size].nunique() < 4:  # below 3 training sizes, a held-out score says little
        print("--law auto: fewer than 4 model sizes, too few to hold one out: fitting camel-tied")
        return argparse.Namespace(**(vars(args) | {"law": "camel-tied"}))
    tokens = args.tokens or ("tokens" if "tokens" in df.columns else None)
    names = [name for name in AUTO_LAWS if tokens is not None or LAWS[name].tokens == "never"]
    base = _fit_columns(argparse.Namespace(**(vars(args) | {"law": "camel-data-tied" if tokens else "camel-tied"})), df)
    laws = {name: _law_template(argparse.Namespace(**(vars(args) | {"law": name})), base) for name in names}
    _warn_collinear(base)
    try:
        best, table = select_law(laws, base.data, key=jax.random.key(args.seed), restarts=min(args.restarts, 16))
    except ValueError as error:
        raise UserError(f"--law auto: {error}") from None
    ranks = table.groupby("law", sort=False)["rank"].first().sort_values()
    mean = table.groupby("law", sort=False)["error"].mean()[ranks.index]
    finished = table.groupby("law", sort=False)["converged"].all()[ranks.index]
    held_out = ", ".join(f"{s:.4g}" for s in sorted(table["test_size"].unique()))
    print(f"--law auto: held-out MAPE at size {held_out}: " + ", ".join(
        f"{n} {e:.3f}%" + ("" if finished[n] else " (unconverged)") for n, e in mean.items()))  # fmt: skip
    if not finished.all() and finished.any():
        print(f"--law auto: {', '.join(finished.index[~finished])}: the best start of a held-out fit did not converge, "
              "so its error is not the law's; ranked after the laws whose fits converged")  # fmt: skip
    # the one-standard-error rule among the laws whose fits converged (all of them when none did)
    eligible = mean[finished] if finished[best] else mean
    se = float(table.loc[table["law"] == best, "error_se"].mean())
    winner = simplest_within(eligible.to_dict(), {name: n_free_parameters(law) for name, law in laws.items()}, best, se)
    if winner != best:
        print(
            f"--law auto: {winner} ({mean[winner]:.3f}%) is within one standard error ({se:.3f}%, over the held-out "
            f"runs) of {best} ({mean[best]:.3f}%): the difference is noise, so the simpler law "
            f"({n_free_parameters(laws[winner])} vs {n_free_parameters(laws[best])} free parameters) is fitted"
        )
    print(f"--law auto: fitting {winner} on every run")
    return argparse.Namespace(**(vars(args) | {"law": winner, "collinearity_said": True}))


def _warn_collinear(table: _Table) -> None:
    """Say so when the tokens column is (nearly) a function of the size column."""
    from ..solver._checks import COLLINEAR, log_correlation

    if table.tokens is None or table.size is None:
        return
    size = table.inputs[table.inputs_index(table.size)]
    corr = log_correlation(size, table.inputs[table.inputs_index(table.tokens)])
    if abs(corr) > COLLINEAR:
        print(
            f"warning: tokens and size are collinear in this table (correlation of their logs {corr:.4f}): a law "
            "of both cannot separate their effects; predictions off that line (other tokens per parameter) are not "
            "supported by these data"
        )


def _intervals(args: argparse.Namespace, result: Any, table: _Table, key: Any, out: dict[str, Any]) -> Any:
    """Bootstrap intervals (warm-started from the 4 best starts) into `out`; None with --resamples 0."""

    from ..fitting._bootstrap import bootstrap

    if args.resamples == 0:
        return None
    warm = _best_starts(result)
    boot = bootstrap(result.law, table.inputs, table.y, key=key, n_resamples=args.resamples, inits=warm, progress=True,
                     options=result.fit_options)
    out["intervals_95"] = {
        k: [np.asarray(lo).tolist(), np.asarray(hi).tolist()] for k, (lo, hi) in boot.interval(0.95).items()
    }
    out["bootstrap_resamples"] = boot.n_resamples  # fewer than asked if Ctrl-C stopped the bootstrap
    out["outside_interval"] = _outside(out["params"], out["intervals_95"])
    return boot


def _fit_figure(table: _Table, result: Any, boot: Any, law_name: str, target: str) -> Any:
    """Loss against size per mixture (laws of mixture and size), else predicted against observed."""
    from .. import plot
    from ..fitting._io import MixtureData

    if table.data is None or table.size is None:
        return plot.predicted_vs_observed(table.y, result.predict(*table.inputs), title=f"{law_name} fit", label=target)
    data = table.data
    groups = np.unique(np.round(np.asarray(data.r), 9), axis=0, return_inverse=True)[1].ravel()
    with_groups = MixtureData(r=data.r, y=data.y, size=data.size, tokens=data.tokens, group=groups)
    if data.tokens is None:
        return plot.loss_vs_size(with_groups, result.law, bootstrap=boot)
    return plot.loss_vs_size(with_groups, _token_path(result.law, data), bootstrap=None)


def _log_limit(result: Any, boot: Any, out: dict[str, Any]) -> None:
    """For a CAMEL fit with terms in the log-law limit (beta_i = 0 to working precision), where the paper's C and
    K_i are infinite and their printed values are where the coordinates stopped: the law's finite coordinates
    (`log_limit_params`), with their bootstrap intervals and what the data leave free, into `out["log_limit"]`."""
    law = result.law
    if not hasattr(law, "log_limit_terms") or result.n_targets is not None:
        return
    terms = np.asarray(law.log_limit_terms())
    if not terms.any():
        return
    coordinates = type(law).log_limit_params
    finite = {k: np.asarray(v) for k, v in law.log_limit_params().items()}
    finite["kappa"] = np.where(terms, 0.0, finite["kappa"])  # 1 / K_i: zero at the limit (a boundary, not a guess)
    at_boundary = {f"kappa[{i}]" for i in np.flatnonzero(terms)}
    free = [name for name in result.identifiability(coordinates=coordinates).not_identified if name not in at_boundary]
    limit: dict[str, Any] = {
        "terms": np.flatnonzero(terms).tolist(),
        "params": {k: v.tolist() for k, v in finite.items()},
        "not_identified": free,
    }
    if boot is not None:
        limit["intervals_95"] = {
            k: [np.asarray(lo).tolist(), np.asarray(hi).tolist()]
            for k, (lo, hi) in boot.interval(0.95, coordinates=coordinates).items()
            if k != "reference_size"
        }
        outside = _outside({k: v for k, v in limit["params"].items() if k != "reference_size"}, limit["intervals_95"])
        limit["outside_interval"] = [name for name in outside if name not in at_boundary]
    out["log_limit"] = limit


def _print_fit(out: dict[str, Any], boot: Any) -> None:
    s = out["summary"]
    print(
        f"{out['law_name']} ({out['law']}): objective {float(s['objective']):.4g}, R^2 {float(s['r2']):.5f}, "
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
    from ..fitting._identify import element_names

    names = []
    for name, value in params.items():
        low, high = (np.asarray(v, dtype=float) for v in intervals[name])
        point = np.asarray(value, dtype=float)
        outside = ~((low <= point) & (point <= high))
        names += [n for n, o in zip(element_names(name, value), np.ravel(outside)) if o]
    return names


def _print_params(out: dict[str, Any]) -> None:
    """Each parameter with its 95% interval; elements the data do not determine are said to be so. Terms in the
    log-law limit are printed as such (K infinite, C minus infinite), followed by the finite coordinates."""
    limit = out.get("log_limit")
    params, intervals, free = out["params"], out.get("intervals_95", {}), set(out["summary"]["not_identified"])
    if limit is not None:
        terms = limit["terms"]
        print(
            f"  terms {terms} are in the law's log-law limit (beta_i = 0 to working precision): each is "
            "-[b_i log(M / M0) + a_i log <t_i, r>], a form in which the paper's K_i are infinite and C minus "
            "infinite; printed as such below, with the law's finite coordinates (L = C1 + the terms) after them"
        )
        params = dict(params)
        at_limit = np.isin(np.arange(len(params["K"])), terms)
        params["K"] = np.where(at_limit, np.inf, params["K"])
        params["beta"] = np.where(at_limit, 0.0, params["beta"])
        params["alpha"] = np.where(at_limit, 0.0, params["alpha"])
        params["C"] = -np.inf
        infinite = {"C", *(f"{n}[{i}]" for n in ("K", "alpha", "beta") for i in terms)}
        intervals = {k: v for k, v in intervals.items() if k not in ("C", "K", "alpha", "beta")}
        free -= infinite
    _print_block(params, intervals, free)
    if limit is not None:
        print(f"  finite coordinates (reference size M0 = {limit['params']['reference_size']:.4g}):")
        finite = {k: v for k, v in limit["params"].items() if k != "reference_size"}
        _print_block(finite, limit.get("intervals_95", {}), set(limit["not_identified"]))
    outside = out.get("outside_interval", []) if limit is None else limit.get("outside_interval", [])
    if outside:
        print(f"  warning: point estimate outside its own interval for {', '.join(outside)}")


def _print_block(params: dict[str, Any], intervals: dict[str, Any], free: set[str]) -> None:
    """One line per parameter: its value, its 95% interval when there is one, the elements the data leave free."""
    from ..fitting._identify import element_names

    def show(value):
        return np.array2string(np.asarray(value), precision=4, separator=", ")

    for name, value in params.items():
        interval = intervals.get(name)
        text = show(value) + (f"  95% [{show(interval[0])}, {show(interval[1])}]" if interval is not None else "")
        loose = [n for n in element_names(name, value) if n in free]
        if loose:
            text += f"  (not identified by these data: {', '.join(loose)})"
        print(f"  {name}: {text}")


def _token_path(law: Any, data: Any):
    """A token-aware law drawn against size along the table's own tokens-for-size line (log tokens regressed on
    log size), so the curves pass through the runs (for the figure only)."""
    import jax.numpy as jnp

    log_size, log_tokens = np.log(np.asarray(data.size)), np.log(np.asarray(data.tokens))
    slope = np.polyfit(log_size, log_tokens, 1)[0] if np.ptp(log_size) > 0 else 0.0
    intercept = float(np.mean(log_tokens - slope * log_size))
    return lambda r, size: law(r, size, jnp.exp(intercept + slope * jnp.log(size)))


def _print_influence(result: Any, table: _Table) -> None:
    """The influence section: the runs whose removal moves the prediction most, at the largest trained size and
    the runs' mean mixture (a law of the mixture) or at the largest size (a law of size alone)."""
    from ..fitting._influence import influence
    from ..mixture._pick_influence import influence_text

    if np.ndim(result.y) != 1:
        print("influence of each run: not computed for a fit of several targets")
        return
    inputs = [np.asarray(x) for x in result.inputs]
    last = int(np.argmax(inputs[table.inputs_index(table.size)])) if table.size is not None else 0
    at = tuple(x[last : last + 1] for x in inputs)
    if table.mixture:
        at = (np.mean(inputs[0], axis=0, keepdims=True), *at[1:])
    print(influence_text(influence(result, at), runs=[f"row {i}" for i in range(len(result.y))]))
