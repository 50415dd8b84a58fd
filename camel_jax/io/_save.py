"""Saving and loading results: one `.npz` file holding the arrays and a JSON description of the structure.

The JSON records the object kind, each law's registered name and `structure()`, the package version, the format
version and a hash of the data, so a load rebuilds the exact pytree and refuses what it cannot rebuild faithfully.

A file is untrusted input (see SECURITY.md): nothing in it chooses code to import or run. A law class is looked
up by name in a registry (the shipped laws, plus those a user adds with `register_law`); the skeleton is built by
`jax.eval_shape`, so no metadata value sizes an allocation; every structure value, array dtype, shape and law
parameter is checked before an object is returned.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import stat
import tempfile
import time
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._version import __version__
from ..fitting._bootstrap import BootstrapResult
from ..fitting._calibrate import Calibration, DecisionCalibration
from ..fitting._fit import FitResult
from ..laws import CAMEL, DML, CAMELData, Chinchilla, LogLinear, LossToBenchmark, PowerLaw, SODMAdditive, SODMJoint
from ..laws._camel_mixture import CAMELMixture
from ..laws._legacy import legacy_layouts, upgrade
from ..mixture._pipeline import Pipeline, PipelineFit
from ..solver._options import FitOptions

# 2: CAMEL's and CAMELData's well-posed coordinates (issue 29; version-1 files are converted on load,
# laws/_legacy.py); a FitResult records its mixture column names (`names`), a Pipeline its `datasets` (None in
# version-1 files). 3: SODMAdditive's, SODMJoint's, DML's and Chinchilla's well-posed coordinates (version-1 and -2
# files are converted on load). 4: CAMEL's and CAMELData's optional `beta_max`. 5: SODMAdditive's and SODMJoint's
# `mixture_chart` (a string; earlier files hold the "log" chart, and load so). 6: DML's `t_max`, a bound on each
# term's rate, and CAMEL's `ratio_max`, the free law's bound on alpha / beta (earlier files hold unbounded laws, and
# load so). 7: a `DecisionCalibration`'s `center` and `spread` (its distances in leverage units; earlier files
# measured them in plain log size past `size_max`, and load so). 8: SODMJoint's `coefficient_chart` (earlier files
# hold the "roots" chart, and load so). 9: CAMELData's `data_term` (earlier files hold the "domains" data term, the
# default, and load so). 10: a `DecisionCalibration`'s gain scale follows the size (`scale_center`, `scale_exponent`,
# `exponent_se`, `scale_exponent_cov`; earlier files hold one scale for every size, and load so). 11: a
# `Calibration`'s `pooled` (how many targets share its kappas; earlier files hold per-target kappas, and load so).
# 12: CAMELData's `gamma_max` (its data term's exponents bounded, default 3) and `mixture_center` (the shares measured
# from the data's mean mixture; earlier files hold unbounded exponents and shares from the origin, and load so).
# 13: a FitResult's optional `targets` (names of several targets), `options` (its FitOptions), `bootstrap` (the
# resampled laws a band needs), `calibration`, and the reader flags and metadata of the table it was fitted on
# (earlier files hold none of them, and load so; a reader of format 12 refuses these files instead of misreading
# their extra arrays).
# 14: CAMELMixture's `a_max`, a bound on each term's slope (earlier files hold unbounded slopes, a = root_a^2, and
# load so).
# 15: a PipelineFit's `benchmark_problems` and `degenerate_benchmarks` (what its score's loss-to-benchmark fits said)
# and `resample_problems` (its resampled fits'); earlier files hold none, and load so; a reader of format 14 refuses
# these files rather than drop the warnings.
FORMAT_VERSION = 15

# Bounds on what a file may ask for: far above any real law, far below anything harmful.
_MAX_STRUCTURE_INT = 100_000
_MAX_INPUTS = 16
_MAX_METADATA_BYTES = 1_000_000

_SHIPPED: tuple[type, ...] = (CAMEL, CAMELData, DML, SODMAdditive, SODMJoint, Chinchilla, PowerLaw, LossToBenchmark,
                              LogLinear, CAMELMixture)

# A user's own law classes, as `save` and `load` take them: a sequence of classes (each named `module:qualname` in
# files) or a mapping {name in files: class}.
UserLaws = Sequence[type] | Mapping[str, type] | None
# What `save` writes and `load` returns.
Saveable = FitResult | BootstrapResult | Pipeline | PipelineFit


def known_laws(laws: UserLaws = None) -> dict[str, type]:
    """The law classes a file may name: the shipped laws (by class name) and the caller's own `laws`.

    Built anew on every call: no module-level registry, so what one caller allows never leaks into another."""
    known: dict[str, type] = {cls.__name__: cls for cls in _SHIPPED}
    named = laws.items() if isinstance(laws, Mapping) else ((None, cls) for cls in (laws or ()))
    for name, cls in named:
        if not (isinstance(cls, type) and issubclass(cls, eqx.Module) and hasattr(cls, "sample_init")):
            raise TypeError(f"`laws` takes law classes (eqx.Modules with sample_init); got {cls!r}")
        name = name or f"{cls.__module__}:{cls.__qualname__}"
        if known.get(name, cls) is not cls:
            raise ValueError(f"`laws` names two different classes {name!r}")
        known[name] = cls
    return known


def _registered_name(cls: type, known: dict[str, type]) -> str:
    for name, candidate in known.items():
        if candidate is cls:
            return name
    raise TypeError(
        f"law class {cls.__module__}:{cls.__qualname__} is not one camel-jax ships: pass it as "
        f"`save(..., laws=[{cls.__name__}])`, and as `load(..., laws=[{cls.__name__}])` where the file is read"
    )


def _law_descriptor(law: Any, known: dict[str, type]) -> dict[str, Any]:
    """Name and structure of a (possibly batched) law: structure() reads trailing axes only."""
    return {"class": _registered_name(type(law), known), "structure": _jsonable(law.structure())}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return {"__tuple__": [_jsonable(v) for v in value]}
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return value


def _structure_value(value: Any, where: str) -> Any:
    """A structure value from a file: a bool, a bounded int, a finite float, None or a tuple of those (strings are
    `_choice`s)."""
    if isinstance(value, dict) and set(value) == {"__tuple__"} and isinstance(value["__tuple__"], list):
        if len(value["__tuple__"]) > 16:
            raise ValueError(f"{where}: a tuple of {len(value['__tuple__'])} values")
        return tuple(_structure_value(v, where) for v in value["__tuple__"])
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -_MAX_STRUCTURE_INT <= value <= _MAX_STRUCTURE_INT:
            raise ValueError(f"{where}: integer {value} is out of range (|n| <= {_MAX_STRUCTURE_INT})")
        return value
    if isinstance(value, float):
        if not np.isfinite(value):
            raise ValueError(f"{where}: non-finite value {value}")
        return value
    raise ValueError(f"{where}: unexpected value {value!r}")


def _choice(cls: type, key: str, value: str, where: str) -> str:
    """A string structure value from a file: one of the values the law class declares for that keyword
    (`AbstractLaw.CHOICES`, e.g. SODM's `mixture_chart`); nothing else may be a string."""
    allowed = getattr(cls, "CHOICES", {}).get(key, ())
    if value not in allowed:
        raise ValueError(f"{where}: unexpected value {value[:40]!r}" + (f"; one of {allowed}" if allowed else ""))
    return value


def _template(descriptor: Any, where: str, known: dict[str, type]) -> Any:
    """The law's skeleton (shapes and dtypes only, built by eval_shape: nothing is allocated)."""
    if not isinstance(descriptor, dict) or not isinstance(descriptor.get("class"), str):
        raise ValueError(f"{where}: malformed law description")
    name = descriptor["class"]
    # Files of camel-jax <= 0.1 named a shipped law by its module path; the name after ':' is looked up.
    if name.startswith("camel_jax.") and name.partition(":")[2] in known:
        name = name.partition(":")[2]
    cls = known.get(name)
    if cls is None:
        raise ValueError(
            f"{where}: unknown law class {descriptor['class']!r}; load() builds only the shipped laws and those "
            f"passed as `laws=` ({', '.join(sorted(known))}): pass your own law class as load(..., laws=[MyLaw])"
        )
    raw = descriptor.get("structure")
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: malformed law structure")
    structure = {str(k): _choice(cls, str(k), v, f"{where} structure {k!r}") if isinstance(v, str)
                 else _structure_value(v, f"{where} structure {k!r}") for k, v in raw.items()}  # fmt: skip
    try:
        return eqx.filter_eval_shape(cls.sample_init, jax.random.key(0), **structure)  # type: ignore[attr-defined]
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: invalid {name} structure {structure}: {error}") from None


def _data_hash(arrays: list[np.ndarray]) -> str:
    digest = hashlib.sha256()
    for a in arrays:
        digest.update(np.ascontiguousarray(a).tobytes())
    return digest.hexdigest()[:16]


def save(
    obj: Saveable,
    path: str | Path,
    *,
    laws: UserLaws = None,
    reader: dict[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Save a FitResult, BootstrapResult, Pipeline or PipelineFit to `path` (a `.npz` file; the suffix is added
    if missing).

    `load(path)` gives back an equal object (exact round trip). A `PipelineFit` (what `fit_pipeline` returns)
    keeps everything its verdict uses: the resampled pipelines, the calibration of the extrapolation error, the
    score's noise and the trained mixtures, so `camel-jax optimize` on the file gives the same verdict as
    `optimal_mixture` on the object. The write is atomic.

    **Arguments**:

    - `obj`: the `FitResult`, `BootstrapResult`, `Pipeline` or `PipelineFit` to save.
    - `path`: the file to write (`.npz` is appended when missing).
    - `laws`: law classes camel-jax does not ship that `obj` holds (a sequence of classes, or {name: class});
      pass the same to `load`.
    - `reader`: how the runs were read (the `read_runs` keywords), kept in the file so that new rows are later
      read the same way (`saved_reader`); None: not recorded.
    - `metadata`: a JSON-able mapping kept beside the object (e.g. the table's column names, which `camel-jax
      predict` reads rows by); `read_metadata` gives it back. A `FitResult`'s `bootstrap` and `calibration` are
      saved with it.

    **Returns**: the `Path` written.
    """
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(path.suffix + ".npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, lambda f: save_to(obj, f, laws=laws, reader=reader, metadata=metadata))
    return path


def save_to(
    obj: Saveable,
    file: Any,
    *,
    laws: UserLaws = None,
    reader: dict[str, Any] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> None:
    """Write what `save` writes to an open binary file."""
    known = known_laws(laws)
    meta: dict[str, Any] = {"format_version": FORMAT_VERSION, "camel_jax_version": __version__}
    if reader is not None:
        meta["reader"] = {str(k): _jsonable(v) for k, v in reader.items()}
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise TypeError(f"`metadata` must be a mapping; got {type(metadata).__name__}")
        meta["metadata"] = json.loads(json.dumps(dict(metadata)))  # JSON-able, or a TypeError naming the value
    if isinstance(obj, FitResult):
        meta |= {"kind": "FitResult", **_fit_meta(obj, known)}
        meta["data_hash"] = _fit_hash(obj)
    elif isinstance(obj, BootstrapResult):
        meta |= {
            "kind": "BootstrapResult",
            "law": _law_descriptor(obj.laws, known),
            "has_status": obj.status is not None,
            "data_hash": _data_hash([np.asarray(obj.resamples)]),
            "names": None if obj.names is None else list(obj.names),
            "targets": None if obj.targets is None else list(obj.targets),
        }
    elif isinstance(obj, Pipeline):
        meta |= {"kind": "Pipeline", **_pipeline_meta(obj, known), "data_hash": None}
    elif isinstance(obj, PipelineFit):
        meta |= {
            "kind": "PipelineFit",
            "pipeline": _pipeline_meta(obj.pipeline, known),
            "pipelines": None if obj.pipelines is None else _pipeline_meta(obj.pipelines, known),
            "loss_fit": _fit_meta(obj.loss_fit, known),
            "resampled": obj.resamples is not None,
            "calibration": None if obj.calibration is None else _calibration_meta(obj.calibration),
            "data_hash": _fit_hash(obj.loss_fit),
            "decision_calibration": obj.decision_calibration is not None,
            "benchmark_problems": list(obj.benchmark_problems),
            "degenerate_benchmarks": list(obj.degenerate_benchmarks),
            "resample_problems": list(obj.resample_problems),
        }
    else:
        raise TypeError(f"save() takes a FitResult, BootstrapResult, Pipeline or PipelineFit; got {type(obj).__name__}")
    leaves = jax.tree.leaves(obj)
    arrays = {f"leaf_{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    arrays["__meta__"] = np.array(json.dumps(meta))
    np.savez(file, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as its `allow_pickle`


def _fit_meta(fit: FitResult, known: dict[str, type]) -> dict[str, Any]:
    names = None if fit.names is None else [str(name) for name in fit.names]
    targets = None if fit.targets is None else [str(name) for name in fit.targets]
    meta = {"law": _law_descriptor(fit.law, known), "n_inputs": len(fit.inputs), "log_residuals": fit.log_residuals,
            "names": names, "targets": targets, "options": _options_meta(fit.options)}  # fmt: skip
    # optional (absent in files written before them, and then None): the fit's bootstrap and calibration
    if fit.bootstrap is not None:
        meta["bootstrap"] = {"law": _law_descriptor(fit.bootstrap.laws, known),
                             "has_status": fit.bootstrap.status is not None}  # fmt: skip
    if fit.calibration is not None:
        meta["calibration"] = _calibration_meta(fit.calibration)
    return meta


# The fields of a FitOptions a file keeps (issue 57): all but `penalty`, a function, which no file can hold (a fit
# with a penalty is saved without its options; pass them again to whatever rereads it).
_SAVED_OPTIONS = ("max_steps", "tol", "polish", "delta", "log_residuals", "reduction", "prescreen", "lanes")


def _options_meta(options: FitOptions | None) -> dict[str, Any] | None:
    if options is None or options.penalty is not None:
        return None
    return {name: getattr(options, name) for name in _SAVED_OPTIONS}


def _options_from(value: Any, where: str, log_residuals: bool) -> FitOptions | None:
    """A fit's `FitOptions` from a file: None where it recorded none (files before issue 57, fits with a penalty),
    otherwise checked as `FitOptions` checks its fields."""
    if value is None:
        return None
    if not isinstance(value, dict) or not set(value) <= set(_SAVED_OPTIONS):
        raise ValueError(f"{where}: options must be a mapping of {', '.join(_SAVED_OPTIONS)}")
    try:
        options = FitOptions(**value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: invalid options: {error}") from None
    if options.log_residuals != log_residuals:
        raise ValueError(f"{where}: options.log_residuals disagrees with log_residuals")
    return options


def _fit_hash(fit: FitResult) -> str:
    return _data_hash([np.asarray(x) for x in (*fit.inputs, fit.y, fit.weights)])


def _pipeline_meta(pipeline: Pipeline, known: dict[str, type]) -> dict[str, Any]:
    return {
        "loss_laws": {b: _law_descriptor(law, known) for b, law in pipeline.loss_laws.items()},
        "benchmark_laws": {b: _law_descriptor(law, known) for b, law in pipeline.benchmark_laws.items()},
        "weights": [[b, w] for b, w in pipeline.benchmark_weights],
        "datasets": None if pipeline.datasets is None else list(pipeline.datasets),
    }


def _calibration_meta(calibration: Calibration) -> dict[str, Any]:
    """The calibration's static fields (its arrays are leaves)."""
    return {
        "size_max": float(calibration.size_max),
        "size_index": int(calibration.size_index),
        "log_scale": bool(calibration.log_scale),
        "distances": [float(d) for d in calibration.distances],
        "pooled": int(calibration.pooled),
        # the tokens it measures distance in (absent in files written before; they load as a calibration in size)
        "tokens_index": calibration.tokens_index,
        "tokens_range": None if calibration.tokens_range is None else [float(t) for t in calibration.tokens_range],
        "tokens_measured": [bool(m) for m in calibration.tokens_measured],
    }


# A temporary file of `_write_atomic` untouched this long belongs to a writer that was killed (SIGKILL, power loss).
STALE_TMP_SECONDS = 3600.0


def _write_atomic(path: Path, write: Any) -> None:
    """Write through a temporary file in the same folder, then rename: a failed write leaves nothing behind."""
    tmp = _write_temporary(path, write)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_temporary(path: Path, write: Any) -> Path:
    """Write to a fresh hidden file beside `path` (`.name.<random>.tmp`) and return it; on failure it is removed.
    Temporary files of `path` left by a killed writer (older than `STALE_TMP_SECONDS`) are removed first."""
    _remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, _file_mode(path))  # mkstemp's 0600 would make every output private, whatever the umask
        with os.fdopen(fd, "wb") as f:
            write(f)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def _file_mode(path: Path) -> int:
    """The permissions a written file gets: those of the file it replaces, else 0666 less the process's umask (as
    `open` would give a new file)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        umask = os.umask(0o022)  # read it the only portable way: set, then restore at once
        os.umask(umask)
        return 0o666 & ~umask


def _remove_stale_temporaries(path: Path) -> None:
    now = time.time()
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        try:
            if now - stale.stat().st_mtime > STALE_TMP_SECONDS:
                stale.unlink()
        except OSError:  # gone already, or not ours to remove: never a reason to fail a save
            pass


def _read(path: Path) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Metadata and arrays of a file written by `save`; any other file is a one-line `ValueError`."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = {info.filename: info for info in archive.infolist()}
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise ValueError(f"{path} is not a file written by camel_jax.save (not a .npz archive: {error})") from None
    n = len(infos) - 1
    expected = {"__meta__.npy", *(f"leaf_{i}.npy" for i in range(n))}
    if set(infos) != expected:
        raise ValueError(f"{path} is not a file written by camel_jax.save (unexpected entries)")
    if infos["__meta__.npy"].file_size > _MAX_METADATA_BYTES:
        raise ValueError(f"{path}: metadata of {infos['__meta__.npy'].file_size} bytes is implausibly large")
    if any(info.compress_type != zipfile.ZIP_STORED for info in infos.values()):
        raise ValueError(f"{path}: compressed entries are not written by camel_jax.save")
    _check_declared_sizes(path, infos)
    try:
        with np.load(path, allow_pickle=False) as stored:
            meta = json.loads(str(stored["__meta__"]))
            leaves = [stored[f"leaf_{i}"] for i in range(n)]
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, json.JSONDecodeError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"{path} could not be read as a camel_jax.save file: {message}") from None
    except (RecursionError, MemoryError):
        raise ValueError(f"{path}: metadata nested too deeply or too large to be a camel_jax.save file") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: malformed metadata")
    for i, leaf in enumerate(leaves):
        if leaf.dtype.kind not in "biuf":
            raise ValueError(f"{path}: array leaf_{i} has dtype {leaf.dtype}; saved results hold numbers only")
    # a file written on (or converted to) the other byte order holds the same numbers: read them in this machine's
    leaves = [leaf.astype(leaf.dtype.newbyteorder("=")) if not leaf.dtype.isnative else leaf for leaf in leaves]
    return meta, leaves


def _check_declared_sizes(path: Path, infos: dict[str, zipfile.ZipInfo]) -> None:
    """Each array's header must declare no more bytes than its entry holds: a file cannot make `load` allocate
    what it does not contain."""
    with zipfile.ZipFile(path) as archive:
        for name, info in infos.items():
            try:
                with archive.open(info) as entry:
                    version = np.lib.format.read_magic(entry)
                    fmt = np.lib.format
                    read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
                    shape, _, dtype = read(entry, max_header_size=10_000)
            except (ValueError, OSError, EOFError, SyntaxError, zipfile.BadZipFile) as error:
                message = str(error).splitlines()[0] if str(error) else type(error).__name__
                raise ValueError(f"{path}: entry {name} is not a plain array: {message}") from None
            declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if declared > info.file_size:
                raise ValueError(
                    f"{path}: entry {name} declares {declared} bytes of data but holds {info.file_size}: the file is "
                    "truncated or forged"
                )


def _skeleton(meta: dict[str, Any], path: Path, known: dict[str, type]) -> tuple[Any, list[tuple[str, Any]]]:
    """The object to fill, with law skeletons (from eval_shape) in place of laws, and for each law its name and
    a function that picks it out of the object, for the shape checks."""
    kind = meta.get("kind")
    if kind == "FitResult":
        fitted = _fit_skeleton(meta, f"{path}", known)
        picks = [("law", lambda o: o.law), ("laws", lambda o: o.laws)]
        if fitted.bootstrap is not None:
            picks.append(("bootstrap.laws", lambda o: o.bootstrap.laws))
        return fitted, picks
    if kind == "BootstrapResult":
        law = _template(meta.get("law"), f"{path}: law", known)
        zero = jnp.zeros(())
        status = zero if meta.get("has_status") is True else None  # files written before `status`: None
        skeleton = BootstrapResult(laws=law, objectives=zero, converged=zero, n_failed=zero, resamples=zero,
                                   status=status, names=_names(meta.get("names"), f"{path}: names"),
                                   targets=_names(meta.get("targets"), f"{path}: targets"))  # fmt: skip
        return skeleton, [("laws", lambda o: o.laws)]
    if kind == "Pipeline":
        pipeline = _pipeline_skeleton(meta, f"{path}", known)
        return pipeline, _pipeline_picks(pipeline, "", lambda o: o)
    if kind == "PipelineFit":
        return _pipeline_fit_skeleton(meta, path, known)
    raise ValueError(f"{path}: unknown object kind {kind!r}")


def _fit_skeleton(meta: Any, where: str, known: dict[str, type]) -> FitResult:
    if not isinstance(meta, dict):
        raise ValueError(f"{where}: malformed fit description")
    n_inputs = meta.get("n_inputs")
    if not (isinstance(n_inputs, int) and not isinstance(n_inputs, bool) and 1 <= n_inputs <= _MAX_INPUTS):
        raise ValueError(f"{where}: n_inputs must be an integer in [1, {_MAX_INPUTS}]; got {n_inputs!r}")
    if not isinstance(meta.get("log_residuals"), bool):
        raise ValueError(f"{where}: log_residuals must be true or false")
    law = _template(meta.get("law"), f"{where}: law", known)
    zero = jnp.zeros(())
    boot, cal = meta.get("bootstrap"), meta.get("calibration")
    if boot is not None:
        if not isinstance(boot, dict):
            raise ValueError(f"{where}: malformed bootstrap description")
        boot = BootstrapResult(laws=_template(boot.get("law"), f"{where}: bootstrap law", known), objectives=zero,
                               converged=zero, n_failed=zero, resamples=zero,
                               status=zero if boot.get("has_status") is True else None)  # fmt: skip
    if cal is not None:
        cal = _calibration_skeleton(cal, f"{where}: calibration", n_inputs)
    return FitResult(
        law=law,
        objective=zero,
        laws=law,
        objectives=zero,
        converged=zero,
        n_steps=zero,
        grad_norm=zero,
        status=zero,
        n_failed=zero,
        inputs=(zero,) * n_inputs,
        y=zero,
        weights=zero,
        log_residuals=meta["log_residuals"],
        names=_names(meta.get("names"), where),
        targets=_names(meta.get("targets"), f"{where}: targets"),  # absent (None) in files written before it
        bootstrap=boot,
        calibration=cal,
        options=_options_from(meta.get("options"), where, meta["log_residuals"]),
    )


def _names(value: Any, where: str) -> tuple[str, ...] | None:
    """A fit's mixture column names from a file: None (version 1 files, fits of arrays) or short strings."""
    if value is None:
        return None
    ok = isinstance(value, list) and 0 < len(value) <= _MAX_STRUCTURE_INT
    if not (ok and all(isinstance(v, str) and 0 < len(v) <= 1000 for v in value) and len(set(value)) == len(value)):
        raise ValueError(f"{where}: names must be a list of distinct column names")
    return tuple(value)


def _pipeline_skeleton(meta: Any, where: str, known: dict[str, type]) -> Pipeline:
    if not isinstance(meta, dict):
        raise ValueError(f"{where}: malformed pipeline description")
    loss_meta, bench_meta, weights = meta.get("loss_laws"), meta.get("benchmark_laws"), meta.get("weights")
    if not (isinstance(loss_meta, dict) and isinstance(bench_meta, dict) and isinstance(weights, list)):
        raise ValueError(f"{where}: malformed pipeline description")
    pairs = {}
    for item in weights:
        ok = isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
        if not (ok and isinstance(item[1], (int, float)) and np.isfinite(item[1])):
            raise ValueError(f"{where}: malformed benchmark weight {item!r}")
        pairs[item[0]] = float(item[1])
    loss = {b: _template(d, f"{where}: loss law {b!r}", known) for b, d in loss_meta.items()}
    bench = {b: _template(d, f"{where}: benchmark law {b!r}", known) for b, d in bench_meta.items()}
    pipeline = Pipeline(loss, bench, pairs, _names(meta.get("datasets"), f"{where}: datasets"))
    if pipeline.datasets is not None and len(pipeline.datasets) != pipeline.n_datasets:
        raise ValueError(f"{where}: datasets names {len(pipeline.datasets)} columns for {pipeline.n_datasets}")
    return pipeline


def _pipeline_picks(pipeline: Pipeline, prefix: str, pick: Any) -> list[tuple[str, Any]]:
    """(name, picker) of every law of a pipeline that `pick` takes out of the object."""
    loss = [(f"{prefix}loss_laws[{b!r}]", lambda o, b=b: pick(o).loss_laws[b]) for b in pipeline.loss_laws]
    bench = [(f"{prefix}benchmark_laws[{b!r}]", lambda o, b=b: pick(o).benchmark_laws[b])
             for b in pipeline.benchmark_laws]  # fmt: skip
    return loss + bench


def _strings(value: Any, where: str) -> tuple[str, ...]:
    """A list of strings from a file's metadata, as a tuple (one line naming the field otherwise)."""
    if not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
        raise ValueError(f"{where} must be a list of strings")
    return tuple(value)


def _pipeline_fit_skeleton(meta: dict[str, Any], path: Path, known: dict[str, type]) -> tuple[Any, list]:
    """A PipelineFit's skeleton: its point and resampled pipelines, its mixture-law fit and its calibration."""
    pipeline = _pipeline_skeleton(meta.get("pipeline"), f"{path}: pipeline", known)
    batched = meta.get("pipelines")
    pipelines = None if batched is None else _pipeline_skeleton(batched, f"{path}: pipelines", known)
    loss_fit = _fit_skeleton(meta.get("loss_fit"), f"{path}: loss_fit", known)
    if not isinstance(meta.get("resampled"), bool):
        raise ValueError(f"{path}: resampled must be true or false")
    cal = meta.get("calibration")
    calibration = None if cal is None else _calibration_skeleton(cal, f"{path}: calibration", len(loss_fit.inputs))
    zero = jnp.zeros(())
    decision: Any = _decision_skeleton(meta, path)  # a layout before format 7 is converted once loaded
    said = _strings(meta.get("benchmark_problems", []), f"{path}: benchmark_problems")
    degenerate = _strings(meta.get("degenerate_benchmarks", []), f"{path}: degenerate_benchmarks")
    resampled = _strings(meta.get("resample_problems", []), f"{path}: resample_problems")
    unknown = sorted(set(degenerate) - {b for b, _ in pipeline.benchmark_weights})
    if unknown:
        raise ValueError(f"{path}: degenerate_benchmarks names {unknown}, not benchmarks of the pipeline's score")
    skeleton = PipelineFit(pipeline=pipeline, pipelines=pipelines, loss_fit=loss_fit,
                           resamples=zero if meta["resampled"] else None, calibration=calibration,
                           score_noise=0.0, decision_calibration=decision, benchmark_problems=said,
                           degenerate_benchmarks=degenerate, resample_problems=resampled)  # fmt: skip
    picks = _pipeline_picks(pipeline, "pipeline.", lambda o: o.pipeline)
    if pipelines is not None:
        picks += _pipeline_picks(pipelines, "pipelines.", lambda o: o.pipelines)
    return skeleton, picks + [("loss_fit.law", lambda o: o.loss_fit.law), ("loss_fit.laws", lambda o: o.loss_fit.laws)]


# The fields of `DecisionCalibration` a file before format 10 stores, in order (format 10 added the scale's trend
# in size), and before format 7 (which added `center` and `spread`).
_TREND_FIELDS = ("scale_center", "scale_exponent", "exponent_se", "scale_exponent_cov")
_DECISION_BEFORE_10 = tuple(f.name for f in dataclasses.fields(DecisionCalibration) if f.name not in _TREND_FIELDS)
_DECISION_BEFORE_7 = tuple(name for name in _DECISION_BEFORE_10 if name not in ("center", "spread"))


def _decision_skeleton(meta: dict[str, Any], path: Path) -> DecisionCalibration | tuple[Array, ...] | None:
    """A decision calibration's skeleton (all its fields are scalar leaves), or None (also for files written
    before it existed); files before format 10 store a tuple of the fields it had then (`_decision_before_10`)."""
    present = meta.get("decision_calibration", False)
    if not isinstance(present, bool):
        raise ValueError(f"{path}: decision_calibration must be true or false")
    if not present:
        return None
    version = meta.get("format_version", 0)
    if version < 10:
        return tuple(jnp.zeros(()) for _ in (_DECISION_BEFORE_7 if version < 7 else _DECISION_BEFORE_10))
    return DecisionCalibration(*(jnp.zeros(()) for _ in dataclasses.fields(DecisionCalibration)))


def _decision_before_10(stored: tuple[Array, ...]) -> DecisionCalibration:
    """The calibration a file before format 10 stored, with one gain scale for every size (exponent 0); before
    format 7 also with its distance max(0, log M - log size_max) / 1."""
    if len(stored) == len(_DECISION_BEFORE_7):
        values = dict(zip(_DECISION_BEFORE_7, stored, strict=True))
        values.update(center=jnp.log(values["size_max"]), spread=jnp.ones_like(values["size_max"]))
    else:
        values = dict(zip(_DECISION_BEFORE_10, stored, strict=True))
    zero = jnp.zeros_like(values["scale"])
    return DecisionCalibration(**values, scale_center=values["center"], scale_exponent=zero, exponent_se=zero,
                               scale_exponent_cov=zero)  # fmt: skip


def _calibration_skeleton(meta: Any, where: str, n_inputs: int) -> Calibration:
    """A calibration's static fields, each checked: the size it extrapolates from, which input is the size, the
    scale and the held-out cells' distances."""
    if not isinstance(meta, dict):
        raise ValueError(f"{where}: malformed description")
    size_max, index, log_scale, distances = (meta.get(k) for k in ("size_max", "size_index", "log_scale", "distances"))
    if not (isinstance(size_max, (int, float)) and not isinstance(size_max, bool) and 0 < size_max < np.inf):
        raise ValueError(f"{where}: size_max must be a finite number > 0; got {size_max!r}")
    if not (isinstance(index, int) and not isinstance(index, bool) and 0 <= index < n_inputs):
        raise ValueError(f"{where}: size_index must be an integer in [0, {n_inputs}); got {index!r}")
    if not isinstance(log_scale, bool):
        raise ValueError(f"{where}: log_scale must be true or false")
    if not isinstance(distances, list) or len(distances) > _MAX_STRUCTURE_INT:
        raise ValueError(f"{where}: distances must be a list of finite numbers >= 0")
    if not all(isinstance(d, (int, float)) and not isinstance(d, bool) and 0 <= d < np.inf for d in distances):
        raise ValueError(f"{where}: distances must be a list of finite numbers >= 0")
    pooled = meta.get("pooled", 1)  # files before format 11: per-target kappas
    if not (isinstance(pooled, int) and not isinstance(pooled, bool) and 1 <= pooled <= _MAX_STRUCTURE_INT):
        raise ValueError(f"{where}: pooled must be an integer >= 1; got {pooled!r}")
    tokens_index, tokens_range = meta.get("tokens_index"), meta.get("tokens_range")
    tokens_measured = meta.get("tokens_measured", [False, False])
    if tokens_index is not None and not (isinstance(tokens_index, int) and not isinstance(tokens_index, bool)
                                         and 0 <= tokens_index < n_inputs and tokens_index != index):  # fmt: skip
        raise ValueError(f"{where}: tokens_index must be an input other than the size; got {tokens_index!r}")
    if (tokens_range is None) != (tokens_index is None) or tokens_range is not None and not (
        isinstance(tokens_range, list) and len(tokens_range) == 2
        and all(isinstance(t, (int, float)) and not isinstance(t, bool) and 0 < t < np.inf for t in tokens_range)
        and tokens_range[0] <= tokens_range[1]
    ):  # fmt: skip
        raise ValueError(f"{where}: tokens_range must be [min, max] of finite numbers > 0 with tokens_index")
    if not (isinstance(tokens_measured, list) and len(tokens_measured) == 2
            and all(isinstance(m, bool) for m in tokens_measured)):  # fmt: skip
        raise ValueError(f"{where}: tokens_measured must be two true/false values")
    zero = jnp.zeros(())
    return Calibration(kappa_level=zero, kappa_mix=zero, size_max=float(size_max), size_index=index,
                       log_scale=log_scale, distances=tuple(float(d) for d in distances), rms_error=zero,
                       boot_sd=zero, noise_sd=zero, pooled=pooled, tokens_index=tokens_index,
                       tokens_range=None if tokens_range is None else (float(tokens_range[0]), float(tokens_range[1])),
                       tokens_measured=(tokens_measured[0], tokens_measured[1]))  # fmt: skip


def _check_law(stored: Any, skeleton: Any, name: str, path: Path) -> None:
    """Stored law leaves are floats whose trailing axes are the structure's and whose leading (batch) axes
    agree across the law."""
    batch = set()
    for leaf, spec in zip(jax.tree.leaves(stored), jax.tree.leaves(skeleton)):
        core = leaf.shape[leaf.ndim - spec.ndim :] if spec.ndim else ()
        if leaf.ndim < spec.ndim or core != spec.shape or leaf.dtype.kind != "f":
            raise ValueError(
                f"{path}: {name} holds an array of shape {leaf.shape} and dtype {leaf.dtype} where its structure "
                f"needs floats of trailing shape {spec.shape}"
            )
        batch.add(leaf.shape[: leaf.ndim - spec.ndim])
    if len(batch) > 1:
        raise ValueError(f"{path}: {name}'s arrays disagree in their leading axes {sorted(batch)}")


def _check_finite(obj: Any, path: Path) -> None:
    """The laws a user acts on hold finite parameters (a failed start of a fit may be non-finite: its
    objective says so, and it is never the chosen law)."""

    def finite(law: Any, where: Any = None) -> bool:
        leaves = [np.asarray(leaf) for leaf in jax.tree.leaves(law)]
        if where is None:
            return all(np.isfinite(leaf).all() for leaf in leaves)
        keep = np.asarray(where)
        return all(np.isfinite(leaf[keep]).all() for leaf in leaves)

    def fit_ok(fitted: FitResult) -> bool:
        ok = finite(fitted.law) or not np.isfinite(np.asarray(fitted.objective)).all()
        if fitted.bootstrap is not None:
            ok = ok and finite(fitted.bootstrap.laws, fitted.bootstrap.finite())
        return ok

    for fitted in [obj] if isinstance(obj, FitResult) else [obj.loss_fit] if isinstance(obj, PipelineFit) else []:
        if not np.isfinite(np.asarray(fitted.objective)).any() and not finite(fitted.law):
            raise ValueError(
                f"{path}: field `law` holds non-finite parameters and `objective` is {np.asarray(fitted.objective)}: "
                "every start of this fit failed, so nothing in it can be used; refit"
            )
    if isinstance(obj, FitResult):
        ok = fit_ok(obj)
    elif isinstance(obj, BootstrapResult):
        ok = finite(obj.laws, np.isfinite(np.asarray(obj.objectives)))
    elif isinstance(obj, PipelineFit):
        ok = finite(obj.pipeline) and finite(obj.pipelines) and fit_ok(obj.loss_fit)
    else:
        ok = finite((obj.loss_laws, obj.benchmark_laws))
    if not ok:
        raise ValueError(f"{path}: a law holds non-finite parameters")


def _check_fit_data(fitted: FitResult, where: str) -> None:
    """A fit's data as `fit` would accept them: inputs of one length P and finite, y [P] or [T, P] finite (and > 0
    under log residuals) where weighted, weights finite, >= 0 and not all zero, one name per mixture column."""
    from ..data._checks import _check_positive, _check_simplex, check_inputs, check_targets

    try:
        arrays = check_inputs(fitted.inputs)
        check_targets(fitted.y, fitted.weights, arrays[0].shape[0], fitted.log_residuals)
        if np.shape(fitted.weights) != np.shape(fitted.y):
            raise ValueError(f"`weights` has shape {np.shape(fitted.weights)}, `y` {np.shape(fitted.y)}")
    except ValueError as error:
        raise ValueError(f"{where}: the fitted data are invalid: {error}") from None
    if arrays[0].ndim == 2 and "n_datasets" in getattr(fitted.law, "structure", dict)():
        try:
            _check_simplex(arrays[0])  # a mixture law's runs: rows on the simplex, sizes and tokens > 0
            for i, a in enumerate(arrays[1:], start=1):
                _check_positive(a, f"inputs[{i}] (model size or tokens)")
        except ValueError as error:
            raise ValueError(f"{where}: field `inputs` is invalid: {error}") from None
    if fitted.names is not None and (arrays[0].ndim != 2 or arrays[0].shape[1] != len(fitted.names)):
        raise ValueError(f"{where}: names {list(fitted.names)} do not match inputs[0] of shape {arrays[0].shape}")
    n_targets = 1 if np.ndim(fitted.y) == 1 else np.shape(fitted.y)[0]
    if fitted.targets is not None and len(fitted.targets) != n_targets:
        raise ValueError(f"{where}: targets {list(fitted.targets)} do not match y of shape {np.shape(fitted.y)}")
    boot = fitted.bootstrap
    if boot is not None:
        B = np.shape(boot.objectives)[0] if np.ndim(boot.objectives) else -1
        per = (B,) if fitted.n_targets is None else (B, fitted.n_targets)
        resamples = np.asarray(boot.resamples)
        if np.shape(boot.objectives) != per or resamples.shape != (B, arrays[0].shape[0]):
            raise ValueError(f"{where}: the bootstrap's objectives {np.shape(boot.objectives)} and resamples "
                             f"{resamples.shape} do not match the fit's {per} resamples of {arrays[0].shape[0]} runs")
        if not (np.isfinite(resamples).all() and np.all(resamples >= 0)):
            raise ValueError(f"{where}: the bootstrap's resample weights must be finite and >= 0")
    cal = fitted.calibration
    if cal is not None:
        for name in ("kappa_level", "kappa_mix"):
            kappa = np.asarray(getattr(cal, name))
            if kappa.dtype.kind != "f" or kappa.ndim > 1 or not (np.isfinite(kappa).all() and np.all(kappa >= 0)):
                raise ValueError(f"{where}: calibration {name} must be finite numbers >= 0")


def _checked_pipeline_fit(obj: PipelineFit, path: Path) -> PipelineFit:
    """The parts of a PipelineFit that are not laws: the noise is a number >= 0, the resample counts [B, P] are
    whole numbers >= 0 over the fit's runs, and the calibration's error scales are >= 0, one per benchmark."""
    noise = np.asarray(obj.score_noise)
    if noise.shape != () or noise.dtype.kind != "f" or not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"{path}: score_noise must be a finite number >= 0")
    n_points = np.shape(obj.loss_fit.inputs[0])[0] if np.ndim(obj.loss_fit.inputs[0]) else -1
    if obj.resamples is not None:
        counts = np.asarray(obj.resamples)
        ok = counts.ndim == 2 and counts.shape[1] == n_points and np.isfinite(counts).all()
        if not (ok and np.all(counts >= 0) and np.all(counts == np.round(counts))):
            raise ValueError(f"{path}: resamples must be whole counts >= 0 of shape [B, {n_points}]")
    cal = obj.calibration
    if cal is not None:
        n_bench = len(obj.pipeline.benchmark_weights)
        for name in ("kappa_level", "kappa_mix"):
            kappa = np.asarray(getattr(cal, name))
            ok = kappa.dtype.kind == "f" and kappa.shape in ((), (n_bench,)) and np.isfinite(kappa).all()
            if not (ok and np.all(kappa >= 0)):
                raise ValueError(f"{path}: calibration {name} must be finite numbers >= 0, one per benchmark")
        if cal.pooled not in (1, n_bench):
            raise ValueError(f"{path}: calibration pooled must be 1 or the number of benchmarks ({n_bench})")
    decision = obj.decision_calibration
    if decision is not None:
        for field in dataclasses.fields(DecisionCalibration):
            value = np.asarray(getattr(decision, field.name))
            # a law can predict a mixture's effect with the wrong sign; sizes below 1 have a negative mean log size
            signed = field.name in ("scale", "center", "scale_center", "scale_exponent", "scale_exponent_cov")
            if value.shape != () or value.dtype.kind != "f" or not (np.isfinite(value) and (signed or value >= 0)):
                raise ValueError(f"{path}: decision_calibration {field.name} must be a finite number >= 0")
            if field.name == "spread" and not value > 0:
                raise ValueError(f"{path}: decision_calibration spread must be > 0")
    return dataclasses.replace(obj, score_noise=float(noise))


def saved_reader(path: str | Path) -> dict[str, Any] | None:
    """How the runs behind a saved file were read (the `read_runs` keywords `save(..., reader=)` recorded, e.g. by
    `camel-jax fit`), or None when the file does not say."""
    meta, _ = _read(Path(path))
    reader = meta.get("reader")
    return dict(reader) if isinstance(reader, dict) else None


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The `metadata` a file was saved with ({} when none: every file written before it existed).

    **Arguments**:

    - `path`: a file `save` wrote.

    **Returns**: the mapping, as JSON reads it back.
    """
    meta, _ = _read(Path(path))
    value = meta.get("metadata", {})
    if not isinstance(value, dict):
        raise ValueError(f"{path}: malformed metadata")
    return value


def load(path: str | Path, *, laws: UserLaws = None) -> Saveable:
    """Load what `save` wrote.

    The file is untrusted: laws are built only from the shipped classes and the caller's own `laws` (a sequence
    of classes, or {name in the file: class}), never by import; every
    structure value is bounded, and every array's dtype and shape is checked against the structure before the
    object is built; law parameters must be finite. Anything else, and a newer format version, is a `ValueError`
    naming the problem; a missing file is `FileNotFoundError`.

    **Arguments**:

    - `path`: a file `save` wrote.
    - `laws`: law classes beyond the shipped ones that the file may name (a sequence of classes, or {name in the
      file: class}); nothing else is ever imported.

    **Returns**: the saved object (`FitResult`, `BootstrapResult`, `Pipeline` or `PipelineFit`), equal to the one
    saved.
    """
    path = Path(path)
    if not path.exists() and path.with_suffix(path.suffix + ".npz").exists():
        path = path.with_suffix(path.suffix + ".npz")
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    meta, leaves = _read(path)
    version = meta.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError(f"{path}: malformed format_version {version!r}")
    if version > FORMAT_VERSION:
        raise ValueError(
            f"{path} uses format version {version} (camel-jax {meta.get('camel_jax_version')!s:.20}); "
            f"this camel-jax {__version__} reads up to version {FORMAT_VERSION}: upgrade camel-jax"
        )
    known = known_laws(laws)
    if version < FORMAT_VERSION:  # laws whose stored layout changed are rebuilt as they were, then converted
        known.update({name: cls for name, cls in legacy_layouts(version).items() if known.get(name) in _SHIPPED})
    skeleton, picks = _skeleton(meta, path, known)
    treedef = jax.tree.structure(skeleton)
    n_leaves = len(jax.tree.leaves(skeleton))
    if n_leaves != len(leaves):
        raise ValueError(f"{path}: stored {len(leaves)} arrays but the {meta['kind']} structure needs {n_leaves}")
    stored = jax.tree.unflatten(treedef, leaves)
    for name, pick in picks:
        _check_law(pick(stored), pick(skeleton), name, path)
    obj = jax.tree.unflatten(treedef, [jnp.asarray(leaf) for leaf in leaves])
    if version < FORMAT_VERSION:
        obj = upgrade(obj)
        if isinstance(obj, PipelineFit) and isinstance(obj.decision_calibration, tuple):
            obj = dataclasses.replace(obj, decision_calibration=_decision_before_10(obj.decision_calibration))
    _check_finite(obj, path)
    if isinstance(obj, FitResult):
        _check_fit_data(obj, f"{path}")
    elif isinstance(obj, PipelineFit):
        _check_fit_data(obj.loss_fit, f"{path}: loss_fit")
    return _checked_pipeline_fit(obj, path) if isinstance(obj, PipelineFit) else obj
