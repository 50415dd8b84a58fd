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
from ._terms import from_helmert, inverse_power_mean_term, linear_limit_term, power_term, to_helmert

# The charts of the mixture term, by the limit each holds as a regular point (K = 1 / sum C -> infinity in both):
# "linear", equal p and gamma -> 1 (a term linear in r and r log r); "log", gamma -> 0 (the log law).
MIXTURE_CHARTS = ("linear", "log")


def mixture_chart(value: Any) -> str:
    """A checked `mixture_chart`: one of `MIXTURE_CHARTS`."""
    if not isinstance(value, str) or value not in MIXTURE_CHARTS:
        raise ValueError(f"`mixture_chart` must be one of {MIXTURE_CHARTS}; got {value!r}")
    return value


def mixture_size(law: Any) -> int:
    """The number of datasets of either SODM law's mixture term, in either chart."""
    leaf = law.gamma_tilt if law.mixture_chart == "linear" else law.p_roots
    return int(leaf.shape[-1])


def sodm_structure(law: Any) -> dict[str, Any]:
    """The structure of either SODM law (additive or joint): datasets, tokens input, units and mixture chart."""
    return {
        "n_datasets": mixture_size(law),
        "tokens": law.tokens,
        "size_scale": law.size_scale,
        "tokens_scale": law.tokens_scale,
        "loss_scale": law.loss_scale,
        "mixture_chart": law.mixture_chart,
    }


def sodm_settings(
    tokens: bool, size_scale: float, tokens_scale: float, loss_scale: float = 1.0, chart: str = "linear"
) -> dict[str, Any]:
    """The static settings of either SODM law, checked: whether tokens are an input, the units and the chart."""
    return {
        "tokens": bool(tokens),
        "size_scale": positive_number(size_scale, "size_scale"),
        "tokens_scale": positive_number(tokens_scale, "tokens_scale"),
        "loss_scale": positive_number(loss_scale, "loss_scale"),
        "mixture_chart": mixture_chart(chart),
    }


def sodm_data_scales(law: Any, inputs: tuple[Any, ...], y: Any) -> dict[str, float]:
    """The units of a SODM fit: the orders of magnitude of the targets, the sizes and (with tokens) the tokens."""
    scales = {"loss_scale": data_scale(y), "size_scale": data_scale(inputs[1])}
    if law.tokens:
        scales["tokens_scale"] = data_scale(inputs[2])
    return scales


def mixture_coordinates(C: Array, gamma: Array, loss_scale: float, chart: str) -> dict[str, Any]:
    """The coordinates of the mixture term 1 / sum_j C_j r_j^gamma_j (C in the user's 1 / loss) in `chart`:
    sqrt(kappa), kappa = sum C in loss units, and ("log") the roots of p = C / sum C and of c = gamma / kappa, or
    ("linear") p_tilt = H^T log(p) / kappa and gamma_tilt = log(gamma) / kappa. The other chart's are None."""
    total = jnp.sum(C, axis=-1)
    kappa = total * loss_scale
    if chart == "log":
        return {"root_kappa": jnp.sqrt(kappa), "p_roots": jnp.sqrt(C / total[..., None]),
                "root_c": jnp.sqrt(gamma / kappa[..., None]), "p_tilt": None, "gamma_tilt": None}  # fmt: skip
    log_p = jnp.log(C) - jnp.log(total)[..., None]
    return {"root_kappa": jnp.sqrt(kappa), "p_roots": None, "root_c": None,
            "p_tilt": to_helmert(log_p / kappa[..., None]),
            "gamma_tilt": jnp.log(gamma) / kappa[..., None]}  # fmt: skip


def chart_constant(chart: str, n_datasets: int, kappa: Array) -> Array:
    """The constant the mixture term is written less of in `chart` (in loss units), the value the term tends to
    as kappa -> 0: K = 1 / kappa ("log"), n K ("linear")."""
    return (n_datasets if chart == "linear" else 1) / kappa


