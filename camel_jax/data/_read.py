"""`read_runs`: the one reader of a user's table of training runs, wide or long, in the formats the field publishes.

Everything it does to the table on the way in (percent shares read as fractions, rows rescaled, duplicates merged,
rows left out) is said in one `ReadNote` each; everything it cannot read is a one-line `ValueError` naming the
column or row, raised before any compute. The caller's table is never modified.
"""

from __future__ import annotations

import fnmatch
import re
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .._warn import user_stacklevel
from ._containers import MIXTURE_SUM_TOLERANCE, MixtureData
from ._formats import load

# A token count (or step) asked for with `checkpoint=` must have a checkpoint within this relative distance.
NEAR = 0.1
# Columns whose name says they tell validation domains (or tasks, metrics) apart; and ones that tell runs apart.
_DOMAIN_HINTS = ("domain", "valid", "eval", "task", "metric", "subset", "split", "benchmark", "file")
_RUN_HINTS = ("run", "seed", "replicate", "id", "name")


class ReadNote(UserWarning):
    """Said by `read_runs` for what it did to a table on the way in (percent shares read as fractions, rows
    rescaled, duplicate rows merged, rows left out): one sentence each, the command line prints them as `note:`."""


def read_runs(
    source: Any,
    *,
    mixture: str | Sequence[str] | None = None,
    size: str | None = None,
    tokens: str | None = None,
    target: str | Sequence[str] | None = None,
    domain: str | None = None,
    step: str | None = None,
    checkpoint: str | float = "final",
    names: str | Sequence[str] | None = None,
    normalize: bool = False,
    format: str | None = None,
    run: str | None = None,
) -> MixtureData:
    """Read a table of training runs into a `MixtureData`: one point per run (or per checkpoint), one target per
    validation loss, the datasets and targets by name.

    The table may be wide (one row per run or checkpoint, a column per loss) or long (a row per run x validation
    domain x checkpoint, with a `domain` column): both give the same data. Every problem is a one-line
    `ValueError` naming the column or row; what is done to the table on the way in is said as a `ReadNote`.

    **Arguments**:

    - `source`: a CSV path or a DataFrame; for the paired formats, a pair of them or a folder (see `format`).
    - `mixture`: the mixture, as columns (a list, or a glob such as `'weight_*'`), or one column whose values are
      shares joined by '-', ',' or ' ' (`'0.5-0.25-0.25'`). Default: the `r_*` columns, else the format's.
      Shares that sum to 100 are read as percent (a note); rows within 1e-2 of 1 are rescaled to sum to 1.
    - `size`, `tokens`: the model-size and training-tokens columns (default `'size'` and `'tokens'` when present).
    - `target`: the loss column(s): a name, a list, or a glob (`'*_loss'`). Default `'loss'`, else the format's.
      A missing value gives that target weight 0 at that point (the run stays for the other targets).
    - `domain`: a column naming the validation domain of each row of a long table: one target per domain.
    - `step`: a column of training steps, ordering each run's checkpoints when there is no `tokens` column.
    - `checkpoint`: `'final'` (each run's last checkpoint), a token count (or step, without `tokens`: the
      checkpoint nearest it, runs with none within 10% left out), or `'all'` (every checkpoint a point; the data's
      `group` is then the run, so `bootstrap` and `calibrate` resample whole runs).
    - `names`: the datasets' names (a list or a comma-separated string); default the mixture columns' names, or
      for a column of shares the header split like the values, else `d0, d1, ...`.
    - `normalize`: rescale rows whose shares are off 1 by more than 1e-2 (the rows are named in a note); by
      default such a row is an error.
    - `format`: a published format by name: `'dmsl'` (Shukor et al.'s wide CSV), `'mixinglaws'` (Ye et al.'s long
      files), `'olmix'` (ratios.csv + metrics.csv joined on `run_id`), `'regmix'` (a mixture CSV + a loss CSV
      joined on `index`). Default: recognized from the columns (said in a note), else a plain table.
    - `run`: a column identifying the training run (default: the mixture and size), telling replicate runs apart.

    **Returns**: a `MixtureData`; with several targets `y` and `weight` are [T, P] (as `fit` takes them) and
    `targets` names them.
    """
    df, defaults, notes = load(source, format)
    for note in notes:
        _note(note)
    given = dict(mixture=mixture, size=size, tokens=tokens, target=target, domain=domain, step=step, run=run,
                 names=names)  # fmt: skip
    spec: dict[str, Any] = {role: value if value is not None else defaults.get(role) for role, value in given.items()}
    for role in ("size", "tokens", "domain", "step", "run"):
        if spec[role] is not None and not isinstance(spec[role], str):
            raise TypeError(f"{role}= must be one column name; got {spec[role]!r}")
    _check_table(df)
    columns = [str(c) for c in df.columns]
    df = df.set_axis(columns, axis=1)
    for role in ("size", "tokens", "step"):
        if spec[role] is None and role in columns:
            spec[role] = role
    for role in ("size", "tokens", "domain", "step", "run"):
        _require(columns, spec[role], role)
    if spec["target"] is None:
        spec["target"] = "loss" if "loss" in columns else None
    targets = _match(columns, spec["target"], "target")
    if not targets:
        raise ValueError(f"name the target (loss) column(s): target= or --target; columns: {columns[:12]}")
    shares, datasets, used = _mixture(df, columns, spec["mixture"], spec["names"])
    roles = {r: spec[r] for r in ("size", "tokens", "domain", "step", "run") if spec[r] is not None}
    _check_roles(used, targets, roles)
    return _assemble(df, shares, datasets, targets, roles, checkpoint, normalize)


