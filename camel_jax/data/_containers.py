"""The data layer: validated arrays from the user's tables. pandas lives here and nowhere in the core.

Every problem in the user's data is a `ValueError` naming the column and the first offending row (by the
DataFrame's index label), raised before any compute. The caller's DataFrame is never modified.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, NamedTuple

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array, ArrayLike, Float, Int

from .._warn import user_stacklevel

# Real tables round mixture weights (e.g. to 3 decimals): rows whose sum is within this of 1 are renormalized.
MIXTURE_SUM_TOLERANCE = 1e-2


class MixtureData(eqx.Module):
    """Training runs for a mixture law: mixtures, sizes, tokens, targets and weights as arrays.

    **Fields**: `r` [P, n] rows on the simplex; `size` [P] or None; `tokens` [P] or None; `y` [P], or [T, P]
    for T targets (several validation losses; the shape `fit` takes); `weight` >= 0, the shape of `y` (0 where a
    target is missing: its value is then NaN); `group` [P] integer codes (training run or mixture) or None;
    `columns`, the mixture column names (static); `targets`, the target names (static; () when unnamed).

    `inputs` is the tuple a mixture law takes: `(r, size, tokens)`, `(r, size)` or `(r,)`.
    """

    r: Float[Array, "P n"]
    y: Float[Array, "*T P"]
    weight: Float[Array, "*T P"]
    size: Float[Array, " P"] | None = None
    tokens: Float[Array, " P"] | None = None
    group: Int[Array, " P"] | None = None
    columns: tuple[str, ...] = eqx.field(static=True, default=())
    targets: tuple[str, ...] = eqx.field(static=True, default=())

    def __init__(
        self,
        r: ArrayLike,
        y: ArrayLike,
        weight: ArrayLike | None = None,
        size: ArrayLike | None = None,
        tokens: ArrayLike | None = None,
        group: ArrayLike | None = None,
        columns: Sequence[str] = (),
        targets: Sequence[str] = (),
        *,
        positive_target: bool = True,
    ):
        """Build from arrays, with the same checks as `from_frame` (rows are named by position). `y` [T, P] with
        `weight` [T, P] holds T targets; a target may be NaN where its weight is 0."""
        r = _float_argument(r, "r")
        if r.ndim != 2 or len(r) == 0:
            raise ValueError(f"`r` must have shape (P, n_datasets) with P >= 1; got {r.shape}")
        columns = tuple(columns) or tuple(f"r{j}" for j in range(r.shape[1]))
        _finite_columns(r, columns)
        if np.ndim(y) == 2:
            self._several_targets(r, y, weight, size, tokens, group, columns, targets, positive_target)
            return
        targets = tuple(map(str, targets))
        if len(targets) > 1:
            raise ValueError(f"`targets` names {len(targets)} targets for `y` of shape {np.shape(y)}")
        given = {"y": y, "size": size, "tokens": tokens, "weight": weight}
        values = {role: _row_argument(v, role, len(r)) for role, v in given.items() if v is not None}
        if group is not None:
            values["group"] = _row_shape(np.asarray(group), "group", len(r))
        names = {role: f"`{role}`" for role in values}
        parsed = _check_mixture(r, values, _Rows(list(columns), names, range(len(r))), positive_target)
        self.r, self.y, self.weight = parsed["r"], parsed["y"], parsed["weight"]
        self.size, self.tokens, self.group = parsed["size"], parsed["tokens"], parsed["group"]
        self.columns = columns
        self.targets = targets

    def _several_targets(self, r, y, weight, size, tokens, group, columns, targets, positive_target) -> None:
        """`y` [T, P]: each target checked where its weight is > 0 (NaN allowed where it is 0)."""
        Y = _float_argument(y, "y")
        T, P = Y.shape
        if P != len(r):
            raise ValueError(f"`y` must have shape (T, {len(r)}), one column per row of `r`; got {Y.shape}")
        W = np.ones_like(Y) if weight is None else _float_argument(weight, "weight")
        if W.shape != Y.shape:
            raise ValueError(f"`weight` must have the shape of `y` {Y.shape}; got {W.shape}")
        targets = tuple(map(str, targets)) or tuple(f"y{t}" for t in range(T))
        if len(targets) != T or len(set(targets)) != T:
            raise ValueError(f"`targets` must name each of the {T} targets once; got {list(targets)}")
        rows = range(P)
        for t, name in enumerate(targets):
            what = f"`weight` of target {name!r}"
            _weights(_finite(W[t], what, rows), _Rows([], {"weight": what}, rows))
            used = W[t] > 0
            _finite(np.where(used, Y[t], 1.0), f"target {name!r}", rows)
            if positive_target:
                _positive(np.where(used, Y[t], 1.0), "y", _Rows([], {"y": f"target {name!r}"}, rows))
        given = {"y": np.ones(P), "size": size, "tokens": tokens}
        values = {role: _row_argument(v, role, P) for role, v in given.items() if v is not None}
        if group is not None:
            values["group"] = _row_shape(np.asarray(group), "group", P)
        names = {role: f"`{role}`" for role in values}
        parsed = _check_mixture(r, values, _Rows(list(columns), names, rows), positive_target)
        self.r, self.y, self.weight = parsed["r"], jnp.asarray(np.where(W > 0, Y, np.nan)), jnp.asarray(W)
        self.size, self.tokens, self.group = parsed["size"], parsed["tokens"], parsed["group"]
        self.columns, self.targets = columns, targets

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        *,
        mixture: Sequence[str],
        target: str,
        size: str | None = None,
        tokens: str | None = None,
        weight: str | None = None,
        group: str | None = None,
        positive_target: bool = True,
    ) -> MixtureData:
        """Validate a DataFrame and convert it to arrays.

        **Arguments**:

        - `mixture`: the mixture-weight columns (one per dataset). Rows must be >= 0 and sum to 1 within 1e-2;
          rows within that tolerance are renormalized to sum to exactly 1.
        - `target`: the loss column. Must be > 0 when `positive_target` (log-residual fits).
        - `size`, `tokens`: model size and training tokens (> 0), in any units.
        - `weight`: per-row fit weights (>= 0, not all zero); default 1.
        - `group`: a column identifying training runs or mixtures, for grouped bootstrap.
        """
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"`df` must be a pandas DataFrame; got {type(df).__name__}")
        parsed = _parse_mixture_frame(
            df,
            mixture=_column_list(mixture, "mixture"),
            target=target,
            size=size,
            tokens=tokens,
            weight=weight,
            group=group,
            positive_target=positive_target,
        )
        return cls(**parsed, columns=tuple(map(str, mixture)), positive_target=positive_target)

    @property
    def inputs(self) -> tuple[Array, ...]:
        if self.size is None:
            return (self.r,)
        if self.tokens is None:
            return (self.r, self.size)
        return (self.r, self.size, self.tokens)

    @property
    def n_points(self) -> int:
        return int(self.y.shape[-1])

    @property
    def n_targets(self) -> int | None:
        """T when `y` is [T, P] (several targets), else None."""
        return None if self.y.ndim == 1 else int(self.y.shape[0])

    @property
    def n_datasets(self) -> int:
        return int(self.r.shape[1])


class BenchmarkData(eqx.Module):
    """Checkpoints for the loss-to-benchmark law: validation losses `L` [P, V], accuracy `y` [P], `weight` [P].

    `inputs = (L,)`.
    """

    L: Float[Array, "P V"]
    y: Float[Array, " P"]
    weight: Float[Array, " P"]
    columns: tuple[str, ...] = eqx.field(static=True, default=())

    def __init__(self, L: ArrayLike, y: ArrayLike, weight: ArrayLike | None = None, columns: Sequence[str] = ()):
        L = _float_argument(L, "L")
        if L.ndim != 2:
            raise ValueError(f"`L` must have shape (P, n_losses); got {L.shape}")
        columns = tuple(columns) or tuple(f"L{j}" for j in range(L.shape[1]))
        _finite_columns(L, columns)
        y = _accuracies(_row_argument(y, "y", len(L)), "`y` (accuracy)")
        w = _row_argument(weight, "weight", len(L)) if weight is not None else None
        w = _weights(w, _Rows([], {"weight": "`weight`"}, range(len(L))))
        self.L, self.y, self.weight = jnp.asarray(L), jnp.asarray(y), jnp.asarray(w)
        self.columns = columns

    @classmethod
    def from_frame(
        cls, df: pd.DataFrame, *, losses: Sequence[str], target: str, weight: str | None = None
    ) -> BenchmarkData:
        """Validate a DataFrame of (validation losses, benchmark accuracy) rows and convert it to arrays."""
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"`df` must be a pandas DataFrame; got {type(df).__name__}")
        L, y, w = _parse_benchmark_frame(df, _column_list(losses, "losses"), target, weight)
        return cls(L, y, w, columns=tuple(map(str, losses)))

    @property
    def inputs(self) -> tuple[Array]:
        return (self.L,)

    @property
    def n_points(self) -> int:
        return int(self.y.shape[0])


def positive_columns(df: pd.DataFrame, columns: dict[str, str]) -> dict[str, Array]:
    """Validated numeric columns that must be > 0 (sizes, tokens, a log-residual target), by role:
    `{role: column name} -> {role: array}`; errors name the column, its role and the first bad row."""
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"`df` must be a pandas DataFrame; got {type(df).__name__}")
    _require_columns(df, list(columns.values()))
    return {role: jnp.asarray(_positive_column(df, column, role)) for role, column in columns.items()}


def match_mixture_columns(df: pd.DataFrame, names: Sequence[str] | None, n_datasets: int, what: str) -> list[str]:
    """The mixture columns of `df` for a result fitted on the columns `names` (in the fit's order, whatever the
    table's): a missing one, or an `r_*` column the fit never saw, is an error naming it. Without names (a result
    of arrays), the table's `r_*` columns in its own order, which must be `n_datasets` of them."""
    prefixed = [str(c) for c in df.columns if str(c).startswith("r_")]
    if names is None:
        if len(prefixed) != n_datasets:
            raise ValueError(
                f"{what} has {len(prefixed)} mixture (r_*) column(s) {prefixed}; the fit has {n_datasets} datasets "
                "(and no column names: name them in the fit's order, `mixture=` or --mixture)"
            )
        return prefixed
    names = [str(c) for c in names]
    if len(names) != n_datasets:
        raise ValueError(f"the fit names {len(names)} mixture columns {names} for {n_datasets} datasets")
    present = {str(c) for c in df.columns}
    missing = [c for c in names if c not in present]
    if missing:
        raise ValueError(f"{what} has no column {missing[0]!r}; the fit's mixture columns are {names}")
    extra = [c for c in prefixed if c not in names]
    if extra:
        raise ValueError(f"{what} has a mixture column {extra[0]!r} the fit never saw; the fit's are {names}")
    return names


