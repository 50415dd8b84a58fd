"""What `design` and `next` inherit from a saved fit (`--fit FIT.npz`): its mixture column names, the columns it
read (from the `fit` JSON written beside it), its size units, its tokens, and the centre of its runs. One loop:
`fit` -> `design --fit` -> train -> `fit` -> `next --fit`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from ._common import UserError, _training_data


@dataclasses.dataclass(frozen=True)
class FitContext:
    """The saved fit's conventions: `names` (its mixture columns, None when the file has none), `n` datasets,
    the `size` and `tokens` column names its table used, the `target` names (one, or several for a fit of several
    validation losses), the trained `sizes` and `tokens` values, and whether its law takes tokens."""

    names: tuple[str, ...] | None
    n: int
    size: str
    tokens: str | None
    targets: tuple[str, ...]
    sizes: np.ndarray
    tokens_values: np.ndarray | None
    mixtures: np.ndarray

    @property
    def token_aware(self) -> bool:
        return self.tokens_values is not None

    @property
    def units(self) -> str:
        from ..experiments._design import size_units

        return size_units(self.sizes)

    @property
    def columns(self) -> list[str]:
        """The mixture columns a table for this fit carries: its names, else r_0, r_1, ..."""
        return list(self.names) if self.names is not None else [f"r_{j}" for j in range(self.n)]

    def centre(self) -> np.ndarray:
        """The mean mixture of the fitted runs: where a design around the fit is centred."""
        r = self.mixtures.mean(axis=0)
        return r / r.sum()

    def tokens_at(self, sizes: Any) -> np.ndarray:
        """Tokens at `sizes` along the fitted runs' own tokens-for-size line (log tokens regressed on log size)."""
        from ..experiments._design import tokens_for_size

        assert self.tokens_values is not None
        return tokens_for_size(self.sizes, self.tokens_values, sizes)


def fit_context(saved: Any, path: str) -> FitContext:
    """The conventions of a saved `fit` (a FitResult, or a fit_pipeline result's loss fit), refused with one line
    when it is not a fit of a law of the mixture."""
    fitted = _training_data(saved)
    if fitted is None or len(fitted.inputs) < 2 or np.ndim(fitted.inputs[0]) != 2:
        raise UserError(f"{path}: --fit needs a `camel-jax fit` result of a law of (mixture, size[, tokens])")
    r = np.asarray(fitted.inputs[0], float)
    weights = np.asarray(fitted.weights).reshape(-1, r.shape[0]).max(axis=0) > 0
    names = getattr(fitted, "names", None)
    columns = _columns_beside(path)
    targets = getattr(fitted, "targets", None) or columns.get("targets") or columns.get("target") or "loss"
    targets = (targets,) if isinstance(targets, str) else tuple(str(t) for t in targets)
    return FitContext(
        names=None if names is None else tuple(str(c) for c in names),
        n=r.shape[1],
        size=str(columns.get("size") or "size"),
        tokens=str(columns.get("tokens") or "tokens") if len(fitted.inputs) == 3 else None,
        targets=targets,
        sizes=np.asarray(fitted.inputs[1], float)[weights],
        tokens_values=np.asarray(fitted.inputs[2], float)[weights] if len(fitted.inputs) == 3 else None,
        mixtures=r[weights],
    )


def _columns_beside(path: str) -> dict[str, Any]:
    """The table's columns as `camel-jax fit` recorded them in the JSON beside its .npz ({} when there is none)."""
    sidecar = Path(path).with_suffix(".json")
    try:
        columns = json.loads(sidecar.read_text()).get("columns", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return columns if isinstance(columns, dict) else {}
