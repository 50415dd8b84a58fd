"""Checks of a fit's arguments and data, on the host and before any compute (`fit`, `bootstrap`): inputs, targets
and weights, mixtures on the simplex, column names, keys, and what a design can determine.

Each names the offending argument, row or parameter. `fit_arrays`, the traceable core, repeats the value checks
with `eqx.error_if` for callers who skip these. Moved here from `solver/_checks.py` (issue 58); the checks of a law
itself are in `camel_jax.laws._checks`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from .._warn import user_stacklevel
from ..laws._base import n_free_parameters
from ..laws._checks import check_law, output_shape


def check_inputs(inputs: Sequence[ArrayLike], name: str = "inputs") -> tuple[Array, ...]:
    if not isinstance(inputs, (tuple, list)):
        raise TypeError(
            f"`{name}` must be a tuple of arrays passed as law(*{name}) (e.g. data.inputs); got {type(inputs).__name__}"
        )
    arrays = tuple(jnp.asarray(x) for x in inputs)
    if len(arrays) == 0:
        raise ValueError(f"`{name}` is empty")
    n = arrays[0].shape[0] if arrays[0].ndim else None
    for i, a in enumerate(arrays):
        if a.ndim == 0 or a.shape[0] != n:
            raise ValueError(
                f"every array in `{name}` must have the same leading length P; "
                f"{name}[{i}] has shape {a.shape}, {name}[0] has {arrays[0].shape}"
            )
        finite_rows = np.isfinite(np.asarray(a)).reshape(n, -1).all(axis=1)
        if not finite_rows.all():
            raise ValueError(f"`{name}[{i}]` has a non-finite value at row {int(np.argmin(finite_rows))}")
    return arrays


def named_columns(columns: Sequence[str]) -> tuple[str, ...] | None:
    """The mixture columns a user named, or None for MixtureData's positional defaults (r0, r1, ...)."""
    columns = tuple(map(str, columns))
    if not columns or columns == tuple(f"r{j}" for j in range(len(columns))):
        return None
    return columns


def check_key(key: Any, name: str = "key") -> None:
    """A `jax.random` key (new-style `jax.random.key` or a legacy uint32[2] `PRNGKey`), not a seed."""
    ok = isinstance(key, jax.Array) and (
        jnp.issubdtype(key.dtype, jax.dtypes.prng_key) or (key.dtype == jnp.uint32 and key.shape[-1:] == (2,))
    )
    if not ok:
        raise TypeError(f"`{name}` must be a jax.random key (e.g. jax.random.key(0)); got {key!r:.60}")


def check_several_mixtures(r: ArrayLike, weights: ArrayLike | None, what: str) -> None:
    """A decision about mixtures needs runs at two or more distinct mixtures (with positive weight)."""
    r = np.asarray(r)
    if r.ndim != 2:
        return
    used = np.ones(len(r), bool) if weights is None else (np.asarray(weights).reshape(-1, len(r)) > 0).any(axis=0)
    n_mixtures = len(np.unique(np.round(r[used], 12), axis=0))
    if n_mixtures < 2:
        raise ValueError(
            f"{what} holds {n_mixtures} distinct mixture: nothing is known about how the outcome changes with the "
            "mixture, so no mixture can be recommended; train runs at several mixtures"
        )


def check_law_inputs(law: Any, arrays: tuple[Array, ...]) -> None:
    """`law(*inputs)` must give one prediction per point, shape (P,): checked on shapes alone (eval_shape); a
    mixture law's rows lie on the simplex and its sizes and tokens are > 0 (checked on the host)."""
    check_law(law)
    P = arrays[0].shape[0]
    n = law.structure().get("n_datasets") if hasattr(law, "structure") else None
    if n is not None and (arrays[0].ndim != 2 or arrays[0].shape[1] != n):
        raise ValueError(
            f"`inputs[0]` (the mixture) must have shape (P, n_datasets)=({P}, {n}) for this law; got "
            f"{arrays[0].shape}. Is a mixture column missing or extra?"
        )
    if n is not None:
        _check_simplex(arrays[0])
        for i, a in enumerate(arrays[1:], start=1):
            _check_positive(a, f"inputs[{i}] (model size or tokens)")
    elif hasattr(law, "size_parameters") and law.size_parameters() is not None:
        position = law.size_parameters()[0]
        _check_positive(arrays[position], f"inputs[{position}] (model size)")
    shapes = [a.shape for a in arrays]
    hint = " (size and token arrays must be 1-D, shape (P,))" if any(a.ndim > 1 for a in arrays[1:]) else ""
    try:
        out = output_shape(law, arrays)
    except (TypeError, ValueError) as error:
        message = str(error).splitlines()[0]
        raise ValueError(f"the law cannot be evaluated on inputs of shapes {shapes}{hint}: {message}") from None
    if getattr(out, "shape", None) != (P,):
        raise ValueError(
            f"law(*inputs) has shape {getattr(out, 'shape', None)}, not ({P},): every input must have one row per "
            f"point{hint} (got shapes {shapes})"
        )


