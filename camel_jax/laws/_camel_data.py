"""CAMEL with a data term: mixture effects that do not vanish with model size (issue 15)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._base import (
    AbstractLaw,
    as_leaves,
    count,
    log_uniform,
    positive_inverse,
    positive_number,
    safe_log,
    simplex_logits,
)
from ._camel import tied_alpha


class CAMELData(AbstractLaw):
    """CAMEL plus a per-domain data term.

        L(r, M, D) = C + sum_i K_i / (eta_i^alpha_i M^beta_i) + sum_i G_i / (eta_i D)^gamma_i,   eta_i = <t_i, r>

    The capacity part is CAMEL's (Li, Gu & Zhang 2026, Theorem 1), with the same profiles `t` [k, n] (columns on
    the simplex) and the same `tied` option (alpha_i = (beta_i/c) / (1 + beta_i/c)). The data term says that
    intrinsic domain i's loss also falls with the tokens it receives, eta_i D; it does not shrink with M, which is
    what real tables show (dmsl_shukor2025: the per-domain spread across mixtures barely changes from 122M to
    1.2B parameters). With `shared_exponents=True` the data term reuses the mixture exponents (gamma_i = alpha_i).

    With `tokens=False` the law is `law(r, M)` and the data term is evaluated at one fixed D (folded into G): the
    paper's setting, where every size is trained on the same cooldown, makes it a pure mixture effect.

    `size_scale`, `tokens_scale`: static reference units for M and D (params() reports K and G in user units).

    **Arguments** (`__call__`): `r` [P, n] rows on the simplex, `size` [P] > 0, and `tokens` [P] > 0 when
    `tokens=True`. **Returns**: predicted loss, [P].
    """

    t_logits: Float[Array, "*batch k n"]
    log_K: Float[Array, "*batch k"]
    raw_alpha: Float[Array, "*batch k"] | None
    raw_beta: Float[Array, "*batch k"]
    C: Float[Array, "*batch"]
    log_G: Float[Array, "*batch k"]
    raw_gamma: Float[Array, "*batch k"] | None
    tied: bool = eqx.field(static=True, default=False)
    shared_exponents: bool = eqx.field(static=True, default=False)
    tokens: bool = eqx.field(static=True, default=True)
    capacity_exponent: float = eqx.field(static=True, default=1.0)
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)

    @property
    def t(self) -> Array:
        return jax.nn.softmax(self.t_logits, axis=-2)

    @property
    def beta(self) -> Array:
        return jnp.exp(self.raw_beta)

    @property
    def alpha(self) -> Array:
        if self.tied:
            return tied_alpha(self.beta, self.capacity_exponent)
        assert self.raw_alpha is not None
        return jnp.exp(self.raw_alpha)

    @property
    def gamma(self) -> Array:
        if self.shared_exponents:
            return self.alpha
        assert self.raw_gamma is not None
        return jnp.exp(self.raw_gamma)

    def __call__(
        self, r: Float[Array, "P n"], size: Float[Array, " P"], *tokens: Float[Array, " P"]
    ) -> Float[Array, " P"]:
        if len(tokens) != int(self.tokens):
            raise TypeError(
                f"CAMELData(tokens={self.tokens}) takes {2 + int(self.tokens)} inputs; got {2 + len(tokens)}"
            )
        log_eta = safe_log(r @ self.t.T)  # [P, k]
        log_size = jnp.log(size / self.size_scale)[:, None]
        capacity = self.log_K[None, :] - self.alpha[None, :] * log_eta - self.beta[None, :] * log_size
        log_data = log_eta + (jnp.log(tokens[0] / self.tokens_scale)[:, None] if self.tokens else 0.0)
        data = self.log_G[None, :] - self.gamma[None, :] * log_data
        return self.C + jnp.sum(jnp.exp(capacity) + jnp.exp(data), axis=-1)

    def params(self) -> dict[str, Array]:
        beta, gamma = self.beta, self.gamma
        out = {
            "t": self.t,
            "K": jnp.exp(self.log_K + beta * jnp.log(self.size_scale)),
            "alpha": self.alpha,
            "beta": beta,
            "C": self.C,
            "G": jnp.exp(self.log_G + gamma * jnp.log(self.tokens_scale)) if self.tokens else jnp.exp(self.log_G),
            "gamma": gamma,
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
        G: ArrayLike,
        alpha: ArrayLike | None = None,
        gamma: ArrayLike | None = None,
        tied: bool = False,
        shared_exponents: bool = False,
        tokens: bool = True,
        capacity_exponent: float = 1.0,
        size_scale: float = 1.0,
        tokens_scale: float = 1.0,
    ) -> CAMELData:
        """Build from constrained values. A derived exponent (alpha when `tied`, gamma when `shared_exponents`)
        may be passed only if it agrees, so that `from_params(**law.params(), **law.structure()...)` round-trips."""
        settings = _settings(tied, shared_exponents, tokens, capacity_exponent, size_scale, tokens_scale)
        ndims = {"t": 2, "K": 1, "beta": 1, "C": 0, "G": 1}
        values: dict[str, Any] = {"t": t, "K": K, "beta": beta, "C": C, "G": G}
        for name, value, derived, setting in (("alpha", alpha, tied, "tied=True"),
                                              ("gamma", gamma, shared_exponents, "shared_exponents=True")):  # fmt: skip
            if not derived and value is None:
                raise ValueError(f"`{name}` is required unless {setting}")
            if not derived:
                ndims[name], values[name] = 1, value
        p = as_leaves(ndims, values)
        alpha_ = tied_alpha(p["beta"], settings["capacity_exponent"]) if tied else p["alpha"]
        _check_derived("alpha", alpha, alpha_ if tied else None, "tied=True")
        gamma_ = alpha_ if shared_exponents else p["gamma"]
        _check_derived("gamma", gamma, gamma_ if shared_exponents else None, "shared_exponents=True")
        log_D = jnp.log(settings["tokens_scale"]) if tokens else 0.0
        return cls(
            t_logits=simplex_logits(p["t"], axis=-2, name="t"),
            log_K=positive_inverse(p["K"], None, "K") - p["beta"] * jnp.log(settings["size_scale"]),
            raw_alpha=None if tied else positive_inverse(alpha_, None, "alpha"),
            raw_beta=positive_inverse(p["beta"], None, "beta"),
            C=p["C"],
            log_G=positive_inverse(p["G"], None, "G") - gamma_ * log_D,
            raw_gamma=None if shared_exponents else positive_inverse(gamma_, None, "gamma"),
            **settings,
        )

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
    ) -> CAMELData:
        """A random start: profiles near uniform, K and G in [0.05, 2], exponents in [0.05, 1.5], C in [0, 3]."""
        n_datasets, n_domains = count(n_datasets, "n_datasets"), count(n_domains, "n_domains")
        settings = _settings(tied, shared_exponents, tokens, capacity_exponent, size_scale, tokens_scale)
        k_t, k_K, k_a, k_b, k_C, k_G, k_g = jax.random.split(key, 7)
        return cls(
            t_logits=jax.random.normal(k_t, (n_domains, n_datasets)),
            log_K=log_uniform(k_K, (n_domains,), 0.05, 2.0),
            raw_alpha=None if tied else log_uniform(k_a, (n_domains,), 0.05, 1.5),
            raw_beta=log_uniform(k_b, (n_domains,), 0.05, 1.5),
            C=jax.random.uniform(k_C, (), minval=0.0, maxval=3.0),
            log_G=log_uniform(k_G, (n_domains,), 0.05, 2.0),
            raw_gamma=None if shared_exponents else log_uniform(k_g, (n_domains,), 0.05, 1.5),
            **settings,
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
            "shared_exponents": self.shared_exponents,
            "tokens": self.tokens,
            "capacity_exponent": self.capacity_exponent,
            "size_scale": self.size_scale,
            "tokens_scale": self.tokens_scale,
        }


def _settings(
    tied: bool, shared_exponents: bool, tokens: bool, capacity_exponent: float, size_scale: float, tokens_scale: float
) -> dict[str, Any]:
    """The static settings, checked."""
    return {
        "tied": bool(tied),
        "shared_exponents": bool(shared_exponents),
        "tokens": bool(tokens),
        "capacity_exponent": positive_number(capacity_exponent, "capacity_exponent"),
        "size_scale": positive_number(size_scale, "size_scale"),
        "tokens_scale": positive_number(tokens_scale, "tokens_scale"),
    }


def _check_derived(name: str, given: ArrayLike | None, derived: Array | None, setting: str) -> None:
    """A derived exponent may be passed (a round trip of params()) only if it agrees with its derivation."""
    if derived is None or given is None or isinstance(given, jax.core.Tracer) or isinstance(derived, jax.core.Tracer):
        return
    if not bool(jnp.allclose(jnp.asarray(given), derived, rtol=1e-8)):
        raise ValueError(f"`{name}` is determined when {setting}; the given {name} disagrees: omit it")
