"""The multi-loss logistic law from validation losses to benchmark accuracy (CAMEL paper, eq. loss-to-score)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._base import AbstractLaw, as_leaves


class LossToBenchmark(AbstractLaw):
    """Benchmark accuracy from V validation losses.

        Acc(L) = C + A / (1 + exp(k . L + B)) = C + A * sigmoid(-(k . L + B))

    computed in the sigmoid form, which cannot overflow. `k` [V], `A, B, C` real. `proxy_loss(L) = k . L` is the
    paper's benchmark-proxy loss L_b. Reference: Li, Gu & Zhang (2026), Section 2.2, eq. (loss-to-score);
    the single-loss form follows Dubey et al. (2024).

    **Arguments** (`__call__`): `losses` [P, V]. **Returns**: accuracy [P].
    """

    k: Float[Array, "*batch V"]
    A: Float[Array, "*batch"]
    B: Float[Array, "*batch"]
    C: Float[Array, "*batch"]

    def proxy_loss(self, losses: Float[Array, "P V"]) -> Float[Array, " P"]:
        """The benchmark-proxy loss L_b = k . L."""
        return losses @ self.k

    def from_proxy(self, proxy: Float[Array, " P"]) -> Float[Array, " P"]:
        """Accuracy from the proxy loss: C + A * sigmoid(-(L_b + B))."""
        return self.C + self.A * jax.nn.sigmoid(-(proxy + self.B))

    def __call__(self, losses: Float[Array, "P V"]) -> Float[Array, " P"]:
        return self.from_proxy(self.proxy_loss(losses))

    def params(self) -> dict[str, Array]:
        return {"k": self.k, "A": self.A, "B": self.B, "C": self.C}

    @classmethod
    def from_params(cls, *, k: ArrayLike, A: ArrayLike, B: ArrayLike, C: ArrayLike) -> LossToBenchmark:
        p = as_leaves({"k": 1, "A": 0, "B": 0, "C": 0}, {"k": k, "A": A, "B": B, "C": C})
        return cls(k=p["k"], A=p["A"], B=p["B"], C=p["C"])

    @classmethod
    def sample_init(cls, key: Array, *, n_losses: int) -> LossToBenchmark:
        """A random start: k ~ N(0, 1) / V with a positive sum (higher loss, lower accuracy), A in [0.2, 1],
        C in [0, 0.5], B centring the sigmoid for losses around 3."""
        k_k, k_A, k_B, k_C = jax.random.split(key, 4)
        k = jax.random.normal(k_k, (n_losses,)) / n_losses
        k = k - jnp.mean(k) + jax.random.uniform(k_k, (), minval=0.5, maxval=3.0) / n_losses
        return cls(
            k=k,
            A=jax.random.uniform(k_A, (), minval=0.2, maxval=1.0),
            B=-3.0 * jnp.sum(k) + jax.random.normal(k_B, ()),
            C=jax.random.uniform(k_C, (), minval=0.0, maxval=0.5),
        )

    def structure(self) -> dict[str, Any]:
        return {"n_losses": self.k.shape[-1]}
