"""SODM, joint form (Shukor et al. 2025): mixture-dependent size and data coefficients, in well-posed coordinates."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._base import AbstractLaw, as_leaves, count, log_uniform, positive_inverse, safe_log, simplex_from_roots
from ._camel import exprel
from ._sodm_additive import (
    MIXTURE_CHARTS,
    chart_constant,
    mixture_constant,
    mixture_coordinates,
    mixture_params,
    mixture_term,
    sample_mixture,
    sodm_data_scales,
    sodm_settings,
    sodm_structure,
)


def scaled_term(w: Array, kappa: Array) -> Array:
    """A (exp(-u) - 1) with u = kappa w and A = 1 / kappa: finite (-w) as kappa -> 0."""
    return -w * exprel(-kappa * w)


def _coefficient_coordinates(CX: Array, gammaX: Array, exponent: Array, scale: float, loss_scale: float) -> dict:
    """Roots of (p, a, b, kappa) for a term (sum_j CX_j r_j)^gammaX / (X / scale)^exponent in loss units."""
    total = jnp.sum(CX, axis=-1)
    A = jnp.exp(gammaX * jnp.log(total) - exponent * jnp.log(scale)) / loss_scale
    return {
        "p": jnp.sqrt(CX / total[..., None]),
        "a": jnp.sqrt(A * gammaX),
        "b": jnp.sqrt(A * exponent),
        "kappa": jnp.sqrt(1.0 / A),
    }


def _coefficient_params(p_roots: Array, root_a: Array, root_b: Array, root_kappa: Array, scale: float,
                        loss_scale: float) -> tuple[Array, Array, Array, Array]:  # fmt: skip
    """The paper's (CX, gammaX, exponent) of a scaled term, and its amplitude A in loss units at the reference."""
    kappa = root_kappa**2
    gammaX, exponent = kappa * root_a**2, kappa * root_b**2
    A = 1.0 / kappa
    # (sum CX r)^gammaX (X / s)^-exponent s_L A_unit... = (sum CX' r)^gammaX X^-exponent, CX' summing to
    # (s_L A s^exponent)^(1 / gammaX)
    log_total = (jnp.log(loss_scale * A) + exponent * jnp.log(scale)) / gammaX
    CX = simplex_from_roots(p_roots, axis=-1) * jnp.exp(log_total)[..., None]
    return CX, gammaX, exponent, A


