"""Terms shared by the SODM, DML and Chinchilla laws, written so that their limits are regular points.

A power term A x^-alpha is A + A (x^-alpha - 1) = A - b z exprel(-alpha z) with z = log x and b = A alpha: the
constant A joins the law's level, and the rest is finite (the log law -b z) as alpha -> 0 with b fixed, and zero
at b = 0 (the term off). CAMEL's terms (laws/_camel.py) use the same form.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._base import safe_log
from ._camel import exprel


def power_term(b: Array, exponent: Array, z: Array) -> Array:
    """A (exp(-exponent z) - 1) with A = b / exponent: a power law in exp(z) less its value at z = 0, which tends
    to the log law -b z as exponent -> 0."""
    return -b * z * exprel(-exponent * z)


def logrel(y: Array) -> Array:
    """log1p(y) / y, smooth through y = 0 (where it is 1), for y > -1."""
    small = jnp.abs(y) < 1e-4
    safe = jnp.where(small, 1.0, y)
    return jnp.where(small, 1.0 - y / 2.0 + y * y / 3.0, jnp.log1p(safe) / safe)


def inverse_power_mean_term(r: Array, p: Array, c: Array, kappa: Array) -> Array:
    """SODM's mixture term less its constant: K / sum_j p_j r_j^gamma_j - K with K = 1 / kappa and gamma_j =
    kappa c_j, finite and regular as kappa -> 0 (the log law -sum_j p_j c_j log r_j) and zero at c = 0.

    With u = -log sum_j p_j r_j^gamma_j the term is K (exp(u) - 1) = q exprel(kappa q), q = u / kappa
    = -(1/kappa) log1p(kappa v), v = sum_j p_j expm1(gamma_j log r_j) / kappa. A zero weight contributes r^gamma = 0
    (as `safe_pow` does), i.e. -p_j / kappa to v: the log law is infinite there, so kappa stays positive.

    **Arguments**: `r` [P, n] mixtures, `p` [n] on the simplex, `c` [n] >= 0, `kappa` scalar >= 0.
    **Returns**: [P].
    """
    present = r > 0
    x = c[None, :] * safe_log(r)  # log r_j^(c_j), finite where r_j > 0
    x = jnp.where(present, x, 0.0)
    kappa_safe = jnp.maximum(kappa, 1e-30)
    each = jnp.where(present, x * exprel(kappa * x), -1.0 / kappa_safe)  # expm1(kappa x) / kappa
    v = each @ p
    y = jnp.maximum(kappa * v, -1.0 + jnp.finfo(v.dtype).eps)  # -1 only when every weighted r_j is zero
    q = -v * logrel(y)
    return q * exprel(kappa * q)


def helmert(n: int) -> np.ndarray:
    """[n, n-1] orthonormal columns orthogonal to the ones vector (the Helmert basis): coordinates of the
    directions in which a mixture can move on the simplex."""
    basis = np.zeros((n, max(n - 1, 0)))
    for j in range(1, n):
        basis[:j, j - 1] = 1.0
        basis[j, j - 1] = -float(j)
        basis[:, j - 1] /= np.sqrt(j * (j + 1.0))
    return basis


def square_root(value: Any, name: str) -> Array:
    """sqrt(value) for the square-root coordinates of non-negative quantities; checks (on concrete values) >= 0."""
    from jax.core import Tracer

    if not isinstance(value, Tracer) and np.any(np.asarray(value) < 0):
        raise ValueError(f"parameter `{name}` must be >= 0; got {np.asarray(value)}")
    return jnp.sqrt(value)
