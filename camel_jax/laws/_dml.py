"""DML, the data mixing law of Ye et al. (2025), in the form the CAMEL paper writes it, in well-posed coordinates."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._base import AbstractLaw, as_leaves, count, log_uniform, positive_inverse, positive_number
from ._camel import data_scale, exprel
from ._terms import helmert


def _center(center: Any, n: int) -> tuple[float, ...] | None:
    """A checked mixture center: None (the uniform mixture) or n finite numbers."""
    if center is None:
        return None
    values = tuple(float(c) for c in center)
    if len(values) != n or not all(np.isfinite(values)):
        raise ValueError(f"`center` must be {n} finite numbers (a mixture) or None; got {center!r}")
    return values


class DML(AbstractLaw):
    """Data mixing law at one model size and training length.

        L(r) = sum_i S_i [C_i + K_i exp(sum_j t_ij r_j)]

    `S, K` [k] > 0, `C` [k] and `t` [k, n] real. Reference: Ye et al. (2025), "Data Mixing Laws", as written in
    Li, Gu & Zhang (2026), Section 2.

    **Parameterization** (why the fit is well posed). As written the law is over-parameterized: S C and S K
    collapse, and on the simplex (sum_j r_j = 1) adding a constant to a row t_i multiplies K_i. Its identified
    form is L = C0 + sum_i k_i exp(t_i . (r - c)) with one level C0, k_i > 0 (the term's value at the mixture `c`)
    and t_i in the (n-1)-dimensional space of directions on the simplex (t_i = H v_i, H the Helmert basis). Each
    term is then written less its value at c, k_i (exp(x) - 1) = w_i exprel(kappa_i w_i) with w_i = a_i . H^T
    (r - c), a_i = k_i v_i and kappa_i = 1 / k_i, and L = s_L (C1 + sum_i w_i exprel(kappa_i w_i)), C1 = C0 +
    sum k_i. The free coordinates are C1, a [k, n-1] and sqrt(kappa): the linear limit (kappa -> 0, a law linear
    in r) and a term off (a_i = 0) are finite points, and no direction leaves the function unchanged. `loss_scale`
    s_L and the mixture `center` c (the data's mean mixture to two decimals, None: uniform) are static, set from
    the data by `fit` (`with_data_scales`). `params()` reports one representative of the paper's parameters:
    S = 1, C_i = C0 / k and rows of t summing to 0.

    **Arguments** (`__call__`): `r` mixtures [P, n], rows on the simplex. **Returns**: predicted loss [P].
    """

    UNITS = ("loss_scale", "center")

    C1: Float[Array, "*batch"]
    a: Float[Array, "*batch k m"]  # k_i v_i, m = n - 1
    root_kappa: Float[Array, "*batch k"]  # sqrt(1 / k_i)
    loss_scale: float = eqx.field(static=True, default=1.0)
    center: tuple[float, ...] | None = eqx.field(static=True, default=None)

    def _offsets(self, n: int) -> Array:
        """H^T (r - c) is H^T r - H^T c: the second part."""
        c = np.full(n, 1.0 / n) if self.center is None else np.asarray(self.center)
        return jnp.asarray(helmert(n).T @ c)

    def __call__(self, r: Float[Array, "P n"]) -> Float[Array, " P"]:
        n = r.shape[-1]
        rho = r @ jnp.asarray(helmert(n), dtype=r.dtype) - self._offsets(n).astype(r.dtype)[None, :]  # [P, m]
        w = rho @ self.a.T  # [P, k]
        kappa = self.root_kappa**2
        return self.loss_scale * (self.C1 + jnp.sum(w * exprel(kappa[None, :] * w), axis=-1))

    def params(self) -> dict[str, Array]:
        """One representative of the paper's t, S, C, K (S = 1, rows of t summing to 0), in the user's units."""
        m = self.a.shape[-1]
        kappa = self.root_kappa**2
        t = (self.a * kappa[..., None]) @ jnp.asarray(helmert(m + 1).T)  # [k, n], rows summing to 0
        c = np.full(m + 1, 1.0 / (m + 1)) if self.center is None else np.asarray(self.center)
        k = 1.0 / kappa  # the term's value at the center, in loss_scale units
        n_terms = self.a.shape[-2]
        C0 = self.C1 - jnp.sum(k, axis=-1)
        return {
            "t": t,
            "S": jnp.ones_like(kappa),
            "C": self.loss_scale * jnp.broadcast_to((C0 / n_terms)[..., None], kappa.shape),
            "K": self.loss_scale * k * jnp.exp(-(t @ jnp.asarray(c))),
        }

    @classmethod
    def from_params(
        cls,
        *,
        t: ArrayLike,
        S: ArrayLike,
        C: ArrayLike,
        K: ArrayLike,
        loss_scale: float = 1.0,
        center: Any = None,
    ) -> DML:
        """Build from the paper's values (S, K > 0; C, t real)."""
        p = as_leaves({"t": 2, "S": 1, "C": 1, "K": 1}, {"t": t, "S": S, "C": C, "K": K})
        positive_inverse(p["S"], None, "S")
        positive_inverse(p["K"], None, "K")
        n = p["t"].shape[-1]
        if n < 2:
            raise ValueError(f"`t` must have at least 2 columns (datasets); got shape {p['t'].shape}")
        s_L = positive_number(loss_scale, "loss_scale")
        center = _center(center, n)
        c = np.full(n, 1.0 / n) if center is None else np.asarray(center)
        # S K exp(t . r) = S K exp(mean t) exp(tc . r) on the simplex, tc = t - mean t: its value at c is k
        mean = jnp.mean(p["t"], axis=-1, keepdims=True)
        k = p["S"] * p["K"] * jnp.exp(mean[..., 0] + (p["t"] - mean) @ jnp.asarray(c)) / s_L
        v = (p["t"] - mean) @ jnp.asarray(helmert(n))
        return cls(
            C1=jnp.sum(p["S"] * p["C"], axis=-1) / s_L + jnp.sum(k, axis=-1),
            a=k[..., None] * v,
            root_kappa=jnp.sqrt(1.0 / k),
            loss_scale=s_L,
            center=center,
        )

    @classmethod
    def sample_init(
        cls, key: Array, *, n_datasets: int, n_domains: int, loss_scale: float = 1.0, center: Any = None
    ) -> DML:
        """A random start in the law's units: the level C1 in [0.8, 1.2], each term's value at the center k in
        [0.01, 1] and its direction t ~ N(0, 1) on the simplex."""
        n_datasets, n_domains = count(n_datasets, "n_datasets", least=2), count(n_domains, "n_domains")
        k_t, k_C, k_K = jax.random.split(key, 3)
        k = jnp.exp(log_uniform(k_K, (n_domains,), 0.01, 1.0))
        v = jax.random.normal(k_t, (n_domains, n_datasets - 1))
        return cls(
            C1=jax.random.uniform(k_C, (), minval=0.8, maxval=1.2),
            a=k[:, None] * v,
            root_kappa=jnp.sqrt(1.0 / k),
            loss_scale=positive_number(loss_scale, "loss_scale"),
            center=_center(center, n_datasets),
        )

    def with_data_scales(self, inputs: tuple[Any, ...], y: Any) -> dict[str, Any]:
        """The units of a fit: the targets' order of magnitude and the data's mean mixture to two decimals (the
        point where each term's level is measured, for conditioning)."""
        r = np.asarray(inputs[0], dtype=np.float64)
        return {"loss_scale": data_scale(y), "center": tuple(float(x) for x in np.round(r.mean(axis=0), 2))}

    def structure(self) -> dict[str, Any]:
        k, m = self.a.shape[-2:]
        return {"n_datasets": m + 1, "n_domains": k, "loss_scale": self.loss_scale, "center": self.center}
