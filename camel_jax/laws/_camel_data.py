"""CAMEL with a data term: mixture effects that do not vanish with model size (issue 15)."""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._base import (
    UNCONVERGED_HINT,
    AbstractLaw,
    as_leaves,
    count,
    log_uniform,
    positive_inverse,
    positive_number,
    safe_log,
    simplex_from_roots,
    simplex_roots,
)
from ._camel import (
    CAPACITY_EXPONENT,
    beta_inverse,
    beta_value,
    box_cox_term,
    data_scale,
    exprel,
    resolve_beta_max,
    resolve_bound,
    size_anchor,
    square_inverse,
    start_beta,
    tied_alpha,
)
from ._terms import from_helmert, to_helmert

# The data term's forms (`CAMELData`'s `data_term`): "domains", per intrinsic domain G_i (eta_i D)^-gamma_i (the
# default, and the only form up to format 8); "linear", a mixture effect linear in r (without tokens only; issue 29).
DATA_TERMS = ("domains", "linear")
# The default bound on the "domains" data term's own exponents gamma_i (`gamma_max`; issue 29): without it the fits
# of a design near one reference mixture end in a spike, gamma_i -> infinity with G_i -> 0 (a term that fits one
# mixture), at infinity; within it they stop, and extrapolate better (see the class docstring).
GAMMA_MAX = 3.0
# An exponent (a capacity term's beta_i, a data term's gamma_i) below this: the term is its log law to about u / 2
# relative, u = beta_i |z| (gamma_i |y|), 5e-6 for |z| <= 10 (sizes or tokens spanning e^10, 22,000-fold, beyond
# any table's trained range), and the paper's K_i (G_i) >= 1e6 b_i (h_i) and C are where the coordinates stopped,
# not estimates (`CAMELData.log_limit_terms`). 1e-6, as `CAMELMixture`'s LOG_LIMIT_ALPHA (CAMEL's 1e-8 left a gap
# there: a converged term at 1.55e-8 had K beyond 1e6); tied CAMELData's fits of 5Mix's 22 losses (issue 56) stopped
# at exponents of 0 to 7e-15 (23 terms) or above 6.6e-4, none between.
LOG_LIMIT_EXPONENT = 1e-6


def resolve_gamma_max(gamma_max: Any, own_exponents: bool) -> float | None:
    """The bound on gamma a law is fitted within, checked: "default" gives `GAMMA_MAX` where the data term has its
    own exponents ("domains" without `shared_exponents`) and None elsewhere; None: no bound."""
    why = ('`gamma_max` bounds the "domains" data term\'s own exponents: give None with shared_exponents=True or '
           'data_term="linear"')  # fmt: skip
    return resolve_bound(gamma_max, "gamma_max", GAMMA_MAX, own_exponents, why)


def mean_mixture(r: Any) -> tuple[float, ...]:
    """The mixture the profiles' shares are measured from (`CAMELData`'s `mixture_center`): the rows' mean, mixed
    with 1% of the uniform mixture so that every share is > 0, to 4 decimals (a static unit: a design's resamples
    and folds share it, and so their compiled programs)."""
    mean = np.mean(np.asarray(r, dtype=float), axis=0)
    return tuple(float(x) for x in np.round(0.99 * mean + 0.01 / len(mean), 4))


def log_center(t: Array, center: tuple[float, ...] | None) -> Array:
    """log eta_i at `center` [..., k] (0 without a center: shares measured from the origin, as up to format 11)."""
    t = jnp.asarray(t)
    if center is None:
        return jnp.zeros(t.shape[:-1], t.dtype)
    return safe_log(jnp.einsum("...kn,n->...k", t, jnp.asarray(center, t.dtype)))


def resolve_data_term(data_term: Any, tokens: bool, shared_exponents: bool) -> str:
    """A checked `data_term`: "linear" needs tokens=False and no `shared_exponents` (a property of the per-domain
    term)."""
    if not isinstance(data_term, str) or data_term not in DATA_TERMS:
        raise ValueError(f"`data_term` must be one of {DATA_TERMS}; got {data_term!r}")
    if data_term == "linear" and tokens:
        raise ValueError('`data_term="linear"` is a mixture effect without tokens: pass tokens=False, or use the '
                         '"domains" data term')  # fmt: skip
    if data_term == "linear" and shared_exponents:
        raise ValueError('`shared_exponents` applies to the "domains" data term (gamma_i = alpha_i); the "linear" '
                         "one has no exponents")  # fmt: skip
    return data_term