# rows of a mixture may be rounded (as in tables, see camel_jax.data._containers.MIXTURE_SUM_TOLERANCE)
_SIMPLEX_TOLERANCE = 1e-2


def _check_simplex(r: Array) -> None:
    rn = np.asarray(r)
    if rn.dtype.kind not in "fiu":
        return
    negative = rn < 0
    if negative.any():
        i, j = np.argwhere(negative)[0]
        raise ValueError(f"`inputs[0]` (the mixture) has a negative weight {rn[i, j]:g} at row {i}, column {j}")
    off = np.abs(rn.sum(axis=1) - 1.0) > _SIMPLEX_TOLERANCE
    if off.any():
        i = int(np.argmax(off))
        raise ValueError(
            f"`inputs[0]` (the mixture) row {i} sums to {rn[i].sum():.6g}, not 1: each row is a mixture (weights "
            "summing to 1); is a column missing, or are they percentages?"
        )


def _check_positive(a: Array, name: str) -> None:
    an = np.asarray(a)
    if an.dtype.kind in "fiu" and np.any(an <= 0):
        i = int(np.argmax(np.ravel(an <= 0)))
        raise ValueError(f"`{name}` must be > 0 (it enters through its logarithm); got {np.ravel(an)[i]:g} at row {i}")


def check_targets(y: ArrayLike, weights: ArrayLike | None, n_points: int, log_residuals: bool) -> tuple[Array, Array]:
    y = jnp.asarray(y)
    if not jnp.issubdtype(y.dtype, jnp.floating):
        y = y.astype(jnp.result_type(float))
    if y.ndim not in (1, 2) or y.shape[-1] != n_points:
        raise ValueError(
            f"`y` must have shape (P,) or (T, P) with P={n_points} (the length of the inputs); got {y.shape}"
        )
    w = jnp.ones(y.shape, y.dtype) if weights is None else jnp.asarray(weights, dtype=y.dtype)
    if w.shape != y.shape:
        try:
            w = jnp.broadcast_to(w, y.shape)
        except ValueError:
            raise ValueError(
                f"`weights` must have the shape of `y` {y.shape} (or broadcast to it); got {w.shape}"
            ) from None
    wn, yn = np.asarray(w), np.asarray(y)
    if np.any(wn < 0) or not np.all(np.isfinite(wn)):
        raise ValueError("`weights` must be finite and >= 0")
    if np.any(np.sum(wn, axis=-1) <= 0):
        raise ValueError("`weights` are zero for every point (of some target): nothing to fit")
    used = wn > 0
    bad_rows = (~np.isfinite(np.where(used, yn, 0.0))).reshape(-1, n_points).any(axis=0)
    if bad_rows.any():
        raise ValueError(f"`y` has a non-finite value at a point with positive weight (row {int(np.argmax(bad_rows))})")
    if log_residuals and np.any(yn[used] <= 0):
        raise ValueError(
            "`y` must be > 0 where weights are positive when log_residuals=True; "
            "fit proxy losses or accuracies with log_residuals=False"
        )
    return y, w


# the messages of `warn_design` (and of `fit`'s poor-fit warning), for callers whose fits run on designs they chose
# (bootstrap resamples, held-out folds, small backtest budgets) and who report the consequence themselves
DESIGN_WARNINGS = "(fitting .* free parameters|the data hold|the best fit explains)"


def warn_design(law: Any, arrays: tuple[Array, ...], W: Array) -> None:
    """Warn when the data cannot determine the law: fewer points than free parameters, too few model sizes, or
    one mixture (`design_problems`, which `FitResult.problems()` repeats so that they travel with the fit)."""
    for problem in design_problems(law, arrays, W):
        warnings.warn(problem, stacklevel=user_stacklevel())


