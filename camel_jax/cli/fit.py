"""`camel-jax fit runs.csv`: fit a registered law (or the `auto` choice) to a CSV; write JSON with intervals, the
fit's .npz and a figure, all or none."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import (
    UserError,
    _best_starts,
    _check_destination,
    _read_csv,
    _write_outputs,
    add_reader_flags,
    json_text,
    read_table,
    reader_options,
)
from ._names import CAPACITY_EXPONENT, LAW_NAMES, DeferredModule  # the laws (and JAX): imported when work starts

if TYPE_CHECKING:
    import numpy as np
else:
    np = DeferredModule("numpy")  # imported when work starts: `--help` stays fast


def law_entry(name: str) -> Any:
    """The registry's entry of a law name (the registry, and JAX, imported when work starts)."""
    from ..laws._registry import law_entry as entry

    return entry(name)

# The candidates of `--law auto` on a table of several sizes (with varying tokens, those that read them; without
# tokens, those but camel-data*), chosen by held-out error (see `_choose_law`).
AUTO_LAWS = ("camel-tied", "camel-free", "sodm-additive", "camel-data-free", "camel-data-tied", "log-linear-size")
# What `--law` takes: every registered name and alias (the same law as everywhere in camel-jax), or auto.
LAW_CHOICES = (*LAW_NAMES, "auto")


def add_parser(sub: Any) -> None:
    fit = sub.add_parser("fit", help="fit a law to a CSV of runs; write JSON (with intervals), .npz and a figure")
    fit.add_argument("csv", nargs="+", help="the runs table (a CSV, wide or long; or the pair of files of --format "
                     "olmix/regmix, or a folder)")  # fmt: skip
    auto = (f"auto (default): the lowest held-out error at the largest size among {', '.join(AUTO_LAWS)}; on a "
            f"table of one size, over a quarter of the mixtures among {', '.join(AUTO_MIXTURE_LAWS)}")
    fit.add_argument("--law", choices=LAW_CHOICES, default="auto", help=f"the law (camel = camel-tied, camel-data = "
                     f"camel-data-tied, sodm = sodm-additive); {auto}")  # fmt: skip
    add_reader_flags(fit)
    fit.add_argument("--n-domains", type=int, default=3, help="CAMEL/DML intrinsic domains k (default 3)")
    fit.add_argument("--domains", type=int, default=None, help=argparse.SUPPRESS)  # renamed: a one-line error
    fit.add_argument("--capacity-exponent", type=float, default=CAPACITY_EXPONENT,
                     help="tied CAMEL: capacity ~ M^c (default 3, the paper's scale index)")
    fit.add_argument("--beta-max", type=float, default=None, help="bound the capacity exponents beta_i of "
                     "camel and camel-data (default: unbounded); a beta at the bound is reported as such")  # fmt: skip
    fit.add_argument("--restarts", type=int, default=32)
    fit.add_argument("--max-steps", type=int, default=None, help="L-BFGS steps per start (default 1000; "
                     "FitOptions.max_steps): raise it when the best start stops at the step cap")  # fmt: skip
    fit.add_argument("--polish", type=int, default=None, help="Newton steps per start after L-BFGS (default: the "
                     "law's, 300 or 1000; FitOptions.polish)")  # fmt: skip
    fit.add_argument("--resamples", type=int, default=200, help="bootstrap resamples for the intervals (0: none)")
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--out", default="camel-fit", help="output prefix (default camel-fit: .json, .npz, .png)")
    fit.add_argument("--no-calibrate", dest="calibrate", action="store_false", help="skip the calibration of the "
                     "extrapolation error (held-out largest sizes, refitted with the bootstrap) that widens the "
                     "bands of `predict` and the verdicts of `optimize` past the largest trained size")  # fmt: skip
    fit.add_argument("--influence", action="store_true", help="also print which runs move the prediction at the "
                     "largest trained size most (approximate leave-one-run-out, one Hessian, no refits)")  # fmt: skip


def _fit_options(args: argparse.Namespace, law: Any) -> Any:
    """The `FitOptions` of `--max-steps` and `--polish` for `law` (what is not given stays the law's default); None
    when neither is given, so that each law keeps its own defaults."""
    if getattr(args, "max_steps", None) is None and getattr(args, "polish", None) is None:
        return None
    from ..fitting._fit import resolve_options

    given = {"max_steps": args.max_steps, "polish": args.polish}
    return resolve_options(None, law).replace(**{name: value for name, value in given.items() if value is not None})


