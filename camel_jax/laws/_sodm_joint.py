"""SODM, joint form (Shukor et al. 2025): mixture-dependent size and data coefficients."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._base import AbstractLaw, as_leaves, count, log_uniform, positive_inverse, safe_pow
from ._sodm_additive import sodm_settings, sodm_structure


class SODMJoint(AbstractLaw):
    """Joint mixture law: the mixture scales the size and data terms.

        L(r, N, D) = E + 1 / sum_j C_j r_j^gamma_j
                     + (sum_j CA_j r_j)^gammaA / N^alpha + (sum_j CB_j r_j)^gammaB / D^beta

    every coefficient and exponent > 0; `tokens=False` drops the D term (`law(r, N)`). Reference: Shukor et
    al. (2025), the joint law; named SODM in Li, Gu & Zhang (2026).

    **Arguments** (`__call__`): `r` [P, n], `size` [P], and `tokens` [P] when `tokens=True`. **Returns**: [P].
    """

    log_E: Float[Array, "*batch"]
    log_C: Float[Array, "*batch n"]
    log_gamma: Float[Array, "*batch n"]
    log_CA: Float[Array, "*batch n"]
    log_gammaA: Float[Array, "*batch"]
    log_alpha: Float[Array, "*batch"]
    log_CB: Float[Array, "*batch n"] | None
    log_gammaB: Float[Array, "*batch"] | None
    log_beta: Float[Array, "*batch"] | None
    tokens: bool = eqx.field(static=True, default=True)
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)

    def __call__(
        self, r: Float[Array, "P n"], size: Float[Array, " P"], *tokens: Float[Array, " P"]
    ) -> Float[Array, " P"]:
        if len(tokens) != int(self.tokens):
            raise TypeError(
                f"SODMJoint(tokens={self.tokens}) takes {2 + int(self.tokens)} inputs; got {2 + len(tokens)}"
            )
        loss = jnp.exp(self.log_E) + 1.0 / (safe_pow(r, jnp.exp(self.log_gamma)[None, :]) @ jnp.exp(self.log_C))
        size_coef = jnp.log(r @ jnp.exp(self.log_CA)) * jnp.exp(self.log_gammaA)
        loss = loss + jnp.exp(size_coef - jnp.exp(self.log_alpha) * jnp.log(size / self.size_scale))
        if self.tokens:
            assert self.log_CB is not None and self.log_gammaB is not None and self.log_beta is not None
            tokens_coef = jnp.log(r @ jnp.exp(self.log_CB)) * jnp.exp(self.log_gammaB)
            loss = loss + jnp.exp(tokens_coef - jnp.exp(self.log_beta) * jnp.log(tokens[0] / self.tokens_scale))
        return loss

    def params(self) -> dict[str, Array]:
        alpha, gammaA = jnp.exp(self.log_alpha), jnp.exp(self.log_gammaA)
        # (sum CA r)^gammaA / (N/s)^alpha = (sum CA' r)^gammaA / N^alpha with CA' = CA s^(alpha/gammaA)
        out = {
            "E": jnp.exp(self.log_E),
            "C": jnp.exp(self.log_C),
            "gamma": jnp.exp(self.log_gamma),
            "CA": jnp.exp(self.log_CA + (alpha / gammaA * jnp.log(self.size_scale))[..., None]),
            "gammaA": gammaA,
            "alpha": alpha,
        }
        if self.tokens:
            assert self.log_CB is not None and self.log_gammaB is not None and self.log_beta is not None
            beta, gammaB = jnp.exp(self.log_beta), jnp.exp(self.log_gammaB)
            out |= {
                "CB": jnp.exp(self.log_CB + (beta / gammaB * jnp.log(self.tokens_scale))[..., None]),
                "gammaB": gammaB,
                "beta": beta,
            }
        return out

    @classmethod
    def from_params(
        cls,
        *,
        E: ArrayLike,
        C: ArrayLike,
        gamma: ArrayLike,
        CA: ArrayLike,
        gammaA: ArrayLike,
        alpha: ArrayLike,
        CB: ArrayLike | None = None,
        gammaB: ArrayLike | None = None,
        beta: ArrayLike | None = None,
        size_scale: float = 1.0,
        tokens_scale: float = 1.0,
    ) -> SODMJoint:
        """Build from constrained values; passing `CB`, `gammaB` and `beta` selects `tokens=True`."""
        token_values = (CB, gammaB, beta)
        tokens = any(v is not None for v in token_values)
        if tokens and any(v is None for v in token_values):
            raise ValueError("pass all of `CB`, `gammaB`, `beta` (tokens=True) or none (tokens=False)")
        ndims = {"E": 0, "C": 1, "gamma": 1, "CA": 1, "gammaA": 0, "alpha": 0}
        values: dict[str, Any] = {"E": E, "C": C, "gamma": gamma, "CA": CA, "gammaA": gammaA, "alpha": alpha}
        if tokens:
            ndims |= {"CB": 1, "gammaB": 0, "beta": 0}
            values |= {"CB": CB, "gammaB": gammaB, "beta": beta}
        p = as_leaves(ndims, values)
        shift_A = (p["alpha"] / p["gammaA"] * jnp.log(size_scale))[..., None]
        return cls(
            log_E=positive_inverse(p["E"], None, "E"),
            log_C=positive_inverse(p["C"], None, "C"),
            log_gamma=positive_inverse(p["gamma"], None, "gamma"),
            log_CA=positive_inverse(p["CA"], None, "CA") - shift_A,
            log_gammaA=positive_inverse(p["gammaA"], None, "gammaA"),
            log_alpha=positive_inverse(p["alpha"], None, "alpha"),
            log_CB=(
                positive_inverse(p["CB"], None, "CB") - (p["beta"] / p["gammaB"] * jnp.log(tokens_scale))[..., None]
                if tokens
                else None
            ),
            log_gammaB=positive_inverse(p["gammaB"], None, "gammaB") if tokens else None,
            log_beta=positive_inverse(p["beta"], None, "beta") if tokens else None,
            **sodm_settings(tokens, size_scale, tokens_scale),
        )

    @classmethod
    def sample_init(
        cls, key: Array, *, n_datasets: int, tokens: bool = True, size_scale: float = 1.0, tokens_scale: float = 1.0
    ) -> SODMJoint:
        """A random start: E in [0.5, 3], C in [1, 10], CA and CB in [0.05, 2], exponents in [0.05, 1.5]."""
        n_datasets = count(n_datasets, "n_datasets")
        keys = jax.random.split(key, 9)
        return cls(
            log_E=log_uniform(keys[0], (), 0.5, 3.0),
            log_C=log_uniform(keys[1], (n_datasets,), 1.0, 10.0),
            log_gamma=log_uniform(keys[2], (n_datasets,), 0.1, 1.0),
            log_CA=log_uniform(keys[3], (n_datasets,), 0.05, 2.0),
            log_gammaA=log_uniform(keys[4], (), 0.5, 1.5),
            log_alpha=log_uniform(keys[5], (), 0.05, 1.5),
            log_CB=log_uniform(keys[6], (n_datasets,), 0.05, 2.0) if tokens else None,
            log_gammaB=log_uniform(keys[7], (), 0.5, 1.5) if tokens else None,
            log_beta=log_uniform(keys[8], (), 0.05, 1.5) if tokens else None,
            **sodm_settings(tokens, size_scale, tokens_scale),
        )

    def size_parameters(self) -> tuple[int, int]:
        """Size is `inputs[1]`; E, the size amplitudes and alpha describe the size dependence."""
        return 1, 3

    def structure(self) -> dict[str, Any]:
        return sodm_structure(self)