def design_problems(law: Any, arrays: Sequence[Any], W: Any) -> list[str]:
    """What the design cannot determine, one sentence each: fewer points than free parameters, one model size or
    fewer sizes than the parameters of the size dependence, or a mixture law fitted on one mixture ([] when none).

    **Arguments**:

    - `law`: one law (unbatched: its structure and size parameters are read).
    - `arrays`: the fit's inputs; `W`: its weights ([P] or [T, P]; points of weight 0 are not in the design).

    **Returns**: a list of sentences.
    """
    out = []
    n_params = n_free_parameters(law)
    n_used = int(np.min(np.sum(np.asarray(W) > 0, axis=-1)))
    if n_used < n_params:
        out.append(
            f"fitting {n_params} free parameters to {n_used} points: the law is not identifiable from these data; "
            "consider tied=True (CAMEL), fewer intrinsic domains, or a `penalty`"
        )
    out += _size_problems(law, arrays, W)
    n = law.structure().get("n_datasets") if hasattr(law, "structure") else None
    if n is not None and np.ndim(arrays[0]) == 2:
        used = (np.asarray(W).reshape(-1, np.shape(arrays[0])[0]) > 0).any(axis=0)  # the data, not one resample
        if len(np.unique(np.round(np.asarray(arrays[0])[used], 12), axis=0)) < 2:
            out.append(
                "the data hold one mixture: nothing determines how the loss changes with the mixture, so the "
                "mixture parameters are arbitrary and no mixture can be recommended from this fit"
            )
    return out


def size_counts(law: Any, arrays: Sequence[Any], W: Any) -> tuple[int, int] | None:
    """(the distinct model sizes with weight, the fewest over targets; the parameters that describe the law's size
    dependence, `size_parameters()`), or None for a law without a size input: the counts behind `fit`'s warning
    that the sizes do not determine the size dependence, which `camel-jax fit --law auto` ranks by too."""
    spec = law.size_parameters() if hasattr(law, "size_parameters") else None
    if spec is None:
        return None
    position, n_size_params = spec
    sizes = np.asarray(arrays[position])
    return min(len(np.unique(sizes[row > 0])) for row in np.asarray(W).reshape(-1, sizes.shape[0])), n_size_params


def _size_problems(law: Any, arrays: Sequence[Any], W: Any) -> list[str]:
    """The design cannot support extrapolation in model size: one size, or fewer distinct sizes than the
    parameters that describe the size dependence (the law's `size_parameters()`)."""
    counts = size_counts(law, arrays, W)
    if counts is None:
        return []
    n_sizes, n_size_params = counts
    position = law.size_parameters()[0]
    if n_sizes == 1:
        return [
            f"the data hold one model size (inputs[{position}]): nothing determines how the loss changes with "
            "size, so the size exponents and the floor C are arbitrary and predictions at other sizes meaningless"
        ]
    if n_sizes < n_size_params:
        return [
            f"the data hold {n_sizes} distinct model sizes for {n_size_params} parameters of the size dependence: "
            "the floor and the size exponents are not determined (see `FitResult.identifiability()`); "
            "extrapolation in size is unreliable"
        ]
    return []


# Correlation of log tokens with log size above which a law of both cannot tell their effects apart.
COLLINEAR = 0.99


def log_correlation(x: Any, z: Any) -> float:
    """The correlation of log x with log z over the runs (0 when either is constant): near +-1, a law of both
    cannot separate their effects."""
    log_x, log_z = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(z, dtype=float))
    if np.ptp(log_x) == 0 or np.ptp(log_z) == 0:
        return 0.0
    return float(np.corrcoef(log_x, log_z)[0, 1])


def check_names(names: Any, arrays: Sequence[Any]) -> tuple[str, ...] | None:
    """`names=` of `fit` / `fit_arrays`: one distinct, non-empty string per mixture column of `inputs[0]` [P, N]."""
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise TypeError(f"`names` must be a sequence of column names (e.g. ['r_web', 'r_code']); got {names!r}")
    if not arrays or np.ndim(arrays[0]) != 2:
        raise ValueError("`names` names the mixture columns of `inputs[0]` [P, N]; this law's first input is not one")
    n = np.shape(arrays[0])[1]
    if len(names) != n or not all(isinstance(x, str) and x for x in names):
        raise ValueError(f"`names` needs {n} non-empty strings, one per column of `inputs[0]`; got {list(names)!r}")
    repeated = sorted({x for x in names if list(names).count(x) > 1})
    if repeated:
        raise ValueError(f"`names` repeats {repeated}: each mixture column needs its own name")
    return tuple(names)