class SODMJoint(AbstractLaw):
    """Joint mixture law: the mixture scales the size and data terms.

        L(r, N, D) = E + 1 / sum_j C_j r_j^gamma_j
                     + (sum_j CA_j r_j)^gammaA / N^alpha + (sum_j CB_j r_j)^gammaB / D^beta

    with every coefficient and exponent > 0; `tokens=False` drops the D term (`law(r, N)`). Reference: Shukor et
    al. (2025), the joint law; named SODM in Li, Gu & Zhang (2026).

    **Parameterization** (see `SODMAdditive` and `CAMEL`). The size term is A rho^gammaA m^-alpha with
    rho = sum_j pA_j r_j (pA_j = CA_j / sum CA on the simplex), A = (sum CA)^gammaA s_N^-alpha and m = N / s_N;
    less its constant A it is -w exprel(-kappa_A w) with w = b_A log m - a_A log rho, b_A = A alpha,
    a_A = A gammaA and kappa_A = 1 / A, so that alpha = kappa_A b_A and gammaA = kappa_A a_A. Its log-law limit
    (kappa_A -> 0), a size term without mixture dependence (a_A = 0) and a mixture term without size dependence
    (b_A = 0) are finite points. The data term is the same in D, and the mixture term is SODMAdditive's, in the chart
    `mixture_chart` picks ("linear", the default, or "log"; see `SODMAdditive`). The free coordinates are the level
    E1 = E + K + A + B ("log"; E + n K + A + B in the "linear" chart), the mixture term's and square roots of the
    rest. Units `loss_scale`, `size_scale`
    and `tokens_scale` are static, set from the data by `fit`; `params()` reports the paper's values.

    **Arguments** (`__call__`): `r` [P, n], `size` [P], and `tokens` [P] when `tokens=True`. **Returns**: [P].
    """

    UNITS = ("loss_scale", "size_scale", "tokens_scale")
    CHOICES = {"mixture_chart": MIXTURE_CHARTS}

    E1: Float[Array, "*batch"]
    p_roots: Float[Array, "*batch n"] | None  # the mixture term (as SODMAdditive's)
    root_c: Float[Array, "*batch n"] | None
    root_kappa: Float[Array, "*batch"]
    pA_roots: Float[Array, "*batch n"]  # sqrt(CA_j / sum CA)
    root_aA: Float[Array, "*batch"]  # sqrt(A gammaA)
    root_bA: Float[Array, "*batch"]  # sqrt(A alpha)
    root_kappaA: Float[Array, "*batch"]  # sqrt(1 / A)
    pB_roots: Float[Array, "*batch n"] | None
    root_aB: Float[Array, "*batch"] | None
    root_bB: Float[Array, "*batch"] | None
    root_kappaB: Float[Array, "*batch"] | None
    p_tilt: Float[Array, "*batch m"] | None = None  # the mixture term in the "linear" chart (as SODMAdditive's)
    gamma_tilt: Float[Array, "*batch n"] | None = None
    tokens: bool = eqx.field(static=True, default=True)
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)
    loss_scale: float = eqx.field(static=True, default=1.0)
    mixture_chart: str = eqx.field(static=True, default="linear")

    def __call__(
        self, r: Float[Array, "P n"], size: Float[Array, " P"], *tokens: Float[Array, " P"]
    ) -> Float[Array, " P"]:
        if len(tokens) != int(self.tokens):
            raise TypeError(
                f"SODMJoint(tokens={self.tokens}) takes {2 + int(self.tokens)} inputs; got {2 + len(tokens)}"
            )
        loss = self.E1 + mixture_term(self, r)
        rho = safe_log(r @ simplex_from_roots(self.pA_roots, axis=-1))
        w = self.root_bA**2 * jnp.log(size / self.size_scale) - self.root_aA**2 * rho
        loss = loss + scaled_term(w, self.root_kappaA**2)
        if self.tokens:
            assert self.pB_roots is not None and self.root_aB is not None
            assert self.root_bB is not None and self.root_kappaB is not None
            rho = safe_log(r @ simplex_from_roots(self.pB_roots, axis=-1))
            w = self.root_bB**2 * jnp.log(tokens[0] / self.tokens_scale) - self.root_aB**2 * rho
            loss = loss + scaled_term(w, self.root_kappaB**2)
        return self.loss_scale * loss

    def params(self) -> dict[str, Array]:
        """The paper's E, C, gamma, CA, gammaA, alpha (and CB, gammaB, beta) in the user's units."""
        CA, gammaA, alpha, A = _coefficient_params(self.pA_roots, self.root_aA, self.root_bA, self.root_kappaA,
                                                   self.size_scale, self.loss_scale)  # fmt: skip
        level = A + mixture_constant(self)
        out = {"CA": CA, "gammaA": gammaA, "alpha": alpha}
        if self.tokens:
            assert self.pB_roots is not None and self.root_aB is not None
            assert self.root_bB is not None and self.root_kappaB is not None
            CB, gammaB, beta, B = _coefficient_params(self.pB_roots, self.root_aB, self.root_bB, self.root_kappaB,
                                                      self.tokens_scale, self.loss_scale)  # fmt: skip
            level = level + B
            out |= {"CB": CB, "gammaB": gammaB, "beta": beta}
        return {"E": self.loss_scale * (self.E1 - level)} | mixture_params(self) | out

    @classmethod
    def from_params(
        cls,
        *,
        E: ArrayLike,
        C: ArrayLike,
        gamma: ArrayLike,
        CA: ArrayLike,
        gammaA: ArrayLike,
        alpha: ArrayLike,
        CB: ArrayLike | None = None,
        gammaB: ArrayLike | None = None,
        beta: ArrayLike | None = None,
        size_scale: float = 1.0,
        tokens_scale: float = 1.0,
        loss_scale: float = 1.0,
        mixture_chart: str = "linear",
    ) -> SODMJoint:
        """Build from the paper's values (every coefficient and exponent > 0, E real); passing `CB`, `gammaB` and
        `beta` selects `tokens=True`; `mixture_chart` the chart of the mixture term (the same function in either)."""
        token_values = (CB, gammaB, beta)
        tokens = any(v is not None for v in token_values)
        if tokens and any(v is None for v in token_values):
            raise ValueError("pass all of `CB`, `gammaB`, `beta` (tokens=True) or none (tokens=False)")
        settings = sodm_settings(tokens, size_scale, tokens_scale, loss_scale, mixture_chart)
        ndims = {"E": 0, "C": 1, "gamma": 1, "CA": 1, "gammaA": 0, "alpha": 0}
        values: dict[str, Any] = {"E": E, "C": C, "gamma": gamma, "CA": CA, "gammaA": gammaA, "alpha": alpha}
        if tokens:
            ndims |= {"CB": 1, "gammaB": 0, "beta": 0}
            values |= {"CB": CB, "gammaB": gammaB, "beta": beta}
        p = as_leaves(ndims, values)
        for name in ndims:
            if name != "E":
                positive_inverse(p[name], None, name)
        s_L = settings["loss_scale"]
        mixture = mixture_coordinates(p["C"], p["gamma"], s_L, settings["mixture_chart"])
        size = _coefficient_coordinates(p["CA"], p["gammaA"], p["alpha"], settings["size_scale"], s_L)
        data = None
        if tokens:
            data = _coefficient_coordinates(p["CB"], p["gammaB"], p["beta"], settings["tokens_scale"], s_L)
        constant = chart_constant(settings["mixture_chart"], p["C"].shape[-1], mixture["root_kappa"] ** 2)
        return cls._assemble(p["E"] / s_L + constant, mixture, size, data, settings)

    @classmethod
    def _assemble(
        cls,
        E: Array,
        mixture: dict[str, Any],
        size: dict[str, Any],
        data: dict[str, Any] | None,
        settings: dict[str, Any],
    ) -> SODMJoint:
        """The law from E plus the mixture term's constant (in loss units), the mixture term's coordinates and
        each scaled term's (p, a, b, kappa): the level E1 adds every scaled term's value at the reference point
        (1 / kappa^2)."""
        level = E + 1.0 / size["kappa"] ** 2
        if data is not None:
            level = level + 1.0 / data["kappa"] ** 2
        data = data if data is not None else dict.fromkeys(("p", "a", "b", "kappa"))
        return cls(
            E1=level,
            **mixture,
            pA_roots=size["p"],
            root_aA=size["a"],
            root_bA=size["b"],
            root_kappaA=size["kappa"],
            pB_roots=data["p"],
            root_aB=data["a"],
            root_bB=data["b"],
            root_kappaB=data["kappa"],
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
        mixture_chart: str = "linear",
    ) -> SODMJoint:
        """A random start in the law's units: CA and CB in [0.05, 2], gammaA and gammaB in [0.5, 1.5], alpha and
        beta in [0.05, 1.5]; the mixture term as SODMAdditive's (`sample_mixture`: "log", E in [0.5, 3], C in
        [1, 10], gamma in [0.1, 1]; "linear", E + n K in [0.5, 3], near the linear limit)."""
        n_datasets = count(n_datasets, "n_datasets")
        keys = jax.random.split(key, 4)
        E = jnp.exp(log_uniform(keys[0], (), 0.5, 3.0))
        settings = sodm_settings(tokens, size_scale, tokens_scale, loss_scale, mixture_chart)
        mixture, constant = sample_mixture(keys[1], n_datasets, settings["mixture_chart"])

        def term(k: Array) -> dict[str, Array]:
            k_C, k_g, k_e = jax.random.split(k, 3)
            CX = jnp.exp(log_uniform(k_C, (n_datasets,), 0.05, 2.0))
            gammaX = jnp.exp(log_uniform(k_g, (), 0.5, 1.5))
            exponent = jnp.exp(log_uniform(k_e, (), 0.05, 1.5))
            return _coefficient_coordinates(CX, gammaX, exponent, 1.0, 1.0)

        data = term(keys[3]) if tokens else None
        return cls._assemble(E + constant, mixture, term(keys[2]), data, settings)

    def with_data_scales(self, inputs: tuple[Any, ...], y: Any) -> dict[str, float]:
        """The units of a fit (see `AbstractLaw.with_data_scales`)."""
        return sodm_data_scales(self, inputs, y)

    def size_parameters(self) -> tuple[int, int]:
        """Size is `inputs[1]`; E, the size amplitudes and alpha describe the size dependence."""
        return 1, 3

    def structure(self) -> dict[str, Any]:
        return sodm_structure(self)
