"""SODM, additive form (Shukor et al. 2025, "Scaling Laws for Optimal Data Mixtures")."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._base import AbstractLaw, as_leaves, count, log_uniform, positive_inverse, positive_number, safe_pow


def sodm_structure(law: Any) -> dict[str, Any]:
    """The structure of either SODM law (additive or joint): datasets, tokens input and reference scales."""
    return {
        "n_datasets": law.log_C.shape[-1],
        "tokens": law.tokens,
        "size_scale": law.size_scale,
        "tokens_scale": law.tokens_scale,
    }


def sodm_settings(tokens: bool, size_scale: float, tokens_scale: float) -> dict[str, Any]:
    """The static settings of either SODM law, checked: whether tokens are an input, and the reference scales."""
    return {
        "tokens": bool(tokens),
        "size_scale": positive_number(size_scale, "size_scale"),
        "tokens_scale": positive_number(tokens_scale, "tokens_scale"),
    }


class SODMAdditive(AbstractLaw):
    """Additive mixture law with separate size, data and mixture terms.

        L(r, N, D) = E + A / N^alpha + B / D^beta + 1 / sum_j C_j r_j^gamma_j

    every coefficient and exponent > 0. With `tokens=False` the D term is dropped and the law is `law(r, N)`:
    when every run has one token count it merges into E anyway (the paper's fixed-length cooldowns).
    Reference: Shukor et al. (2025), the additive law; named SODM in Li, Gu & Zhang (2026).

    `size_scale`, `tokens_scale`: static reference units for N and D (params() reports in user units).

    **Arguments** (`__call__`): `r` [P, n], `size` [P], and `tokens` [P] when `tokens=True`. **Returns**: [P].
    """

    log_E: Float[Array, "*batch"]
    log_A: Float[Array, "*batch"]
    log_alpha: Float[Array, "*batch"]
    log_B: Float[Array, "*batch"] | None
    log_beta: Float[Array, "*batch"] | None
    log_C: Float[Array, "*batch n"]
    log_gamma: Float[Array, "*batch n"]
    tokens: bool = eqx.field(static=True, default=True)
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)

    def __call__(
        self, r: Float[Array, "P n"], size: Float[Array, " P"], *tokens: Float[Array, " P"]
    ) -> Float[Array, " P"]:
        if len(tokens) != int(self.tokens):
            raise TypeError(
                f"SODMAdditive(tokens={self.tokens}) takes {2 + int(self.tokens)} inputs; got {2 + len(tokens)}"
            )
        loss = jnp.exp(self.log_E) + jnp.exp(self.log_A - jnp.exp(self.log_alpha) * jnp.log(size / self.size_scale))
        if self.tokens:
            assert self.log_B is not None and self.log_beta is not None
            loss = loss + jnp.exp(self.log_B - jnp.exp(self.log_beta) * jnp.log(tokens[0] / self.tokens_scale))
        mixture_term = safe_pow(r, jnp.exp(self.log_gamma)[None, :]) @ jnp.exp(self.log_C)
        return loss + 1.0 / mixture_term

    def params(self) -> dict[str, Array]:
        alpha = jnp.exp(self.log_alpha)
        out = {
            "E": jnp.exp(self.log_E),
            "A": jnp.exp(self.log_A + alpha * jnp.log(self.size_scale)),
            "alpha": alpha,
            "C": jnp.exp(self.log_C),
            "gamma": jnp.exp(self.log_gamma),
        }
        if self.tokens:
            assert self.log_B is not None and self.log_beta is not None
            beta = jnp.exp(self.log_beta)
            out["B"] = jnp.exp(self.log_B + beta * jnp.log(self.tokens_scale))
            out["beta"] = beta
        return out

    @classmethod
    def from_params(
        cls,
        *,
        E: ArrayLike,
        A: ArrayLike,
        alpha: ArrayLike,
        C: ArrayLike,
        gamma: ArrayLike,
        B: ArrayLike | None = None,
        beta: ArrayLike | None = None,
        size_scale: float = 1.0,
        tokens_scale: float = 1.0,
    ) -> SODMAdditive:
        """Build from constrained values; passing `B` and `beta` selects `tokens=True`."""
        tokens = B is not None or beta is not None
        if tokens and (B is None or beta is None):
            raise ValueError("pass both `B` and `beta` (tokens=True) or neither (tokens=False)")
        ndims = {"E": 0, "A": 0, "alpha": 0, "C": 1, "gamma": 1}
        values: dict[str, Any] = {"E": E, "A": A, "alpha": alpha, "C": C, "gamma": gamma}
        if tokens:
            ndims |= {"B": 0, "beta": 0}
            values |= {"B": B, "beta": beta}
        p = as_leaves(ndims, values)
        return cls(
            log_E=positive_inverse(p["E"], None, "E"),
            log_A=positive_inverse(p["A"], None, "A") - p["alpha"] * jnp.log(size_scale),
            log_alpha=positive_inverse(p["alpha"], None, "alpha"),
            log_B=positive_inverse(p["B"], None, "B") - p["beta"] * jnp.log(tokens_scale) if tokens else None,
            log_beta=positive_inverse(p["beta"], None, "beta") if tokens else None,
            log_C=positive_inverse(p["C"], None, "C"),
            log_gamma=positive_inverse(p["gamma"], None, "gamma"),
            **sodm_settings(tokens, size_scale, tokens_scale),
        )

    @classmethod
    def sample_init(
        cls, key: Array, *, n_datasets: int, tokens: bool = True, size_scale: float = 1.0, tokens_scale: float = 1.0
    ) -> SODMAdditive:
        """A random start: E in [0.5, 3], A and B in [0.05, 2], exponents in [0.05, 1.5], C in [1, 10],
        gamma in [0.1, 1]."""
        n_datasets = count(n_datasets, "n_datasets")
        keys = jax.random.split(key, 7)
        return cls(
            log_E=log_uniform(keys[0], (), 0.5, 3.0),
            log_A=log_uniform(keys[1], (), 0.05, 2.0),
            log_alpha=log_uniform(keys[2], (), 0.05, 1.5),
            log_B=log_uniform(keys[3], (), 0.05, 2.0) if tokens else None,
            log_beta=log_uniform(keys[4], (), 0.05, 1.5) if tokens else None,
            log_C=log_uniform(keys[5], (n_datasets,), 1.0, 10.0),
            log_gamma=log_uniform(keys[6], (n_datasets,), 0.1, 1.0),
            **sodm_settings(tokens, size_scale, tokens_scale),
        )

    def size_parameters(self) -> tuple[int, int]:
        """Size is `inputs[1]`; E, A and alpha describe the size dependence."""
        return 1, 3

    def structure(self) -> dict[str, Any]:
        return sodm_structure(self)