def _law_template(args: argparse.Namespace, table: _Table):
    """A template of the registered law `args.law` for the columns of `table` (reference scales: their geometric
    means; `fit` sets the final units from the data)."""
    import jax

    from ..laws import law_template

    return law_template(
        args.law,
        jax.random.key(args.seed),
        n_datasets=len(table.mixture),
        n_domains=args.n_domains,
        capacity_exponent=args.capacity_exponent,
        size_scale=table.scale(table.size),
        tokens_scale=table.scale(table.tokens),
        tokens=table.tokens is not None,
        **({} if getattr(args, "beta_max", None) is None else {"beta_max": args.beta_max}),
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
    weight: Any = None  # [P] or [T, P]: 0 where a target is missing
    targets: tuple[str, ...] = ()

    def scale(self, column: str | None) -> float:
        """The geometric mean of the size or tokens column (a law's reference scale), 1 without the column."""
        if column is None:
            return 1.0
        values = self.inputs[self.inputs_index(column)]
        return float(np.exp(np.mean(np.log(np.asarray(values)))))

    def inputs_index(self, column: str) -> int:
        names = (["__mixture"] if self.mixture else []) + [c for c in (self.size, self.tokens) if c is not None]
        return names.index(column)


def _fit_columns(args: argparse.Namespace, source: Any) -> _Table:
    """The inputs of the law `args.law`, from the runs `read_table` read (a `MixtureData`; a DataFrame for a law
    of size alone); every problem is a one-line `UserError`."""
    from ..data._containers import MixtureData

    entry = law_entry(args.law)
    if not entry.mixture:
        return _size_columns(args, source, entry)
    data: MixtureData = source
    if entry.size and data.size is None:
        raise UserError(f"the {args.law} law needs a model-size column: --size")
    tokens = data.tokens if entry.tokens != "never" else None
    if (entry.tokens == "required" or entry.name.startswith("camel-data")) and tokens is None:
        raise UserError(f"the {args.law} law needs a tokens column: --tokens")
    size = data.size
    if not entry.size:
        _check_one_size(args, data)
        size, tokens = None, None
    data = dataclasses.replace(data, size=size, tokens=tokens if size is not None else None)
    weight = data.weight
    return _Table(data.inputs, data.y, list(data.columns), "size" if size is not None else None,
                  "tokens" if data.tokens is not None else None, data, weight, data.targets)  # fmt: skip


def _size_columns(args: argparse.Namespace, df: Any, entry: Any) -> _Table:
    """A law of size (and tokens) alone, on the table's columns."""
    from ..data._containers import positive_columns

    size = args.size or ("size" if "size" in df.columns else None)
    if size is None:
        raise UserError(f"the {args.law} law needs a model-size column: --size (columns: {list(df.columns)})")
    tokens = args.tokens
    if tokens is None and "tokens" in df.columns and entry.tokens != "never" and not getattr(args, "drop_tokens", 0):
        tokens = "tokens"
    if entry.tokens == "required" and tokens is None:
        raise UserError(f"the {args.law} law needs a tokens column: --tokens")
    target = args.target or "loss"
    if target not in df.columns:
        raise UserError(f"column {target!r} not found (--target); available columns: {list(df.columns)}")
    roles = {"size": size, **({"tokens": tokens} if tokens else {}), "target": target}
    columns = positive_columns(df, roles)
    inputs = tuple(columns[role] for role in ("size", "tokens") if role in columns)
    return _Table(inputs, columns["target"], [], size, tokens, targets=(target,))


def _check_one_size(args: argparse.Namespace, data: Any) -> None:
    if data.size is not None and len(np.unique(np.asarray(data.size))) > 1:
        raise UserError(
            f"the {args.law} law describes one model size, but the table holds {len(np.unique(np.asarray(data.size)))} "
            "sizes: filter the table to one size, or use a law of size and mixture (--law camel-tied)"
        )


def run(args: argparse.Namespace) -> None:
    """`camel-jax fit`, with numpy's floating-point RuntimeWarnings kept out of the output: a fit that runs to a
    limit is reported as degenerate (`FitResult.problems`), not through a warning from inside a reduction."""
    import warnings

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _run(args)


def _check_counts(args: argparse.Namespace) -> None:
    """The counts of starts, resamples and solver steps, each a one-line error before any compute."""
    if args.restarts < 1:
        raise UserError(f"--restarts must be >= 1; got {args.restarts}")
    if args.resamples < 0:
        raise UserError(f"--resamples must be >= 0 (0: no intervals); got {args.resamples}")
    if getattr(args, "max_steps", None) is not None and args.max_steps < 1:
        raise UserError(f"--max-steps must be >= 1; got {args.max_steps}")
    if getattr(args, "polish", None) is not None and args.polish < 0:
        raise UserError(f"--polish must be >= 0 (0: no Newton steps); got {args.polish}")
    beta_max = getattr(args, "beta_max", None)
    if beta_max is not None and not (math.isfinite(beta_max) and beta_max > 0):
        raise UserError(f"--beta-max must be a finite number > 0; got {beta_max}")
    if beta_max is not None and args.law != "auto" and "beta_max" not in law_entry(args.law).takes:
        name = law_entry(args.law).name
        raise UserError(f"--beta-max bounds the capacity exponents of camel and camel-data; {name} has none")


def _run(args: argparse.Namespace) -> None:
    import jax

    from ..data._checks import check_several_mixtures
    from ..fitting._fit import fit
    from ..io._save import save_to
    from ..laws._registry import law_entry

    if getattr(args, "domains", None) is not None:
        raise UserError("--domains is now --n-domains (CAMEL's count of intrinsic domains k); --domain names the "
                        "validation-domain column of a long table")  # fmt: skip
    _check_counts(args)
    prefix = Path(args.out)
    _check_destination(prefix, (".json", ".npz", ".png"))
    # the table is read (and its columns checked) before a law is chosen
    source = _read_runs(args) if args.law == "auto" or law_entry(args.law).mixture else _read_csv(args.csv[0])
    if args.law == "auto":
        args, source = _choose_law(args, source)
    args = argparse.Namespace(**(vars(args) | {"law": law_entry(args.law).name}))  # an alias: its registered name
    table = _fit_columns(args, source)
    if table.data is not None:
        check_several_mixtures(table.data.r, table.data.weight, f"{args.csv}")
    if not getattr(args, "collinearity_said", False):
        _warn_collinear(table)
    template = _law_template(args, table)
    key = jax.random.key(args.seed)
    result = fit(template, table.inputs, table.y, key=key, restarts=args.restarts, weights=table.weight,
                 names=tuple(table.mixture) or None, targets=table.targets or None,
                 options=_fit_options(args, template))  # fmt: skip
    if getattr(args, "auto_ranking", None):  # auto's pick must converge on the whole table, not only held out
        args, table, result = _auto_fallback(args, source, table, result, key)
    out = _report(args, result, table)
    if out["degenerate"]:
        out["degenerate_advice"] = _degenerate_advice(args, table, source)
    try:
        boot = _intervals(args, result, table, key, out)
    except KeyboardInterrupt:  # the fit is done: keep it, without intervals
        print("interrupted during the bootstrap: writing the fit without intervals", file=sys.stderr)
        boot = None
    fig = _fit_figure(table, result, boot, out["law"], ", ".join(table.targets) or "loss")
    _log_limit(result, boot, out)
    _detached(result, boot, out)
    kept = _kept(args, result, boot, table, key, out)
    _write_outputs(
        {
            Path(f"{prefix}.json"): lambda f: f.write(json_text(out).encode()),
            Path(f"{prefix}.npz"): lambda f: save_to(
                kept, f, reader=out["reader"], metadata=_file_metadata(args, table, source)
            ),
            Path(f"{prefix}.png"): lambda f: fig.savefig(f, format="png", dpi=130, bbox_inches="tight"),
        }
    )
    _print_fit(out, boot) if result.n_targets is None else _print_targets(out, boot)
    if args.influence:
        _print_influence(result, table)
    print(f"wrote {prefix}.json, {prefix}.npz, {prefix}.png")


def _report(args: argparse.Namespace, result: Any, table: _Table) -> dict[str, Any]:
    """What `fit` writes to its JSON (and prints from): the law, the columns and reader flags, the parameters, the
    summary, the best start's status (one per target) and the degenerate parameters."""
    from ..solver._options import Status

    best = np.atleast_1d(np.asarray(result.best_status))
    return {
        "law": type(result.law).__name__,
        "law_name": args.law,
        "csv": args.csv[0] if len(args.csv) == 1 else list(args.csv),
        "columns": {"mixture": table.mixture, "size": table.size, "tokens": table.tokens,
                    "target": list(table.targets)},  # fmt: skip
        "targets": list(table.targets),
        "reader": reader_options(args),
        "params": {k: np.asarray(v).tolist() for k, v in result.law.params().items()},
        "summary": {k: v if k == "not_identified" else np.asarray(v).tolist() for k, v in result.summary().items()},
        "best_status": Status(int(best[0])).label if result.n_targets is None else [Status(int(b)).label for b in best],
        "degenerate": _named_degenerate(result, list(table.targets)),
        "at_bound": _named_at_bounds(result, list(table.targets)),
    }


def _named_at_bounds(result: Any, targets: list[str]) -> dict[str, dict[str, Any]]:
    """The parameter elements at the upper bound of their range (`AbstractLaw.at_bounds`: the bound, not an
    estimate), {element (with its target for a fit of several, `"Github: gamma[1]"`): {"bound": "gamma_max",
    "value": 3.0}}."""
    from ..fitting._identify import element_names

    out = {}
    for label, law in zip(_target_prefixes(result, targets), result.target_laws()):
        for name, (field, bound, at) in (law.at_bounds() if hasattr(law, "at_bounds") else {}).items():
            for element, flag in zip(element_names(name, at), np.ravel(at)):
                if flag:
                    out[label + element] = {"bound": field, "value": float(bound)}
    return out


def _named_degenerate(result: Any, targets: list[str]) -> dict[str, str]:
    """`FitResult.degenerate()` with each target named (`"loss_web: K[1]"`); a fit of several targets wrote {} here,
    hiding 18 degenerate targets of 22 on Data Mixing Laws' 5Mix."""
    if result.n_targets is None:
        return result.degenerate()
    found = zip(_target_prefixes(result, targets), result.degenerate_by_target())
    return {label + name: why for label, elements in found for name, why in elements.items()}


def _target_prefixes(result: Any, targets: list[str]) -> list[str]:
    """What names an element of each target in `fit`'s JSON: `"loss_web: "` (`"target t: "` past the names given)
    for a fit of several targets, `""` for the one target of a fit of one."""
    if result.n_targets is None:
        return [""]
    return [f"{targets[t] if t < len(targets) else f'target {t}'}: " for t in range(result.n_targets)]


def _read_runs(args: argparse.Namespace) -> Any:
    """The runs, read by `read_table`; for `--law auto`, a table of token budgets without a size column is refused
    as what it is for the law choice (no registered law reads tokens without a size)."""
    try:
        return read_table(args)
    except UserError as error:
        if args.law != "auto" or not str(error).startswith("`tokens` needs `size` too"):
            raise
        column = args.tokens or "tokens"
        budgets = _read_csv(args.csv[0])[column].nunique()
        raise UserError(
            f"--law auto: one model size and {budgets} token budgets ({column!r}): no registered law reads tokens "
            "without a size; filter the table to one token budget (laws of the mixture) or give the model-size "
            "column (--size)"
        ) from None


def _choose_law(args: argparse.Namespace, data: Any) -> tuple[argparse.Namespace, Any]:
    """`--law auto` (the default): the candidates the table can feed, fitted on part of it and scored on the rest
    by held-out MAPE; one line says what was compared, how it was held out and why the winner won. Returns `args`
    with the winner (and `auto_ranking`, the candidates best first, for the advice on a degenerate fit), and the
    runs (`read_table`'s `MixtureData`) without a tokens column that holds one value.

    What the table holds decides the candidates and the split:

    - a tokens column with one value is said and dropped (a token term is not identified by it);
    - tokens that vary: only laws that read them (a law that ignores a varying column is never a candidate);
    - 4 or more sizes: the largest size held out, each law fitted on the smaller sizes;
    - 2 or 3 sizes: each size's largest token budget held out when the tokens vary, else a quarter of the mixtures;
    - one size: the laws of the mixture alone (`AUTO_MIXTURE_LAWS`: log-linear, DML and CAMEL's law of the mixture,
      camel-mixture), a quarter of the mixtures held out.

    Every split is scored alike (`held_out_rows`): with several targets each candidate is fitted to every target at
    once and ranked by the mean of their held-out MAPEs (the final fit's own form: on RegMix's 13 losses a law
    fitted to their mean ranked otherwise than on the losses themselves), a candidate unconverged or degenerate on
    more than `AUTO_MAX_FAILED_SHARE` of the targets ranked after the others.
    """
    import jax

    from ..laws._registry import LAWS

    key = jax.random.key(args.seed)
    tokens = None if data.tokens is None else np.asarray(data.tokens)
    if tokens is not None and np.unique(tokens).size == 1:
        print(f"--law auto: column {args.tokens or 'tokens'!r} holds one value in every row ({tokens[0]:.4g}): a token "
              "term is not identified by it, so it is dropped and laws without tokens are compared")  # fmt: skip
        data, tokens = dataclasses.replace(data, tokens=None), None
    n_sizes = _n_sizes(data)
    if n_sizes <= 1 and tokens is not None and data.size is not None:  # a size column with one value
        raise UserError(
            f"--law auto: one model size ({args.size or 'size'!r} holds {float(np.asarray(data.size)[0]):.4g} in every "
            f"row) and {np.unique(tokens).size} token budgets: no registered law reads tokens without a size, and one "
            "size says nothing of how the loss changes with size; add runs at a second size, or filter the table to "
            "one token budget (laws of the mixture, at this size only)"
        )
    if n_sizes <= 1 and tokens is not None:
        raise UserError(
            f"--law auto: one model size and {np.unique(tokens).size} token budgets: no registered law reads tokens "
            "without a size; filter the table to one token budget (laws of the mixture) or give the model-size "
            "column (--size)"
        )
    if n_sizes <= 1:
        names = list(AUTO_MIXTURE_LAWS)
    else:
        if tokens is not None:
            names = [n for n in AUTO_LAWS if LAWS[n].tokens != "never"]
        else:
            names = [n for n in AUTO_LAWS if not n.startswith("camel-data")]
    reader = "log-linear" if n_sizes <= 1 else "camel-data-tied" if tokens is not None else "camel-tied"
    every = _fit_columns(argparse.Namespace(**(vars(args) | {"law": reader})), data)
    laws = {name: _law_template(argparse.Namespace(**(vars(args) | {"law": name})), every) for name in names}
    _warn_collinear(every)  # once, here: the final fit does not repeat it (`collinearity_said`)
    test, how = _auto_split(every, tokens is not None, n_sizes, key)
    if n_sizes <= 1 and data.size is not None:  # a size column with one value: the laws of the mixture ignore it
        how += f" ({float(np.asarray(data.size)[0]):.4g}: predictions at this size only)"
    # every target fitted at once, as the final fit will be, and scored by the mean of their held-out MAPEs
    options = {name: _fit_options(args, law) for name, law in laws.items()}
    ranking = _rank_by_rows(laws, every, test, how, key, min(args.restarts, 16), options)
    _say_choice(ranking, laws, how, tokens is not None, n_sizes)
    winner = ranking.attrs["winner"]
    chosen = argparse.Namespace(**(vars(args) | {"law": winner, "collinearity_said": True,
                                                 "auto_ranking": list(ranking.index)}))  # fmt: skip
    return chosen, data


# The candidates of `--law auto` on a table of one model size: laws of the mixture alone. camel-mixture (tied CAMEL
# without its size term) holds out best on 10 of RegMix's 13 losses (a quarter of the 1M runs held out: 0.68-3.73%
# against log-linear's 1.23-4.71%) and ranks RegMix's held-out runs at Spearman 0.969-0.998 (log-linear 0.951-0.987),
# but its fits there often stop at the step cap, and auto then passes over it (docs/studies/10_real_tables.md).
AUTO_MIXTURE_LAWS = ("log-linear", "dml", "camel-mixture")
# With fewer sizes than this `--law auto` holds out a token budget or a quarter of the mixtures, not a size.
AUTO_MIN_SIZES = 4
# The share of the mixtures `--law auto` holds out when it holds out by mixture.
AUTO_MIXTURE_SHARE = 0.25


def _auto_split(base: _Table, tokens: bool, n_sizes: int, key: Any) -> tuple[Any, str]:
    """The rows `--law auto` holds out ([P] booleans) and the words for them: the largest size on a table of
    `AUTO_MIN_SIZES` sizes or more; below that each size's largest token budget when the tokens vary, else a
    quarter of the mixtures (chosen with `key`)."""
    import jax

    data = base.data
    if n_sizes >= AUTO_MIN_SIZES:
        size = np.asarray(data.size)
        test = size == size.max()
        return test, (f"the largest size ({size.max():.4g}) held out, fitted on the smaller sizes ({int(test.sum())} "
                      f"of {test.size} rows)")  # fmt: skip
    if tokens:
        size, budget = np.asarray(data.size), np.asarray(data.tokens)
        test = np.array([budget[i] == budget[size == size[i]].max() for i in range(size.size)])
        return test, f"each size's largest token budget held out ({int(test.sum())} of {test.size} rows)"
    groups = np.unique(np.round(np.asarray(data.r), 9), axis=0, return_inverse=True)[1].ravel()
    n_mix = int(groups.max()) + 1
    chosen = np.asarray(jax.random.permutation(jax.random.fold_in(key, 7919), n_mix))
    chosen = chosen[: max(1, int(round(AUTO_MIXTURE_SHARE * n_mix)))]
    test = np.isin(groups, chosen)
    return test, (f"{chosen.size} of {n_mix} mixtures held out at random ({int(test.sum())} of {test.size} rows)"
                  + (", one model size" if n_sizes <= 1 else f", {n_sizes} sizes"))  # fmt: skip


def _rank_by_rows(
    laws: dict[str, Any], base: _Table, test: Any, how: str, key: Any, restarts: int, options: Any = None
) -> Any:
    """The candidates fitted on the rows outside `test` and scored on those in it (`held_out_rows`, every target
    fitted at once): a frame indexed by law, best first (`error`, `error_se`, `failed_share`, `usable`)."""
    from ..data._checks import size_counts
    from ..experiments._select import held_out_rows, law_data

    data = base.data
    if test.all() or not test.any():
        raise UserError(f"--law auto: cannot hold out part of this table ({how}); name a law with --law")
    if data.n_targets is not None:
        print(f"--law auto: chosen on the mean of the {data.n_targets} targets' held-out MAPEs, every target fitted")
    inputs = {name: law_data(law, data, name).inputs for name, law in laws.items()}
    _, table = held_out_rows(laws, inputs, data.y, test, key=key, restarts=restarts, progress=True,
                             weights=data.weight, options=options)  # fmt: skip
    frame = table.set_index("law")
    # the final fit's own rule: a law is kept when at most AUTO_MAX_FAILED_SHARE of its targets are unconverged or
    # degenerate (one target: converged and not degenerate)
    frame["usable"] = frame["failed_share"] <= AUTO_MAX_FAILED_SHARE
    # a law whose size dependence the table's sizes do not determine (`fit` warns so: fewer distinct sizes than its
    # size parameters) is ranked after those it determines: on 3Mix's 2 sizes sodm-additive (3 parameters) won the
    # split of token budgets and held out at 410M at 6.9%, log-linear-size (1) at 4.2%
    counts = {name: size_counts(laws[name], inputs[name], data.weight) or (1, 0) for name in frame.index}
    frame["sizes"] = [counts[name][0] for name in frame.index]
    frame["size_parameters"] = [counts[name][1] for name in frame.index]
    frame["undetermined"] = frame["size_parameters"] > frame["sizes"]
    frame["usable"] &= ~frame["undetermined"]
    finite = np.isfinite(frame["error"].to_numpy())
    usable = frame["usable"].to_numpy()
    order = sorted(range(len(frame)), key=lambda j: (not finite[j], not usable[j], frame["error"].iloc[j]))
    return frame.iloc[order]


def _n_sizes(data: Any) -> int:
    """The distinct model sizes of a table (1 without a size column)."""
    return 1 if data.size is None else int(np.unique(np.asarray(data.size)).size)


def _say_choice(frame: Any, laws: dict[str, Any], how: str, tokens: bool, n_sizes: int) -> None:
    """The one line of `--law auto`: the candidates' held-out errors, the split, and why the winner won (the lowest
    error, or the simplest law within one standard error of it: the one-standard-error rule among the usable
    fits, whose best start converged). Sets `frame.attrs["winner"]`."""
    from ..experiments._select import simplest_within
    from ..laws._base import n_free_parameters

    best = str(frame.index[0])
    usable = frame[frame["usable"]] if bool(frame["usable"].any()) else frame
    se = float(frame.loc[best, "error_se"])
    sizes = {name: n_free_parameters(law) for name, law in laws.items()}
    winner = simplest_within(usable["error"].to_dict(), sizes, best, se)
    errors = ", ".join(f"{n} {e:.3f}%{_failed_label(frame, n)}" for n, e in frame["error"].items())
    reads = "tokens vary: laws that read them" if tokens else "one size: laws of the mixture" if n_sizes <= 1 else ""
    why = (
        "the lowest held-out error"
        if winner == best
        else f"within one standard error ({se:.3f}%) of {best} and simpler ({sizes[winner]} vs {sizes[best]} free "
        "parameters)"
    )
    print(f"--law auto: held-out MAPE, {how}{'; ' + reads if reads else ''}: {errors}; fitting {winner} on every "
          f"run: {why}")  # fmt: skip
    frame.attrs["winner"] = winner


def _failed_label(frame: Any, name: str) -> str:
    """What `--law auto`'s line says after a candidate's error: nothing for a clean fit; its unconverged or
    degenerate share of the targets where some (but few enough to keep it) are; "(unconverged or degenerate)"
    for a candidate it passes over."""
    share = float(frame.loc[name, "failed_share"]) if "failed_share" in frame else None
    several = share is not None and 0.0 < share < 1.0
    if "undetermined" in frame and frame.loc[name, "undetermined"]:
        return (f" (size dependence not determined: {int(frame.loc[name, 'sizes'])} sizes for "
                f"{int(frame.loc[name, 'size_parameters'])} parameters)")  # fmt: skip
    if frame.loc[name, "usable"]:
        return f" ({share:.0%} of the targets unconverged or degenerate)" if several else ""
    where = f" on {share:.0%} of the targets" if several else ""
    return f" (unconverged or degenerate{where})"


# `--law auto` fits the next candidate of its ranking when the final fit of its pick leaves the best start
# unconverged or degenerate on more than this share of the targets.
AUTO_MAX_FAILED_SHARE = 0.25


def _failed_targets(result: Any) -> tuple[int, int, list[str]]:
    """(the targets whose best start did not meet its stopping rule or is degenerate, the targets, the statuses of
    the unconverged ones): a single-target fit counts as one target."""
    from ..experiments._select import target_failures
    from ..solver._options import Status

    best = np.atleast_1d(np.asarray(result.best_status))
    unconverged, failed, _ = target_failures(result)
    labels = sorted({Status(int(code)).label for code in best[unconverged]})
    return int(failed.sum()), int(best.size), labels


def _auto_fallback(args: argparse.Namespace, source: Any, table: _Table, result: Any,
                   key: Any) -> tuple[argparse.Namespace, _Table, Any]:  # fmt: skip
    """`--law auto`'s pick, fitted on every run, with the best start unconverged or degenerate on more than
    `AUTO_MAX_FAILED_SHARE` of the targets: the next candidates of auto's held-out ranking are fitted in turn (until
    one is within the share) and the one with the fewest such targets is kept (the pick on a tie). One line says
    why each is fitted and one which is kept; when none does better, the pick stays and its `problems()` say so.
    Returns (args with the law kept, its table, its fit)."""
    from ..data._checks import check_several_mixtures
    from ..fitting._fit import fit

    failed, n, labels = _failed_targets(result)
    if failed <= AUTO_MAX_FAILED_SHARE * n:
        return args, table, result
    pick, best = args.law, (failed, args, table, result)
    what = f"target{'s' if n > 1 else ''}"
    for name in [x for x in args.auto_ranking if law_entry(x).name != pick]:
        status = f"unconverged ({', '.join(labels)}) or degenerate" if labels else "degenerate"
        print(f"--law auto: {best[1].law}'s best start is {status} on {best[0]} of {n} {what} (more than "
              f"{AUTO_MAX_FAILED_SHARE:.0%}); fitting {name}, the next by held-out error")  # fmt: skip
        other = argparse.Namespace(**(vars(args) | {"law": law_entry(name).name}))
        try:
            other_table = _fit_columns(other, source)
            if other_table.data is not None:
                check_several_mixtures(other_table.data.r, other_table.data.weight, f"{args.csv}")
            template = _law_template(other, other_table)
        except (UserError, ValueError) as error:  # a candidate this table cannot feed in full
            print(f"--law auto: {name} cannot be fitted on every run ({error}); skipping it")
            continue
        fitted = fit(template, other_table.inputs, other_table.y, key=key, restarts=args.restarts,
                     weights=other_table.weight, names=tuple(other_table.mixture) or None,
                     targets=other_table.targets or None, options=_fit_options(other, template))  # fmt: skip
        count, _, other_labels = _failed_targets(fitted)
        if count < best[0]:
            best, labels = (count, other, other_table, fitted), other_labels
        if best[0] <= AUTO_MAX_FAILED_SHARE * n:
            break
    if best[1].law == pick:
        print(f"--law auto: no other candidate does better; keeping {pick} ({failed} of {n} {what} unconverged or "
              "degenerate: see the problems below)")  # fmt: skip
    else:
        print(f"--law auto: fitting {best[1].law}: {best[0]} of {n} {what} unconverged or degenerate, against "
              f"{failed} for {pick}")  # fmt: skip
    return best[1], best[2], best[3]


def _degenerate_advice(args: argparse.Namespace, table: _Table, source: Any) -> str:
    """What to fit instead of a degenerate fit: a token-aware law when the table's tokens vary and this law ignores
    them, else the next law of `--law auto`'s held-out ranking (when auto ran), else `--law auto` itself."""
    tokens = getattr(source, "tokens", None)
    budgets = 0 if tokens is None else int(np.unique(np.asarray(tokens)).size)
    if table.tokens is None and budgets > 1:
        return (
            f"the tokens vary in this table ({budgets} values) and {args.law} ignores them: fit a "
            "token-aware law (--law sodm-additive or --law camel-data-free)"
        )
    ranking = [name for name in getattr(args, "auto_ranking", ()) if name != args.law]
    if ranking:
        return f"fit --law {ranking[0]}, the next best of --law auto's held-out ranking"
    return "fit --law auto, which ranks the laws that can read this table by held-out error"


def _warn_collinear(table: _Table) -> None:
    """Say so when the tokens column is (nearly) a function of the size column."""
    from ..data._checks import COLLINEAR, log_correlation

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
    """Bootstrap intervals (warm-started from the 4 best starts of each target) into `out`; None with
    --resamples 0."""

    from ..fitting._bootstrap import bootstrap
    from ..fitting._degenerate import in_limits

    if args.resamples == 0:
        return None
    warm = _best_starts(result)
    groups = None if table.data is None else table.data.group  # checkpoints of one run: resampled together
    law = result.target_laws()[0]  # a template
    boot = bootstrap(law, table.inputs, table.y, key=key, n_resamples=args.resamples, inits=warm, progress=True,
                     weights=table.weight, groups=groups, names=result.names, targets=result.targets,
                     options=result.fit_options)  # fmt: skip
    out["intervals_95"] = {
        k: [np.asarray(lo).tolist(), np.asarray(hi).tolist()] for k, (lo, hi) in boot.interval(0.95).items()
    }
    out["bootstrap_resamples"] = boot.n_resamples  # fewer than asked if Ctrl-C stopped the bootstrap
    out["outside_interval"] = _outside(out["params"], out["intervals_95"]) if result.n_targets is None else []
    degenerate = dataclasses.replace(result, bootstrap=boot).degenerate_resamples()  # [B] or [B, T]
    out["bootstrap_degenerate"] = int(degenerate.sum())  # resampled laws that are limits, not estimates
    if result.n_targets is None:  # resampled laws with a term in a limit: their intervals' ends are that limit
        out["bootstrap_at_limits"] = int(in_limits(boot.laws).sum())
    return boot


def _kept(args: argparse.Namespace, result: Any, boot: Any, table: _Table, key: Any, out: dict[str, Any]) -> Any:
    """The fit as its file keeps it: with its bootstrap (so that `predict` and `optimize` give its bands without
    refitting) and, for a law of size fitted on 3 sizes or more, the calibration of its extrapolation error past the
    largest trained size (2 folds of min(--resamples, 16) resamples; `--no-calibrate` skips it)."""
    import jax

    from ..fitting._calibrate import calibrate

    if boot is None:
        return result
    calibration = None
    sizes = 0 if table.size is None else len(np.unique(np.asarray(table.inputs[table.inputs_index(table.size)])))
    if getattr(args, "calibrate", True) and sizes >= 3 and table.mixture:
        # a template law, warm-started from the fit's law (batched over the targets of a fit of several), with the
        # checkpoints of one run resampled together, as the bootstrap is
        law = result.target_laws()[0]
        groups = None if table.data is None else table.data.group
        try:
            calibration = calibrate(law, table.inputs, table.y, key=jax.random.fold_in(key, 11),
                                    n_resamples=max(2, min(boot.n_resamples, 16)), inits=result.law,
                                    weights=result.weights, groups=groups, options=result.fit_options,
                                    progress=True)  # fmt: skip
            out["calibration"] = calibration.summary()
            print(f"  extrapolation error: {calibration.summary()}")
        except (ValueError, KeyboardInterrupt) as error:
            print(f"note: the extrapolation error was not calibrated ({str(error) or 'interrupted'}): bands past the "
                  "largest trained size are the bootstrap's alone")  # fmt: skip
    return dataclasses.replace(result, bootstrap=boot, calibration=calibration)


def _file_metadata(args: argparse.Namespace, table: _Table, source: Any = None) -> dict[str, Any]:
    """What the fit's file records beside the fit: the columns it was read from (`predict` reads rows by them), the
    law's registered name and the distinct model sizes it was fitted on."""
    from ..fitting._fit import is_mixture_data

    columns = {"mixture": table.mixture, "size": table.size, "tokens": table.tokens, "target": args.target}
    out = {"columns": columns, "law_name": args.law, "csv": str(args.csv)}
    # the runs as read: the table of a law of the mixture has dropped the size column
    read = source if is_mixture_data(source) else table.data
    size = read.size if is_mixture_data(read) else None
    if size is not None:  # a law that reads no size predicts at these only (`predict` refuses other sizes)
        out["trained_sizes"] = [float(s) for s in np.unique(np.asarray(size, dtype=float))]
    return out


def _fit_figure(table: _Table, result: Any, boot: Any, law_name: str, target: str) -> Any:
    """Loss against size per mixture (laws of mixture and size), else predicted against observed."""
    from .. import plot
    from ..data._containers import MixtureData

    if table.data is not None and table.data.n_targets is not None:  # every target's points, pooled
        used = np.asarray(table.weight) > 0
        predicted = np.asarray(result.predict(*table.inputs))
        return plot.predicted_vs_observed(np.asarray(table.y)[used], predicted[used], label="loss",
                                          title=f"{law_name} fit, {table.data.n_targets} targets")  # fmt: skip
    if table.data is None or table.size is None:
        return plot.predicted_vs_observed(table.y, result.predict(*table.inputs), title=f"{law_name} fit", label=target)
    data = table.data
    groups = np.unique(np.round(np.asarray(data.r), 9), axis=0, return_inverse=True)[1].ravel()
    with_groups = MixtureData(r=data.r, y=data.y, size=data.size, tokens=data.tokens, group=groups)
    labels = _mixture_labels(np.asarray(data.r), groups, table.mixture)
    extend = FIGURE_EXTEND * float(np.max(np.asarray(data.size)))
    if data.tokens is None:
        return plot.loss_vs_size(with_groups, result.law, bootstrap=boot, labels=labels, extend_to=extend)
    return plot.loss_vs_size(with_groups, _token_path(result.law, data), bootstrap=None, labels=labels,
                             extend_to=extend)  # fmt: skip


# The fit's figure draws each curve (and band) to this many times the largest trained size: the extrapolation.
FIGURE_EXTEND = 4.0


def _mixture_labels(r: np.ndarray, groups: np.ndarray, names: list[str], shown: int = 6, shares: int = 3) -> list[str]:
    """The legend of the fit's figure: each drawn mixture (the first `shown` groups) by its largest shares, by
    name ("r_web 0.60, r_code 0.25, r_books 0.15")."""
    labels = []
    for g in np.unique(groups)[:shown]:
        row = r[groups == g][0]
        top = np.argsort(-row)[:shares]
        labels.append(", ".join(f"{names[j]} {row[j]:.2f}" for j in top if row[j] > 0))
    return labels


def _log_limit(result: Any, boot: Any, out: dict[str, Any]) -> None:
    """For a fit with terms in the log-law limit (CAMEL's beta_i, camel-mixture's alpha_i, CAMELData's beta_i or
    gamma_i = 0 to working precision), where the paper's C and K_i (G_i) are infinite and their printed values are
    where the coordinates stopped: the law's finite coordinates (`log_limit_params`), with their bootstrap intervals
    and what the data leave free, into `out["log_limit"]`: "terms" (capacity terms) and, for CAMELData,
    "data_terms", each a list, or {target: list} for a fit of several targets (whose per-target identifiability is
    not computed)."""
    law = result.law
    if not hasattr(law, "log_limit_terms"):
        return
    terms = np.asarray(law.log_limit_terms())
    data = np.asarray(law.log_limit_data_terms()) if hasattr(law, "log_limit_data_terms") else np.zeros_like(terms)
    if not (terms.any() or data.any()):
        return
    coordinates = type(law).log_limit_params
    finite = {k: np.asarray(v) for k, v in law.log_limit_params().items()}
    finite["kappa"] = np.where(terms, 0.0, finite["kappa"])  # 1 / K_i: zero at the limit (a boundary, not a guess)
    if "nu" in finite:
        finite["nu"] = np.where(data, 0.0, finite["nu"])  # 1 / G_i, likewise
    named: dict[str, Any]
    if result.n_targets is None:
        named = {"terms": np.flatnonzero(terms).tolist(), "data_terms": np.flatnonzero(data).tolist()}
    else:
        named = {kind: {name: np.flatnonzero(row).tolist() for name, row in zip(out["targets"], rows) if row.any()}
                 for kind, rows in (("terms", terms), ("data_terms", data))}  # fmt: skip
    if not hasattr(law, "log_limit_data_terms"):
        del named["data_terms"]
    limit: dict[str, Any] = named | {"params": {k: v.tolist() for k, v in finite.items()}}
    # (one target) 1 / K_i, 1 / G_i of the terms in the limit: 0, a boundary, whose identifiability means nothing
    at_boundary = {f"kappa[{i}]" for i in np.flatnonzero(terms)} | {f"nu[{i}]" for i in np.flatnonzero(data)}
    if result.n_targets is None:
        free = result.identifiability(coordinates=coordinates).not_identified
        limit["not_identified"] = [name for name in free if name not in at_boundary]
    if boot is not None:
        limit["intervals_95"] = {
            k: [np.asarray(lo).tolist(), np.asarray(hi).tolist()]
            for k, (lo, hi) in boot.interval(0.95, coordinates=coordinates).items()
            if not k.startswith("reference_")
        }
        if result.n_targets is None:
            shown = {k: v for k, v in limit["params"].items() if not k.startswith("reference_")}
            limit["outside_interval"] = [name for name in _outside(shown, limit["intervals_95"])
                                         if name not in at_boundary]  # fmt: skip
    out["log_limit"] = limit


def _detached(result: Any, boot: Any, out: dict[str, Any]) -> None:
    """For a camel-mixture fit with detached terms (share s_i = 0 to working precision, `detached_terms`), where
    the paper's K_i and row t_i are 0 and their printed values (~1e-17) are where the coordinates stopped: the
    finite coordinates of every term (`detached_params`: Kt, alpha, profile, D), with their bootstrap intervals,
    into `out["detached"]`, whose "terms" name the detached ones: a list, or {target: list} for a fit of several
    targets (whose per-target identifiability is not computed)."""
    law = result.law
    if not hasattr(law, "detached_terms"):
        return
    terms = np.asarray(law.detached_terms())
    if not terms.any():
        return
    coordinates = type(law).detached_params
    detached: dict[str, Any] = {"params": {k: np.asarray(v).tolist() for k, v in law.detached_params().items()}}
    if result.n_targets is None:
        detached["terms"] = np.flatnonzero(terms).tolist()
        detached["not_identified"] = list(result.identifiability(coordinates=coordinates).not_identified)
    else:
        rows = zip(out["targets"], terms)
        detached["terms"] = {name: np.flatnonzero(row).tolist() for name, row in rows if row.any()}
    if boot is not None:
        detached["intervals_95"] = {
            k: [np.asarray(lo).tolist(), np.asarray(hi).tolist()]
            for k, (lo, hi) in boot.interval(0.95, coordinates=coordinates).items()
        }
        if result.n_targets is None:
            detached["outside_interval"] = _outside(detached["params"], detached["intervals_95"])
    out["detached"] = detached


def _print_fit(out: dict[str, Any], boot: Any) -> None:
    s = out["summary"]
    print(
        f"{out['law_name']} ({out['law']}): objective {float(s['objective']):.4g}, R^2 {float(s['r2']):.5f}, "
        f"MAPE {float(s['mape_percent']):.3f}%, {int(s['n_converged'])}/{s['n_starts']} starts converged, "
        f"best start: {out['best_status']}"
    )
    if boot is not None:
        print(f"  bootstrap: {int(np.sum(np.asarray(boot.converged)))}/{boot.n_resamples} resamples converged")
        _say_degenerate_resamples(out, boot.n_resamples)
    if out["best_status"] not in ("converged", "stalled"):
        print(
            "  warning: the best start did not converge; the intervals below describe where the resamples "
            "stopped, not what the data determine"
        )
    _print_params(out)


def _say_degenerate_resamples(out: dict[str, Any], total: int) -> None:
    """A warning line when some resampled laws are degenerate (`FitResult.degenerate_resamples`)."""
    found = out.get("bootstrap_degenerate", 0)
    if found:
        print(f"  warning: {found} of {total} resampled laws are degenerate (a limit the solver ran to, or a step "
              "inside the trained sizes): the intervals include them, and the data barely determine this law")
    limits = out.get("bootstrap_at_limits", 0)
    if limits:
        print(f"  note: {limits} of {total} resampled laws have a term in a limit of the law (the log-law limit, "
              "where K_i is infinite and C minus infinite, or a detached term, where K_i is 0): the intervals "
              "reach those values, printed as unbounded or 0, not where those resamples' solver stopped")


def _print_targets(out: dict[str, Any], boot: Any) -> None:
    """A fit of several targets: one line per target (objective, R^2, MAPE, starts converged, best start), then
    their mean; the parameters and their intervals are in the JSON."""
    s = out["summary"]
    print(f"{out['law_name']} ({out['law']}): {len(out['targets'])} targets fitted in one program")
    width = max(len(t) for t in out["targets"])
    for t, name in enumerate(out["targets"]):
        print(f"  {name:<{width}}  objective {s['objective'][t]:.4g}, R^2 {s['r2'][t]:.5f}, MAPE "
              f"{s['mape_percent'][t]:.3f}%, {int(s['n_converged'][t])}/{s['n_starts']} starts converged, best start: "
              f"{out['best_status'][t]}")  # fmt: skip
    print(f"  {'mean':<{width}}  objective {np.mean(s['objective']):.4g}, R^2 {np.mean(s['r2']):.5f}, MAPE "
          f"{np.mean(s['mape_percent']):.3f}%, {sum(b in ('converged', 'stalled') for b in out['best_status'])}/"
          f"{len(out['targets'])} best starts converged")  # fmt: skip
    if boot is not None:
        print(f"  bootstrap: {int(np.sum(np.asarray(boot.converged)))}/{np.size(boot.converged)} resample fits "
              f"converged ({boot.n_resamples} resamples x {len(out['targets'])} targets)")  # fmt: skip
        _say_degenerate_resamples(out, int(np.size(boot.converged)))
    bad = [n for n, b in zip(out["targets"], out["best_status"]) if b not in ("converged", "stalled")]
    if bad:
        print(f"  warning: the best start of {', '.join(bad)} did not converge; their parameters are where the "
              "starts stopped, not what the data determine")  # fmt: skip
    for name, terms in out.get("detached", {}).get("terms", {}).items():
        print(f"  {name}: terms {terms} are detached (share 0 to working precision: no share of any dataset); their "
              "K_i and row t_i are 0 in that limit, not estimates: their finite coordinates (Kt, alpha, profile, D) "
              "are the .json's \"detached\"")  # fmt: skip
    limit = out.get("log_limit", {})
    for name in out["targets"]:
        terms, data = limit.get("terms", {}).get(name, []), limit.get("data_terms", {}).get(name, [])
        if terms or data:
            which = " and ".join(f"{kind} {found}" for kind, found in (("terms", terms), ("data terms", data)) if found)
            print(f"  {name}: {which} are in their log-law limit (exponent 0 to working precision): their K_i (G_i) "
                  "are infinite and C minus infinite there, not estimates: their finite coordinates are the .json's "
                  '"log_limit"')  # fmt: skip
    bounded = out.get("at_bound", {})
    if bounded:
        shown = "; ".join(f"{name} (at its bound {at['bound']} = {at['value']:g})"
                          for name, at in list(bounded.items())[:4])  # fmt: skip
        print(f"  {len(bounded)} parameter element(s) at the bound of their range, the bound and not an estimate: "
              f"{shown}{' ...' if len(bounded) > 4 else ''} (all in the .json's \"at_bound\")")  # fmt: skip
    print("  parameters and 95% intervals of each target: in the .json")


# A point estimate within this fraction of its parameter's largest element (in absolute value) of its interval is
# inside it: an element at 0 to working precision (a switched-off term's K_i = 2.5e-41 against a lower end of
# 5.0e-41) is not "outside" by rounding.
OUTSIDE_RTOL = 1e-9


def _outside(params: dict[str, Any], intervals: dict[str, Any]) -> list[str]:
    """The parameter elements whose point estimate lies outside their own bootstrap interval (by more than
    `OUTSIDE_RTOL` of the parameter's largest element)."""
    from ..fitting._identify import element_names

    names = []
    for name, value in params.items():
        low, high = (np.asarray(v, dtype=float) for v in intervals[name])
        point = np.asarray(value, dtype=float)
        finite = np.abs(point[np.isfinite(point)])
        slack = OUTSIDE_RTOL * (float(finite.max()) if finite.size else 0.0)
        outside = ~((low - slack <= point) & (point <= high + slack))
        names += [n for n, o in zip(element_names(name, value), np.ravel(outside)) if o]
    return names


def _print_params(out: dict[str, Any]) -> None:
    """Each parameter with its 95% interval; elements the data do not determine are said to be so. Terms in the
    log-law limit are printed as such (K infinite, C minus infinite), and detached terms (`out["detached"]`: K_i and
    row t_i 0), each followed by the finite coordinates."""
    limit = out.get("log_limit")
    params, intervals, free = out["params"], out.get("intervals_95", {}), set(out["summary"]["not_identified"])
    if limit is not None:
        params, intervals, limits, infinite = _log_limit_header(limit, dict(params), intervals)
        free -= infinite
    else:
        limits = {}
    detached = out.get("detached")
    fixed = {} if detached is None else _detached_header(detached["terms"], params, limits)
    for name, at in out.get("at_bound", {}).items():
        fixed.setdefault(name, f"{at['value']:g} (at its bound {at['bound']})")
    free -= set(fixed)
    degenerate = out.get("degenerate", {})
    _print_block(params, intervals, free, {**limits, **degenerate}, fixed)
    if degenerate:
        print(
            f"  warning: degenerate fit ({len(degenerate)} parameter(s) at a limit, not estimates: "
            + "; ".join(f"{name} {why}" for name, why in list(degenerate.items())[:4])
            + f"{' ...' if len(degenerate) > 4 else ''}); {out.get('degenerate_advice', '')}"
        )
    if limit is not None:
        names = {"reference_size": "size M0", "reference_tokens": "tokens D0", "reference_mixture": "mixture c"}
        where = [f"{text} = {_short(limit['params'][key])}" for key, text in names.items() if key in limit["params"]]
        print("  finite coordinates" + (f" (reference {', '.join(where)})" if where else "") + ":")
        finite = {k: v for k, v in limit["params"].items() if not k.startswith("reference_")}
        _print_block(finite, limit.get("intervals_95", {}), set(limit["not_identified"]), degenerate, _off(finite))
    outside = out.get("outside_interval", []) if limit is None else limit.get("outside_interval", [])
    outside = [name for name in outside if name not in fixed]
    if detached is not None:
        outside += _print_detached(detached, degenerate)
    if outside:
        print(f"  warning: point estimate outside its own interval for {', '.join(outside)}")


def _off(finite: dict[str, Any]) -> dict[str, str]:
    """The inverse amplitudes kappa_i = 1 / K_i and nu_i = 1 / G_i (at the reference point) of terms switched off
    (K_i or G_i below 1e-6 in the loss's units, b_i or h_i 0 to working precision): another regular point of the
    coordinates, where the inverse is huge or infinite; printed in words, never as that number."""
    from ..fitting._degenerate import ESTIMATE_LIMIT

    out: dict[str, str] = {}
    for name, amplitude in (("kappa", "K"), ("nu", "G")):
        values = np.ravel(np.asarray(finite.get(name, []), dtype=float))
        out |= {f"{name}[{i}]": f"term off ({amplitude}_{i} below 1e-6)" for i, v in enumerate(values)
                if not abs(v) <= ESTIMATE_LIMIT}  # fmt: skip
    return out


def _short(value: Any) -> str:
    """A reference point's value, as the finite coordinates' header prints it (4 significant digits)."""
    array = np.asarray(value, dtype=float)
    return f"{float(array):.4g}" if array.ndim == 0 else "[" + ", ".join(f"{v:.4g}" for v in array.ravel()) + "]"


def _log_limit_header(
    limit: dict[str, Any], params: dict[str, Any], intervals: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, str], set[str]]:
    """The lines that say which terms are in their log-law limit (capacity terms: beta_i, or camel-mixture's
    alpha_i, = 0; CAMELData's data terms: gamma_i = 0), and what `_print_block` prints there: their exponents 0,
    K_i (G_i) infinite and C minus infinite, never the numbers the coordinates stopped at. Returns (the parameters
    with those exponents at 0, the intervals without the parameters of the limit, {element: text}, the elements
    whose identifiability means nothing there)."""
    terms, data_terms = limit["terms"], limit.get("data_terms", [])
    size = "beta" in params  # CAMELMixture (one size): alpha_i = 0 is its log law, -a_i log <t_i, r>
    eta = "<t_i, r> / eta0_i" if "reference_mixture" in limit["params"] else "<t_i, r>"
    if terms:
        print(
            f"  terms {terms} are in the law's log-law limit ({'beta_i' if size else 'alpha_i'} = 0 to working "
            f"precision): each is {f'-[b_i log(M / M0) + a_i log({eta})]' if size else '-a_i log <t_i, r>'}, a form "
            "in which the paper's K_i are infinite and C minus infinite; printed as such below, with the law's "
            "finite coordinates (L = C1 + the terms) after them"
        )
    if data_terms:
        form = f"log({eta}) + log(D / D0)" if "reference_tokens" in limit["params"] else f"log({eta})"
        print(
            f"  data terms {data_terms} are in their log-law limit (gamma_i = 0 to working precision): each is "
            f"-h_i [{form}], a form in which the paper's G_i are infinite and C minus infinite; printed as such "
            "below, with the law's finite coordinates (L = C1 + the terms) after them"
        )
    at_limit = np.isin(np.arange(len(params["K"])), terms)
    if size:
        params["beta"] = np.where(at_limit, 0.0, params["beta"])
    params["alpha"] = np.where(at_limit, 0.0, params["alpha"])
    infinite = {"C", *(f"{n}[{i}]" for n in ("K", "alpha", "beta") for i in terms)}
    limits = {"C": "minus infinite in the log-law limit"} | {f"K[{i}]": "infinite in the log-law limit" for i in terms}
    dropped = {"C", "K", "alpha", "beta"} if terms else {"C"}
    if data_terms:
        params["gamma"] = np.where(np.isin(np.arange(len(params["G"])), data_terms), 0.0, params["gamma"])
        infinite |= {f"{n}[{i}]" for n in ("G", "gamma") for i in data_terms}
        limits |= {f"G[{i}]": "infinite in the log-law limit" for i in data_terms}
        dropped |= {"G", "gamma"}
    return params, {k: v for k, v in intervals.items() if k not in dropped}, limits, infinite


