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


def linear_limit_term(r: Array, kappa: Array, p_tilt: Array, gamma_tilt: Array) -> Array:
    """SODM's mixture term less its constant, in the chart of its linear limit: K / sum_j p_j r_j^gamma_j - n K
    with K = 1 / kappa, p = softmax(kappa a), a = H p_tilt (H the Helmert basis: a sums to 0) and
    gamma_j = exp(kappa b_j), b = `gamma_tilt`; finite and regular as kappa -> 0, where it tends to the model
    n (mean_j a_j - sum_j a_j r_j - sum_j b_j r_j log r_j), linear in r and r log r (equal p, gamma = 1, K -> oo).

    On the simplex p_j r_j^gamma_j = r_j exp(kappa x_j) / Z with x_j = a_j + b_j exprel(kappa b_j) log r_j and
    Z = sum_k exp(kappa a_k) = n (1 + kappa V), V = mean_k a_k exprel(kappa a_k); with U = sum_j r_j x_j
    exprel(kappa x_j) the sum is (1 + kappa U) / Z (as sum_j r_j = 1), so the term is n (V - U) / (1 + kappa U).
    Rows are renormalized to sum to 1 (the data layer does so too), which the identity needs exactly. A zero weight
    contributes r^gamma = 0, as in `inverse_power_mean_term`.

    **Arguments**: `r` [P, n] mixtures, `kappa` scalar >= 0, `p_tilt` [n-1], `gamma_tilt` [n].
    **Returns**: [P].
    """
    n = r.shape[-1]
    a = from_helmert(p_tilt)
    present = r > 0
    total = jnp.sum(r, axis=-1, keepdims=True)
    share = r / jnp.where(total > 0, total, 1.0)
    x = a[None, :] + (gamma_tilt * exprel(kappa * gamma_tilt))[None, :] * jnp.where(present, safe_log(r), 0.0)
    U = jnp.sum(jnp.where(present, share * x * exprel(kappa * x), 0.0), axis=-1)
    V = jnp.mean(a * exprel(kappa * a))
    return n * (V - U) / (1.0 + kappa * U)


def helmert(n: int) -> np.ndarray:
    """[n, n-1] orthonormal columns orthogonal to the ones vector (the Helmert basis): coordinates of the
    directions in which a mixture can move on the simplex."""
    basis = np.zeros((n, max(n - 1, 0)))
    for j in range(1, n):
        basis[:j, j - 1] = 1.0
        basis[j, j - 1] = -float(j)
        basis[:, j - 1] /= np.sqrt(j * (j + 1.0))
    return basis


def from_helmert(tilt: Array) -> Array:
    """The vector [..., n] summing to 0 whose Helmert coordinates are `tilt` [..., n-1] (`helmert`)."""
    return tilt @ jnp.asarray(helmert(tilt.shape[-1] + 1).T, dtype=tilt.dtype)


def to_helmert(vector: Array) -> Array:
    """The Helmert coordinates [..., n-1] of `vector` [..., n]: of its part summing to 0 (`from_helmert`'s
    inverse on such vectors)."""
    return vector @ jnp.asarray(helmert(vector.shape[-1]), dtype=vector.dtype)


def square_root(value: Any, name: str) -> Array:
    """sqrt(value) for the square-root coordinates of non-negative quantities; checks (on concrete values) >= 0."""
    from jax.core import Tracer

    if not isinstance(value, Tracer) and np.any(np.asarray(value) < 0):
        raise ValueError(f"parameter `{name}` must be >= 0; got {np.asarray(value)}")
    return jnp.sqrt(value)
