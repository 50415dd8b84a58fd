"""SODM, joint form (Shukor et al. 2025): mixture-dependent size and data coefficients, in well-posed coordinates."""

from __future__ import annotations

import math
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
from ._terms import from_helmert, logrel, to_helmert

# The charts of a scaled term's mixture dependence rho^gammaX (rho = sum_j pX_j r_j), by the limit each holds as a
# regular point besides the log law: "uniform", gammaX -> infinity with pX -> uniform (a coefficient exponential in
# a linear function of r); "roots", gammaX -> 0 (a coefficient without mixture dependence), the layout up to format 7.
COEFFICIENT_CHARTS = ("uniform", "roots")


def coefficient_chart(value: Any) -> str:
    """A checked `coefficient_chart`: one of `COEFFICIENT_CHARTS`."""
    if not isinstance(value, str) or value not in COEFFICIENT_CHARTS:
        raise ValueError(f"`coefficient_chart` must be one of {COEFFICIENT_CHARTS}; got {value!r}")
    return value


def scaled_term(w: Array, kappa: Array) -> Array:
    """A (exp(-u) - 1) with u = kappa w and A = 1 / kappa: finite (-w) as kappa -> 0."""
    return -w * exprel(-kappa * w)


def uniform_chart_factor(r: Array, h: Array, tilt: Array) -> Array:
    """A gammaX log(n rho) in the "uniform" chart: (1 / h) log(sum_j q_j r_j), q_j = n pX_j, with h = 1 / (A gammaX)
    and sqrt(q_j) proportional to 1 + h e_j, e = H tilt (H the Helmert basis: e sums to 0); finite and regular as
    h -> 0, where it tends to 2 e . r (gammaX -> infinity, pX -> uniform).

    With u = 2 e . r + h (e^2) . r and v = h mean(e^2) (rows of r renormalized to sum to 1, as the identity needs),
    sum_j (1 + h e_j)^2 r_j = 1 + h u and mean_j (1 + h e_j)^2 = 1 + h v, so the factor is
    u logrel(h u) - v logrel(h v). A weight q_j = 0 (e_j = -1 / h) is a regular point, as in the roots chart.

    **Arguments**: `r` [P, n] mixtures, `h` scalar >= 0, `tilt` [n-1]. **Returns**: [P].
    """
    e = from_helmert(tilt)
    total = jnp.sum(r, axis=-1, keepdims=True)
    share = r / jnp.where(total > 0, total, 1.0)
    u = 2.0 * (share @ e) + h * (share @ (e * e))
    # 1 + h u = sum_j (1 + h e_j)^2 r_j >= 0, zero only when every weighted dataset of the row has q_j = 0
    y = jnp.maximum(h * u, -1.0 + jnp.finfo(u.dtype).eps)
    v = h * jnp.mean(e * e)
    return u * logrel(y) - v * logrel(h * v)


def _coefficient_coordinates(CX: Array, gammaX: Array, exponent: Array, scale: float, loss_scale: float,
                             chart: str) -> dict:  # fmt: skip
    """The coordinates of a term (sum_j CX_j r_j)^gammaX / (X / scale)^exponent in loss units: sqrt(1 / A) and
    sqrt(A exponent), A its amplitude at the chart's reference mixture (rho = 1 / n, "uniform"; rho = 1, "roots"),
    with ("uniform") the tilt and sqrt(h), h = 1 / (A gammaX), or ("roots") the roots of pX and sqrt(A gammaX).
    The other chart's are None."""
    total = jnp.sum(CX, axis=-1)
    n = CX.shape[-1]
    log_rho = -math.log(n) if chart == "uniform" else 0.0
    A = jnp.exp(gammaX * (jnp.log(total) + log_rho) - exponent * jnp.log(scale)) / loss_scale
    out = {"b": jnp.sqrt(A * exponent), "kappa": jnp.sqrt(1.0 / A), "p": None, "a": None, "tilt": None, "h": None}
    roots = jnp.sqrt(CX / total[..., None])
    if chart == "roots":
        return out | {"p": roots, "a": jnp.sqrt(A * gammaX)}
    h = 1.0 / (A * gammaX)
    e = (roots / jnp.mean(roots, axis=-1, keepdims=True) - 1.0) / h[..., None]  # sums to 0
    return out | {"tilt": to_helmert(e), "h": jnp.sqrt(h)}


