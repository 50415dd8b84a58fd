"""Saving and loading results: one `.npz` file holding the arrays and a JSON description of the structure.

The JSON records the object kind, each law's class and `structure()`, the package version, the format version
and a hash of the data, so a load rebuilds the exact pytree (law templates from `sample_init`, then the stored
leaves) and refuses what it cannot rebuild faithfully.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from . import __version__
from ._bootstrap import BootstrapResult
from ._fit import FitResult
from ._pipeline import Pipeline

FORMAT_VERSION = 1


def _law_descriptor(law: Any) -> dict[str, Any]:
    """Class and structure of a (possibly batched) law: structure() reads trailing axes only."""
    cls = type(law)
    return {"class": f"{cls.__module__}:{cls.__qualname__}", "structure": _jsonable(law.structure())}


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


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__tuple__"}:
            return tuple(_from_json(v) for v in value["__tuple__"])
        return {k: _from_json(v) for k, v in value.items()}
    return value


def _template(descriptor: dict[str, Any]) -> Any:
    module_name, _, qualname = descriptor["class"].partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        raise ValueError(
            f"unknown law class {descriptor['class']!r}: import the module that defines it before loading"
        ) from None
    return obj.sample_init(jax.random.key(0), **_from_json(descriptor["structure"]))


def _data_hash(arrays: list[np.ndarray]) -> str:
    digest = hashlib.sha256()
    for a in arrays:
        digest.update(np.ascontiguousarray(a).tobytes())
    return digest.hexdigest()[:16]


def save(obj: FitResult | BootstrapResult | Pipeline, path: str | Path) -> Path:
    """Save a FitResult, BootstrapResult or Pipeline to `path` (a `.npz` file; the suffix is added if missing).

    Returns the path written. `load(path)` gives back an equal object (exact round trip).
    """
    path = Path(path)
    if path.suffix != ".npz":
        path = path.with_suffix(path.suffix + ".npz")
    meta: dict[str, Any] = {"format_version": FORMAT_VERSION, "camel_jax_version": __version__}
    if isinstance(obj, FitResult):
        meta |= {
            "kind": "FitResult",
            "law": _law_descriptor(obj.law),
            "n_inputs": len(obj.inputs),
            "log_residuals": obj.log_residuals,
        }
        meta["data_hash"] = _data_hash([np.asarray(x) for x in (*obj.inputs, obj.y, obj.weights)])
    elif isinstance(obj, BootstrapResult):
        meta |= {
            "kind": "BootstrapResult",
            "law": _law_descriptor(obj.laws),
            "data_hash": _data_hash([np.asarray(obj.weights)]),
        }
    elif isinstance(obj, Pipeline):
        meta |= {
            "kind": "Pipeline",
            "loss_laws": {b: _law_descriptor(law) for b, law in obj.loss_laws.items()},
            "benchmark_laws": {b: _law_descriptor(law) for b, law in obj.benchmark_laws.items()},
            "weights": [[b, w] for b, w in obj.weights],
            "data_hash": None,
        }
    else:
        raise TypeError(f"save() takes a FitResult, BootstrapResult or Pipeline; got {type(obj).__name__}")
    leaves = jax.tree.leaves(obj)
    arrays = {f"leaf_{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)}
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, __meta__=np.array(json.dumps(meta)), **arrays)
    return path


def load(path: str | Path) -> FitResult | BootstrapResult | Pipeline:
    """Load what `save` wrote. An unknown law class or a newer format version raises `ValueError`."""
    path = Path(path)
    if not path.exists() and path.with_suffix(path.suffix + ".npz").exists():
        path = path.with_suffix(path.suffix + ".npz")
    with np.load(path, allow_pickle=False) as stored:
        if "__meta__" not in stored:
            raise ValueError(f"{path} was not written by camel_jax.save (no metadata)")
        meta = json.loads(str(stored["__meta__"]))
        leaves = [stored[f"leaf_{i}"] for i in range(len(stored.files) - 1)]
    if meta.get("format_version", 0) > FORMAT_VERSION:
        raise ValueError(
            f"{path} uses format version {meta['format_version']} (camel-jax {meta.get('camel_jax_version')}); "
            f"this camel-jax {__version__} reads up to version {FORMAT_VERSION}: upgrade camel-jax"
        )
    kind = meta.get("kind")
    zero = jnp.zeros(())
    if kind == "FitResult":
        law = _template(meta["law"])
        skeleton = FitResult(
            law=law,
            objective=zero,
            laws=law,
            objectives=zero,
            converged=zero,
            n_steps=zero,
            grad_norm=zero,
            status=zero,
            n_failed=zero,
            inputs=(zero,) * meta["n_inputs"],
            y=zero,
            weights=zero,
            log_residuals=meta["log_residuals"],
        )
    elif kind == "BootstrapResult":
        skeleton = BootstrapResult(
            laws=_template(meta["law"]), objectives=zero, converged=zero, n_failed=zero, weights=zero
        )
    elif kind == "Pipeline":
        skeleton = Pipeline(
            {b: _template(d) for b, d in meta["loss_laws"].items()},
            {b: _template(d) for b, d in meta["benchmark_laws"].items()},
            {b: w for b, w in meta["weights"]},
        )
    else:
        raise ValueError(f"{path}: unknown object kind {kind!r}")
    treedef = jax.tree.structure(skeleton)
    if treedef.num_leaves != len(leaves):
        raise ValueError(f"{path}: stored {len(leaves)} arrays but the {kind} structure needs {treedef.num_leaves}")
    return jax.tree.unflatten(treedef, [jnp.asarray(leaf) for leaf in leaves])
