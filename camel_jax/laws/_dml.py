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

# t_max's smoothing: kappa_i = t_max sin(raw_i)^2 / sqrt(|a_i|^2 + A_FLOOR^2), so that a term off (a_i = 0) stays a
# regular point; in units of loss_scale, far below any mixture effect a fit resolves (the bound on |t_i| is exact to
# (A_FLOOR / |a_i|)^2 / 2 relative)
A_FLOOR = 1e-6
# The default bound on a term's rate |t_i|: its value changes by at most a factor exp(sqrt(2) T_MAX) ~ 2e6 between
# any two mixtures (see DML)
T_MAX = 10.0


def resolve_t_max(t_max: Any) -> float | None:
    """The bound on each term's rate |t_i| a law is fitted within (None: no bound), checked."""
    return None if t_max is None else positive_number(t_max, "t_max")


def kappa_value(raw: Array, a: Array, t_max: float | None) -> Array:
    """kappa = raw^2 (kappa >= 0, and kappa = 0, the linear limit, a regular point); with `t_max`,
    t_max sin(raw)^2 / sqrt(|a|^2 + A_FLOOR^2): the rate |t| = kappa |a| in [0, t_max), both ends regular points."""
    if t_max is None:
        return raw * raw
    return t_max * jnp.sin(raw) ** 2 / jnp.sqrt(jnp.sum(a * a, axis=-1) + A_FLOOR**2)