def _coefficient_params(law: SODMJoint, term: str, scale: float) -> tuple[Array, Array, Array, Array]:
    """The paper's (CX, gammaX, exponent) of the scaled term `term` ("A" or "B"), and its amplitude A in loss units
    at the chart's reference mixture (the constant the level E1 includes)."""
    kappa = getattr(law, f"root_kappa{term}") ** 2
    exponent = kappa * getattr(law, f"root_b{term}") ** 2
    A = 1.0 / kappa
    if law.coefficient_chart == "roots":
        gammaX = kappa * getattr(law, f"root_a{term}") ** 2
        p, log_rho = simplex_from_roots(getattr(law, f"p{term}_roots"), axis=-1), 0.0
    else:
        h = getattr(law, f"root_h{term}") ** 2
        tilt = getattr(law, f"p{term}_tilt")
        n = tilt.shape[-1] + 1
        gammaX = kappa / h
        e = from_helmert(tilt)
        p, log_rho = simplex_from_roots(1.0 + h[..., None] * e, axis=-1), -math.log(n)
    # (sum CX r)^gammaX (X / s)^-exponent = s_L A (rho / rho_ref)^gammaX (X / s)^-exponent with CX = total p,
    # total = (s_L A s^exponent)^(1 / gammaX) / rho_ref
    log_total = (jnp.log(law.loss_scale * A) + exponent * jnp.log(scale)) / gammaX - log_rho
    return p * jnp.exp(log_total)[..., None], gammaX, exponent, A


def _settings(tokens: bool, size_scale: float, tokens_scale: float, loss_scale: float, mixture_chart: str,
              chart: str) -> dict[str, Any]:  # fmt: skip
    """The static settings of SODMJoint, checked: SODM's (`sodm_settings`) and the coefficient chart."""
    return sodm_settings(tokens, size_scale, tokens_scale, loss_scale, mixture_chart) | {
        "coefficient_chart": coefficient_chart(chart)
    }


