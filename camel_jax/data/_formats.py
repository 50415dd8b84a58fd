"""The tables the field publishes, by name: how each is read into one DataFrame, and which columns play which role.

Each format gives `read_runs` a DataFrame and the defaults of its arguments (the mixture, size, tokens, target,
domain, step and run columns, and the dataset names); an argument the user passes wins over the format's.
See docs/your_runs.md for each with an example.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

FORMATS = ("dmsl", "mixinglaws", "olmix", "regmix")

# Data Mixing Laws (Ye et al. 2025): the order of the training domains in `train_mixture`, by the `dataset` column
# (from the authors' notebooks; 5Mix's order is undocumented, so its datasets keep the neutral names d0..d4).
MIXINGLAWS_NAMES = {"2Mix": ["Github", "Pile-CC"], "3Mix": ["Github", "Books3", "Pile-CC"], "ct": ["Pile", "Python"]}


def read_csv(path: Any) -> pd.DataFrame:
    """A CSV file as a DataFrame, or a one-line `ValueError` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no such file: {path}")
    try:
        header = pd.read_csv(path, header=None, nrows=1, dtype=str).iloc[0].tolist()
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, IndexError) as error:
        message = str(error).splitlines()[0] if str(error) else "empty file"
        raise ValueError(f"cannot read {path} as CSV: {message}") from None
    repeated = sorted({str(h) for h in header if header.count(h) > 1})
    if repeated:
        raise ValueError(f"{path} has duplicated column name(s) {repeated}: rename them so each is unique")
    if len(df.columns) == 1 and any(sep in str(df.columns[0]) for sep in ";\t|"):
        raise ValueError(
            f"{path} has a single column {str(df.columns[0])[:60]!r}: camel-jax reads comma-separated files; "
            "is this one separated by ';', tabs or '|'?"
        )
    return df


def _frame(source: Any) -> pd.DataFrame:
    if isinstance(source, pd.DataFrame):
        return source
    if isinstance(source, (str, os.PathLike)):
        return read_csv(source)
    raise TypeError(f"a table must be a path to a CSV file or a pandas DataFrame; got {type(source).__name__}")