def kappa_inverse(kappa: Array, a: Array, t_max: float | None) -> Array:
    """The raw coordinate of `kappa` given `a` (`kappa_value`'s inverse); a rate |t| = kappa |a| above `t_max` is a
    `ValueError`."""
    if t_max is None:
        return jnp.sqrt(kappa)
    if not isinstance(kappa, jax.core.Tracer) and not isinstance(a, jax.core.Tracer):
        rate = np.asarray(kappa) * np.linalg.norm(np.asarray(a), axis=-1)
        if np.any(rate > t_max * (1 + 1e-9)):
            raise ValueError(
                f"the rate |t_i| (the norm of each row of t less its mean) = {rate} exceeds `t_max` = {t_max}; pass "
                "t_max=None (no bound) or a larger bound to allow it"
            )
    fraction = kappa * jnp.sqrt(jnp.sum(a * a, axis=-1) + A_FLOOR**2) / t_max
    return jnp.arcsin(jnp.sqrt(jnp.clip(fraction, 0.0, 1.0)))


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
    sum k_i. The free coordinates are C1, a [k, n-1] and raw_kappa (sqrt(kappa) without a bound, see **Bound**):
    the linear limit (kappa -> 0, a law linear in r) and a term off (a_i = 0) are finite points, and no direction
    leaves the function unchanged. `loss_scale` s_L and the mixture `center` c (the data's mean mixture to two
    decimals, None: uniform) are static, set from the data by `fit` (`with_data_scales`). `params()` reports one
    representative of the paper's parameters: S = 1, C_i = C0 / k and rows of t summing to 0.

    **Bound** (the default): `t_max` holds each term's rate, the norm |t_i| of its row of t less the row's mean
    (= kappa_i |a_i|), within [0, t_max] by kappa_i = t_max sin(raw_i)^2 / |a_i| (|a_i| floored smoothly at 1e-6,
    so that a term off stays a regular point), where both ends are regular points: a start whose data want an ever
    sharper exponential (kappa_i -> infinity with k_i -> 0: a spike that fits one mixture's noise) stops at the
    bound, converged, instead of crawling toward it. A term then changes by at most a factor exp(sqrt(2) t_max)
    between any two mixtures (t_max = 10: 1.4e6, beyond any plausible mixture effect, and a factor exp(10 |r - r'|)
    between mixtures r, r' of a design). `t_max=None` drops the bound (raw_i = sqrt(kappa_i)).

    **Arguments** (`__call__`): `r` mixtures [P, n], rows on the simplex. **Returns**: predicted loss [P].
    """

    UNITS = ("loss_scale", "center")

    C1: Float[Array, "*batch"]
    a: Float[Array, "*batch k m"]  # k_i v_i, m = n - 1
    raw_kappa: Float[Array, "*batch k"]  # kappa_i = 1 / k_i through `kappa_value`
    loss_scale: float = eqx.field(static=True, default=1.0)
    center: tuple[float, ...] | None = eqx.field(static=True, default=None)
    t_max: float | None = eqx.field(static=True, default=T_MAX)  # None: no bound on the rate

    @property
    def kappa(self) -> Array:
        """kappa_i = 1 / k_i, in units of 1 / loss_scale (0: the linear limit)."""
        return kappa_value(self.raw_kappa, self.a, self.t_max)

    def _offsets(self, n: int) -> Array:
        """H^T (r - c) is H^T r - H^T c: the second part."""
        c = np.full(n, 1.0 / n) if self.center is None else np.asarray(self.center)
        return jnp.asarray(helmert(n).T @ c)

    def __call__(self, r: Float[Array, "P n"]) -> Float[Array, " P"]:
        n = r.shape[-1]
        rho = r @ jnp.asarray(helmert(n), dtype=r.dtype) - self._offsets(n).astype(r.dtype)[None, :]  # [P, m]
        w = rho @ self.a.T  # [P, k]
        kappa = self.kappa
        return self.loss_scale * (self.C1 + jnp.sum(w * exprel(kappa[None, :] * w), axis=-1))

    def params(self) -> dict[str, Array]:
        """One representative of the paper's t, S, C, K (S = 1, rows of t summing to 0), in the user's units."""
        m = self.a.shape[-1]
        kappa = self.kappa
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
        t_max: float | None = T_MAX,
    ) -> DML:
        """Build from the paper's values (S, K > 0; C, t real). `t_max`: see `DML` (each row of t less its mean
        must have norm <= it)."""
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
        t_max = resolve_t_max(t_max)
        a = k[..., None] * v
        return cls(
            C1=jnp.sum(p["S"] * p["C"], axis=-1) / s_L + jnp.sum(k, axis=-1),
            a=a,
            raw_kappa=kappa_inverse(1.0 / k, a, t_max),
            loss_scale=s_L,
            center=center,
            t_max=t_max,
        )

    @classmethod
    def sample_init(
        cls,
        key: Array,
        *,
        n_datasets: int,
        n_domains: int,
        loss_scale: float = 1.0,
        center: Any = None,
        t_max: float | None = T_MAX,
    ) -> DML:
        """A random start in the law's units: the level C1 in [0.8, 1.2], each term's value at the center k in
        [0.01, 1] and its direction t ~ N(0, 1) on the simplex (its rate |t| at most 0.9 `t_max`, by a larger k).
        `t_max`: the bound on each term's rate (None: none; see `DML`)."""
        n_datasets, n_domains = count(n_datasets, "n_datasets", least=2), count(n_domains, "n_domains")
        t_max = resolve_t_max(t_max)
        k_t, k_C, k_K = jax.random.split(key, 3)
        k = jnp.exp(log_uniform(k_K, (n_domains,), 0.01, 1.0))
        v = jax.random.normal(k_t, (n_domains, n_datasets - 1))
        a = k[:, None] * v
        if t_max is None:
            raw_kappa = jnp.sqrt(1.0 / k)
        else:
            fraction = jnp.sqrt(jnp.sum(a * a, axis=-1) + A_FLOOR**2) / (k * t_max)
            raw_kappa = jnp.arcsin(jnp.sqrt(jnp.minimum(fraction, 0.9)))
        return cls(
            C1=jax.random.uniform(k_C, (), minval=0.8, maxval=1.2),
            a=a,
            raw_kappa=raw_kappa,
            loss_scale=positive_number(loss_scale, "loss_scale"),
            center=_center(center, n_datasets),
            t_max=t_max,
        )

    def with_data_scales(self, inputs: tuple[Any, ...], y: Any) -> dict[str, Any]:
        """The units of a fit: the targets' order of magnitude and the data's mean mixture to two decimals (the
        point where each term's level is measured, for conditioning)."""
        r = np.asarray(inputs[0], dtype=np.float64)
        return {"loss_scale": data_scale(y), "center": tuple(float(x) for x in np.round(r.mean(axis=0), 2))}

    def structure(self) -> dict[str, Any]:
        k, m = self.a.shape[-2:]
        return {
            "n_datasets": m + 1,
            "n_domains": k,
            "loss_scale": self.loss_scale,
            "center": self.center,
            "t_max": self.t_max,
        }
