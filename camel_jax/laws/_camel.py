"""CAMEL, the capacity-aware mixture law (Li, Gu & Zhang 2026, Theorem 1)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._base import (
    AbstractLaw,
    as_leaves,
    check_bounds,
    count,
    log_uniform,
    positive,
    positive_inverse,
    positive_number,
    safe_log,
    simplex_logits,
)


def tied_alpha(beta: Array, capacity_exponent: float) -> Array:
    """The tied mixture exponent: alpha_i = a_i / (1 + a_i) with a_i = beta_i / c (Theorem 1's proof)."""
    a = beta / capacity_exponent
    return a / (1.0 + a)


class CAMEL(AbstractLaw):
    """Capacity-aware mixture law.

        L(r, M) = C + sum_i K_i / (<t_i, r>^alpha_i * M^beta_i)

    with `t` [k, n] whose columns lie on the simplex over the k intrinsic domains (dataset j is a distribution
    over domains), `K, alpha, beta` [k] > 0 and `C` real. Reference: Li, Gu & Zhang (2026), "Capacity-Aware
    Mixture Law Enables Efficient LLM Data Optimization", Theorem 1.

    With `tied=True` the exponents follow the theorem's proof: the domain exponent a_i gives alpha_i =
    a_i / (a_i + 1) and beta_i = a_i when M is proportional to capacity. When capacity grows as M^c
    (`capacity_exponent=c`, e.g. c=3 for the paper's scale index, where depth and width both grow with M),
    beta_i = c a_i, so alpha_i = (beta_i / c) / (1 + beta_i / c). Only beta is then free.

    `size_scale` is a static reference size: the law is evaluated on M / size_scale internally so that
    raw parameter counts (1e9) are as well conditioned as a scale index (4..12); `params()` reports K in the
    user's units of M.

    **Arguments** (`__call__`):
    - `r`: mixtures, [P, n], rows on the simplex (zero weights allowed).
    - `size`: model sizes M, [P], > 0.

    **Returns**: predicted loss, [P].
    """

    t_logits: Float[Array, "*batch k n"]
    log_K: Float[Array, "*batch k"]
    raw_alpha: Float[Array, "*batch k"] | None
    raw_beta: Float[Array, "*batch k"]
    C: Float[Array, "*batch"]
    tied: bool = eqx.field(static=True, default=False)
    capacity_exponent: float = eqx.field(static=True, default=1.0)
    size_scale: float = eqx.field(static=True, default=1.0)
    alpha_bounds: tuple[float, float] | None = eqx.field(static=True, default=None)
    beta_bounds: tuple[float, float] | None = eqx.field(static=True, default=None)

    @property
    def t(self) -> Array:
        return jax.nn.softmax(self.t_logits, axis=-2)

    @property
    def beta(self) -> Array:
        return positive(self.raw_beta, self.beta_bounds)

    @property
    def alpha(self) -> Array:
        if self.tied:
            return tied_alpha(self.beta, self.capacity_exponent)
        assert self.raw_alpha is not None
        return positive(self.raw_alpha, self.alpha_bounds)

    def __call__(self, r: Float[Array, "P n"], size: Float[Array, " P"]) -> Float[Array, " P"]:
        eta = r @ self.t.T  # [P, k]: effective intrinsic-domain weights <t_i, r>
        log_size = jnp.log(size / self.size_scale)
        log_terms = self.log_K[None, :] - self.alpha[None, :] * safe_log(eta) - self.beta[None, :] * log_size[:, None]
        return self.C + jnp.sum(jnp.exp(log_terms), axis=-1)

    def params(self) -> dict[str, Array]:
        beta = self.beta
        out = {
            "t": self.t,
            "K": jnp.exp(self.log_K + beta * jnp.log(self.size_scale)),
            "alpha": self.alpha,
            "beta": beta,
            "C": self.C,
        }
        return out

    @classmethod
    def from_params(
        cls,
        *,
        t: ArrayLike,
        K: ArrayLike,
        beta: ArrayLike,
        C: ArrayLike,
        alpha: ArrayLike | None = None,
        tied: bool = False,
        capacity_exponent: float = 1.0,
        size_scale: float = 1.0,
        alpha_bounds: tuple[float, float] | None = None,
        beta_bounds: tuple[float, float] | None = None,
    ) -> CAMEL:
        """Build from constrained values. When `tied`, `alpha` is derived from `beta`; passing it is allowed only
        if it agrees (so that `from_params(**law.params(), tied=True)` round-trips)."""
        if tied and alpha is not None and not isinstance(alpha, jax.core.Tracer):
            if not jnp.allclose(jnp.asarray(alpha), tied_alpha(jnp.asarray(beta), capacity_exponent), rtol=1e-8):
                raise ValueError(
                    "`alpha` is determined by `beta` when tied=True (alpha = (beta/c) / (1 + beta/c)); "
                    "the given alpha disagrees: omit it"
                )
        if not tied and alpha is None:
            raise ValueError("`alpha` is required when tied=False")
        alpha_bounds = check_bounds(alpha_bounds, "alpha_bounds")
        beta_bounds = check_bounds(beta_bounds, "beta_bounds")
        ndims = {"t": 2, "K": 1, "beta": 1, "C": 0}
        values: dict[str, Any] = {"t": t, "K": K, "beta": beta, "C": C}
        if not tied:
            ndims["alpha"] = 1
            values["alpha"] = alpha
        p = as_leaves(ndims, values)
        raw_beta = positive_inverse(p["beta"], beta_bounds, "beta")
        return cls(
            t_logits=simplex_logits(p["t"], axis=-2, name="t"),
            log_K=positive_inverse(p["K"], None, "K") - p["beta"] * jnp.log(size_scale),
            raw_alpha=None if tied else positive_inverse(p["alpha"], alpha_bounds, "alpha"),
            raw_beta=raw_beta,
            C=p["C"],
            tied=tied,
            capacity_exponent=positive_number(capacity_exponent, "capacity_exponent"),
            size_scale=positive_number(size_scale, "size_scale"),
            alpha_bounds=alpha_bounds,
            beta_bounds=beta_bounds,
        )

    @classmethod
    def sample_init(
        cls,
        key: Array,
        *,
        n_datasets: int,
        n_domains: int,
        tied: bool = False,
        capacity_exponent: float = 1.0,
        size_scale: float = 1.0,
        alpha_bounds: tuple[float, float] | None = None,
        beta_bounds: tuple[float, float] | None = None,
    ) -> CAMEL:
        """A random start: profiles near uniform, K in [0.05, 2], exponents in [0.05, 1.5], C in [0, 3]."""
        n_datasets, n_domains = count(n_datasets, "n_datasets"), count(n_domains, "n_domains")
        k_t, k_K, k_a, k_b, k_C = jax.random.split(key, 5)
        alpha_bounds = check_bounds(alpha_bounds, "alpha_bounds")
        beta_bounds = check_bounds(beta_bounds, "beta_bounds")

        def raw_exponent(k: Array, bounds: tuple[float, float] | None) -> Array:
            if bounds is None:
                return log_uniform(k, (n_domains,), 0.05, 1.5)
            return jax.random.uniform(k, (n_domains,), minval=-2.0, maxval=2.0)

        return cls(
            t_logits=jax.random.normal(k_t, (n_domains, n_datasets)),
            log_K=log_uniform(k_K, (n_domains,), 0.05, 2.0),
            raw_alpha=None if tied else raw_exponent(k_a, alpha_bounds),
            raw_beta=raw_exponent(k_b, beta_bounds),
            C=jax.random.uniform(k_C, (), minval=0.0, maxval=3.0),
            tied=tied,
            capacity_exponent=positive_number(capacity_exponent, "capacity_exponent"),
            size_scale=positive_number(size_scale, "size_scale"),
            alpha_bounds=alpha_bounds,
            beta_bounds=beta_bounds,
        )

    def size_parameters(self) -> tuple[int, int]:
        """Size is `inputs[1]`; C and the k exponents beta describe the size dependence."""
        return 1, int(self.raw_beta.shape[-1]) + 1

    def structure(self) -> dict[str, Any]:
        k, n = self.t_logits.shape[-2:]
        return {
            "n_datasets": n,
            "n_domains": k,
            "tied": self.tied,
            "capacity_exponent": self.capacity_exponent,
            "size_scale": self.size_scale,
            "alpha_bounds": self.alpha_bounds,
            "beta_bounds": self.beta_bounds,
        }