# --- the pieces ---------------------------------------------------------------------------------------------------


def _note(message: str) -> None:
    warnings.warn(ReadNote(message), stacklevel=user_stacklevel())


def _check_table(df: Any) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"`source` must be a path to a CSV file or a pandas DataFrame; got {type(df).__name__}")
    if len(df) == 0:
        raise ValueError("the table is empty: no runs to read")
    labels = [str(c) for c in df.columns]
    repeated = sorted({c for c in labels if labels.count(c) > 1})
    if repeated:
        raise ValueError(f"the table has duplicated column name(s) {repeated}: rename them so each is unique")


def _require(columns: list[str], column: str | None, role: str) -> None:
    if column is not None and column not in columns:
        raise ValueError(f"column {column!r} not found ({role}=); available columns: {columns[:20]}")


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def _match(columns: list[str], spec: Any, role: str) -> list[str]:
    """The columns a name, a comma-separated list, a glob or a list of them names, in the table's order for a glob;
    a name matching nothing is an error naming it."""
    if spec is None:
        return []
    items = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else [str(s) for s in spec]
    out: list[str] = []
    for item in items:
        if _is_glob(item):
            found = [c for c in columns if fnmatch.fnmatchcase(c, item)]
            if not found:
                raise ValueError(f"no column matches {item!r} ({role}=); available columns: {columns[:20]}")
            out += [c for c in found if c not in out]
        elif item not in columns:
            raise ValueError(f"column {item!r} not found ({role}=); available columns: {columns[:20]}")
        elif item in out:
            raise ValueError(f"column {item!r} is named twice in {role}=")
        else:
            out.append(item)
    return out


def _check_roles(mixture: list[str], targets: list[str], roles: dict[str, str]) -> None:
    """A column plays one role: a target that is also the size (say) is an error naming it."""
    seen: dict[str, str] = {}
    for role, cols in [("mixture", mixture), ("target", targets), *((r, [c]) for r, c in roles.items())]:
        for c in cols:
            if c in seen and seen[c] != role:
                raise ValueError(f"column {c!r} is named both as {seen[c]}= and as {role}=: one role per column")
            seen[c] = role


def _numeric(df: pd.DataFrame, column: str, role: str, missing: bool = False) -> np.ndarray:
    """A column as floats; a non-numeric value is an error naming the row (NaN left as it is when `missing`)."""
    values = pd.to_numeric(df[column], errors="coerce")
    text = values.isna() & df[column].notna()
    if text.any():
        row = df.index[int(np.argmax(text.to_numpy()))]
        raise ValueError(f"column {column!r} has a non-numeric value {df[column].loc[row]!r} at row {row!r} ({role})")
    out = values.to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(out) & (~np.isnan(out) if missing else True)
    if bad.any():
        row = df.index[int(np.argmax(bad))]
        raise ValueError(f"column {column!r} has a missing or infinite value ({out[int(np.argmax(bad))]}) at row "
                         f"{row!r} ({role})")  # fmt: skip
    return out


_DASH = re.compile(r"(?<![eE])-")  # '-' between shares, not the sign of an exponent (1e-3)


def _separator(values: Sequence[str]) -> str:
    text = "".join(values)
    return "," if "," in text else " " if " " in text.strip() else "-"


def _split(value: str, separator: str) -> list[str]:
    value = value.strip()
    if separator == "-":
        return _DASH.split(value)
    return value.split(",") if separator == "," else value.split()


