"""The log-linear law: log-loss linear in the log shares (the field's standard baseline), with optional size and
tokens terms."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._base import AbstractLaw, as_leaves, count, log_uniform, positive, positive_inverse, positive_number
from ._camel import data_scale

# The shares' offset eps lies in this open interval: below it a share of 0 would weigh like an infinite effect
# (log 0); at its top log(r + eps) is already close to linear in r over the simplex, and a larger eps would only
# trade against the b_j along a flat direction.
EPS_BOUNDS = (1e-6, 1.0)


class LogLinear(AbstractLaw):
    """Log-linear law of the mixture, optionally with power laws in model size and tokens.

        log L = c + sum_j b_j log(r_j + eps) - alpha log M - beta log D,

    that is L = A prod_j (r_j + eps)^b_j / (M^alpha D^beta), with `A` > 0, `b` [n] real, `eps` in (1e-6, 1) and
    `alpha`, `beta` real (present when the law has a size, a tokens input). The field's standard baseline: a
    least-squares model of the loss on the log shares (olmix's default regressor) is this law with eps fixed and
    one size. The offset eps (below about eps a share's effect saturates) is fitted, one shared by every share:
    a share of exactly 0 is a regular point. (An offset per share ranked 0.5 points of Spearman better on RegMix's
    split, but a share without effect, b_j = 0, leaves its offset free and its starts crawl to the bounds.)

    Fitted under log residuals the objective is a linear least-squares problem in (c, b, alpha, beta) for every
    eps (exactly so where the Huber loss is quadratic): the fit is quick and its optimum unique. It has no
    irreducible loss: its size term is a pure power law, and extrapolation to larger sizes is the weak point of
    this form (a baseline for mixtures, not for sizes).

    `loss_scale`, `size_scale` and `tokens_scale` are static units that `fit` sets from the data (powers of ten
    near the geometric means); `params()` reports `A` in the user's units of loss, size and tokens.

    **Arguments** (`__call__`): `r` mixtures [P, n] (rows on the simplex), then `M` [P] > 0 when the law has a size,
    then `D` [P] > 0 when it has tokens. **Returns**: predicted loss [P].
    """

    UNITS = ("loss_scale", "size_scale", "tokens_scale")

    c: Float[Array, "*batch"]
    b: Float[Array, "*batch n"]
    raw_eps: Float[Array, "*batch"]
    alpha: Float[Array, "*batch"] | None
    beta: Float[Array, "*batch"] | None
    loss_scale: float = eqx.field(static=True, default=1.0)
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)

    @property
    def eps(self) -> Array:
        """The shares' offset eps, in (1e-6, 1)."""
        return positive(self.raw_eps, EPS_BOUNDS)

    @property
    def size(self) -> bool:
        return self.alpha is not None

    @property
    def tokens(self) -> bool:
        return self.beta is not None

    def __call__(self, r: Float[Array, "P n"], *sizes: Float[Array, " P"]) -> Float[Array, " P"]:
        expected = int(self.size) + int(self.tokens)
        if len(sizes) != expected:
            raise ValueError(f"this LogLinear law takes r and {expected} size/tokens input(s); got {len(sizes)}")
        log_loss = self.c + jnp.log(r + self.eps) @ self.b
        rest = list(sizes)
        if self.alpha is not None:
            log_loss = log_loss - self.alpha * jnp.log(rest.pop(0) / self.size_scale)
        if self.beta is not None:
            log_loss = log_loss - self.beta * jnp.log(rest.pop(0) / self.tokens_scale)
        return self.loss_scale * jnp.exp(log_loss)

    def params(self) -> dict[str, Array]:
        """A, b, eps (and alpha, beta), with A in the user's units: L = A prod_j (r_j + eps)^b_j / (M^alpha
        D^beta)."""
        log_A = self.c + jnp.log(self.loss_scale)
        out: dict[str, Array] = {"b": self.b, "eps": self.eps}
        if self.alpha is not None:
            log_A = log_A + self.alpha * jnp.log(self.size_scale)
            out["alpha"] = self.alpha
        if self.beta is not None:
            log_A = log_A + self.beta * jnp.log(self.tokens_scale)
            out["beta"] = self.beta
        return {"A": jnp.exp(log_A), **out}

    @classmethod
    def from_params(
        cls,
        *,
        A: ArrayLike,
        b: ArrayLike,
        eps: ArrayLike,
        alpha: ArrayLike | None = None,
        beta: ArrayLike | None = None,
        loss_scale: float = 1.0,
        size_scale: float = 1.0,
        tokens_scale: float = 1.0,
    ) -> LogLinear:
        """Build from the constrained values (A > 0, eps in (1e-6, 1)); the law has a size term when `alpha` is
        given and a tokens term when `beta` is."""
        ndims = {"A": 0, "b": 1, "eps": 0} | ({"alpha": 0} if alpha is not None else {})
        ndims |= {"beta": 0} if beta is not None else {}
        values: dict[str, Any] = {"A": A, "b": b, "eps": eps, "alpha": alpha, "beta": beta}
        p = as_leaves(ndims, {name: values[name] for name in ndims})
        if p["b"].shape[-1] < 2:
            raise ValueError(f"`b` must have one entry per dataset (at least 2); got shape {p['b'].shape}")
        s_L = positive_number(loss_scale, "loss_scale")
        s_M = positive_number(size_scale, "size_scale")
        s_D = positive_number(tokens_scale, "tokens_scale")
        c = positive_inverse(p["A"], None, "A") - np.log(s_L)
        if "alpha" in p:
            c = c - p["alpha"] * np.log(s_M)
        if "beta" in p:
            c = c - p["beta"] * np.log(s_D)
        return cls(
            c=c,
            b=p["b"],
            raw_eps=positive_inverse(p["eps"], EPS_BOUNDS, "eps"),
            alpha=p.get("alpha"),
            beta=p.get("beta"),
            loss_scale=s_L,
            size_scale=s_M,
            tokens_scale=s_D,
        )

    @classmethod
    def sample_init(
        cls,
        key: Array,
        *,
        n_datasets: int,
        size: bool = False,
        tokens: bool = False,
        loss_scale: float = 1.0,
        size_scale: float = 1.0,
        tokens_scale: float = 1.0,
    ) -> LogLinear:
        """A random start in the law's units: c in [-0.1, 0.1], b ~ N(0, 0.05^2), eps log-uniform in [1e-3, 0.1],
        alpha and beta in [0, 0.3]. `size`, `tokens`: whether the law has those terms."""
        n = count(n_datasets, "n_datasets", least=2)
        k_c, k_b, k_e, k_a, k_d = jax.random.split(key, 5)
        eps = jnp.exp(log_uniform(k_e, (), 1e-3, 0.1))
        return cls(
            c=jax.random.uniform(k_c, (), minval=-0.1, maxval=0.1),
            b=0.05 * jax.random.normal(k_b, (n,)),
            raw_eps=positive_inverse(eps, EPS_BOUNDS, "eps"),
            alpha=jax.random.uniform(k_a, (), maxval=0.3) if size else None,
            beta=jax.random.uniform(k_d, (), maxval=0.3) if tokens else None,
            loss_scale=positive_number(loss_scale, "loss_scale"),
            size_scale=positive_number(size_scale, "size_scale"),
            tokens_scale=positive_number(tokens_scale, "tokens_scale"),
        )

    def with_data_scales(self, inputs: tuple[Any, ...], y: Any) -> dict[str, float]:
        """The units of a fit: the powers of ten nearest the geometric means of the targets, sizes and tokens."""
        scales = {"loss_scale": data_scale(y)}
        rest = list(inputs[1:])
        if self.size and rest:
            scales["size_scale"] = data_scale(rest.pop(0))
        if self.tokens and rest:
            scales["tokens_scale"] = data_scale(rest.pop(0))
        return scales

    def size_parameters(self) -> tuple[int, int] | None:
        """Size is `inputs[1]`, described by one exponent (alpha); None without a size term."""
        return (1, 1) if self.size else None

    def structure(self) -> dict[str, Any]:
        return {
            "n_datasets": int(self.b.shape[-1]),
            "size": self.size,
            "tokens": self.tokens,
            "loss_scale": self.loss_scale,
            "size_scale": self.size_scale,
            "tokens_scale": self.tokens_scale,
        }