def mixture_constant(law: Any) -> Array:
    """`chart_constant` of a law."""
    return chart_constant(law.mixture_chart, mixture_size(law), law.root_kappa**2)


def mixture_term(law: Any, r: Array) -> Array:
    """The mixture term less `mixture_constant`, in loss units, in the law's chart."""
    kappa = law.root_kappa**2
    if law.mixture_chart == "linear":
        return linear_limit_term(r, kappa, law.p_tilt, law.gamma_tilt)
    return inverse_power_mean_term(r, simplex_from_roots(law.p_roots, axis=-1), law.root_c**2, kappa)


def mixture_params(law: Any) -> dict[str, Array]:
    """The paper's C (in the user's 1 / loss) and gamma of the mixture term."""
    kappa = law.root_kappa * law.root_kappa
    if law.mixture_chart == "linear":
        p = jax.nn.softmax(kappa[..., None] * from_helmert(law.p_tilt), axis=-1)
        gamma = jnp.exp(kappa[..., None] * law.gamma_tilt)
    else:
        p = simplex_from_roots(law.p_roots, axis=-1)
        gamma = kappa[..., None] * law.root_c * law.root_c
    return {"C": p * (kappa / law.loss_scale)[..., None], "gamma": gamma}


def sample_mixture(
    key: Array, n_datasets: int, chart: str, kappa_range: tuple[float, float] = (0.01, 1.0)
) -> tuple[dict[str, Any], Array]:
    """The mixture-term coordinates of a start (in units of the loss scale), and the constant its level includes.

    "log": C in [1, 10] and gamma in [0.1, 1], the level including K. "linear": kappa log-uniform in `kappa_range`
    ([0.01, 1] by default: K in [1, 100])
    and p_tilt, gamma_tilt in [-0.2, 0.2] (gamma within exp(+-0.2 kappa) of 1), near the linear limit, where the
    level excludes n K: the term starts small beside E (a start's level E1 = E + n K would hold up to 500 units
    of loss, which the fits then spend their steps removing)."""
    if chart == "log":
        k_C, k_g = jax.random.split(key)
        C = jnp.exp(log_uniform(k_C, (n_datasets,), 1.0, 10.0))
        gamma = jnp.exp(log_uniform(k_g, (n_datasets,), 0.1, 1.0))
        coordinates = mixture_coordinates(C, gamma, 1.0, chart)
        return coordinates, 1.0 / jnp.sum(C)
    k_kappa, k_p, k_gamma = jax.random.split(key, 3)
    kappa = jnp.exp(log_uniform(k_kappa, (), *kappa_range))
    p_tilt = jax.random.uniform(k_p, (n_datasets - 1,), minval=-0.2, maxval=0.2)
    gamma_tilt = jax.random.uniform(k_gamma, (n_datasets,), minval=-0.2, maxval=0.2)
    coordinates = {"root_kappa": jnp.sqrt(kappa), "p_roots": None, "root_c": None, "p_tilt": p_tilt,
                   "gamma_tilt": gamma_tilt}  # fmt: skip
    return coordinates, jnp.zeros_like(kappa)


