"""From a chosen mixture to a trainer's config: availability caps by dataset name, and the mixture written by name
in the formats trainers read (a JSON record, OLMo-core, Levanter, Megatron-LM, nanotron), and read back.

Weights travel by name, never by position: every dataset is named once, a map that misses or adds a dataset is
refused naming it, and the written weights sum to 1 exactly in the decimals written (rounded to `digits` places,
then the largest weight that can take it absorbs the rounding).

The YAML is written here, by hand (small and flat, every string double-quoted), so that the provenance can travel
as comments the trainers' strict config decoders skip; reading a YAML file back needs PyYAML.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from decimal import ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from .._version import __version__
from .._warn import user_stacklevel

EXPORT_FORMATS: Mapping[str, str] = MappingProxyType(
    {
        "json": ".mixture.json",
        "olmo-core": ".olmo-core.yaml",
        "levanter": ".levanter.yaml",
        "megatron": ".megatron.txt",
        "nanotron": ".nanotron.yaml",
    }
)
"""The formats `export_mixture` writes, {format: the suffix `camel-jax optimize --export` gives its file}:
json (the record `read_mixture` reads), olmo-core, levanter, megatron, nanotron; read-only."""
_TARGETS = {
    "json": "camel-jax mixture record, format 1",
    "olmo-core": "OLMo-core SourceMixtureList (olmo_core.data.source_mixture, v2.3.0 to v2.5.0)",
    "levanter": "Levanter LMMixtureDatasetConfig (levanter.data.text, 1.2)",
    "megatron": "Megatron-LM --data-args-path (megatron/training, core 0.20)",
    "nanotron": "nanotron data_stages with NanosetDatasetsArgs (nanotron main since 2024-09, 0.4)",
}
JSON_FORMAT_VERSION = 1
# A mixture given by hand may be rounded: weights summing within this of 1 are a mixture (and are normalized).
SUM_TOLERANCE = 1e-6


def availability_caps(
    available_tokens: Mapping[str, float] | Any,
    target_tokens: float,
    max_epochs: float | Mapping[str, float] = 1.0,
    *,
    names: Sequence[str] | None = None,
) -> dict[str, float]:
    """Upper bounds on each dataset's share from the tokens it has: r_i <= min(1, E_i x available_i / D).

    A share above the cap would need more than E_i passes over dataset i's tokens in a run of D tokens. The law
    does not model repeated data: a cap that allows more than one epoch (E_i > 1) is said so in one warning, since
    the prediction at such a mixture treats repeated tokens as fresh ones.

    **Arguments**:

    - `available_tokens`: tokens each dataset has, by name (a mapping name -> tokens, or a pandas Series); each
      finite and > 0.
    - `target_tokens`: D, the tokens of the run the mixture is for (> 0).
    - `max_epochs`: E, the most passes allowed over a dataset's tokens (> 0; default 1, no repetition); one
      number, or one per dataset by name.
    - `names`: the fit's datasets (e.g. `FitResult.names`): every one must have its tokens, and no other; the caps
      then come in this order, so `upper=list(caps.values())` lines up with the fit's mixture columns.

    **Returns**: the caps, {name: cap} (in the order of `names` when given). Raises a one-line `ValueError` for a
    missing or unknown name, a value that is not a positive number, or caps that sum below 1 (the datasets cannot
    supply D tokens within E epochs: it says by how much, and the E that would).
    """
    available = _positive_by_name(available_tokens, "available_tokens")
    order = list(available) if names is None else _check_names_match(available, names, "`available_tokens`")
    target = _positive(target_tokens, "`target_tokens`")
    epochs = _epochs_by_name(max_epochs, order)
    caps = {name: min(1.0, epochs[name] * available[name] / target) for name in order}
    total = math.fsum(caps.values())
    if total < 1.0:
        supply = math.fsum(epochs[name] * available[name] for name in order)
        needed = target / math.fsum(available.values())
        listed = ", ".join(f"{name} {caps[name]:.4g}" for name in order)
        raise ValueError(
            f"infeasible caps: within the allowed epochs the datasets supply {supply:.4g} of the {target:.4g} target "
            f"tokens (the caps sum to {total:.4g} < 1: {listed}); allow {needed:.4g} epochs of every dataset, "
            "add data or lower the target"
        )
    repeated = [name for name in order if epochs[name] > 1 and caps[name] > available[name] / target]
    if repeated:
        warnings.warn(
            f"the caps of {', '.join(repeated)} allow more than one epoch of their tokens; the law does not model "
            "repeated data: its prediction at such a mixture treats repeated tokens as fresh",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
    return caps


def repetitions(mixture: Mapping[str, float], available_tokens: Mapping[str, float], target_tokens: float) -> dict:
    """Epochs each dataset is read at a mixture: r_i x D / available_i, by name (for the datasets with tokens)."""
    return {name: float(w) * float(target_tokens) / float(available_tokens[name])
            for name, w in mixture.items() if name in available_tokens}  # fmt: skip


def export_mixture(
    mixture: Any,
    format: str,
    path: str | os.PathLike | None = None,
    *,
    names: Sequence[str] | None = None,
    caps: Mapping[str, float] | None = None,
    max_epochs: float | Mapping[str, float] | None = None,
    paths: Mapping[str, str] | None = None,
    decision: Any = None,
    provenance: Mapping[str, Any] | None = None,
    digits: int = 12,
) -> str:
    """A mixture written by dataset name in a trainer's format; the file's text, also written to `path` if given.

    Formats (docs/exports.md shows each, with the version of the config it targets): `json` (the record:
    `{"mixture": {name: weight}, "caps", "max_epochs", "paths", "decision", "provenance"}`; `read_mixture` reads
    it back), `olmo-core` (a `SourceMixtureList` YAML: per source `source_name`, `target_ratio`, `paths`, and
    from `max_epochs` its `max_repetition_ratio` and `max_source_fraction`), `levanter` (`train_weights:
    {name: weight}`, with `configs: {name: {train_urls: [path]}}` when `paths` are given), `megatron` (a
    `--data-args-path` file: one `weight prefix` pair per line), `nanotron` (`data_stages` with one stage whose
    `dataset_folder` and `dataset_weights` list the datasets in the same order). Where a path is not given, a
    placeholder `<path of NAME>` stands for it (the trainer refuses it until it is replaced). The YAML formats
    carry the provenance, caps and decision as comments; Megatron's file cannot (the trainer reads every word of
    it), so its record is the `json` export.

    The weights are rounded to `digits` decimals and the largest one that stays within its cap takes the rounding,
    so the written numbers sum to exactly 1; a weight at its cap is written at most at the cap.

    **Arguments**:

    - `mixture`: the weights by name (a mapping or a pandas Series), or an array [n] with `names`, or a
      `MixtureResult` with `names` (its mixture, averaged over resamples when it has one per resample, and its
      `decision`). Finite, >= 0, summing to 1 within 1e-6.
    - `format`: one of `EXPORT_FORMATS` (json, olmo-core, levanter, megatron, nanotron).
    - `path`: where to write the text (atomically); None writes nothing.
    - `names`: the datasets in order: every one must be in the mixture (and in `caps` and `paths`), and no other.
    - `caps`: upper bounds by name (`availability_caps`); a weight above its cap is refused.
    - `max_epochs`: the passes allowed over each dataset (a number or by name); OLMo-core's repetition limits.
    - `paths`: {name: path or prefix}, one per dataset (whitespace refused for megatron).
    - `decision`: the verdict on the pick (a `Decision`, or a mapping such as {"band": ..., "gain": ...,
      "verdict": ...}), written to the record.
    - `provenance`: where the mixture comes from (e.g. the fit's hash, the predicted value and its interval):
      a mapping of str to JSON values; the package version is added.
    - `digits`: decimals written (1 to 15).

    **Returns**: the text of the file.
    """
    if format not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {format!r}; give one of {', '.join(EXPORT_FORMATS)}")
    if isinstance(digits, bool) or not isinstance(digits, int) or not 1 <= digits <= 15:
        raise ValueError(f"`digits` must be an integer from 1 to 15; got {digits!r}")
    weights, decision = _mixture_by_name(mixture, names, decision)
    order = list(weights)
    cap = None if caps is None else _caps_by_name(caps, order)
    if cap is not None:
        over = [name for name in order if weights[name] > cap[name] * (1 + 1e-9) + 1e-12]
        if over:
            name = over[0]
            raise ValueError(f"dataset {name!r} has weight {weights[name]:.6g} above its cap {cap[name]:.6g}")
    epochs = None if max_epochs is None else _epochs_by_name(max_epochs, order)
    where = None if paths is None else check_paths(paths, order, format)
    written = _rounded(weights, cap, digits)
    record = {
        "format": format,
        "target": _TARGETS[format],
        "provenance": {"camel_jax_version": __version__, **_jsonable(dict(provenance or {}), "provenance")},
        "caps": None if cap is None else {name: float(c) for name, c in cap.items()},
        "max_epochs": epochs,
        "paths": where,
        "decision": None if decision is None else _decision_record(decision),
    }
    text = _WRITERS[format](written, record)
    if path is not None:
        _write_text(Path(path), text)
    return text


def read_mixture(path: str | os.PathLike) -> dict[str, float]:
    """The mixture in a file `export_mixture` wrote, by name: the `json` record, or an `olmo-core` or `levanter`
    YAML (PyYAML reads these). The weights come back as the very numbers written.

    **Arguments**:

    - `path`: the file.

    **Returns**: {name: weight}, in the file's order. A file that holds no mixture by name (Megatron's and
    nanotron's key weights by path), names a dataset twice, or whose weights do not sum to 1 raises a one-line
    `ValueError`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    text = path.read_text()
    pairs: list[tuple[Any, Any]]
    if path.suffix == ".json":
        try:
            data = json.loads(text, object_pairs_hook=_refuse_repeats)
        except (json.JSONDecodeError, ValueError) as error:
            raise ValueError(f"{path}: not a camel-jax mixture record ({str(error).splitlines()[0]})") from None
        if not isinstance(data, dict) or not isinstance(data.get("mixture"), dict):
            raise ValueError(f'{path}: not a camel-jax mixture record (no "mixture" object)')
        pairs = list(data["mixture"].items())
    else:
        pairs = _yaml_pairs(path, text)
    names = [name for name, _ in pairs]
    repeated = sorted({str(name) for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"{path} names dataset(s) {repeated} more than once")
    out: dict[str, float] = {}
    for name, weight in pairs:
        if not isinstance(name, str) or isinstance(weight, bool) or not isinstance(weight, int | float):
            raise ValueError(f"{path}: the entry {name!r}: {weight!r} is not a dataset name and a weight")
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"{path}: dataset {name!r} has weight {weight!r}; weights are finite and >= 0")
        out[name] = float(weight)
    if abs(math.fsum(out.values()) - 1) > 1e-9:
        raise ValueError(f"{path}: the weights sum to {math.fsum(out.values()):.12g}, not 1")
    return out


def check_paths(paths: Mapping[str, Any], names: Sequence[str], format: str | None = None) -> dict[str, str]:
    """{name: path} with one non-empty string per dataset of `names`, and no other (whitespace refused for
    Megatron, whose data-args file is split on whitespace)."""
    where = _by_name_in(paths, list(names), "`paths`", kind="a path")
    for name, value in where.items():
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"the path of dataset {name!r} must be a non-empty string; got {value!r}")
        if format == "megatron" and any(c.isspace() for c in value):
            raise ValueError(f"the megatron prefix of dataset {name!r} contains whitespace: {value!r}; Megatron "
                             "splits its data-args file on whitespace")  # fmt: skip
    return dict(where)