def _mixture(
    df: pd.DataFrame, columns: list[str], spec: Any, names: Any
) -> tuple[np.ndarray, list[str], list[str]]:  # fmt: skip
    """(the shares [N, n] with NaN rows where a row names no mixture, the dataset names, the columns used)."""
    if spec is None:
        spec = [c for c in columns if c.startswith("r_")] or _shares_column(df, columns)
        if not spec:
            raise ValueError(
                f"no mixture columns: name them with mixture= (--mixture; a list, a glob such as 'weight_*', or one "
                f"column of shares joined by '-'), or prefix them with r_; columns: {columns[:20]}"
            )
    used = _match(columns, spec, "mixture")
    name_list = None if names is None else _column_names(names)
    if len(used) == 1 and not pd.api.types.is_numeric_dtype(df[used[0]]):
        return _parse_shares(df, used[0], name_list)
    if len(used) == 1:
        raise ValueError(f"mixture= names one numeric column {used[0]!r}: a mixture needs a column per dataset "
                         "(or one column of shares joined by '-', ',' or ' ')")  # fmt: skip
    shares = np.stack([_numeric(df, c, "mixture") for c in used], axis=1)
    if name_list is not None and len(name_list) != len(used):
        raise ValueError(f"names= gives {len(name_list)} names for the {len(used)} mixture columns {used}")
    return shares, name_list or used, used


def _column_names(names: Any) -> list[str]:
    out = [s.strip() for s in names.split(",")] if isinstance(names, str) else [str(s) for s in names]
    repeated = sorted({n for n in out if out.count(n) > 1})
    if repeated or not all(out):
        raise ValueError(f"names= must be distinct, non-empty names; got {out}")
    return out


def _shares_column(df: pd.DataFrame, columns: list[str]) -> list[str]:
    """The one text column whose values look like shares joined by a separator, if there is exactly one."""
    found = []
    for c in columns:
        if pd.api.types.is_numeric_dtype(df[c]):
            continue
        values = df[c].dropna().astype(str).head(50).tolist()
        if values and all(re.fullmatch(r"\s*[0-9.eE+]+(\s*[-, ]\s*[0-9.eE+]+)+\s*", v) for v in values):
            found.append(c)
    return found if len(found) == 1 else []


def _parse_shares(df: pd.DataFrame, column: str, names: list[str] | None) -> tuple[np.ndarray, list[str], list[str]]:
    text = df[column]
    present = text.notna() & (text.astype(str).str.strip() != "")
    values = text[present].astype(str).tolist()
    separator = _separator(values)
    parts = [_split(v, separator) for v in values]
    n = len(parts[0]) if parts else 0
    rows = df.index[present.to_numpy()]
    for row, p in zip(rows, parts):
        if len(p) != n:
            raise ValueError(f"column {column!r} (mixture) holds {len(p)} shares at row {row!r} and {n} at row "
                             f"{rows[0]!r}: every run needs a share for each dataset")  # fmt: skip
    shares = np.full((len(df), n), np.nan)
    try:
        shares[present.to_numpy()] = np.array(parts, dtype=float)
    except ValueError:
        bad = next(row for row, p in zip(rows, parts) if not _floats(p))
        raise ValueError(f"column {column!r} (mixture) is not shares joined by {separator!r} at row {bad!r}: "
                         f"{df[column].loc[bad]!r}") from None  # fmt: skip
    if names is None:
        header = _split(column, separator)
        names = header if len(header) == n and len(set(header)) == n else [f"d{j}" for j in range(n)]
    elif len(names) != n:
        raise ValueError(f"names= gives {len(names)} names for the {n} shares of column {column!r}")
    return shares, names, [column]


def _floats(parts: list[str]) -> bool:
    try:
        [float(p) for p in parts]
    except ValueError:
        return False
    return True


def _rows_text(labels: Sequence[Any], limit: int = 5) -> str:
    shown = ", ".join(repr(x) for x in list(labels)[:limit])
    return shown + (f" and {len(labels) - limit} more" if len(labels) > limit else "")