# --- checks -------------------------------------------------------------------------------------------------


def _accuracies(y: np.ndarray, name: str, labels: Sequence[Any] | None = None) -> np.ndarray:
    """Accuracies are fractions in [0, 1]: a percent scale or a value outside is an error naming the row."""
    labels = range(len(y)) if labels is None else labels
    y = np.asarray(y, dtype=float)
    above = y > 1  # a missing value is left to the weights' checks (it may carry weight 0)
    if above.any():
        i = int(np.argmax(above))
        known = y[np.isfinite(y)]
        hint = "; is it in percent? divide by 100" if np.all((known >= 0) & (known <= 100)) else ""
        raise ValueError(f"{name} is {y[i]:g} at row {list(labels)[i]!r}: accuracies are fractions in [0, 1]{hint}")
    below = y < 0
    if below.any():  # noisy measurements near a chance level of 0 (e.g. simulated ones) can dip below it
        i = int(np.argmax(below))
        warnings.warn(
            f"{name} is {y[i]:g} at row {list(labels)[i]!r} ({int(below.sum())} value(s) below 0): accuracies are "
            "fractions in [0, 1]; fitted as given",
            stacklevel=user_stacklevel(),
        )
    return y


def _column_list(columns: Any, name: str) -> list[str]:
    """A list of column names; a lone string is an error (it would be read one character per column)."""
    if isinstance(columns, str):
        raise TypeError(f"`{name}` must be a list of column names; got the string {columns!r} (write [{columns!r}])")
    return list(columns)


