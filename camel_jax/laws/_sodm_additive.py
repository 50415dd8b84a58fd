"""SODM, additive form (Shukor et al. 2025, "Scaling Laws for Optimal Data Mixtures"), in well-posed coordinates."""

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
    simplex_from_roots,
)
from ._camel import data_scale
from ._terms import inverse_power_mean_term, power_term


def sodm_structure(law: Any) -> dict[str, Any]:
    """The structure of either SODM law (additive or joint): datasets, tokens input and units."""
    return {
        "n_datasets": law.p_roots.shape[-1],
        "tokens": law.tokens,
        "size_scale": law.size_scale,
        "tokens_scale": law.tokens_scale,
        "loss_scale": law.loss_scale,
    }


def sodm_settings(tokens: bool, size_scale: float, tokens_scale: float, loss_scale: float = 1.0) -> dict[str, Any]:
    """The static settings of either SODM law, checked: whether tokens are an input, and the units."""
    return {
        "tokens": bool(tokens),
        "size_scale": positive_number(size_scale, "size_scale"),
        "tokens_scale": positive_number(tokens_scale, "tokens_scale"),
        "loss_scale": positive_number(loss_scale, "loss_scale"),
    }


def sodm_data_scales(law: Any, inputs: tuple[Any, ...], y: Any) -> dict[str, float]:
    """The units of a SODM fit: the orders of magnitude of the targets, the sizes and (with tokens) the tokens."""
    scales = {"loss_scale": data_scale(y), "size_scale": data_scale(inputs[1])}
    if law.tokens:
        scales["tokens_scale"] = data_scale(inputs[2])
    return scales


def mixture_coordinates(C: Array, gamma: Array, loss_scale: float) -> tuple[Array, Array, Array]:
    """(p roots, c roots, kappa root) of the mixture term 1 / sum_j C_j r_j^gamma_j (C in the user's 1 / loss)."""
    total = jnp.sum(C, axis=-1)
    kappa = total * loss_scale
    return jnp.sqrt(C / total[..., None]), jnp.sqrt(gamma / kappa[..., None]), jnp.sqrt(kappa)


def mixture_params(law: Any) -> dict[str, Array]:
    """The paper's C (in the user's 1 / loss) and gamma of the mixture term."""
    kappa = law.root_kappa * law.root_kappa
    p = simplex_from_roots(law.p_roots, axis=-1)
    return {"C": p * (kappa / law.loss_scale)[..., None], "gamma": kappa[..., None] * law.root_c * law.root_c}


def sample_mixture(key: Array, n_datasets: int) -> tuple[Array, Array, Array]:
    """Mixture-term roots of a start with C in [1, 10] and gamma in [0.1, 1] (in units of the loss scale)."""
    k_C, k_g = jax.random.split(key)
    C = jnp.exp(log_uniform(k_C, (n_datasets,), 1.0, 10.0))
    gamma = jnp.exp(log_uniform(k_g, (n_datasets,), 0.1, 1.0))
    return mixture_coordinates(C, gamma, 1.0)