def _given_data_term(G: Any, d: Any, gamma: Any, data_term: Any, tokens: bool, shared_exponents: bool) -> str:
    """`from_params`' data term: the one whose parameters are given (`G` or `d`, exactly one), checked against an
    explicit `data_term`."""
    if (G is None) == (d is None):
        raise ValueError('give `G` (the "domains" data term) or `d` (the "linear" one), not both or neither')
    given = "domains" if d is None else "linear"
    wanted = given if data_term is None else resolve_data_term(data_term, tokens, shared_exponents)
    if wanted != given:
        needs = {"domains": "`G` (and `gamma`)", "linear": "`d`"}[wanted]
        raise ValueError(f"`data_term={data_term!r}` is built from {needs}")
    if d is not None and gamma is not None:
        raise ValueError('`gamma` belongs to the "domains" data term; the "linear" one has none')
    return resolve_data_term(given, tokens, shared_exponents)


class CAMELData(AbstractLaw):
    """CAMEL plus a per-domain data term.

        L(r, M, D) = C + sum_i K_i / (eta_i^alpha_i M^beta_i) + sum_i G_i / (eta_i D)^gamma_i,   eta_i = <t_i, r>

    The capacity part is CAMEL's (Li, Gu & Zhang 2026, Theorem 1), with the same profiles `t` [k, n] (columns on
    the simplex) and the same `tied` option (alpha_i = (beta_i/c) / (1 + beta_i/c)). The data term says that
    intrinsic domain i's loss also falls with the tokens it receives, eta_i D; it does not shrink with M, which is
    what real tables show (dmsl_shukor2025: the per-domain spread across mixtures barely changes from 122M to
    1.2B parameters). With `shared_exponents=True` the data term reuses the mixture exponents (gamma_i = alpha_i).

    With `tokens=False` the law is `law(r, M)` and the data term is evaluated at one fixed D: the paper's setting,
    where every size is trained on the same cooldown, makes it a pure mixture effect, a function of r that does not
    shrink with M. `data_term` (static) picks its form:

    - `"domains"` (the default, and the only form up to format 8): sum_i G_i eta_i^-gamma_i, D folded into G.
    - `"linear"` (opt-in, tokens=False only): sum_j d_j r_j, with d summing to 0 (its mean is C's),

          L(r, M) = C + sum_i K_i / (eta_i^alpha_i M^beta_i) + sum_j d_j r_j.

      Measured (issue 29; 32 default starts, tied, k=3): on the paper's 66-run design (11 mixtures near one
      reference) the per-domain term shares its profile t_i with the capacity terms and is seen only through its
      first-order effect, so its fits run along valleys (a profile row toward 0 with the amplitudes growing,
      gamma_i -> infinity with G_i -> 0, a capacity term at beta -> 0 trading with a data term) and through
      saddles: 4% of the starts converged over 11 worlds, no best start (before format 12's shares from the data's
      mean and bound on gamma, below: 93% since). The linear term, separate from the
      profiles and linear in its coefficients: 75% (every best start but one), and a lower held-out error against
      the truth (M=12 0.186% -> 0.163%, M=20 1.25% -> 0.42%). On dmsl_shukor2025 (mixtures far apart; 122M-1.2B,
      held out at 2.7B) it converges in every start of every domain (per-domain term: 0-28%), but extrapolates
      worse on 5 of 7 domains (mean 2.23% -> 2.55%; c4 0.80% -> 0.70%): a linear term describes mixtures near one
      reference, not the whole simplex. Hence not the default.

    **Parameterization**: as CAMEL's (see `CAMEL`), every power term is written in the form that stays finite in
    its log-law limit, K (exp(-u) - 1) = -w (exp(-u) - 1) / (-u): the capacity terms with w = b z, u = beta z,
    z = g log eta + log(M / s_M) (b = K beta, g = alpha / beta), the data terms with w = h y, u = gamma y,
    y = log eta + log(D / s_D) (h = G gamma), and L = s_L (C1 + sum of terms), C1 = C + sum K + sum G (the linear
    data term: s_L e . r, e = H d_tilt, H the Helmert basis, so that e sums to 0, and C1 = C + mean(d) + sum K). The
    free coordinates are square roots of b, h, beta, gamma, g and of the profiles, so that b = 0, h = 0 (a term
    off), beta = 0, gamma = 0 (log laws) and t_ij = 0 are regular points. The shares are measured from the data's
    mean mixture c (`mixture_center`): log eta above is log(eta_i / <t_i, c>), so that b and h are the terms' slopes
    at the mixtures fitted, not at eta = 1 (the same functions: the factor <t_i, c>^alpha_i moves into K_i, and
    <t_i, c>^gamma_i into G_i). The data term's own exponents are bounded, gamma = `gamma_max` sin(raw)^2 (default
    3; None: raw^2, no bound). `loss_scale` s_L, `size_scale` s_M (the tied law: the smallest size, as `CAMEL`'s),
    `tokens_scale` s_D and `mixture_center` c are static units, set from the data by `fit` (`with_data_scales`).
    `beta_max` bounds beta as `CAMEL`'s does (opt-in). In a log-law limit the paper's K_i (G_i) is infinite and C
    minus infinite: `log_limit_terms` and `log_limit_data_terms` say which terms are there, `log_limit_params` gives
    the finite coordinates.

    Measured (issue 29; tied, k=3, no tokens, 32 default starts on the paper's 66-run design, 11 worlds): shares
    from the origin and gamma unbounded, 4% of the starts converged (0-19%), and the fits ran along valleys to a
    spike (gamma_i -> 40-120 with G_i -> 0); from the data's mean, 76% (62-88%) at a lower objective; with gamma
    <= 3 too, 80% (66-94%), and the held-out error against the truth fell from 0.185% to 0.174% at M=12 and from
    1.25% to 1.00% at M=20; with the size unit at the smallest size and 1,000 Newton steps (`default_polish`), the
    defaults, 93% (84-100%), 0.175% and 1.04% (docs/performance.md).

    **Arguments** (`__call__`): `r` [P, n] rows on the simplex, `size` [P] > 0, and `tokens` [P] > 0 when
    `tokens=True`. **Returns**: predicted loss, [P].
    """

    UNITS = ("loss_scale", "size_scale", "tokens_scale", "mixture_center")
    UPPER_BOUNDS = {"beta": "beta_max", "gamma": "gamma_max"}

    t_roots: Float[Array, "*batch k n"]
    root_b: Float[Array, "*batch k"]
    raw_alpha: Float[Array, "*batch k"] | None  # free law: sqrt(alpha / beta)
    raw_beta: Float[Array, "*batch k"]  # sqrt(beta)
    C1: Float[Array, "*batch"]
    root_h: Float[Array, "*batch k"] | None  # sqrt(G gamma) of the "domains" data term
    raw_gamma: Float[Array, "*batch k"] | None  # sqrt(gamma), unless shared_exponents
    tied: bool = eqx.field(static=True, default=False)
    shared_exponents: bool = eqx.field(static=True, default=False)
    tokens: bool = eqx.field(static=True, default=True)
    capacity_exponent: float = eqx.field(static=True, default=CAPACITY_EXPONENT)
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)
    loss_scale: float = eqx.field(static=True, default=1.0)
    beta_max: float | None = eqx.field(static=True, default=None)  # None: no upper bound (the default)
    d_tilt: Float[Array, "*batch m"] | None = None  # the "linear" data term's coefficients, in the Helmert basis
    data_term: str = eqx.field(static=True, default="domains")
    gamma_max: float | None = eqx.field(static=True, default=None)  # None: gamma = raw^2 (files up to format 11)
    mixture_center: tuple[float, ...] | None = eqx.field(static=True, default=None)  # None: from the origin

    CHOICES = {"data_term": DATA_TERMS}

    @property
    def t(self) -> Array:
        return simplex_from_roots(self.t_roots, axis=-2)

    @property
    def beta(self) -> Array:
        return beta_value(self.raw_beta, None, self.beta_max)

    @property
    def ratio(self) -> Array:
        """g_i = alpha_i / beta_i: 1 / (c + beta_i) when tied, else a free coordinate."""
        if self.tied:
            return 1.0 / (self.capacity_exponent + self.beta)
        assert self.raw_alpha is not None
        return self.raw_alpha * self.raw_alpha

    @property
    def alpha(self) -> Array:
        if self.tied:
            return tied_alpha(self.beta, self.capacity_exponent)
        return self.beta * self.ratio

    @property
    def gamma(self) -> Array:
        if self.shared_exponents:
            return self.alpha
        assert self.raw_gamma is not None
        return beta_value(self.raw_gamma, None, self.gamma_max)

    def term_variables(self, r: Float[Array, "P n"]) -> Float[Array, "P k"]:
        """[P, k]: log <t_i, r>, each term's effective intrinsic-domain weight, whose trained range bounds where the
        terms were measured (`FitResult.outside_support`)."""
        return safe_log(jnp.asarray(r) @ self.t.T)

    def __call__(
        self, r: Float[Array, "P n"], size: Float[Array, " P"], *tokens: Float[Array, " P"]
    ) -> Float[Array, " P"]:
        if len(tokens) != int(self.tokens):
            raise TypeError(
                f"CAMELData(tokens={self.tokens}) takes {2 + int(self.tokens)} inputs; got {2 + len(tokens)}"
            )
        log_eta = safe_log(r @ self.t.T) - log_center(self.t, self.mixture_center)[None, :]  # [P, k], from the center
        z = self.ratio[None, :] * log_eta + jnp.log(size / self.size_scale)[:, None]
        capacity = -(self.root_b * self.root_b)[None, :] * z * exprel(-self.beta[None, :] * z)
        level = self.C1 + jnp.sum(capacity, axis=-1)
        if self.data_term == "linear":
            return self.loss_scale * (level + r @ self.d)
        assert self.root_h is not None
        y = log_eta + (jnp.log(tokens[0] / self.tokens_scale)[:, None] if self.tokens else 0.0)
        data = -(self.root_h * self.root_h)[None, :] * y * exprel(-self.gamma[None, :] * y)
        return self.loss_scale * (level + jnp.sum(data, axis=-1))

    @property
    def d(self) -> Array:
        """The linear data term's coefficients e = H d_tilt (summing to 0), in units of `loss_scale`."""
        assert self.d_tilt is not None
        return from_helmert(self.d_tilt)

    def params(self) -> dict[str, Array]:
        """The paper's t, K, alpha, beta, C and the data term's G, gamma ("domains") or d ("linear", summing to 0),
        in the user's units."""
        beta = self.beta
        K = self.root_b * self.root_b / beta
        G = None if self.root_h is None else self.root_h * self.root_h / self.gamma  # "linear": no G
        level = self.C1 - jnp.sum(K, axis=-1) - (0.0 if G is None else jnp.sum(G, axis=-1))
        log_c = log_center(self.t, self.mixture_center)
        capacity = {
            "t": self.t,
            "K": self.loss_scale * K * jnp.exp(beta * jnp.log(self.size_scale) + self.alpha * log_c),
            "alpha": self.alpha,
            "beta": beta,
            "C": self.loss_scale * level,
        }
        if G is None:
            return capacity | {"d": self.loss_scale * self.d}
        log_D = jnp.log(self.tokens_scale) if self.tokens else 0.0
        return capacity | {"G": self.loss_scale * G * jnp.exp(self.gamma * (log_D + log_c)), "gamma": self.gamma}

    def log_limit_terms(self) -> Array:
        """Which capacity terms sit in their log-law limit: beta_i below `LOG_LIMIT_EXPONENT` (1e-6), where the term
        equals its log law -b_i [g_i log(eta_i / eta0_i) + log(M / M0)] to about beta_i |z| / 2 relative over the
        trained range, and the paper's K_i (>= 1e6 b_i, or infinite) and C (minus as much) are where the
        coordinates stopped, not estimates: report `log_limit_params` there. The data terms' limit is
        `log_limit_data_terms`.

        **Returns**: [k] booleans (with the law's batch axes).
        """
        return self.beta < LOG_LIMIT_EXPONENT

    def log_limit_data_terms(self) -> Array:
        """Which data terms sit in their log-law limit: gamma_i below `LOG_LIMIT_EXPONENT` (1e-6), where the term
        equals its log law -h_i [log(eta_i / eta0_i) + log(D / D0)] (without tokens: -h_i log(eta_i / eta0_i)) and
        the paper's G_i (>= 1e6 h_i, or infinite) and C are where the coordinates stopped, not estimates. None is,
        for the "linear" data term (no exponent).

        **Returns**: [k] booleans (with the law's batch axes).
        """
        if self.root_h is None:
            return jnp.zeros(self.root_b.shape, bool)
        return self.gamma < LOG_LIMIT_EXPONENT

    def log_limit_params(self) -> dict[str, Array]:
        """The finite coordinates that stand for the paper's K, G and C, in the user's units of loss, measured at the
        reference point (size M0 = `size_scale`, tokens D0 = `tokens_scale`, mixture c = `mixture_center`, eta0_i =
        <t_i, c>; eta0_i = 1 without a center):

        - `b` [k]: b_i = K_i beta_i, the capacity term's log-law coefficient of log(M / M0);
        - `a` [k]: a_i = b_i alpha_i / beta_i, its coefficient of log(eta_i / eta0_i);
        - `kappa` [k]: beta_i / b_i, 1 / the capacity term's amplitude at the reference point (0 in the limit);
        - `h` [k] and `nu` [k] ("domains" data term): h_i = G_i gamma_i, its log-law coefficient of
          log(eta_i / eta0_i) + log(D / D0), and nu_i = gamma_i / h_i, 1 / its amplitude at the reference point;
        - `C1`: the loss at the reference point (C + sum_i K_i + sum_i G_i there; the "linear" data term:
          C + mean(d) + sum_i K_i, the level of s_L e . r);
        - `reference_size`, and `reference_tokens` (tokens=True) and `reference_mixture` [n] (with a center).

        **Returns**: {name: array}, with the law's batch axes.
        """
        scale, b, beta = self.loss_scale, self.root_b * self.root_b, self.beta
        out = {"a": scale * b * self.ratio, "b": scale * b, "kappa": beta / b / scale}
        if self.root_h is not None:
            h = self.root_h * self.root_h
            out |= {"h": scale * h, "nu": self.gamma / h / scale}
        out |= {"C1": scale * self.C1, "reference_size": jnp.asarray(self.size_scale)}
        if self.tokens:
            out["reference_tokens"] = jnp.asarray(self.tokens_scale)
        if self.mixture_center is not None:
            out["reference_mixture"] = jnp.asarray(self.mixture_center)
        return out

    def in_units(self, **units: Any) -> CAMELData:
        """The same function (batch axes kept) stored in other units (`UNITS`: `loss_scale`, `size_scale`,
        `tokens_scale`, `mixture_center`), moved in the law's own coordinates, so that a term in its log-law limit
        (K_i or G_i infinite) or switched off (b_i = 0) moves exactly too: a new reference point shifts each term's
        variable by a constant delta, b_i (exp(-beta_i z) - 1) / beta_i with z = z' + delta is b'_i (exp(-beta_i z')
        - 1) / beta_i, b'_i = b_i exp(-beta_i delta), plus a constant that joins the level (the data terms alike).

        **Arguments**:

        - `units`: the new values of some of `loss_scale`, `size_scale`, `tokens_scale`, `mixture_center`.

        **Returns**: the law in the new units, its exponents, profiles and bounds unchanged.
        """
        unknown = sorted(set(units) - set(self.UNITS))
        if unknown:
            raise ValueError(f"CAMELData.in_units takes its units {list(self.UNITS)}; got {unknown}")
        loss_scale = positive_number(units.get("loss_scale", self.loss_scale), "loss_scale")
        size_scale = positive_number(units.get("size_scale", self.size_scale), "size_scale")
        tokens_scale = positive_number(units.get("tokens_scale", self.tokens_scale), "tokens_scale")
        center = _center(units.get("mixture_center", self.mixture_center), int(self.t_roots.shape[-1]))
        ratio = self.loss_scale / loss_scale
        shift = log_center(self.t, center) - log_center(self.t, self.mixture_center)  # log <t_i, c'> / <t_i, c>
        delta = self.ratio * shift + jnp.log(size_scale / self.size_scale)  # z = z' + delta
        b, beta = self.root_b * self.root_b, self.beta
        level = self.C1 + jnp.sum(box_cox_term(b, beta, delta), axis=-1)
        fields: dict[str, Any] = {"root_b": jnp.sqrt(ratio * b * jnp.exp(-beta * delta))}
        if self.root_h is not None:
            tokens = jnp.log(tokens_scale / self.tokens_scale) if self.tokens else 0.0
            delta_y, h, gamma = shift + tokens, self.root_h * self.root_h, self.gamma  # y = y' + delta_y
            level = level + jnp.sum(box_cox_term(h, gamma, delta_y), axis=-1)
            fields["root_h"] = jnp.sqrt(ratio * h * jnp.exp(-gamma * delta_y))
        if self.d_tilt is not None:
            fields["d_tilt"] = ratio * self.d_tilt
        fields |= dict(loss_scale=loss_scale, size_scale=size_scale, tokens_scale=tokens_scale, mixture_center=center)
        return dataclasses.replace(self, **fields, C1=ratio * level)

    @classmethod
    def from_params(
        cls,
        *,
        t: ArrayLike,
        K: ArrayLike,
        beta: ArrayLike,
        C: ArrayLike,
        G: ArrayLike | None = None,
        d: ArrayLike | None = None,
        alpha: ArrayLike | None = None,
        gamma: ArrayLike | None = None,
        tied: bool = False,
        shared_exponents: bool = False,
        tokens: bool = True,
        capacity_exponent: float = CAPACITY_EXPONENT,
        size_scale: float = 1.0,
        tokens_scale: float = 1.0,
        loss_scale: float = 1.0,
        beta_max: float | None = None,
        data_term: str | None = None,
        gamma_max: float | None | str = "default",
        mixture_center: ArrayLike | None = None,
    ) -> CAMELData:
        """Build from constrained values: the "domains" data term from `G` (and `gamma`), the "linear" one from `d`
        [n] (any d: its mean joins C); `data_term` None: the one whose parameters are given. A derived exponent
        (alpha when `tied`, gamma when `shared_exponents`) may be passed only if it agrees, so that
        `from_params(**law.params(), **law.structure()...)` round-trips. `beta_max`, `gamma_max`,
        `mixture_center`: see `sample_init`."""
        settings = _settings(tied, shared_exponents, tokens, capacity_exponent, size_scale, tokens_scale, loss_scale)
        settings["beta_max"] = resolve_beta_max(beta_max)
        settings["data_term"] = _given_data_term(G, d, gamma, data_term, tokens, shared_exponents)
        settings |= _data_units(settings["data_term"], shared_exponents, gamma_max, mixture_center, jnp.shape(t)[-1])
        if d is not None:
            return _linear_from_params(t, K, beta, C, d, alpha, tied, settings)
        ndims = {"t": 2, "K": 1, "beta": 1, "C": 0, "G": 1}
        values: dict[str, Any] = {"t": t, "K": K, "beta": beta, "C": C, "G": G}
        for name, value, derived, setting in (("alpha", alpha, tied, "tied=True"),
                                              ("gamma", gamma, shared_exponents, "shared_exponents=True")):  # fmt: skip
            if not derived and value is None:
                raise ValueError(f"`{name}` is required unless {setting}")
            if not derived:
                ndims[name], values[name] = 1, value
        p = as_leaves(ndims, values)
        positive_inverse(p["beta"], None, "beta")
        alpha_ = tied_alpha(p["beta"], settings["capacity_exponent"]) if tied else p["alpha"]
        _check_derived("alpha", alpha, alpha_ if tied else None, "tied=True")
        gamma_ = alpha_ if shared_exponents else p["gamma"]
        _check_derived("gamma", gamma, gamma_ if shared_exponents else None, "shared_exponents=True")
        positive_inverse(alpha_, None, "alpha")
        positive_inverse(gamma_, None, "gamma")
        log_c, scale = log_center(p["t"], settings["mixture_center"]), settings["loss_scale"]
        K_unit = _capacity_unit(p, alpha_, log_c, settings)
        log_D = jnp.log(settings["tokens_scale"]) if tokens else 0.0
        G_unit = jnp.exp(positive_inverse(p["G"], None, "G") - gamma_ * (log_D + log_c)) / scale  # G_i at s_D, c
        return cls(
            t_roots=simplex_roots(p["t"], axis=-2, name="t"),
            root_b=jnp.sqrt(K_unit * p["beta"]),
            raw_alpha=None if tied else jnp.sqrt(alpha_ / p["beta"]),
            raw_beta=beta_inverse(p["beta"], None, settings["beta_max"]),
            C1=p["C"] / scale + jnp.sum(K_unit, axis=-1) + jnp.sum(G_unit, axis=-1),
            root_h=jnp.sqrt(G_unit * gamma_),
            raw_gamma=None if shared_exponents else square_inverse(gamma_, settings["gamma_max"], "parameter `gamma`",
                                                                   "gamma_max"),
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
        capacity_exponent: float = CAPACITY_EXPONENT,
        size_scale: float = 1.0,
        tokens_scale: float = 1.0,
        loss_scale: float = 1.0,
        beta_max: float | None = None,
        data_term: str = "domains",
        gamma_max: float | None | str = "default",
        mixture_center: ArrayLike | None = None,
    ) -> CAMELData:
        """A random start in the law's units: profiles near uniform, the level C1 in [0.8, 1.2], slopes b and h in
        [0.003, 0.3], beta (at most 0.9 `beta_max`) and gamma in [0.05, 1.5] (at most 0.9 `gamma_max`) and (free
        law) alpha / beta in [0.1, 3]; the linear data term's coefficients 0.01 N(0, 1). `beta_max`: an upper bound
        on beta (None, the default: none; see `CAMEL`). `data_term`: "domains" (the default) or "linear"
        (tokens=False; see the class docstring). `gamma_max`: the bound on the "domains" data term's own exponents
        ("default": `GAMMA_MAX` = 3; None: none). `mixture_center`: the mixture [n] the shares are measured from
        (None: the origin; `fit` sets the data's mean mixture, see `mixture_center`)."""
        n_datasets, n_domains = count(n_datasets, "n_datasets"), count(n_domains, "n_domains")
        settings = _settings(tied, shared_exponents, tokens, capacity_exponent, size_scale, tokens_scale, loss_scale)
        settings["beta_max"] = beta_max = resolve_beta_max(beta_max)
        settings["data_term"] = resolve_data_term(data_term, tokens, shared_exponents)
        settings |= _data_units(settings["data_term"], shared_exponents, gamma_max, mixture_center, n_datasets)
        bound: float | None = settings["gamma_max"]
        k_t, k_b, k_a, k_beta, k_C, k_h, k_g = jax.random.split(key, 7)
        shape = (n_domains,)
        linear = settings["data_term"] == "linear"
        gamma0 = jax.random.uniform(k_g, shape, minval=0.05, maxval=1.5)
        gamma0 = gamma0 if bound is None else jnp.minimum(gamma0, 0.9 * bound)
        gamma = None if shared_exponents else square_inverse(gamma0, bound, "gamma", "gamma_max")
        term_fields: dict[str, Any] = (
            dict(root_h=None, raw_gamma=None, d_tilt=0.01 * jax.random.normal(k_h, (n_datasets - 1,)))
            if linear
            else dict(root_h=jnp.exp(0.5 * log_uniform(k_h, shape, 0.003, 0.3)), raw_gamma=gamma)
        )
        return cls(
            t_roots=jnp.sqrt(jax.nn.softmax(jax.random.normal(k_t, (n_domains, n_datasets)), axis=0)),
            root_b=jnp.exp(0.5 * log_uniform(k_b, shape, 0.003, 0.3)),
            raw_alpha=None if tied else jnp.exp(0.5 * log_uniform(k_a, shape, 0.1, 3.0)),
            raw_beta=beta_inverse(start_beta(k_beta, shape, beta_max), None, beta_max),
            C1=jax.random.uniform(k_C, (), minval=0.8, maxval=1.2),
            **term_fields,
            **settings,
        )

    def with_data_scales(self, inputs: tuple[Any, ...], y: Any) -> dict[str, Any]:
        """The units of a fit (see `AbstractLaw.with_data_scales`): the orders of magnitude of the targets, the
        sizes and (with `tokens`) the tokens, and the mixture the shares are measured from (the rows' mean)."""
        sizes = size_anchor(inputs[1]) if self.tied else data_scale(inputs[1])
        scales: dict[str, Any] = {"loss_scale": data_scale(y), "size_scale": sizes,
                                  "mixture_center": mean_mixture(inputs[0])}  # fmt: skip
        if self.tokens:
            scales["tokens_scale"] = data_scale(inputs[2])
        return scales

    def size_parameters(self) -> tuple[int, int]:
        """Size is `inputs[1]`; C and the k exponents beta describe the size dependence."""
        return 1, int(self.raw_beta.shape[-1]) + 1

    def default_polish(self) -> int | None:
        """1,000 Newton steps for the "domains" data term without tokens: on the paper's 66-run design (11 worlds,
        32 default starts, the size unit a power of ten) 80% of the starts met the first-order rule within the
        default 300 and 92% within 1,000, at 3.1 s instead of 1.9 s per fit (median, 2 CPU cores); None (the
        `FitOptions` default) otherwise."""
        return 1000 if self.data_term == "domains" and not self.tokens else None

    def unconverged_hint(self) -> str:
        """Without tokens the per-domain data term and the capacity terms both describe the mixture effect, and a
        start can run along the flat valleys where they trade (see the class docstring)."""
        if self.tokens or self.data_term != "domains":
            return UNCONVERGED_HINT
        return (
            "without tokens its data term and its capacity terms both describe the mixture effect, and a start can "
            "run along the flat valleys where they trade: raise FitOptions(polish=...) (1,000 by default here) or "
            'give more restarts, give the runs\' tokens (tokens=True), use data_term="linear", or fit tied CAMEL'
        )

    def structure(self) -> dict[str, Any]:
        k, n = self.t_roots.shape[-2:]
        return {
            "n_datasets": n,
            "n_domains": k,
            "tied": self.tied,
            "shared_exponents": self.shared_exponents,
            "tokens": self.tokens,
            "capacity_exponent": self.capacity_exponent,
            "size_scale": self.size_scale,
            "tokens_scale": self.tokens_scale,
            "loss_scale": self.loss_scale,
            "beta_max": self.beta_max,
            "data_term": self.data_term,
            "gamma_max": self.gamma_max,
            "mixture_center": self.mixture_center,
        }


