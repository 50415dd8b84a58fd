"""The data layer: validated arrays from the user's tables. pandas lives here and nowhere in the core.

Every problem in the user's data is a `ValueError` naming the column and the first offending row (by the
DataFrame's index label), raised before any compute. The caller's DataFrame is never modified.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pandas as pd
from jaxtyping import Array, ArrayLike, Float, Int

# Real tables round mixture weights (e.g. to 3 decimals): rows whose sum is within this of 1 are renormalized.
MIXTURE_SUM_TOLERANCE = 1e-2


class MixtureData(eqx.Module):
    """Training runs for a mixture law: mixtures, sizes, tokens, targets and weights as arrays.

    **Fields**: `r` [P, n] rows on the simplex; `size` [P] or None; `tokens` [P] or None; `y` [P];
    `weight` [P] >= 0; `group` [P] integer codes (training run or mixture) or None; `columns`, the mixture
    column names (static).

    `inputs` is the tuple a mixture law takes: `(r, size, tokens)`, `(r, size)` or `(r,)`.
    """

    r: Float[Array, "P n"]
    y: Float[Array, " P"]
    weight: Float[Array, " P"]
    size: Float[Array, " P"] | None = None
    tokens: Float[Array, " P"] | None = None
    group: Int[Array, " P"] | None = None
    columns: tuple[str, ...] = eqx.field(static=True, default=())

    def __init__(
        self,
        r: ArrayLike,
        y: ArrayLike,
        weight: ArrayLike | None = None,
        size: ArrayLike | None = None,
        tokens: ArrayLike | None = None,
        group: ArrayLike | None = None,
        columns: Sequence[str] = (),
        *,
        positive_target: bool = True,
    ):
        """Build from arrays, with the same checks as `from_frame` (rows are named by position)."""
        r = np.array(r, dtype=float)
        if r.ndim != 2:
            raise ValueError(f"`r` must have shape (P, n_datasets); got {r.shape}")
        columns = tuple(columns) or tuple(f"r{j}" for j in range(r.shape[1]))
        frame = pd.DataFrame(r, columns=list(columns))
        frame["__y"] = np.asarray(y, dtype=float)
        extra = {"size": size, "tokens": tokens, "weight": weight, "group": group}
        for name, value in extra.items():
            if value is not None:
                frame[f"__{name}"] = np.asarray(value)
        parsed = _parse_mixture_frame(
            frame,
            mixture=list(columns),
            target="__y",
            size="__size" if size is not None else None,
            tokens="__tokens" if tokens is not None else None,
            weight="__weight" if weight is not None else None,
            group="__group" if group is not None else None,
            positive_target=positive_target,
        )
        self.r, self.y, self.weight = parsed["r"], parsed["y"], parsed["weight"]
        self.size, self.tokens, self.group = parsed["size"], parsed["tokens"], parsed["group"]
        self.columns = columns

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
        return int(self.y.shape[0])

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
        L = np.array(L, dtype=float)
        if L.ndim != 2:
            raise ValueError(f"`L` must have shape (P, n_losses); got {L.shape}")
        columns = tuple(columns) or tuple(f"L{j}" for j in range(L.shape[1]))
        frame = pd.DataFrame(L, columns=list(columns))
        frame["__y"] = np.asarray(y, dtype=float)
        if weight is not None:
            frame["__weight"] = np.asarray(weight, dtype=float)
        parsed = _parse_benchmark_frame(frame, list(columns), "__y", "__weight" if weight is not None else None)
        self.L, self.y, self.weight = parsed
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
    return {role: jnp.asarray(_positive(df, column, role)) for role, column in columns.items()}


# --- checks -------------------------------------------------------------------------------------------------


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


def _numeric(df: pd.DataFrame, column: str) -> np.ndarray:
    """The column as float64, or an error naming the first non-numeric, NaN or infinite row."""
    series = df[column]
    converted = pd.to_numeric(series, errors="coerce")
    bad = converted.isna() & series.notna()
    if bad.any():
        row = series.index[np.argmax(bad.to_numpy())]
        raise ValueError(f"column {column!r} has a non-numeric value {series.loc[row]!r} at row {row!r}")
    values = converted.to_numpy(dtype=float, na_value=np.nan)
    finite = np.isfinite(values)
    if not finite.all():
        row = series.index[np.argmin(finite)]
        raise ValueError(
            f"column {column!r} has a missing or infinite value ({values[np.argmin(finite)]}) at row {row!r}"
        )
    return values


def _positive(df: pd.DataFrame, column: str, what: str) -> np.ndarray:
    values = _numeric(df, column)
    bad = values <= 0
    if bad.any():
        row = df.index[np.argmax(bad)]
        raise ValueError(f"column {column!r} ({what}) must be > 0; got {values[np.argmax(bad)]} at row {row!r}")
    return values


def _weights(df: pd.DataFrame, column: str | None) -> np.ndarray:
    if column is None:
        return np.ones(len(df))
    values = _numeric(df, column)
    bad = values < 0
    if bad.any():
        row = df.index[np.argmax(bad)]
        raise ValueError(f"column {column!r} (weights) must be >= 0; got {values[np.argmax(bad)]} at row {row!r}")
    if not np.any(values > 0):
        raise ValueError(f"column {column!r} (weights) is zero in every row: nothing to fit")
    return values


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
    named = [*mixture, target, *(c for c in (size, tokens, weight, group) if c is not None)]
    _require_columns(df, named)
    r = np.stack([_numeric(df, c) for c in mixture], axis=1)
    negative = r < 0
    if negative.any():
        i, j = np.argwhere(negative)[0]
        raise ValueError(f"mixture column {mixture[j]!r} has a negative weight {r[i, j]} at row {df.index[i]!r}")
    sums = r.sum(axis=1)
    off = np.abs(sums - 1.0) > MIXTURE_SUM_TOLERANCE
    if off.any():
        i = int(np.argmax(off))
        raise ValueError(
            f"mixture columns {mixture} at row {df.index[i]!r} sum to {sums[i]:.6g}, not 1 "
            f"(tolerance {MIXTURE_SUM_TOLERANCE}); is a mixture column missing?"
        )
    unobserved = ~np.any(r > 0, axis=0)
    if unobserved.any():
        raise ValueError(
            f"mixture column {mixture[int(np.argmax(unobserved))]!r} is zero in every row: a dataset never trained "
            "on has no measurable effect, and a law would extrapolate it freely; drop the column"
        )
    r = r / sums[:, None]
    y = _positive(df, target, "target") if positive_target else _numeric(df, target)
    out: dict[str, Any] = {
        "r": jnp.asarray(r),
        "y": jnp.asarray(y),
        "weight": jnp.asarray(_weights(df, weight)),
        "size": jnp.asarray(_positive(df, size, "size")) if size is not None else None,
        "tokens": jnp.asarray(_positive(df, tokens, "tokens")) if tokens is not None else None,
        "group": None,
    }
    if tokens is not None and size is None:
        raise ValueError("`tokens` needs `size` too: mixture laws take (r, size, tokens)")
    if group is not None:
        if df[group].isna().any():
            row = df.index[np.argmax(df[group].isna().to_numpy())]
            raise ValueError(f"column {group!r} (group) has a missing value at row {row!r}")
        codes, _ = pd.factorize(df[group])
        out["group"] = jnp.asarray(codes)
    return out


def _parse_benchmark_frame(
    df: pd.DataFrame, losses: list[str], target: str, weight: str | None
) -> tuple[Array, Array, Array]:
    if len(losses) == 0:
        raise ValueError("`losses` must name at least one column")
    _require_columns(df, [*losses, target, *([weight] if weight else [])])
    L = np.stack([_numeric(df, c) for c in losses], axis=1)
    y = _numeric(df, target)
    return jnp.asarray(L), jnp.asarray(y), jnp.asarray(_weights(df, weight))
