"""The Chinchilla law of Hoffmann et al. (2022), in well-posed coordinates."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._base import AbstractLaw, as_leaves, log_uniform, positive_inverse, positive_number
from ._camel import data_scale
from ._terms import power_term


class Chinchilla(AbstractLaw):
    """Loss as a function of parameters N and tokens D.

        L(N, D) = E + A / N^alpha + B / D^beta

    with `A, B, alpha, beta` > 0. Reference: Hoffmann et al. (2022), "Training Compute-Optimal Large Language
    Models", eq. (2); Besiroglu et al. (2024).

    **Parameterization** (see `SODMAdditive` and `CAMEL`): each power term is written less its value at the
    reference point, L = s_L (E1 - b_A z_N exprel(-alpha z_N) - b_B z_D exprel(-beta z_D)) with z_N = log(N / s_N),
    z_D = log(D / s_D), b_A = A alpha and b_B = B beta in units s_L at the reference, and E1 = E + A + B. The free
    coordinates are E1 and the square roots of b_A, alpha, b_B, beta: a term off (b = 0) and the log-law limit
    (alpha -> 0 with A alpha finite) are finite points. It is the same function as the paper's for every finite
    parameter value; E may be any real number. `loss_scale` s_L, `size_scale` s_N and `tokens_scale` s_D are
    static units, set from the data by `fit` (`with_data_scales`); in them every term is of the order of the loss,
    so the sum loses no precision. `params()` reports A and B in the user's units.

    **Arguments** (`__call__`): `size` N [P], `tokens` D [P]. **Returns**: [P].
    """

    UNITS = ("loss_scale", "size_scale", "tokens_scale")

    E1: Float[Array, "*batch"]
    root_bA: Float[Array, "*batch"]  # sqrt(A alpha)
    raw_alpha: Float[Array, "*batch"]  # sqrt(alpha)
    root_bB: Float[Array, "*batch"]  # sqrt(B beta)
    raw_beta: Float[Array, "*batch"]  # sqrt(beta)
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)
    loss_scale: float = eqx.field(static=True, default=1.0)

    def log_loss(self, size: Float[Array, " P"], tokens: Float[Array, " P"]) -> Float[Array, " P"]:
        """log L(N, D)."""
        return jnp.log(self(size, tokens))

    def __call__(self, size: Float[Array, " P"], tokens: Float[Array, " P"]) -> Float[Array, " P"]:
        size_term = power_term(self.root_bA**2, self.raw_alpha**2, jnp.log(size / self.size_scale))
        tokens_term = power_term(self.root_bB**2, self.raw_beta**2, jnp.log(tokens / self.tokens_scale))
        return self.loss_scale * (self.E1 + size_term + tokens_term)

    def params(self) -> dict[str, Array]:
        alpha, beta = self.raw_alpha**2, self.raw_beta**2
        A, B = self.root_bA**2 / alpha, self.root_bB**2 / beta  # in loss_scale units at the reference
        return {
            "A": self.loss_scale * A * jnp.exp(alpha * jnp.log(self.size_scale)),
            "B": self.loss_scale * B * jnp.exp(beta * jnp.log(self.tokens_scale)),
            "E": self.loss_scale * (self.E1 - A - B),
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
        loss_scale: float = 1.0,
    ) -> Chinchilla:
        """Build from the paper's values (A, B, alpha, beta > 0; E real)."""
        p = as_leaves(
            dict.fromkeys(("A", "B", "E", "alpha", "beta"), 0), {"A": A, "B": B, "E": E, "alpha": alpha, "beta": beta}
        )
        for name in ("A", "B", "alpha", "beta"):
            positive_inverse(p[name], None, name)
        s_L = positive_number(loss_scale, "loss_scale")
        s_N, s_D = positive_number(size_scale, "size_scale"), positive_number(tokens_scale, "tokens_scale")
        A_unit = p["A"] * jnp.exp(-p["alpha"] * np.log(s_N)) / s_L
        B_unit = p["B"] * jnp.exp(-p["beta"] * np.log(s_D)) / s_L
        return cls(
            E1=p["E"] / s_L + A_unit + B_unit,
            root_bA=jnp.sqrt(A_unit * p["alpha"]),
            raw_alpha=jnp.sqrt(p["alpha"]),
            root_bB=jnp.sqrt(B_unit * p["beta"]),
            raw_beta=jnp.sqrt(p["beta"]),
            size_scale=s_N,
            tokens_scale=s_D,
            loss_scale=s_L,
        )

    @classmethod
    def sample_init(
        cls, key: Array, *, size_scale: float = 1.0, tokens_scale: float = 1.0, loss_scale: float = 1.0
    ) -> Chinchilla:
        """A random start in the law's units: E in [0.5, 5], A and B in [0.05, 2] at the reference sizes,
        exponents in [0.05, 2] (Hoffmann's grid ranges)."""
        k_A, k_B, k_E, k_a, k_b = jax.random.split(key, 5)
        alpha = jnp.exp(log_uniform(k_a, (), 0.05, 2.0))
        beta = jnp.exp(log_uniform(k_b, (), 0.05, 2.0))
        A = jnp.exp(log_uniform(k_A, (), 0.05, 2.0))
        B = jnp.exp(log_uniform(k_B, (), 0.05, 2.0))
        return cls(
            E1=jnp.exp(log_uniform(k_E, (), 0.5, 5.0)) + A + B,
            root_bA=jnp.sqrt(A * alpha),
            raw_alpha=jnp.sqrt(alpha),
            root_bB=jnp.sqrt(B * beta),
            raw_beta=jnp.sqrt(beta),
            size_scale=positive_number(size_scale, "size_scale"),
            tokens_scale=positive_number(tokens_scale, "tokens_scale"),
            loss_scale=positive_number(loss_scale, "loss_scale"),
        )

    def with_data_scales(self, inputs: tuple[Any, ...], y: Any) -> dict[str, float]:
        """The units of a fit (see `AbstractLaw.with_data_scales`): orders of magnitude of the targets, the sizes
        and the tokens."""
        return {"loss_scale": data_scale(y), "size_scale": data_scale(inputs[0]), "tokens_scale": data_scale(inputs[1])}

    @classmethod
    def hoffmann_grid(
        cls, *, size_scale: float = 1e9, tokens_scale: float = 1e10, loss_scale: float = 1.0
    ) -> Chinchilla:
        """Hoffmann et al.'s grid of starts, as Epoch AI's replication uses it (4,500 starts, batched):
        alpha, beta in {0, .5, 1, 1.5, 2} (0 becomes 1e-3: `from_params` takes the paper's exponents > 0),
        log E in {-1, -.5, 0, .5, 1}, log A, log B in {0, 5, ..., 25} (raw units). Pass it as `fit(..., inits=)`.
        The grid is held in the units `fit` sets for Chinchilla-sized tables (sizes near 1e9, tokens near 1e10,
        losses near 1), where its terms are of the order of the loss. (`fit` moves starts without units of their
        own, such as the same grid built with `from_params` in raw units, to the units it sets from the data; solved
        in raw units that grid ended at 1.773e-3 against Epoch's 1.018e-3.)"""
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
            loss_scale=loss_scale,
        )

    def size_parameters(self) -> tuple[int, int]:
        """Size N is `inputs[0]`; E, A and alpha describe the size dependence."""
        return 0, 3

    def structure(self) -> dict[str, Any]:
        return {"size_scale": self.size_scale, "tokens_scale": self.tokens_scale, "loss_scale": self.loss_scale}