class SODMAdditive(AbstractLaw):
    """Additive mixture law with separate size, data and mixture terms.

        L(r, N, D) = E + A / N^alpha + B / D^beta + 1 / sum_j C_j r_j^gamma_j

    with A, B, C_j and the exponents > 0. With `tokens=False` the D term is dropped and the law is `law(r, N)`:
    when every run has one token count it merges into E anyway (the paper's fixed-length cooldowns).
    Reference: Shukor et al. (2025), the additive law; named SODM in Li, Gu & Zhang (2026).

    **Parameterization** (why the fit is well posed; see `CAMEL` for the same idea). Every term is written less
    its value at the reference point, so that its limits are regular points of the free coordinates:

        L = s_L (E1 - b_A z_N exprel(-alpha z_N) - b_B z_D exprel(-beta z_D) + q exprel(kappa q))

    with z_N = log(N / s_N), z_D = log(D / s_D), b_A = A alpha, b_B = B beta (in units s_L at the reference size),
    and the mixture term K / sum_j p_j r_j^gamma_j = K + q exprel(kappa q), K = 1 / kappa = 1 / sum_j C_j,
    p_j = C_j / sum_l C_l, gamma_j = kappa c_j, q = -(1/kappa) log sum_j p_j r_j^gamma_j
    (`inverse_power_mean_term`). E1 = E + A + B + K is the level at the reference point. The free coordinates are
    E1 and the square roots of b_A, alpha, b_B, beta, p, c and kappa: a term off (b = 0, c = 0), a log law in size
    (alpha -> 0 with A alpha finite, E -> -infinity) or in the mixture (kappa -> 0: -sum_j p_j c_j log r_j) and a
    dataset with no weight in the mixture term (p_j = 0) are finite points. It is the same function as the paper's
    for every finite parameter value; E itself may be any real number (it is -infinity in a log-law limit).
    `loss_scale` s_L, `size_scale` s_N and `tokens_scale` s_D are static units, set from the data by `fit`
    (`with_data_scales`); `params()` reports the paper's values in the user's units.

    **Arguments** (`__call__`): `r` [P, n], `size` [P], and `tokens` [P] when `tokens=True`. **Returns**: [P].
    """

    UNITS = ("loss_scale", "size_scale", "tokens_scale")

    E1: Float[Array, "*batch"]
    root_bA: Float[Array, "*batch"]  # sqrt(A alpha)
    raw_alpha: Float[Array, "*batch"]  # sqrt(alpha)
    root_bB: Float[Array, "*batch"] | None  # sqrt(B beta)
    raw_beta: Float[Array, "*batch"] | None  # sqrt(beta)
    p_roots: Float[Array, "*batch n"]  # sqrt(C_j / sum C)
    root_c: Float[Array, "*batch n"]  # sqrt(gamma_j / kappa)
    root_kappa: Float[Array, "*batch"]  # sqrt(sum C)
    tokens: bool = eqx.field(static=True, default=True)
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)
    loss_scale: float = eqx.field(static=True, default=1.0)

    def __call__(
        self, r: Float[Array, "P n"], size: Float[Array, " P"], *tokens: Float[Array, " P"]
    ) -> Float[Array, " P"]:
        if len(tokens) != int(self.tokens):
            raise TypeError(
                f"SODMAdditive(tokens={self.tokens}) takes {2 + int(self.tokens)} inputs; got {2 + len(tokens)}"
            )
        loss = self.E1 + power_term(self.root_bA**2, self.raw_alpha**2, jnp.log(size / self.size_scale))
        if self.tokens:
            assert self.root_bB is not None and self.raw_beta is not None
            loss = loss + power_term(self.root_bB**2, self.raw_beta**2, jnp.log(tokens[0] / self.tokens_scale))
        p = simplex_from_roots(self.p_roots, axis=-1)
        mixture = inverse_power_mean_term(r, p, self.root_c**2, self.root_kappa**2)
        return self.loss_scale * (loss + mixture)

    def params(self) -> dict[str, Array]:
        """The paper's E, A, alpha, C, gamma (and B, beta) in the user's units."""
        alpha = self.raw_alpha**2
        A = self.root_bA**2 / alpha  # in loss_scale units at the reference size
        level = A + 1.0 / self.root_kappa**2
        out = {"A": self.loss_scale * A * jnp.exp(alpha * jnp.log(self.size_scale)), "alpha": alpha}
        if self.tokens:
            assert self.root_bB is not None and self.raw_beta is not None
            beta = self.raw_beta**2
            B = self.root_bB**2 / beta
            level = level + B
            out |= {"B": self.loss_scale * B * jnp.exp(beta * jnp.log(self.tokens_scale)), "beta": beta}
        return {"E": self.loss_scale * (self.E1 - level)} | out | mixture_params(self)

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
        loss_scale: float = 1.0,
    ) -> SODMAdditive:
        """Build from the paper's values (A, alpha, C, gamma, B, beta > 0; E real); passing `B` and `beta` selects
        `tokens=True`."""
        tokens = B is not None or beta is not None
        if tokens and (B is None or beta is None):
            raise ValueError("pass both `B` and `beta` (tokens=True) or neither (tokens=False)")
        settings = sodm_settings(tokens, size_scale, tokens_scale, loss_scale)
        ndims = {"E": 0, "A": 0, "alpha": 0, "C": 1, "gamma": 1}
        values: dict[str, Any] = {"E": E, "A": A, "alpha": alpha, "C": C, "gamma": gamma}
        if tokens:
            ndims |= {"B": 0, "beta": 0}
            values |= {"B": B, "beta": beta}
        p = as_leaves(ndims, values)
        for name in ndims:
            if name != "E":
                positive_inverse(p[name], None, name)
        s_L = settings["loss_scale"]
        A_unit = p["A"] * jnp.exp(-p["alpha"] * jnp.log(settings["size_scale"])) / s_L
        level = p["E"] / s_L + A_unit + 1.0 / (jnp.sum(p["C"], axis=-1) * s_L)
        root_bB = raw_beta = None
        if tokens:
            B_unit = p["B"] * jnp.exp(-p["beta"] * jnp.log(settings["tokens_scale"])) / s_L
            level = level + B_unit
            root_bB, raw_beta = jnp.sqrt(B_unit * p["beta"]), jnp.sqrt(p["beta"])
        p_roots, root_c, root_kappa = mixture_coordinates(p["C"], p["gamma"], s_L)
        return cls(
            E1=level,
            root_bA=jnp.sqrt(A_unit * p["alpha"]),
            raw_alpha=jnp.sqrt(p["alpha"]),
            root_bB=root_bB,
            raw_beta=raw_beta,
            p_roots=p_roots,
            root_c=root_c,
            root_kappa=root_kappa,
            **settings,
        )

    @classmethod
    def sample_init(
        cls,
        key: Array,
        *,
        n_datasets: int,
        tokens: bool = True,
        size_scale: float = 1.0,
        tokens_scale: float = 1.0,
        loss_scale: float = 1.0,
    ) -> SODMAdditive:
        """A random start, in units of the law (`loss_scale`, `size_scale`, `tokens_scale`): E in [0.5, 3], A and B
        in [0.05, 2], exponents in [0.05, 1.5], C in [1, 10], gamma in [0.1, 1]."""
        n_datasets = count(n_datasets, "n_datasets")
        keys = jax.random.split(key, 6)
        E = jnp.exp(log_uniform(keys[0], (), 0.5, 3.0))
        A = jnp.exp(log_uniform(keys[1], (), 0.05, 2.0))
        alpha = jnp.exp(log_uniform(keys[2], (), 0.05, 1.5))
        B = jnp.exp(log_uniform(keys[3], (), 0.05, 2.0))
        beta = jnp.exp(log_uniform(keys[4], (), 0.05, 1.5))
        p_roots, root_c, root_kappa = sample_mixture(keys[5], n_datasets)
        return cls(
            E1=E + A + (B if tokens else 0.0) + 1.0 / root_kappa**2,
            root_bA=jnp.sqrt(A * alpha),
            raw_alpha=jnp.sqrt(alpha),
            root_bB=jnp.sqrt(B * beta) if tokens else None,
            raw_beta=jnp.sqrt(beta) if tokens else None,
            p_roots=p_roots,
            root_c=root_c,
            root_kappa=root_kappa,
            **sodm_settings(tokens, size_scale, tokens_scale, loss_scale),
        )

    def with_data_scales(self, inputs: tuple[Any, ...], y: Any) -> dict[str, float]:
        """The units of a fit (see `AbstractLaw.with_data_scales`)."""
        return sodm_data_scales(self, inputs, y)

    def size_parameters(self) -> tuple[int, int]:
        """Size is `inputs[1]`; E, A and alpha describe the size dependence."""
        return 1, 3

    def structure(self) -> dict[str, Any]:
        return sodm_structure(self)
