"""The Chinchilla law of Hoffmann et al. (2022), evaluated in log space."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._base import AbstractLaw, as_leaves, log_uniform, positive_inverse, positive_number


class Chinchilla(AbstractLaw):
    """Loss as a function of parameters N and tokens D.

        L(N, D) = E + A / N^alpha + B / D^beta

    evaluated as `exp(LSE(log A - alpha log N, log B - beta log D, log E))`, which stays exact for N ~ 1e11
    (and is the form Epoch AI's replication fits). `A, B, E, alpha, beta` > 0. Reference: Hoffmann et al.
    (2022), "Training Compute-Optimal Large Language Models", eq. (2); Besiroglu et al. (2024).

    `size_scale` and `tokens_scale` are static reference units: the law sees N / size_scale and
    D / tokens_scale internally; `params()` reports A and B in the user's units.

    **Arguments** (`__call__`): `size` N [P], `tokens` D [P]. **Returns**: [P].
    """

    log_A: Float[Array, "*batch"]
    log_B: Float[Array, "*batch"]
    log_E: Float[Array, "*batch"]
    log_alpha: Float[Array, "*batch"]
    log_beta: Float[Array, "*batch"]
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)

    def log_loss(self, size: Float[Array, " P"], tokens: Float[Array, " P"]) -> Float[Array, " P"]:
        """log L(N, D), computed without leaving log space."""
        alpha, beta = jnp.exp(self.log_alpha), jnp.exp(self.log_beta)
        terms = jnp.stack(
            [
                self.log_A - alpha * jnp.log(size / self.size_scale),
                self.log_B - beta * jnp.log(tokens / self.tokens_scale),
                jnp.broadcast_to(self.log_E, size.shape),
            ]
        )
        return jax.nn.logsumexp(terms, axis=0)

    def __call__(self, size: Float[Array, " P"], tokens: Float[Array, " P"]) -> Float[Array, " P"]:
        return jnp.exp(self.log_loss(size, tokens))

    def params(self) -> dict[str, Array]:
        alpha, beta = jnp.exp(self.log_alpha), jnp.exp(self.log_beta)
        return {
            "A": jnp.exp(self.log_A + alpha * jnp.log(self.size_scale)),
            "B": jnp.exp(self.log_B + beta * jnp.log(self.tokens_scale)),
            "E": jnp.exp(self.log_E),
            "alpha": alpha,
            "beta": beta,
        }

    @classmethod
    def from_params(
        cls,
        *,
        A: ArrayLike,
        B: ArrayLike,
        E: ArrayLike,
        alpha: ArrayLike,
        beta: ArrayLike,
        size_scale: float = 1.0,
        tokens_scale: float = 1.0,
    ) -> Chinchilla:
        p = as_leaves(
            dict.fromkeys(("A", "B", "E", "alpha", "beta"), 0), {"A": A, "B": B, "E": E, "alpha": alpha, "beta": beta}
        )
        return cls(
            log_A=positive_inverse(p["A"], None, "A") - p["alpha"] * jnp.log(size_scale),
            log_B=positive_inverse(p["B"], None, "B") - p["beta"] * jnp.log(tokens_scale),
            log_E=positive_inverse(p["E"], None, "E"),
            log_alpha=positive_inverse(p["alpha"], None, "alpha"),
            log_beta=positive_inverse(p["beta"], None, "beta"),
            size_scale=positive_number(size_scale, "size_scale"),
            tokens_scale=positive_number(tokens_scale, "tokens_scale"),
        )

    @classmethod
    def sample_init(cls, key: Array, *, size_scale: float = 1.0, tokens_scale: float = 1.0) -> Chinchilla:
        """A random start: log A, log B in [0, 25] (raw units) shifted to the reference scales, E in [0.5, 5],
        exponents in [0.05, 2] (Hoffmann's grid ranges)."""
        k_A, k_B, k_E, k_a, k_b = jax.random.split(key, 5)
        log_alpha = log_uniform(k_a, (), 0.05, 2.0)
        log_beta = log_uniform(k_b, (), 0.05, 2.0)
        return cls(
            log_A=jax.random.uniform(k_A, (), maxval=25.0) - jnp.exp(log_alpha) * jnp.log(size_scale),
            log_B=jax.random.uniform(k_B, (), maxval=25.0) - jnp.exp(log_beta) * jnp.log(tokens_scale),
            log_E=log_uniform(k_E, (), 0.5, 5.0),
            log_alpha=log_alpha,
            log_beta=log_beta,
            size_scale=positive_number(size_scale, "size_scale"),
            tokens_scale=positive_number(tokens_scale, "tokens_scale"),
        )

    @classmethod
    def hoffmann_grid(cls, *, size_scale: float = 1.0, tokens_scale: float = 1.0) -> Chinchilla:
        """Hoffmann et al.'s grid of starts, as Epoch AI's replication uses it (4,500 starts, batched):
        alpha, beta in {0, .5, 1, 1.5, 2} (0 becomes 1e-3: log-parameterized exponents cannot start at 0),
        log E in {-1, -.5, 0, .5, 1}, log A, log B in {0, 5, ..., 25} (raw units). Pass it as `fit(..., inits=)`."""
        exponents = np.array([1e-3, 0.5, 1.0, 1.5, 2.0])
        log_E = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
        log_AB = np.arange(0.0, 30.0, 5.0)
        grids = np.meshgrid(exponents, exponents, log_E, log_AB, log_AB, indexing="ij")
        alpha, beta, e, a, b = (g.ravel() for g in grids)
        return cls.from_params(
            A=np.exp(a),
            B=np.exp(b),
            E=np.exp(e),
            alpha=alpha,
            beta=beta,
            size_scale=size_scale,
            tokens_scale=tokens_scale,
        )

    def size_parameters(self) -> tuple[int, int]:
        """Size N is `inputs[0]`; E, A and alpha describe the size dependence."""
        return 0, 3

    def structure(self) -> dict[str, Any]:
        return {"size_scale": self.size_scale, "tokens_scale": self.tokens_scale}