def _pair(source: Any, format: str, files: tuple[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The two tables of a paired format: a (first, second) pair of paths or DataFrames, or a folder holding
    `files`."""
    if isinstance(source, (str, os.PathLike)) and Path(source).is_dir():
        return _frame(Path(source) / files[0]), _frame(Path(source) / files[1])
    if isinstance(source, Sequence) and not isinstance(source, str) and len(source) == 2:
        return _frame(source[0]), _frame(source[1])
    raise ValueError(
        f"the {format} format is two tables: pass a pair ({files[0]}, {files[1]}) of paths or DataFrames, or a "
        f"folder holding {files[0]} and {files[1]}; got {source!r:.80}"
    )


def _join(left: pd.DataFrame, right: pd.DataFrame, on: str, what: tuple[str, str]) -> tuple[pd.DataFrame, int]:
    """The inner join of two tables on the id column `on`, and how many rows of either had no partner."""
    for df, name in zip((left, right), what):
        if on not in df.columns:
            raise ValueError(f"the {name} table has no {on!r} column to join on; its columns: {list(df.columns)[:8]}")
        repeated = df[on][df[on].duplicated()]
        if len(repeated):
            raise ValueError(f"the {name} table repeats {on} {repeated.iloc[0]!r}: each run must appear once")
    shared = [c for c in right.columns if c in left.columns and c != on]
    if shared:
        raise ValueError(f"the {what[0]} and {what[1]} tables both have column(s) {shared[:5]}: rename one side")
    joined = left.merge(right, on=on, how="inner")
    return joined, len(left) + len(right) - 2 * len(joined)


def load(source: Any, format: str | None) -> tuple[pd.DataFrame, dict[str, Any], list[str]]:
    """(the table as one DataFrame, the format's defaults of `read_runs`' arguments, notes on what was done)."""
    if format is None:
        format = _detect(source)
        if format is None:
            return _frame(source), {}, []
        notes = [f"read as the {format} format (format={format!r} / --format {format})"]
    else:
        notes = []
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}: one of {', '.join(FORMATS)} (or None for a plain table)")
    df, defaults, more = _LOADERS[format](source)
    return df, defaults, notes + more


def _detect(source: Any) -> str | None:
    """The published format a source is in, recognized by its shape and column names, or None."""
    if isinstance(source, (str, os.PathLike)) and Path(source).is_dir():
        return "olmix" if (Path(source) / "ratios.csv").is_file() else None
    if isinstance(source, Sequence) and not isinstance(source, str):
        if len(source) != 2:
            return None
        first = _frame(source[0])
        return "regmix" if "index" in first.columns and "run_id" not in first.columns else "olmix"
    if not isinstance(source, (pd.DataFrame, str, os.PathLike)):
        return None
    columns = {str(c) for c in _frame(source).columns}
    if {"train_mixture", "valid_domain", "loss", "run_id"} <= columns:
        return "mixinglaws"
    weights = any(c.startswith("weight_") for c in columns)
    if weights and "model_size" in columns and any(c.endswith("_loss") for c in columns):
        return "dmsl"
    return None


def _dmsl(source: Any) -> tuple[pd.DataFrame, dict[str, Any], list[str]]:
    defaults = {"mixture": "weight_*", "size": "model_size", "tokens": "n_tokens", "target": "*_loss"}
    return _frame(source), defaults, []


def _mixinglaws(source: Any) -> tuple[pd.DataFrame, dict[str, Any], list[str]]:
    df = _frame(source)
    defaults: dict[str, Any] = {
        "mixture": "train_mixture", "size": "nonembedding_params", "tokens": "tokens", "step": "step",
        "domain": "valid_domain", "target": "loss", "run": "run_id",
    }  # fmt: skip
    if "dataset" in df.columns and df["dataset"].nunique() == 1:
        names = MIXINGLAWS_NAMES.get(str(df["dataset"].iloc[0]))
        if names is not None:
            defaults["names"] = names
    return df, defaults, []


def _regmix(source: Any) -> tuple[pd.DataFrame, dict[str, Any], list[str]]:
    mixture, loss = _pair(source, "regmix", ("mixture.csv", "loss.csv"))
    df, unmatched = _join(mixture, loss, "index", ("mixture", "loss"))
    targets = [str(c) for c in loss.columns if c != "index"]
    notes = [f"{unmatched} row(s) of the mixture and loss tables have no partner on 'index': left out"]
    defaults = {"mixture": [str(c) for c in mixture.columns if c != "index"], "target": targets, "run": "index"}
    return df, defaults, notes if unmatched else []


def _olmix(source: Any) -> tuple[pd.DataFrame, dict[str, Any], list[str]]:
    ratios, metrics = _pair(source, "olmix", ("ratios.csv", "metrics.csv"))
    key = next((c for c in ("run_id", "run") if c in ratios.columns), "run_id")
    meta = {key, "name", "index"}
    ratios = ratios.drop(columns=[c for c in ("name", "index") if c in ratios.columns])
    metrics = metrics.drop(columns=[c for c in ("name", "index") if c in metrics.columns])
    df, unmatched = _join(ratios, metrics, key, ("ratios", "metrics"))
    defaults = {
        "mixture": [str(c) for c in ratios.columns if c not in meta],
        "target": [str(c) for c in metrics.columns if c not in meta],
        "run": key,
    }
    notes = [f"{unmatched} row(s) of ratios and metrics have no partner on {key!r} and are left out"]
    return df, defaults, notes if unmatched else []


_LOADERS = {"dmsl": _dmsl, "mixinglaws": _mixinglaws, "olmix": _olmix, "regmix": _regmix}