def _require_columns(df: pd.DataFrame, columns: Sequence[str]) -> None:
    repeated = sorted({str(c) for c in df.columns[df.columns.duplicated()]})
    if repeated:
        raise ValueError(f"the table has duplicated column name(s) {repeated}: rename them so each is unique")
    if len(df) == 0:
        raise ValueError("the DataFrame is empty: no rows to fit")
    for column in columns:
        if column not in df.columns:
            raise ValueError(f"column {column!r} not found; available columns: {list(map(str, df.columns))}")
    duplicated = [c for c in set(columns) if list(columns).count(c) > 1]
    if duplicated:
        raise ValueError(f"column(s) {duplicated} named more than once")


class _Rows(NamedTuple):
    """How messages name what is checked: the mixture columns, each role's column or argument, the row labels."""

    mixture: list[str]
    names: dict[str, str]
    labels: Sequence[Any]


def _numeric(df: pd.DataFrame, column: str) -> np.ndarray:
    """The column as float64, or an error naming the first non-numeric, NaN or infinite row."""
    series = df[column]
    if pd.api.types.is_bool_dtype(series):  # True/False would be read as 1/0: a size, loss or weight of 1 and 0
        raise ValueError(f"column {column!r} holds True/False values, not numbers: is it the right column?")
    converted = pd.to_numeric(series, errors="coerce")
    bad = converted.isna() & series.notna()
    if bad.any():
        row = series.index[np.argmax(bad.to_numpy())]
        raise ValueError(f"column {column!r} has a non-numeric value {series.loc[row]!r} at row {row!r}")
    return _finite(converted.to_numpy(dtype=float, na_value=np.nan), f"column {column!r}", df.index)