class SODMAdditive(AbstractLaw):
    """Additive mixture law with separate size, data and mixture terms.

        L(r, N, D) = E + A / N^alpha + B / D^beta + 1 / sum_j C_j r_j^gamma_j

    with A, B, C_j and the exponents > 0. With `tokens=False` the D term is dropped and the law is `law(r, N)`:
    when every run has one token count it merges into E anyway (the paper's fixed-length cooldowns).
    Reference: Shukor et al. (2025), the additive law; named SODM in Li, Gu & Zhang (2026).

    **Parameterization** (why the fit is well posed; see `CAMEL` for the same idea). Every term is written less
    its value at the reference point, so that its limits are regular points of the free coordinates:

        L = s_L (E1 - b_A z_N exprel(-alpha z_N) - b_B z_D exprel(-beta z_D) + T(r))

    with z_N = log(N / s_N), z_D = log(D / s_D), b_A = A alpha, b_B = B beta (in units s_L at the reference size),
    and T the mixture term K / sum_j p_j r_j^gamma_j less a constant, K = 1 / kappa = 1 / sum_j C_j,
    p_j = C_j / sum_l C_l. The mixture term has two limits in which it tends to a constant (K -> infinity, absorbed
    by E -> -infinity) plus a finite law, and `mixture_chart` (static) picks which one is a regular point:

    - `"linear"` (the default): p = softmax(kappa H p_tilt), gamma_j = exp(kappa gamma_tilt_j), T = K / S - n K
      (`linear_limit_term`); as kappa -> 0 (equal p, every gamma -> 1) T tends to the model
      n (mean(a) - sum_j a_j r_j - sum_j b_j r_j log r_j), a = H p_tilt, b = gamma_tilt: linear in r and r log r.
      Fits of designs whose mixtures lie near one reference crawl toward this limit in the log chart (issue 29).
    - `"log"`: gamma_j = kappa c_j, T = K / S - K = q exprel(kappa q), q = -(1/kappa) log sum_j p_j r_j^gamma_j
      (`inverse_power_mean_term`); as kappa -> 0 (every gamma -> 0) T tends to the log law -sum_j p_j c_j log r_j;
      c = 0 (the term off) and p_j = 0 (a dataset without weight in the term) are finite points too.

    E1 = E + A + B + K ("log") or E + A + B + n K ("linear") is the level at the reference point. The free
    coordinates are E1 and the square roots of b_A, alpha, b_B, beta and kappa, with p_tilt and gamma_tilt
    ("linear") or the roots of p and c ("log"): a term off (b = 0), a log law in size (alpha -> 0 with A alpha
    finite, E -> -infinity) and the chart's limit of the mixture term are finite points. It is the same function as
    the paper's for every finite parameter value in either chart (mixtures on the simplex); E itself may be any real
    number (it is -infinity in a limit). `loss_scale` s_L, `size_scale` s_N and `tokens_scale` s_D are static
    units, set from the data by `fit` (`with_data_scales`); `params()` reports the paper's values in the user's
    units.

    **Arguments** (`__call__`): `r` [P, n], `size` [P], and `tokens` [P] when `tokens=True`. **Returns**: [P].
    """

    UNITS = ("loss_scale", "size_scale", "tokens_scale")
    CHOICES = {"mixture_chart": MIXTURE_CHARTS}

    E1: Float[Array, "*batch"]
    root_bA: Float[Array, "*batch"]  # sqrt(A alpha)
    raw_alpha: Float[Array, "*batch"]  # sqrt(alpha)
    root_bB: Float[Array, "*batch"] | None  # sqrt(B beta)
    raw_beta: Float[Array, "*batch"] | None  # sqrt(beta)
    p_roots: Float[Array, "*batch n"] | None  # sqrt(C_j / sum C) ("log" chart)
    root_c: Float[Array, "*batch n"] | None  # sqrt(gamma_j / kappa) ("log" chart)
    root_kappa: Float[Array, "*batch"]  # sqrt(sum C)
    p_tilt: Float[Array, "*batch m"] | None = None  # H^T log(p) / kappa, m = n - 1 ("linear" chart)
    gamma_tilt: Float[Array, "*batch n"] | None = None  # log(gamma) / kappa ("linear" chart)
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
                f"SODMAdditive(tokens={self.tokens}) takes {2 + int(self.tokens)} inputs; got {2 + len(tokens)}"
            )
        loss = self.E1 + power_term(self.root_bA**2, self.raw_alpha**2, jnp.log(size / self.size_scale))
        if self.tokens:
            assert self.root_bB is not None and self.raw_beta is not None
            loss = loss + power_term(self.root_bB**2, self.raw_beta**2, jnp.log(tokens[0] / self.tokens_scale))
        return self.loss_scale * (loss + mixture_term(self, r))

    def params(self) -> dict[str, Array]:
        """The paper's E, A, alpha, C, gamma (and B, beta) in the user's units."""
        alpha = self.raw_alpha**2
        A = self.root_bA**2 / alpha  # in loss_scale units at the reference size
        level = A + mixture_constant(self)
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
        mixture_chart: str = "linear",
    ) -> SODMAdditive:
        """Build from the paper's values (A, alpha, C, gamma, B, beta > 0; E real); passing `B` and `beta` selects
        `tokens=True`; `mixture_chart` the chart of the mixture term (the same function in either)."""
        tokens = B is not None or beta is not None
        if tokens and (B is None or beta is None):
            raise ValueError("pass both `B` and `beta` (tokens=True) or neither (tokens=False)")
        settings = sodm_settings(tokens, size_scale, tokens_scale, loss_scale, mixture_chart)
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
        mixture = mixture_coordinates(p["C"], p["gamma"], s_L, settings["mixture_chart"])
        constant = chart_constant(settings["mixture_chart"], p["C"].shape[-1], jnp.sum(p["C"], axis=-1) * s_L)
        level = p["E"] / s_L + A_unit + constant
        root_bB = raw_beta = None
        if tokens:
            B_unit = p["B"] * jnp.exp(-p["beta"] * jnp.log(settings["tokens_scale"])) / s_L
            level = level + B_unit
            root_bB, raw_beta = jnp.sqrt(B_unit * p["beta"]), jnp.sqrt(p["beta"])
        return cls(
            E1=level,
            root_bA=jnp.sqrt(A_unit * p["alpha"]),
            raw_alpha=jnp.sqrt(p["alpha"]),
            root_bB=root_bB,
            raw_beta=raw_beta,
            **mixture,
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
    ) -> SODMAdditive:
        """A random start, in units of the law (`loss_scale`, `size_scale`, `tokens_scale`): A and B in [0.05, 2],
        exponents in [0.05, 1.5]; the mixture term as `sample_mixture` draws it in `mixture_chart` ("log": E in
        [0.5, 3], C in [1, 10], gamma in [0.1, 1]; "linear": E + n K in [0.5, 3], near the linear limit)."""
        n_datasets = count(n_datasets, "n_datasets")
        keys = jax.random.split(key, 6)
        E = jnp.exp(log_uniform(keys[0], (), 0.5, 3.0))
        A = jnp.exp(log_uniform(keys[1], (), 0.05, 2.0))
        alpha = jnp.exp(log_uniform(keys[2], (), 0.05, 1.5))
        B = jnp.exp(log_uniform(keys[3], (), 0.05, 2.0))
        beta = jnp.exp(log_uniform(keys[4], (), 0.05, 1.5))
        settings = sodm_settings(tokens, size_scale, tokens_scale, loss_scale, mixture_chart)
        mixture, constant = sample_mixture(keys[5], n_datasets, settings["mixture_chart"])
        return cls(
            E1=E + A + (B if tokens else 0.0) + constant,
            root_bA=jnp.sqrt(A * alpha),
            raw_alpha=jnp.sqrt(alpha),
            root_bB=jnp.sqrt(B * beta) if tokens else None,
            raw_beta=jnp.sqrt(beta) if tokens else None,
            **mixture,
            **settings,
        )

    def with_data_scales(self, inputs: tuple[Any, ...], y: Any) -> dict[str, float]:
        """The units of a fit (see `AbstractLaw.with_data_scales`)."""
        return sodm_data_scales(self, inputs, y)

    def size_parameters(self) -> tuple[int, int]:
        """Size is `inputs[1]`; E, A and alpha describe the size dependence."""
        return 1, 3

    def structure(self) -> dict[str, Any]:
        return sodm_structure(self)