def _settings(
    tied: bool,
    shared_exponents: bool,
    tokens: bool,
    capacity_exponent: float,
    size_scale: float,
    tokens_scale: float,
    loss_scale: float,
) -> dict[str, Any]:
    """The static settings, checked."""
    return {
        "tied": bool(tied),
        "shared_exponents": bool(shared_exponents),
        "tokens": bool(tokens),
        "capacity_exponent": positive_number(capacity_exponent, "capacity_exponent"),
        "size_scale": positive_number(size_scale, "size_scale"),
        "tokens_scale": positive_number(tokens_scale, "tokens_scale"),
        "loss_scale": positive_number(loss_scale, "loss_scale"),
    }


def _capacity_unit(p: dict[str, Array], alpha: Array, log_c: Array, settings: dict[str, Any]) -> Array:
    """The capacity terms' amplitudes in the law's units, K_i / (s_L s_M^beta_i <t_i, c>^alpha_i) (log_c: log <t_i, c>,
    `log_center`): each term's value at the size unit and the mixture center (K checked > 0)."""
    K_log = positive_inverse(p["K"], None, "K") - p["beta"] * jnp.log(settings["size_scale"]) - alpha * log_c
    return jnp.exp(K_log) / settings["loss_scale"]


def _data_units(data_term: str, shared_exponents: bool, gamma_max: Any, center: Any, n_datasets: int) -> dict:
    """The checked `gamma_max` (see `resolve_gamma_max`) and `mixture_center` (see `_center`)."""
    own = data_term == "domains" and not shared_exponents
    return {"gamma_max": resolve_gamma_max(gamma_max, own), "mixture_center": _center(center, n_datasets)}


