"""Student's t quantile, shared by the calibration and the fit's band for a new run (a module below both)."""

from __future__ import annotations

import functools

from jax.scipy.special import betainc


@functools.lru_cache(maxsize=256)  # 100 incomplete-beta calls each; decisions ask for a few (level, dof) pairs
def t_quantile(p: float, dof: int) -> float:
    """The p-quantile (p in (0.5, 1)) of Student's t with `dof` degrees of freedom, by bisection on its CDF
    1 - I_{dof / (dof + t^2)}(dof / 2, 1 / 2) / 2 (I the regularized incomplete beta function)."""
    lo, hi = 0.0, 1e3
    for _ in range(100):
        mid = (lo + hi) / 2
        cdf = 1 - 0.5 * float(betainc(dof / 2, 0.5, dof / (dof + mid**2)))
        lo, hi = (mid, hi) if cdf < p else (lo, mid)
    return (lo + hi) / 2