def _float_argument(value: Any, name: str) -> np.ndarray:
    try:
        return np.array(value, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"`{name}` must be numeric: {error}") from None


def _row_argument(value: Any, name: str, n_rows: int) -> np.ndarray:
    """A per-row argument of the array constructor as float64: shape (P,) and finite, or an error naming it."""
    return _finite(_row_shape(_float_argument(value, name), name, n_rows), f"`{name}`", range(n_rows))


def _row_shape(values: np.ndarray, name: str, n_rows: int) -> np.ndarray:
    if values.shape != (n_rows,):
        raise ValueError(f"`{name}` must have shape ({n_rows},), one entry per row; got {values.shape}")
    return values


def _finite(values: np.ndarray, name: str, labels: Sequence[Any]) -> np.ndarray:
    finite = np.isfinite(values)
    if not finite.all():
        i = int(np.argmin(finite))
        raise ValueError(f"{name} has a missing or infinite value ({values[i]}) at row {labels[i]!r}")
    return values


def _finite_columns(a: np.ndarray, columns: Sequence[str]) -> None:
    if len(columns) != a.shape[1]:
        raise ValueError(f"`columns` names {len(columns)} columns for an array with {a.shape[1]}")
    for j, column in enumerate(columns):
        _finite(a[:, j], f"column {column!r}", range(len(a)))


def _positive(values: np.ndarray, role: str, rows: _Rows) -> np.ndarray:
    bad = values <= 0
    if bad.any():
        i = int(np.argmax(bad))
        what = f"{rows.names[role]} ({_ROLE.get(role, role)})"
        raise ValueError(f"{what} must be > 0; got {values[i]} at row {rows.labels[i]!r}")
    return values


def _positive_column(df: pd.DataFrame, column: str, role: str) -> np.ndarray:
    """A DataFrame column that must be numeric, finite and > 0; errors name the column, its role and the row."""
    return _positive(_numeric(df, column), role, _Rows([], {role: f"column {column!r}"}, df.index))


def _weights(values: np.ndarray | None, rows: _Rows) -> np.ndarray:
    if values is None:
        return np.ones(len(rows.labels))
    bad = values < 0
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{rows.names['weight']} (weights) must be >= 0; got {values[i]} at row {rows.labels[i]!r}")
    if not np.any(values > 0):
        raise ValueError(f"{rows.names['weight']} (weights) is zero in every row: nothing to fit")
    return values


_ROLE = {"y": "target", "size": "size", "tokens": "tokens"}