def _detached_header(terms: list[int], params: dict[str, Any], limits: dict[str, str]) -> dict[str, str]:
    """The line that says which terms are detached, and what `_print_block` prints for their K_i and row t_i: 0,
    their value in that limit, never where the coordinates stopped (~1e-17). A term also in the log-law limit keeps
    that limit's account of K_i (`limits`). Returns {element name: text}."""
    from ..laws._camel_mixture import DETACHED_SHARE

    print(
        f"  terms {terms} are detached (share s_i below {DETACHED_SHARE:g}, 0 to working precision: the term "
        "takes no share of any dataset): in that limit the paper's K_i and row t_i are 0, printed as such below; "
        "each is Kt_i <w_i / D, r>^-alpha_i, with its profile w_i over the datasets and D_j = sum_l s_l w_lj, the "
        "finite coordinates printed after them"
    )
    n = int(np.shape(params["t"])[-1])
    fixed = {f"K[{i}]": "0 (detached)" for i in terms if f"K[{i}]" not in limits}
    return fixed | {f"t[{i}, {j}]": "0" for i in terms for j in range(n)}


def _print_detached(detached: dict[str, Any], degenerate: dict[str, str]) -> list[str]:
    """The finite coordinates of each detached term (Kt_i, alpha_i, its profile w_i) and D, with their 95%
    intervals; returns the names of those outside their own interval."""
    print("  finite coordinates of the detached terms:")
    params, intervals = detached["params"], detached.get("intervals_95", {})
    free = {name.replace(", ", "][") for name in detached.get("not_identified", [])}  # profile[i, j]: profile[i][j]
    shown = []
    for i in detached["terms"]:
        block = {f"{k}[{i}]": params[k][i] for k in ("Kt", "alpha", "profile")}
        ends = {f"{k}[{i}]": [lo[i], hi[i]] for k, (lo, hi) in intervals.items() if k != "D"}
        _print_block(block, ends, free, degenerate)
        shown += [f"Kt[{i}]", f"alpha[{i}]", f"profile[{i}, "]
    _print_block({"D": params["D"]}, {k: v for k, v in intervals.items() if k == "D"}, free, degenerate)
    outside = detached.get("outside_interval", [])
    return [name for name in outside if name.startswith(("D[", *shown))]