# ------------------------------------------------------------------------------------------------- inputs by name


def _positive(value: Any, what: str) -> float:
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a number; got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a number; got {value!r}") from None
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{what} must be finite and > 0; got {value!r}")
    return number


def _items(values: Any, what: str) -> list[tuple[Any, Any]]:
    """The (name, value) pairs of a mapping or a pandas Series."""
    if isinstance(values, Mapping):
        return list(values.items())
    if hasattr(values, "items") and hasattr(values, "index"):  # a pandas Series, without importing pandas
        return list(values.items())
    raise TypeError(f"{what} must be a mapping of dataset name -> value (or a pandas Series); got "
                    f"{type(values).__name__}")  # fmt: skip


def _positive_by_name(values: Any, what: str) -> dict[str, float]:
    pairs = _items(values, f"`{what}`")
    names = [name for name, _ in pairs]
    repeated = sorted({str(name) for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"`{what}` names dataset(s) {repeated} more than once")
    if not pairs:
        raise ValueError(f"`{what}` is empty")
    for name, _ in pairs:
        if not isinstance(name, str) or not name:
            raise TypeError(f"`{what}` is keyed by dataset names (non-empty strings); got the key {name!r}")
    return {name: _positive(value, f"`{what}` of dataset {name!r}") for name, value in pairs}


def _check_names_match(values: Mapping[str, Any], names: Sequence[str], what: str, kind: str = "a value") -> list:
    """`names` as a list, after checking that `values` has one entry per name and no other."""
    order = [str(name) for name in names]
    repeated = sorted({name for name in order if order.count(name) > 1})
    if repeated:
        raise ValueError(f"`names` repeats {repeated}: each dataset needs its own name")
    missing = [name for name in order if name not in values]
    if missing:
        raise ValueError(f"{what} has no entry for dataset {missing[0]!r} (the datasets: {order})")
    extra = [name for name in values if name not in order]
    if extra:
        raise ValueError(f"{what} gives {kind} for {extra[0]!r}, which is not a dataset (the datasets: {order})")
    return order


def _by_name_in(values: Any, order: list[str], what: str, kind: str = "a value") -> dict[str, Any]:
    pairs = dict(_items(values, what))
    _check_names_match(pairs, order, what, kind)
    return {name: pairs[name] for name in order}


def _caps_by_name(caps: Any, order: list[str]) -> dict[str, float]:
    out = {}
    for name, value in _by_name_in(caps, order, "`caps`").items():
        number = float("nan") if isinstance(value, bool) or not isinstance(value, int | float | np.number) else value
        if not 0 <= float(number) <= 1:
            raise ValueError(f"the cap of dataset {name!r} must be a number in [0, 1]; got {value!r}")
        out[name] = float(number)
    return out


def _epochs_by_name(max_epochs: Any, order: list[str]) -> dict[str, float]:
    if isinstance(max_epochs, Mapping) or hasattr(max_epochs, "index"):
        given = _positive_by_name(max_epochs, "max_epochs")
        return _by_name_in(given, order, "`max_epochs`")
    value = _positive(max_epochs, "`max_epochs`")
    return {name: value for name in order}


def _mixture_by_name(mixture: Any, names: Sequence[str] | None, decision: Any) -> tuple[dict[str, float], Any]:
    """The weights by name (in the order of `names` when given), checked and normalized, and the decision."""
    from ._optimize import MixtureResult  # the result type, for its mixture and verdict

    if isinstance(mixture, MixtureResult):
        decision = mixture.decision if decision is None else decision
        mixture = np.asarray(mixture.r, dtype=float).reshape(-1, np.shape(mixture.r)[-1]).mean(axis=0)
    if isinstance(mixture, Mapping) or (hasattr(mixture, "items") and hasattr(mixture, "index")):
        pairs = _items(mixture, "`mixture`")
        keys = [name for name, _ in pairs]
        repeated = sorted({str(name) for name in keys if keys.count(name) > 1})
        if repeated:
            raise ValueError(f"`mixture` names dataset(s) {repeated} more than once")
        given = dict(pairs)
        order = list(given) if names is None else _check_names_match(given, names, "`mixture`", "a weight")
        values = [given[name] for name in order]
    else:
        if names is None:
            raise TypeError("a mixture given as an array (or a MixtureResult) needs `names`: each weight's dataset")
        order = _check_names_match(dict.fromkeys(names), names, "`names`")
        values = list(np.asarray(mixture, dtype=float).reshape(-1))
        if len(values) != len(order):
            raise ValueError(f"`mixture` has {len(values)} weights for {len(order)} names")
    for name, value in zip(order, values):
        if not isinstance(name, str) or not name:
            raise TypeError(f"dataset names are non-empty strings; got {name!r}")
        if isinstance(value, bool) or not np.isscalar(value) and np.ndim(value) != 0:
            raise TypeError(f"the weight of dataset {name!r} must be a number; got {value!r}")
        if not (np.isfinite(float(value)) and float(value) >= 0):
            raise ValueError(f"the weight of dataset {name!r} must be finite and >= 0; got {value!r}")
    total = math.fsum(float(v) for v in values)
    if abs(total - 1) > SUM_TOLERANCE:
        raise ValueError(f"the weights sum to {total:.10g}; a mixture sums to 1")
    return {name: float(value) / total for name, value in zip(order, values)}, decision


def _rounded(weights: dict[str, float], caps: dict[str, float] | None, digits: int) -> dict[str, Decimal]:
    """Each weight to `digits` decimals (at most its cap), then the largest weight that stays in [0, cap] when it
    takes the difference takes it: the written decimals sum to exactly 1."""
    quantum = Decimal(1).scaleb(-digits)
    limit = {name: Decimal(1) if caps is None else min(Decimal(1), Decimal(caps[name]).quantize(quantum, ROUND_FLOOR))
             for name in weights}  # fmt: skip
    out = {name: min(Decimal(w).quantize(quantum, ROUND_HALF_EVEN), limit[name]) for name, w in weights.items()}
    gap = Decimal(1) - sum(out.values(), Decimal(0))
    order = sorted(out, key=lambda name: out[name], reverse=True)
    fits = [name for name in order if 0 <= out[name] + gap <= limit[name]]
    out[(fits or order)[0]] += gap  # no weight can take it only when the caps sum to 1 within the rounding
    return out


def _decision_record(decision: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(decision) and not isinstance(decision, type):
        return _jsonable(dataclasses.asdict(decision), "decision")
    if isinstance(decision, Mapping):
        return _jsonable(dict(decision), "decision")
    raise TypeError(f"`decision` must be a Decision or a mapping (e.g. band, gain, verdict); got {decision!r:.60}")


def _jsonable(value: Any, where: str) -> Any:
    """`value` as JSON values (numpy numbers as floats, non-finite numbers as null), refusing what JSON cannot
    hold."""
    if isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise TypeError(f"{where} must be keyed by strings; got the keys {list(value)!r:.80}")
        return {key: _jsonable(item, f"{where}[{key!r}]") for key, item in value.items()}
    if isinstance(value, str | bool) or value is None:
        return value
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating) or (isinstance(value, np.ndarray) and value.ndim == 0):
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, Sequence | np.ndarray):
        return [_jsonable(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise TypeError(f"{where} holds {type(value).__name__}, which a JSON file cannot: give numbers, strings, lists")


# ------------------------------------------------------------------------------------------------------- writers


def _number(value: Decimal) -> str:
    """A written weight: plain decimals, never an exponent, always with a point (a YAML float)."""
    text = format(value.normalize(), "f")
    return text if "." in text else text + ".0"


def _string(value: str) -> str:
    """A double-quoted scalar that JSON and YAML read alike."""
    return json.dumps(value, ensure_ascii=False)


def _comments(record: dict[str, Any]) -> list[str]:
    """The record as `# key: value` lines (the YAML formats' provenance)."""
    lines = [f"# written by camel-jax {__version__}: {record['target']}",
             "# weights by dataset name; they sum to exactly 1"]  # fmt: skip
    for key in ("provenance", "decision"):
        for name, value in (record[key] or {}).items():
            lines.append(f"# {key}.{name}: {json.dumps(value, ensure_ascii=False)}")
    for key in ("caps", "max_epochs"):
        if record[key] is not None:
            lines.append(f"# {key}: {json.dumps(record[key], ensure_ascii=False)}")
    return lines


def _placeholder(name: str, record: dict[str, Any]) -> str:
    return record["paths"][name] if record["paths"] is not None else f"<path of {name}>"


def _json_text(written: dict[str, Decimal], record: dict[str, Any]) -> str:
    body = {
        "format": "camel-jax mixture",
        "format_version": JSON_FORMAT_VERSION,
        "mixture": {name: float(w) for name, w in written.items()},
        **{key: record[key] for key in ("caps", "max_epochs", "paths", "decision") if record[key] is not None},
        "provenance": record["provenance"],
    }
    return json.dumps(body, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _olmo_core_text(written: dict[str, Decimal], record: dict[str, Any]) -> str:
    lines = [*_comments(record), "sources:"]
    for name, weight in written.items():
        lines += [f"  - source_name: {_string(name)}", f"    target_ratio: {_number(weight)}",
                  f"    paths: [{_string(_placeholder(name, record))}]"]  # fmt: skip
        if record["max_epochs"] is not None:
            # OLMo-core takes at most available x max_source_fraction x max_repetition_ratio tokens of a source,
            # and wants max_repetition_ratio >= 1: E >= 1 epochs is a repetition, E < 1 a fraction of the source.
            epochs = record["max_epochs"][name]
            lines += [f"    max_repetition_ratio: {max(epochs, 1.0)!r}",
                      f"    max_source_fraction: {min(epochs, 1.0)!r}"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _levanter_text(written: dict[str, Decimal], record: dict[str, Any]) -> str:
    lines = _comments(record)
    if record["paths"] is not None:
        lines.append("configs:")
        for name in written:
            lines += [f"  {_string(name)}:", f"    train_urls: [{_string(record['paths'][name])}]"]
    lines.append("train_weights:")
    lines += [f"  {_string(name)}: {_number(weight)}" for name, weight in written.items()]
    return "\n".join(lines) + "\n"


def _megatron_text(written: dict[str, Decimal], record: dict[str, Any]) -> str:
    # Megatron reads every whitespace-separated word of this file: no comments, no names; a placeholder prefix
    # keeps the dataset's name, with its whitespace replaced, so that the file still splits into pairs.
    return "".join(f"{_number(weight)} {'_'.join(_placeholder(name, record).split())}\n"
                   for name, weight in written.items())  # fmt: skip


def _nanotron_text(written: dict[str, Decimal], record: dict[str, Any]) -> str:
    # nanotron lists folders and weights apart, matched by position: both lists are written in one order, each
    # entry commented with its dataset's name.
    lines = [*_comments(record), "data_stages:", '  - name: "camel-jax mixture"', "    start_training_step: 1",
             "    data:", "      dataset:", "        dataset_folder:"]  # fmt: skip
    lines += [f"          - {_string(_placeholder(name, record))}  # {_string(name)}" for name in written]
    lines.append("        dataset_weights:")
    lines += [f"          - {_number(weight)}  # {_string(name)}" for name, weight in written.items()]
    return "\n".join(lines) + "\n"


_WRITERS = {"json": _json_text, "olmo-core": _olmo_core_text, "levanter": _levanter_text,
            "megatron": _megatron_text, "nanotron": _nanotron_text}  # fmt: skip


def _write_text(path: Path, text: str) -> None:
    """Through a temporary file beside `path`, then renamed: a failed write leaves nothing behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# ------------------------------------------------------------------------------------------------------- readers


def _refuse_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"the key(s) {repeated} appear more than once")
    return dict(pairs)


def _yaml_pairs(path: Path, text: str) -> list[tuple[Any, Any]]:
    """(name, weight) of an olmo-core or levanter YAML export."""
    try:
        import yaml
    except ImportError:
        raise ImportError(f"reading {path} (YAML) needs PyYAML: pip install pyyaml") from None

    class Strict(yaml.SafeLoader):
        """PyYAML keeps the last of a repeated key: this loader refuses it."""

    def mapping(loader: Any, node: Any, deep: bool = False) -> dict:
        keys = [loader.construct_object(key, deep=deep) for key, _ in node.value]
        repeated = sorted({str(key) for key in keys if keys.count(key) > 1})
        if repeated:
            raise ValueError(f"{path} names dataset(s) {repeated} more than once")
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        data = yaml.load(text, Loader=Strict)  # a SafeLoader: builds plain values only
    except yaml.YAMLError as error:
        raise ValueError(f"{path} is not YAML: {str(error).splitlines()[0]}") from None
    if isinstance(data, dict) and isinstance(data.get("sources"), list):
        sources = data["sources"]
        if not all(isinstance(s, dict) and {"source_name", "target_ratio"} <= set(s) for s in sources):
            raise ValueError(f"{path}: every OLMo-core source needs a source_name and a target_ratio")
        return [(s["source_name"], s["target_ratio"]) for s in sources]
    if isinstance(data, dict) and isinstance(data.get("train_weights"), dict):
        return list(data["train_weights"].items())
    raise ValueError(
        f"{path} holds no mixture by name (an olmo-core `sources` list or a levanter `train_weights` map); "
        "Megatron's and nanotron's files key weights by path: read the json export instead"
    )