def _center(center: Any, n_datasets: int) -> tuple[float, ...] | None:
    """A checked `mixture_center`: None, or n_datasets finite shares > 0 (a static tuple)."""
    if center is None:
        return None
    values = np.asarray(center, dtype=float).reshape(-1)
    if values.shape != (n_datasets,) or not np.all(np.isfinite(values) & (values > 0)):
        raise ValueError(f"`mixture_center` must be {n_datasets} finite shares > 0; got {center!r:.80}")
    return tuple(float(x) for x in values)


def _check_derived(name: str, given: ArrayLike | None, derived: Array | None, setting: str) -> None:
    """A derived exponent may be passed (a round trip of params()) only if it agrees with its derivation."""
    if derived is None or given is None or isinstance(given, jax.core.Tracer) or isinstance(derived, jax.core.Tracer):
        return
    if not bool(jnp.allclose(jnp.asarray(given), derived, rtol=1e-8)):
        raise ValueError(f"`{name}` is determined when {setting}; the given {name} disagrees: omit it")


def _linear_from_params(t: ArrayLike, K: ArrayLike, beta: ArrayLike, C: ArrayLike, d: ArrayLike,
                        alpha: ArrayLike | None, tied: bool, settings: dict[str, Any]) -> CAMELData:  # fmt: skip
    """`CAMELData.from_params` of the "linear" data term: d's mean joins the level (rows of r sum to 1)."""
    ndims = {"t": 2, "K": 1, "beta": 1, "C": 0, "d": 1}
    values: dict[str, Any] = {"t": t, "K": K, "beta": beta, "C": C, "d": d}
    if not tied:
        if alpha is None:
            raise ValueError("`alpha` is required unless tied=True")
        ndims["alpha"], values["alpha"] = 1, alpha
    p = as_leaves(ndims, values)
    positive_inverse(p["beta"], None, "beta")
    alpha_ = tied_alpha(p["beta"], settings["capacity_exponent"]) if tied else p["alpha"]
    _check_derived("alpha", alpha, alpha_ if tied else None, "tied=True")
    positive_inverse(alpha_, None, "alpha")
    scale = settings["loss_scale"]
    K_unit = _capacity_unit(p, alpha_, log_center(p["t"], settings["mixture_center"]), settings)
    d_unit = p["d"] / scale
    mean = jnp.mean(d_unit, axis=-1)
    return CAMELData(
        t_roots=simplex_roots(p["t"], axis=-2, name="t"),
        root_b=jnp.sqrt(K_unit * p["beta"]),
        raw_alpha=None if tied else jnp.sqrt(alpha_ / p["beta"]),
        raw_beta=beta_inverse(p["beta"], None, settings["beta_max"]),
        C1=p["C"] / scale + mean + jnp.sum(K_unit, axis=-1),
        root_h=None,
        raw_gamma=None,
        d_tilt=to_helmert(d_unit - mean[..., None]),
        **settings,
    )
