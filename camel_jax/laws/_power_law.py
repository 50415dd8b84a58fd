"""A one-dimensional power law with an offset."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._base import AbstractLaw, as_leaves, log_uniform, positive_inverse, positive_number


class PowerLaw(AbstractLaw):
    """Saturating power law in one variable.

        L(x) = E + A / x^alpha

    with `E, A, alpha` > 0 (E is the irreducible loss). Used for DML's nested size and step laws
    (Ye et al. 2025) and any 1-D scaling curve. `scale` is a static reference for x: the law is evaluated on
    x / scale internally; `params()` reports A in the user's units.

    **Arguments** (`__call__`): `x` [P] > 0. **Returns**: [P].
    """

    log_E: Float[Array, "*batch"]
    log_A: Float[Array, "*batch"]
    log_alpha: Float[Array, "*batch"]
    scale: float = eqx.field(static=True, default=1.0)

    def __call__(self, x: Float[Array, " P"]) -> Float[Array, " P"]:
        alpha = jnp.exp(self.log_alpha)
        return jnp.exp(self.log_E) + jnp.exp(self.log_A - alpha * jnp.log(x / self.scale))

    def params(self) -> dict[str, Array]:
        alpha = jnp.exp(self.log_alpha)
        return {"E": jnp.exp(self.log_E), "A": jnp.exp(self.log_A + alpha * jnp.log(self.scale)), "alpha": alpha}

    @classmethod
    def from_params(cls, *, E: ArrayLike, A: ArrayLike, alpha: ArrayLike, scale: float = 1.0) -> PowerLaw:
        p = as_leaves({"E": 0, "A": 0, "alpha": 0}, {"E": E, "A": A, "alpha": alpha})
        return cls(
            log_E=positive_inverse(p["E"], None, "E"),
            log_A=positive_inverse(p["A"], None, "A") - p["alpha"] * jnp.log(scale),
            log_alpha=positive_inverse(p["alpha"], None, "alpha"),
            scale=positive_number(scale, "scale"),
        )

    @classmethod
    def sample_init(cls, key: Array, *, scale: float = 1.0) -> PowerLaw:
        """A random start: E in [0.3, 5], A in [0.1, 10] (per unit of x / scale), alpha in [0.05, 1.5]."""
        k_E, k_A, k_a = jax.random.split(key, 3)
        return cls(
            log_E=log_uniform(k_E, (), 0.3, 5.0),
            log_A=log_uniform(k_A, (), 0.1, 10.0),
            log_alpha=log_uniform(k_a, (), 0.05, 1.5),
            scale=positive_number(scale, "scale"),
        )

    def structure(self) -> dict[str, Any]:
        return {"scale": self.scale}