def _shares_on_simplex(shares: np.ndarray, datasets: list[str], labels: Any, normalize: bool) -> np.ndarray:
    """Percent read as fractions (a note); rows off 1 by more than the tolerance rescaled with `normalize` (a note
    naming them) or refused; rows within it rescaled silently."""
    negative = shares < 0
    if negative.any():
        i, j = np.argwhere(negative)[0]
        raise ValueError(f"dataset {datasets[j]!r} has a negative share {shares[i, j]:g} at row {labels[i]!r}")
    sums = shares.sum(axis=1)
    if np.all(np.abs(sums - 100.0) <= 100 * MIXTURE_SUM_TOLERANCE):
        _note(f"the mixture shares sum to 100 in every row: read as percent (divided by 100) for {datasets}")
        shares, sums = shares / 100.0, sums / 100.0
    off = np.abs(sums - 1.0) > MIXTURE_SUM_TOLERANCE
    if off.any():
        bad = [labels[i] for i in np.flatnonzero(off)]
        i = int(np.argmax(off))
        if not normalize:
            hint = "; are they percent? (every row must then sum to 100)" if np.nanmax(sums) > 50 else ""
            raise ValueError(
                f"the mixture shares {datasets} at row {labels[i]!r} sum to {sums[i]:.6g}, not 1 (tolerance "
                f"{MIXTURE_SUM_TOLERANCE}; {off.sum()} row(s) off): rescale them with normalize=True (--normalize), "
                f"or is a dataset missing?{hint}"
            )
        if np.any(sums[off] <= 0):
            raise ValueError(f"the mixture shares at row {labels[int(np.argmax(sums <= 0))]!r} are all zero")
        _note(f"{len(bad)} row(s) whose shares sum off 1 by more than {MIXTURE_SUM_TOLERANCE} rescaled to sum to "
              f"1 (normalize=True): rows {_rows_text(bad)} (first sums to {sums[i]:.6g})")  # fmt: skip
    return shares / sums[:, None]