class SODMJoint(AbstractLaw):
    """Joint mixture law: the mixture scales the size and data terms.

        L(r, N, D) = E + 1 / sum_j C_j r_j^gamma_j
                     + (sum_j CA_j r_j)^gammaA / N^alpha + (sum_j CB_j r_j)^gammaB / D^beta

    with every coefficient and exponent > 0; `tokens=False` drops the D term (`law(r, N)`). Reference: Shukor et
    al. (2025), the joint law; named SODM in Li, Gu & Zhang (2026).

    **Parameterization** (see `SODMAdditive` and `CAMEL`). The size term is A (rho / rho_0)^gammaA m^-alpha with
    rho = sum_j pA_j r_j (pA_j = CA_j / sum CA on the simplex), m = N / s_N and A its value at m = 1 and a reference
    rho_0; less its constant A it is -w exprel(-kappa_A w) with w = b_A log m - F_A(r), b_A = A alpha,
    kappa_A = 1 / A and F_A = A gammaA log(rho / rho_0), so that alpha = kappa_A b_A. `coefficient_chart` (static)
    picks the coordinates of F_A:

    - `"uniform"` (the default): rho_0 = 1 / n, the uniform mixture's, and F_A = (1 / h_A) log(n rho) with
      h_A = 1 / (A gammaA) and sqrt(n pA_j) = 1 + h_A e_j, e = H pA_tilt summing to 0 (`uniform_chart_factor`).
      The limit h_A -> 0 (gammaA -> infinity with pA -> uniform: a coefficient exp(2 kappa_A e . r)), a weight pA_j = 0
      and a size term without mixture dependence (e = 0) are finite points. Fits of designs near one reference
      mixture run along a valley between a weight pA_j = 0 and that limit, which in the roots chart is curved (A
      grows as rho_0^-gammaA) and ends at infinity (issue 29).
    - `"roots"` (the layout up to format 7): rho_0 = 1, F_A = a_A log rho with a_A = A gammaA and the roots of pA;
      gammaA = kappa_A a_A, and a_A = 0 and pA_j = 0 are finite points.

    In either chart the log-law limit (kappa_A -> 0) and a mixture term without size dependence (b_A = 0) are
    finite points. The data term is the same in D, and the mixture term is SODMAdditive's, in the chart
    `mixture_chart` picks ("linear", the default, or "log"; see `SODMAdditive`). The free coordinates are the level
    E1 = E + K + A + B ("log"; E + n K + A + B in the "linear" chart), the mixture term's and square roots of the
    rest. Units `loss_scale`, `size_scale` and `tokens_scale` are static, set from the data by `fit`; `params()`
    reports the paper's values.

    **Arguments** (`__call__`): `r` [P, n], `size` [P], and `tokens` [P] when `tokens=True`. **Returns**: [P].
    """

    UNITS = ("loss_scale", "size_scale", "tokens_scale")
    CHOICES = {"mixture_chart": MIXTURE_CHARTS, "coefficient_chart": COEFFICIENT_CHARTS}

    E1: Float[Array, "*batch"]
    p_roots: Float[Array, "*batch n"] | None  # the mixture term (as SODMAdditive's)
    root_c: Float[Array, "*batch n"] | None
    root_kappa: Float[Array, "*batch"]
    pA_roots: Float[Array, "*batch n"] | None  # sqrt(CA_j / sum CA) ("roots" chart)
    root_aA: Float[Array, "*batch"] | None  # sqrt(A gammaA) ("roots" chart)
    root_bA: Float[Array, "*batch"]  # sqrt(A alpha)
    root_kappaA: Float[Array, "*batch"]  # sqrt(1 / A)
    pB_roots: Float[Array, "*batch n"] | None
    root_aB: Float[Array, "*batch"] | None
    root_bB: Float[Array, "*batch"] | None
    root_kappaB: Float[Array, "*batch"] | None
    p_tilt: Float[Array, "*batch m"] | None = None  # the mixture term in the "linear" chart (as SODMAdditive's)
    gamma_tilt: Float[Array, "*batch n"] | None = None
    pA_tilt: Float[Array, "*batch m"] | None = None  # H^T e_A, sqrt(n pA_j) = 1 + h_A e_Aj ("uniform" chart)
    root_hA: Float[Array, "*batch"] | None = None  # sqrt(1 / (A gammaA)) ("uniform" chart)
    pB_tilt: Float[Array, "*batch m"] | None = None
    root_hB: Float[Array, "*batch"] | None = None
    tokens: bool = eqx.field(static=True, default=True)
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)
    loss_scale: float = eqx.field(static=True, default=1.0)
    mixture_chart: str = eqx.field(static=True, default="linear")
    coefficient_chart: str = eqx.field(static=True, default="uniform")

    def __call__(
        self, r: Float[Array, "P n"], size: Float[Array, " P"], *tokens: Float[Array, " P"]
    ) -> Float[Array, " P"]:
        if len(tokens) != int(self.tokens):
            raise TypeError(
                f"SODMJoint(tokens={self.tokens}) takes {2 + int(self.tokens)} inputs; got {2 + len(tokens)}"
            )
        loss = self.E1 + mixture_term(self, r)
        w = self.root_bA**2 * jnp.log(size / self.size_scale) - self._mixture_factor(r, "A")
        loss = loss + scaled_term(w, self.root_kappaA**2)
        if self.tokens:
            assert self.root_bB is not None and self.root_kappaB is not None
            w = self.root_bB**2 * jnp.log(tokens[0] / self.tokens_scale) - self._mixture_factor(r, "B")
            loss = loss + scaled_term(w, self.root_kappaB**2)
        return self.loss_scale * loss

    def _mixture_factor(self, r: Array, term: str) -> Array:
        """A gammaX log(rho / rho_ref) of the scaled term `term` ("A" or "B") in the law's coefficient chart."""
        if self.coefficient_chart == "uniform":
            return uniform_chart_factor(r, getattr(self, f"root_h{term}") ** 2, getattr(self, f"p{term}_tilt"))
        rho = safe_log(r @ simplex_from_roots(getattr(self, f"p{term}_roots"), axis=-1))
        return getattr(self, f"root_a{term}") ** 2 * rho

    def params(self) -> dict[str, Array]:
        """The paper's E, C, gamma, CA, gammaA, alpha (and CB, gammaB, beta) in the user's units."""
        CA, gammaA, alpha, A = _coefficient_params(self, "A", self.size_scale)
        level = A + mixture_constant(self)
        out = {"CA": CA, "gammaA": gammaA, "alpha": alpha}
        if self.tokens:
            CB, gammaB, beta, B = _coefficient_params(self, "B", self.tokens_scale)
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
        coefficient_chart: str = "uniform",
    ) -> SODMJoint:
        """Build from the paper's values (every coefficient and exponent > 0, E real); passing `CB`, `gammaB` and
        `beta` selects `tokens=True`; `mixture_chart` the chart of the mixture term, `coefficient_chart` that of the
        size and data terms' mixture dependence (the same function in every chart)."""
        token_values = (CB, gammaB, beta)
        tokens = any(v is not None for v in token_values)
        if tokens and any(v is None for v in token_values):
            raise ValueError("pass all of `CB`, `gammaB`, `beta` (tokens=True) or none (tokens=False)")
        settings = _settings(tokens, size_scale, tokens_scale, loss_scale, mixture_chart, coefficient_chart)
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
        chart = settings["coefficient_chart"]
        size = _coefficient_coordinates(p["CA"], p["gammaA"], p["alpha"], settings["size_scale"], s_L, chart)
        data = None
        if tokens:
            data = _coefficient_coordinates(p["CB"], p["gammaB"], p["beta"], settings["tokens_scale"], s_L, chart)
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
        each scaled term's (`_coefficient_coordinates`): the level E1 adds every scaled term's value at the
        reference point (1 / kappa^2)."""
        level = E + 1.0 / size["kappa"] ** 2
        if data is not None:
            level = level + 1.0 / data["kappa"] ** 2
        data = data if data is not None else dict.fromkeys(size)
        return cls(
            E1=level,
            **mixture,
            pA_roots=size["p"],
            root_aA=size["a"],
            root_bA=size["b"],
            root_kappaA=size["kappa"],
            pA_tilt=size["tilt"],
            root_hA=size["h"],
            pB_roots=data["p"],
            root_aB=data["a"],
            root_bB=data["b"],
            root_kappaB=data["kappa"],
            pB_tilt=data["tilt"],
            root_hB=data["h"],
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
        coefficient_chart: str = "uniform",
    ) -> SODMJoint:
        """A random start in the law's units: CA and CB in [0.05, 2], gammaA and gammaB in [0.5, 1.5], alpha and
        beta in [0.05, 1.5]; the mixture term as SODMAdditive's (`sample_mixture`: "log", E in [0.5, 3], C in
        [1, 10], gamma in [0.1, 1]; "linear", E + n K in [0.5, 3], nearer the linear limit: K in [10, 1000])."""
        n_datasets = count(n_datasets, "n_datasets")
        keys = jax.random.split(key, 4)
        E = jnp.exp(log_uniform(keys[0], (), 0.5, 3.0))
        settings = _settings(tokens, size_scale, tokens_scale, loss_scale, mixture_chart, coefficient_chart)
        # the mixture term starts nearer its linear limit than SODMAdditive's (K in [10, 1000]): beside the size
        # term's mixture dependence its curvature is barely determined, and starts from K < 10 crawl toward the limit
        mixture, constant = sample_mixture(keys[1], n_datasets, settings["mixture_chart"], kappa_range=(1e-3, 0.1))

        def term(k: Array) -> dict[str, Array]:
            k_C, k_g, k_e = jax.random.split(k, 3)
            CX = jnp.exp(log_uniform(k_C, (n_datasets,), 0.05, 2.0))
            gammaX = jnp.exp(log_uniform(k_g, (), 0.5, 1.5))
            exponent = jnp.exp(log_uniform(k_e, (), 0.05, 1.5))
            return _coefficient_coordinates(CX, gammaX, exponent, 1.0, 1.0, settings["coefficient_chart"])

        data = term(keys[3]) if tokens else None
        return cls._assemble(E + constant, mixture, term(keys[2]), data, settings)

    def with_data_scales(self, inputs: tuple[Any, ...], y: Any) -> dict[str, float]:
        """The units of a fit (see `AbstractLaw.with_data_scales`)."""
        return sodm_data_scales(self, inputs, y)

    def size_parameters(self) -> tuple[int, int]:
        """Size is `inputs[1]`; E, the size amplitudes and alpha describe the size dependence."""
        return 1, 3

    def structure(self) -> dict[str, Any]:
        return sodm_structure(self) | {"coefficient_chart": self.coefficient_chart}