def _parse_mixture_frame(
    df: pd.DataFrame,
    *,
    mixture: list[str],
    target: str,
    size: str | None,
    tokens: str | None,
    weight: str | None,
    group: str | None,
    positive_target: bool,
) -> dict[str, Any]:
    if len(mixture) == 0:
        raise ValueError("`mixture` must name at least one column")
    given = {"y": target, "size": size, "tokens": tokens, "weight": weight, "group": group}
    roles = {role: column for role, column in given.items() if column is not None}
    _require_columns(df, [*mixture, *roles.values()])
    r = np.stack([_numeric(df, c) for c in mixture], axis=1)
    values = {role: _numeric(df, column) for role, column in roles.items() if role != "group"}
    if group is not None:
        values["group"] = df[group].to_numpy()
    names = {role: f"column {column!r}" for role, column in roles.items()}
    return _check_mixture(r, values, _Rows(mixture, names, df.index), positive_target)


def _check_mixture(r: np.ndarray, values: dict[str, Any], rows: _Rows, positive_target: bool) -> dict[str, Any]:
    """The checks shared by both constructors, on float arrays; rows are renormalized to sum to 1."""
    mixture = rows.mixture
    negative = r < 0
    if negative.any():
        i, j = np.argwhere(negative)[0]
        raise ValueError(f"mixture column {mixture[j]!r} has a negative weight {r[i, j]} at row {rows.labels[i]!r}")
    sums = r.sum(axis=1)
    off = np.abs(sums - 1.0) > MIXTURE_SUM_TOLERANCE
    if off.any():
        i = int(np.argmax(off))
        raise ValueError(
            f"mixture columns {mixture} at row {rows.labels[i]!r} sum to {sums[i]:.6g}, not 1 "
            f"(tolerance {MIXTURE_SUM_TOLERANCE}); is a mixture column missing?"
        )
    unobserved = ~np.any(r > 0, axis=0)
    if unobserved.any():
        raise ValueError(
            f"mixture column {mixture[int(np.argmax(unobserved))]!r} is zero in every row: a dataset never trained "
            "on has no measurable effect, and a law would extrapolate it freely; drop the column"
        )
    if "tokens" in values and "size" not in values:
        raise ValueError("`tokens` needs `size` too: mixture laws take (r, size, tokens)")
    y = _positive(values["y"], "y", rows) if positive_target else values["y"]
    _warn_duplicates(r, values, rows)
    out: dict[str, Any] = {"r": jnp.asarray(r / sums[:, None]), "y": jnp.asarray(y), "group": None}
    out["weight"] = jnp.asarray(_weights(values.get("weight"), rows))
    for role in ("size", "tokens"):
        out[role] = jnp.asarray(_positive(values[role], role, rows)) if role in values else None
    if "group" in values:
        codes, _ = pd.factorize(values["group"])
        if np.any(codes < 0):
            i = int(np.argmax(codes < 0))
            raise ValueError(f"{rows.names['group']} (group) has a missing value at row {rows.labels[i]!r}")
        out["group"] = jnp.asarray(codes)
    return out


def _warn_duplicates(r: np.ndarray, values: dict[str, Any], rows: _Rows) -> None:
    """Warn when rows repeat exactly (mixture, size, tokens, target and weight alike): a run entered twice counts
    twice in the fit and narrows its intervals as if it were two measurements."""
    roles = [role for role in ("size", "tokens", "y", "weight") if role in values]
    table = np.column_stack([r, *(np.asarray(values[role], dtype=float) for role in roles)])
    _, first, counts = np.unique(table, axis=0, return_index=True, return_counts=True)
    repeated = counts > 1
    if repeated.any():
        row = int(first[repeated][0])
        copies = int(np.sum(counts[repeated] - 1))
        warnings.warn(
            f"{copies} row(s) repeat another row exactly (e.g. row {rows.labels[row]!r}): each copy counts as a "
            "measurement of its own and narrows the intervals; drop the copies unless they are replicate runs",
            stacklevel=user_stacklevel(),
        )


def _parse_benchmark_frame(
    df: pd.DataFrame, losses: list[str], target: str, weight: str | None
) -> tuple[Array, Array, Array]:
    if len(losses) == 0:
        raise ValueError("`losses` must name at least one column")
    _require_columns(df, [*losses, target, *([weight] if weight else [])])
    L = np.stack([_numeric(df, c) for c in losses], axis=1)
    rows = _Rows(list(losses), {"weight": f"column {weight!r}"}, df.index)
    w = _weights(_numeric(df, weight) if weight else None, rows)
    y = _accuracies(_numeric(df, target), f"column {target!r} (accuracy)", df.index)
    return jnp.asarray(L), jnp.asarray(y), jnp.asarray(w)