def _assemble(
    df: pd.DataFrame,
    shares: np.ndarray,
    datasets: list[str],
    targets: list[str],
    roles: dict[str, str],
    checkpoint: Any,
    normalize: bool,
) -> MixtureData:
    keep = ~np.isnan(shares).any(axis=1)
    if not keep.all():
        _note(f"{int((~keep).sum())} row(s) name no mixture (e.g. row {df.index[int(np.argmin(keep))]!r}) and are "
              "left out: a run needs the mixture it trained on")  # fmt: skip
    axis = roles.get("tokens", roles.get("step"))
    if axis is not None:
        values = pd.to_numeric(df[axis], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        if "tokens" in roles and "step" in roles:  # a row is a checkpoint only if both say which
            values = np.where(np.isnan(pd.to_numeric(df[roles["step"]], errors="coerce")), np.nan, values)
        bad = keep & ~np.isfinite(values)
        if bad.any():
            i = int(np.argmax(bad))
            shown = roles["step"] if "step" in roles else axis
            _note(f"{int(bad.sum())} row(s) whose {shown!r} is not a number (e.g. {str(df[shown].iloc[i])!r} at row "
                  f"{df.index[i]!r}) are left out: their checkpoint is unknown")  # fmt: skip
            keep &= ~bad
    if not keep.any():
        raise ValueError("no row is left to read: every row lacks a mixture or a checkpoint")
    table = df[keep]
    labels = table.index
    shares = _shares_on_simplex(shares[keep], datasets, labels, normalize)
    size = _numeric(table, roles["size"], "size") if "size" in roles else None
    tokens = _numeric(table, roles["tokens"], "tokens") if "tokens" in roles else None
    where = tokens if tokens is not None else _numeric(table, roles["step"], "step") if "step" in roles else None
    Y = np.stack([_numeric(table, c, "target", missing=True) for c in targets])  # [targets, rows]
    run = _run_codes(table, shares, size, roles.get("run"))
    domain = None if "domain" not in roles else table[roles["domain"]].astype(str).to_numpy()
    keep_rows, replicate = _duplicates(table, run, where, domain, Y, targets, roles)
    if replicate.any():  # each replicate its own run
        run = pd.DataFrame({"run": run, "replicate": replicate}).groupby(["run", "replicate"], sort=False).ngroup()
        run = run.to_numpy()
    table, shares, Y, run = table[keep_rows], shares[keep_rows], Y[:, keep_rows], run[keep_rows]
    labels = labels[keep_rows]
    size = None if size is None else size[keep_rows]
    where = None if where is None else where[keep_rows]
    tokens = None if tokens is None else tokens[keep_rows]
    domain = None if domain is None else domain[keep_rows]
    chosen = _checkpoints(run, where, checkpoint, roles, labels)
    size, tokens, where, domain = (None if a is None else a[chosen] for a in (size, tokens, where, domain))
    return _pivot(shares[chosen], Y[:, chosen], run[chosen], size, tokens, where, domain, targets, datasets,
                  checkpoint == "all")  # fmt: skip


def _run_codes(table: pd.DataFrame, shares: np.ndarray, size: np.ndarray | None, run: str | None) -> np.ndarray:
    """One code per training run: the (mixture, size) the run trained, told apart by the `run` column if given
    (run ids may restart at each size, as in the Data Mixing Laws files)."""
    key = pd.DataFrame(np.round(shares, 9))
    if size is not None:
        key["__size"] = size
    if run is not None:
        if table[run].isna().any():
            row = table.index[int(np.argmax(table[run].isna()))]
            raise ValueError(f"column {run!r} (run) has a missing value at row {row!r}")
        key["__run"] = table[run].astype(str).to_numpy()
    return key.groupby(list(key.columns), sort=False).ngroup().to_numpy()


def _duplicates(table, run, where, domain, Y, targets, roles) -> tuple[np.ndarray, np.ndarray]:
    """(rows to keep, a replicate number per row). Exact duplicates (same run, checkpoint, domain and targets) are
    merged with a note; rows that share all but their targets are refused when a column tells them apart (naming
    it: a validation-domain column left out pools several losses into one target), else kept as replicate runs
    (repeated measurements of one configuration, with a note)."""
    key = pd.DataFrame({"run": run})
    if where is not None:
        key["where"] = where
    if domain is not None:
        key["domain"] = domain
    replicate = np.zeros(len(run), int)
    if not key.duplicated().any():
        return np.ones(len(run), bool), replicate
    values = pd.DataFrame(Y.T).round(12).fillna(np.inf)
    full = pd.concat([key.reset_index(drop=True), values.add_prefix("y")], axis=1)
    merged = full.duplicated(keep="first").to_numpy()
    if merged.any():
        _note(f"{int(merged.sum())} exact duplicate row(s) merged (e.g. row {table.index[int(np.argmax(merged))]!r})")
    kept = key[~merged]
    repeated = kept.duplicated(keep=False).to_numpy()
    if repeated.any():
        rows = np.flatnonzero(~merged)
        group = kept.groupby(list(kept.columns), sort=False).ngroup().to_numpy()
        first = int(np.argmax(repeated))
        partner = int(np.flatnonzero((group == group[first]) & (np.arange(len(group)) != first))[0])
        message = _conflict_message(table, rows[first], rows[partner], Y, targets, roles)
        if message is not None:
            raise ValueError(message)
        replicate[rows] = kept.groupby(list(kept.columns), sort=False).cumcount().to_numpy()
        parts = _same_parts(roles)
        _note(f"{int(repeated.sum())} rows share their {parts} with another row but not their targets (e.g. rows "
              f"{table.index[rows[first]]!r} and {table.index[rows[partner]]!r}), and no column tells them apart: "
              "kept as replicate runs, each its own point")  # fmt: skip
    return ~merged, replicate


def _same_parts(roles: dict) -> str:
    parts = ["mixture"] + [r for r in ("size", "tokens", "step", "run", "domain") if r in roles]
    return ", ".join(parts[:-1]) + f" and {parts[-1]}" if len(parts) > 1 else parts[0]


def _conflict_message(table, first, partner, Y, targets, roles) -> str | None:
    """The error for two rows that agree on all but their targets, naming the column that tells them apart; None
    when no column does (replicate runs)."""
    rows = f"rows {table.index[first]!r} and {table.index[partner]!r}"
    t = int(np.argmax(Y[:, first] != Y[:, partner]))
    values = f"{targets[t]} {Y[t, first]:g} vs {Y[t, partner]:g}"
    used = set(roles.values()) | set(targets)
    differing = [c for c in table.columns if c not in used and table[c].iloc[first] != table[c].iloc[partner]
                 and not (pd.isna(table[c].iloc[first]) and pd.isna(table[c].iloc[partner]))]  # fmt: skip
    head = f"rows with the same {_same_parts(roles)} have different targets ({rows}: {values})"
    domains = [c for c in differing if any(h in c.lower() for h in _DOMAIN_HINTS)]
    runs = [c for c in differing if any(h in c.lower() for h in _RUN_HINTS)]
    if "domain" not in roles and (domains or (differing and not runs)):
        column = (domains or differing)[0]
        return f"{head}; is {column!r} a validation-domain column? (domain={column!r} / --domain {column})"
    if runs and "run" not in roles:
        return f"{head}; are they replicate runs told apart by {runs[0]!r}? (run={runs[0]!r} / --run {runs[0]})"
    if differing:
        return f"{head}; the column {differing[0]!r} tells them apart: filter the table on it, or name its role"
    return None


def _checkpoints(run: np.ndarray, where: np.ndarray | None, checkpoint: Any, roles: dict, labels: Any) -> np.ndarray:
    """The rows kept by `checkpoint`: each run's last, the one nearest a token count, or all."""
    if isinstance(checkpoint, str) and checkpoint not in ("final", "all"):
        try:
            checkpoint = float(checkpoint)
        except ValueError:
            raise ValueError(f"checkpoint= must be 'final', 'all' or a token count; got {checkpoint!r}") from None
    if isinstance(checkpoint, bool) or not isinstance(checkpoint, (str, int, float, np.integer, np.floating)):
        raise TypeError(f"checkpoint= must be 'final', 'all' or a token count; got {checkpoint!r}")
    n = len(run)
    if checkpoint == "all":
        return np.ones(n, bool)
    if where is None:
        if checkpoint == "final":
            return np.ones(n, bool)
        raise ValueError(f"checkpoint={checkpoint:g} needs a tokens (or step) column: tokens= / --tokens")
    frame = pd.DataFrame({"run": run, "where": where})
    if checkpoint == "final":
        return (frame["where"] == frame.groupby("run")["where"].transform("max")).to_numpy()
    target = float(checkpoint)
    distance = np.abs(where - target)
    nearest = frame.assign(d=distance).groupby("run")["d"].transform("min").to_numpy()
    chosen = (distance == nearest) & (nearest <= NEAR * abs(target))
    axis = roles.get("tokens", roles.get("step"))
    missing = np.unique(run[~pd.Series(chosen).groupby(run).transform("any").to_numpy()])
    if len(missing) == len(np.unique(run)):
        raise ValueError(f"no run has a checkpoint within {NEAR:.0%} of {target:g} ({axis!r}); the nearest is "
                         f"{where[int(np.argmin(distance))]:g}")  # fmt: skip
    if len(missing):
        first = labels[int(np.argmax(run == missing[0]))]
        _note(f"{len(missing)} run(s) have no checkpoint within {NEAR:.0%} of {target:g} ({axis!r}) and are left out "
              f"(e.g. the run of row {first!r})")  # fmt: skip
    return chosen


def _pivot(shares, Y, run, size, tokens, where, domain, targets, datasets, grouped) -> MixtureData:
    """One point per (run, checkpoint), one target per (domain x) target column; a missing value gets weight 0."""
    point_key = pd.DataFrame({"run": run, "where": np.zeros(len(run)) if where is None else where})
    point = point_key.groupby(["run", "where"], sort=False).ngroup().to_numpy()
    P = int(point.max()) + 1
    first = np.unique(point, return_index=True)[1]
    if domain is None:
        names = list(targets)
        values = np.full((len(names), P), np.nan)
        values[:, point] = Y
    else:
        order = list(dict.fromkeys(domain.tolist()))
        names = order if len(targets) == 1 else [f"{d}/{t}" for d in order for t in targets]
        values = np.full((len(names), P), np.nan)
        code = np.array([order.index(d) for d in domain])
        for j in range(len(targets)):
            values[code * len(targets) + j, point] = Y[j]
    empty = [n for n, row in zip(names, values) if not np.isfinite(row).any()]
    if empty:
        raise ValueError(f"target {empty[0]!r} has no value in any run left to read")
    measured = np.isfinite(values)
    lonely = ~measured.any(axis=0)
    if lonely.any():
        _note(f"{int(lonely.sum())} point(s) have no target value and are left out")
        keep = ~lonely
        values, measured, first = values[:, keep], measured[:, keep], first[keep]
    gaps = int((~measured).sum())
    if gaps:
        which = [n for n, row in zip(names, measured) if not row.all()]
        _note(f"{gaps} missing target value(s) ({', '.join(which[:5])}{' ...' if len(which) > 5 else ''}) get weight "
              "0 there; their runs stay for the other targets")  # fmt: skip
    weight = measured.astype(float)
    y = np.where(measured, values, np.nan)
    single = len(names) == 1
    return MixtureData(
        r=shares[first],
        y=y[0] if single else y,
        weight=weight[0] if single else weight,
        size=None if size is None else size[first],
        tokens=None if tokens is None else tokens[first],
        group=run[first] if grouped else None,
        columns=tuple(datasets),
        targets=tuple(names),
    )
