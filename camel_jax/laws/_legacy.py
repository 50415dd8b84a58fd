"""Laws as files of format version 1 stored them, read only to convert them to today's parameterization.

Format 1 stored CAMEL's free coordinates as softmax logits of the profiles, log K (in units of `size_scale`),
log or bounded exponents and C. Format 2 stores the well-posed coordinates of `CAMEL` (see its docstring); a
version-1 file's CAMEL is rebuilt here with the old layout and converted by `from_params`, so old files load as the
same function.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from ._base import positive
from ._camel import CAMEL, tied_alpha
from ._camel_data import CAMELData


class LegacyCAMEL(eqx.Module):
    """CAMEL's format-1 layout (never fitted; `to_current` converts it)."""

    t_logits: Array
    log_K: Array
    raw_alpha: Array | None
    raw_beta: Array
    C: Array
    tied: bool = eqx.field(static=True, default=False)
    capacity_exponent: float = eqx.field(static=True, default=1.0)
    size_scale: float = eqx.field(static=True, default=1.0)
    alpha_bounds: tuple[float, float] | None = eqx.field(static=True, default=None)
    beta_bounds: tuple[float, float] | None = eqx.field(static=True, default=None)

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
    ) -> LegacyCAMEL:
        """The format-1 skeleton (shapes only matter: `load` fills the leaves)."""
        zeros = jnp.zeros((n_domains,))
        return cls(
            t_logits=jnp.zeros((n_domains, n_datasets)),
            log_K=zeros,
            raw_alpha=None if tied else zeros,
            raw_beta=zeros,
            C=jnp.zeros(()),
            tied=tied,
            capacity_exponent=float(capacity_exponent),
            size_scale=float(size_scale),
            alpha_bounds=None if alpha_bounds is None else tuple(alpha_bounds),  # type: ignore[arg-type]
            beta_bounds=None if beta_bounds is None else tuple(beta_bounds),  # type: ignore[arg-type]
        )

    def to_current(self) -> CAMEL:
        """The same function in today's `CAMEL` (batch axes kept)."""
        beta = jnp.exp(self.raw_beta) if self.beta_bounds is None else positive(self.raw_beta, self.beta_bounds)
        if self.tied:
            alpha = tied_alpha(beta, self.capacity_exponent)
        else:
            assert self.raw_alpha is not None
            alpha = (
                jnp.exp(self.raw_alpha) if self.alpha_bounds is None else positive(self.raw_alpha, self.alpha_bounds)
            )
        return CAMEL.from_params(
            t=jax.nn.softmax(self.t_logits, axis=-2),
            K=jnp.exp(self.log_K + beta * jnp.log(self.size_scale)),
            beta=beta,
            C=self.C,
            alpha=None if self.tied else alpha,
            tied=self.tied,
            capacity_exponent=self.capacity_exponent,
            size_scale=self.size_scale,
            beta_bounds=self.beta_bounds if self.tied else None,
        )


class LegacyCAMELData(eqx.Module):
    """CAMELData's format-1 layout: softmax logits, log K and G (in units of size and tokens scale), log exponents."""

    t_logits: Array
    log_K: Array
    raw_alpha: Array | None
    raw_beta: Array
    C: Array
    log_G: Array
    raw_gamma: Array | None
    tied: bool = eqx.field(static=True, default=False)
    shared_exponents: bool = eqx.field(static=True, default=False)
    tokens: bool = eqx.field(static=True, default=True)
    capacity_exponent: float = eqx.field(static=True, default=1.0)
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)

    @classmethod
    def sample_init(
        cls,
        key: Array,
        *,
        n_datasets: int,
        n_domains: int,
        tied: bool = False,
        shared_exponents: bool = False,
        tokens: bool = True,
        capacity_exponent: float = 1.0,
        size_scale: float = 1.0,
        tokens_scale: float = 1.0,
    ) -> LegacyCAMELData:
        """The format-1 skeleton."""
        zeros = jnp.zeros((n_domains,))
        return cls(
            t_logits=jnp.zeros((n_domains, n_datasets)),
            log_K=zeros,
            raw_alpha=None if tied else zeros,
            raw_beta=zeros,
            C=jnp.zeros(()),
            log_G=zeros,
            raw_gamma=None if shared_exponents else zeros,
            tied=tied,
            shared_exponents=shared_exponents,
            tokens=tokens,
            capacity_exponent=float(capacity_exponent),
            size_scale=float(size_scale),
            tokens_scale=float(tokens_scale),
        )

    def to_current(self) -> CAMELData:
        """The same function in today's `CAMELData`."""
        beta = jnp.exp(self.raw_beta)
        alpha = tied_alpha(beta, self.capacity_exponent) if self.tied else jnp.exp(self.raw_alpha)  # type: ignore[arg-type]
        gamma = alpha if self.shared_exponents else jnp.exp(self.raw_gamma)  # type: ignore[arg-type]
        log_D = jnp.log(self.tokens_scale) if self.tokens else 0.0
        return CAMELData.from_params(
            t=jax.nn.softmax(self.t_logits, axis=-2),
            K=jnp.exp(self.log_K + beta * jnp.log(self.size_scale)),
            beta=beta,
            C=self.C,
            G=jnp.exp(self.log_G + gamma * log_D),
            alpha=None if self.tied else alpha,
            gamma=None if self.shared_exponents else gamma,
            tied=self.tied,
            shared_exponents=self.shared_exponents,
            tokens=self.tokens,
            capacity_exponent=self.capacity_exponent,
            size_scale=self.size_scale,
            tokens_scale=self.tokens_scale,
        )


# The classes a format-1 file names, by the name it uses, whose layout changed in format 2.
FORMAT_1: dict[str, type] = {"CAMEL": LegacyCAMEL, "CAMELData": LegacyCAMELData}


def upgrade(obj: Any) -> Any:
    """`obj` with every format-1 law converted to today's class."""
    legacy = (LegacyCAMEL, LegacyCAMELData)
    return jax.tree.map(
        lambda x: x.to_current() if isinstance(x, legacy) else x, obj, is_leaf=lambda x: isinstance(x, legacy)
    )
