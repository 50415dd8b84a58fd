"""Where a fitted law's terms were measured (issue 56): the trained range of each term's mixture variable, and how
far below it a new mixture lies.

A power-law term K_i <t_i, r>^-alpha_i grows without limit as its variable <t_i, r> falls, so a law of CAMEL's form
predicts a mixture whose variable lies far below every trained run's by extrapolating without limit. On RegMix (384
one-size runs fitted, 128 held out) a held-out mixture of 99.3% freelaw and 0.7% philpapers gave camel-mixture's
first dm_mathematics term a variable e^-60.6, where the trained runs reach e^-4.5: it predicted a loss of 4.1e8
for a measured 6.51. `FitResult.outside_support` flags such rows (a variable below a tenth of its smallest trained
value), so that `camel-jax predict` gives no number there instead of that one. A law without such terms
(`AbstractLaw.term_variables` None: log-linear, DML, SODM, Chinchilla) has no flags.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..laws._base import AbstractLaw

# A row is outside a fit's support when one of its term variables lies below 1 / SUPPORT_FACTOR of that term's
# smallest value over the fitted rows (weight > 0).
SUPPORT_FACTOR = 10.0


def _variables(law: Any, r: Any, batched: bool | int) -> np.ndarray | None:
    """[..., P, m]: `law.term_variables(r)` over the law's leading batch axes (`batched`: True for one, a target
    axis; an int for that many, e.g. resamples and targets); None for a law without term variables (one that keeps
    `AbstractLaw.term_variables`)."""
    if type(law).term_variables is AbstractLaw.term_variables:
        return None
    r = jnp.asarray(r)

    def each(law: Any) -> Any:
        return law.term_variables(r)

    for _ in range(int(batched)):
        each = jax.vmap(each)
    return np.asarray(each(law))


def support_floor(law: Any, r: Any, weights: Any = None, batched: bool | int = False) -> np.ndarray | None:
    """The log of each term variable's smallest value over the fitted rows.

    **Arguments**:

    - `law`: a law (batched over targets when `batched`).
    - `r`: the fitted mixtures [P, n].
    - `weights`: the rows' fit weights ([P], or [T, P] for a law of T targets; rows of weight 0 are not fitted and
      not counted); None: every row.
    - `batched`: whether `law` has a leading target axis (an int: that many leading batch axes, e.g. resamples and
      targets, with `weights` broadcast to them).

    **Returns**: [m] (or [T, m], [B, T, m]) log values; None for a law without term variables
    (`AbstractLaw.term_variables`).
    """
    v = _variables(law, r, batched)
    if v is None:
        return None
    used = np.ones(v.shape[:-1], bool) if weights is None else np.broadcast_to(np.asarray(weights) > 0, v.shape[:-1])
    return np.min(np.where(used[..., None], v, np.inf), axis=-2)


def support_shortfall(law: Any, r: Any, floor: Any, batched: bool | int = False) -> np.ndarray | None:
    """How far below the fitted rows each mixture takes the law's terms: per row, the largest ratio of a term
    variable's smallest trained value (`floor`, from `support_floor`) to its value there (1 or less: inside).

    **Arguments**:

    - `law`: the law (batched over targets when `batched`).
    - `r`: the mixtures [P, n].
    - `floor`: `support_floor` of the fitted rows ([m] or [T, m]).
    - `batched`: whether `law` has a leading target axis.

    **Returns**: [P] (or [T, P]) ratios, None for a law without term variables.
    """
    v = _variables(law, r, batched)
    if v is None:
        return None
    gap = np.max(np.asarray(floor)[..., None, :] - v, axis=-1)
    return np.exp(np.clip(gap, -700.0, 700.0))


def rows_outside(
    law: Any, trained: Any, weights: Any, r: Any, batched: bool | int = False, factor: float = SUPPORT_FACTOR
) -> np.ndarray | None:
    """Which mixtures `r` lie outside the support of `law` fitted on the mixtures `trained` with `weights`: a term
    variable below 1 / `factor` of its smallest value over the fitted rows (`support_floor`, `support_shortfall`).

    **Returns**: [P] booleans (or [..., P] over the law's batch axes); None for a law without term variables.
    """
    floor = support_floor(law, trained, weights, batched)
    shortfall = None if floor is None else support_shortfall(law, r, floor, batched)
    return None if shortfall is None else np.asarray(shortfall > factor)