def _print_block(
    params: dict[str, Any],
    intervals: dict[str, Any],
    free: set[str],
    degenerate: dict[str, str] | None = None,
    fixed: dict[str, str] | None = None,
) -> None:
    """One line per parameter: its value, its 95% interval when there is one, the elements the data leave free.
    An element in `degenerate` ({element name: why}) is printed as "degenerate (why)", never as a number, and its
    parameter's interval is left out; one in `fixed` ({element name: text}: a limit that is no failure, a detached
    term's "0 (detached)") is printed as that text, its parameter's interval left out too; an interval end that is
    not finite prints as "unbounded"."""
    from ..fitting._identify import element_names

    degenerate, fixed = degenerate or {}, fixed or {}

    def show(value, names=None):
        array = np.asarray(value, dtype=float)
        if names is None and np.all(np.isfinite(array)):
            return np.array2string(array, precision=4, separator=", ")
        names = names or [""] * array.size
        text = [
            fixed[n] if n in fixed else f"degenerate ({degenerate[n]})" if n in degenerate
            else f"{v:.4g}" if np.isfinite(v) else "unbounded"
            for n, v in zip(names, np.ravel(array))
        ]  # fmt: skip
        if array.ndim == 0:
            return text[0]
        rows = [text[i : i + array.shape[-1]] for i in range(0, len(text), array.shape[-1])]  # a matrix by rows
        inner = ["[" + ", ".join(row) + "]" for row in rows]
        return inner[0] if array.ndim == 1 else "[" + ", ".join(inner) + "]"

    for name, value in params.items():
        names = element_names(name, value)
        if any(n in degenerate or n in fixed for n in names):
            print(f"  {name}: {show(value, names)}")
            continue
        interval = intervals.get(name)
        text = show(value) + (f"  95% [{show(interval[0])}, {show(interval[1])}]" if interval is not None else "")
        loose = [n for n in names if n in free]
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
