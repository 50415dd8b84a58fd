"""DML, the data mixing law of Ye et al. (2025), in the form the CAMEL paper writes it."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._base import AbstractLaw, as_leaves, count, log_uniform, positive_inverse


class DML(AbstractLaw):
    """Data mixing law at one model size and training length.

        L(r) = sum_i S_i [C_i + K_i exp(sum_j t_ij r_j)]

    `S, K` [k] > 0, `C` [k] and `t` [k, n] real. Reference: Ye et al. (2025), "Data Mixing Laws", as written in
    Li, Gu & Zhang (2026), Section 2.

    The law is over-parameterized (S*C and S*K collapse; `t` is shift-invariant on the simplex): compare
    predictions, not parameters.

    **Arguments** (`__call__`): `r` mixtures [P, n]. **Returns**: predicted loss [P].
    """

    t: Float[Array, "*batch k n"]
    log_S: Float[Array, "*batch k"]
    C: Float[Array, "*batch k"]
    log_K: Float[Array, "*batch k"]

    def __call__(self, r: Float[Array, "P n"]) -> Float[Array, " P"]:
        inner = self.C[None, :] + jnp.exp(self.log_K[None, :] + r @ self.t.T)  # [P, k]
        return inner @ jnp.exp(self.log_S)

    def params(self) -> dict[str, Array]:
        return {"t": self.t, "S": jnp.exp(self.log_S), "C": self.C, "K": jnp.exp(self.log_K)}

    @classmethod
    def from_params(cls, *, t: ArrayLike, S: ArrayLike, C: ArrayLike, K: ArrayLike) -> DML:
        p = as_leaves({"t": 2, "S": 1, "C": 1, "K": 1}, {"t": t, "S": S, "C": C, "K": K})
        return cls(
            t=p["t"],
            log_S=positive_inverse(p["S"], None, "S"),
            C=p["C"],
            log_K=positive_inverse(p["K"], None, "K"),
        )

    @classmethod
    def sample_init(cls, key: Array, *, n_datasets: int, n_domains: int) -> DML:
        """A random start: t ~ N(0, 1), S = 1/k up to a factor e, C in [0, 2]/k, K in [0.01, 1]."""
        n_datasets, n_domains = count(n_datasets, "n_datasets"), count(n_domains, "n_domains")
        k_t, k_S, k_C, k_K = jax.random.split(key, 4)
        return cls(
            t=jax.random.normal(k_t, (n_domains, n_datasets)),
            log_S=log_uniform(k_S, (n_domains,), 1.0 / (2.7 * n_domains), 2.7 / n_domains),
            C=jax.random.uniform(k_C, (n_domains,), minval=0.0, maxval=2.0),
            log_K=log_uniform(k_K, (n_domains,), 0.01, 1.0),
        )

    def structure(self) -> dict[str, Any]:
        k, n = self.t.shape[-2:]
        return {"n_datasets": n, "n_domains": k}
