"""Laws as files of format versions 1 and 2 stored them, read only to convert them to today's parameterization.

Format 1 stored CAMEL's free coordinates as softmax logits of the profiles, log K (in units of `size_scale`),
log or bounded exponents and C. Format 2 stores the well-posed coordinates of `CAMEL` (see its docstring); a
version-1 file's CAMEL is rebuilt here with the old layout and converted by `from_params`, so old files load as the
same function. Format 3 does the same for SODMAdditive, SODMJoint, DML and Chinchilla (their format-1 and
format-2 layouts were the same: logs of the paper's positive parameters). Format 5 adds SODM's `mixture_chart`,
whose default became "linear": the SODM laws of files up to format 4 are rebuilt in the "log" chart they were
written in, the same coordinates. Format 6 adds DML's `t_max`, whose default is a bound: the DML laws of files up to
format 5 are rebuilt unbounded (t_max = None), the coordinates they were written in. Format 8 adds SODMJoint's
`coefficient_chart`, whose default became "uniform": its laws of files up to format 7 are rebuilt in the "roots"
chart they were written in. Format 9 adds CAMELData's `data_term`, whose default ("domains") is the layout of
earlier files: they load as they are.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from ._base import AbstractLaw, positive
from ._camel import CAMEL, tied_alpha
from ._camel_data import CAMELData
from ._camel_mixture import CAMELMixture
from ._chinchilla import Chinchilla
from ._dml import DML
from ._sodm_additive import SODMAdditive
from ._sodm_joint import SODMJoint


class LegacyCAMEL(eqx.Module):
    """CAMEL's format-1 layout (never fitted; `to_current` converts it)."""

    t_logits: Array
    log_K: Array
    raw_alpha: Array | None
    raw_beta: Array
    C: Array
    tied: bool = eqx.field(static=True, default=False)
    capacity_exponent: float = eqx.field(static=True, default=1.0)
    size_scale: float = eqx.field(static=True, default=1.0)
    alpha_bounds: tuple[float, float] | None = eqx.field(static=True, default=None)
    beta_bounds: tuple[float, float] | None = eqx.field(static=True, default=None)

    @classmethod
    def sample_init(
        cls,
        key: Array,
        *,
        n_datasets: int,
        n_domains: int,
        tied: bool = False,
        capacity_exponent: float = 1.0,
        size_scale: float = 1.0,
        alpha_bounds: tuple[float, float] | None = None,
        beta_bounds: tuple[float, float] | None = None,
    ) -> LegacyCAMEL:
        """The format-1 skeleton (shapes only matter: `load` fills the leaves)."""
        zeros = jnp.zeros((n_domains,))
        return cls(
            t_logits=jnp.zeros((n_domains, n_datasets)),
            log_K=zeros,
            raw_alpha=None if tied else zeros,
            raw_beta=zeros,
            C=jnp.zeros(()),
            tied=tied,
            capacity_exponent=float(capacity_exponent),
            size_scale=float(size_scale),
            alpha_bounds=None if alpha_bounds is None else tuple(alpha_bounds),  # type: ignore[arg-type]
            beta_bounds=None if beta_bounds is None else tuple(beta_bounds),  # type: ignore[arg-type]
        )

    def to_current(self) -> CAMEL:
        """The same function in today's `CAMEL` (batch axes kept)."""
        beta = jnp.exp(self.raw_beta) if self.beta_bounds is None else positive(self.raw_beta, self.beta_bounds)
        if self.tied:
            alpha = tied_alpha(beta, self.capacity_exponent)
        else:
            assert self.raw_alpha is not None
            alpha = (
                jnp.exp(self.raw_alpha) if self.alpha_bounds is None else positive(self.raw_alpha, self.alpha_bounds)
            )
        return CAMEL.from_params(
            t=jax.nn.softmax(self.t_logits, axis=-2),
            K=jnp.exp(self.log_K + beta * jnp.log(self.size_scale)),
            beta=beta,
            C=self.C,
            alpha=None if self.tied else alpha,
            tied=self.tied,
            capacity_exponent=self.capacity_exponent,
            size_scale=self.size_scale,
            beta_bounds=self.beta_bounds if self.tied else None,
        )


class LegacyCAMELData(eqx.Module):
    """CAMELData's format-1 layout: softmax logits, log K and G (in units of size and tokens scale), log exponents."""

    t_logits: Array
    log_K: Array
    raw_alpha: Array | None
    raw_beta: Array
    C: Array
    log_G: Array
    raw_gamma: Array | None
    tied: bool = eqx.field(static=True, default=False)
    shared_exponents: bool = eqx.field(static=True, default=False)
    tokens: bool = eqx.field(static=True, default=True)
    capacity_exponent: float = eqx.field(static=True, default=1.0)
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)

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
    ) -> LegacyCAMELData:
        """The format-1 skeleton."""
        zeros = jnp.zeros((n_domains,))
        return cls(
            t_logits=jnp.zeros((n_domains, n_datasets)),
            log_K=zeros,
            raw_alpha=None if tied else zeros,
            raw_beta=zeros,
            C=jnp.zeros(()),
            log_G=zeros,
            raw_gamma=None if shared_exponents else zeros,
            tied=tied,
            shared_exponents=shared_exponents,
            tokens=tokens,
            capacity_exponent=float(capacity_exponent),
            size_scale=float(size_scale),
            tokens_scale=float(tokens_scale),
        )

    def to_current(self) -> CAMELData:
        """The same function in today's `CAMELData`."""
        beta = jnp.exp(self.raw_beta)
        alpha = tied_alpha(beta, self.capacity_exponent) if self.tied else jnp.exp(self.raw_alpha)  # type: ignore[arg-type]
        gamma = alpha if self.shared_exponents else jnp.exp(self.raw_gamma)  # type: ignore[arg-type]
        log_D = jnp.log(self.tokens_scale) if self.tokens else 0.0
        return CAMELData.from_params(
            t=jax.nn.softmax(self.t_logits, axis=-2),
            K=jnp.exp(self.log_K + beta * jnp.log(self.size_scale)),
            beta=beta,
            C=self.C,
            G=jnp.exp(self.log_G + gamma * log_D),
            alpha=None if self.tied else alpha,
            gamma=None if self.shared_exponents else gamma,
            gamma_max=None,
            tied=self.tied,
            shared_exponents=self.shared_exponents,
            tokens=self.tokens,
            capacity_exponent=self.capacity_exponent,
            size_scale=self.size_scale,
            tokens_scale=self.tokens_scale,
        )


# The classes a format-1 file names, by the name it uses, whose layout changed in format 2.
FORMAT_1: dict[str, type] = {"CAMEL": LegacyCAMEL, "CAMELData": LegacyCAMELData}



# --- format 2: SODMAdditive, SODMJoint, DML and Chinchilla as log coordinates (format 3 stores the well-posed ones)


def _exp(x: Array | None) -> Array:
    assert x is not None
    return jnp.exp(x)


class LegacySODMAdditive(eqx.Module):
    """SODMAdditive's layout up to format 2: logs of E, A, alpha, B, beta, C, gamma (A, B in units of the scales)."""

    log_E: Array
    log_A: Array
    log_alpha: Array
    log_B: Array | None
    log_beta: Array | None
    log_C: Array
    log_gamma: Array
    tokens: bool = eqx.field(static=True, default=True)
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)

    @classmethod
    def sample_init(cls, key: Array, *, n_datasets: int, tokens: bool = True, size_scale: float = 1.0,
                    tokens_scale: float = 1.0) -> LegacySODMAdditive:  # fmt: skip
        """The old skeleton (shapes only matter: `load` fills the leaves)."""
        zero, zeros = jnp.zeros(()), jnp.zeros((n_datasets,))
        return cls(zero, zero, zero, zero if tokens else None, zero if tokens else None, zeros, zeros,
                   bool(tokens), float(size_scale), float(tokens_scale))  # fmt: skip

    def to_current(self) -> SODMAdditive:
        alpha = jnp.exp(self.log_alpha)
        tokens: dict[str, Any] = {}
        if self.tokens:
            beta = _exp(self.log_beta)
            tokens = {"B": _exp(self.log_B) * jnp.exp(beta * jnp.log(self.tokens_scale)), "beta": beta}
        return SODMAdditive.from_params(
            E=jnp.exp(self.log_E), A=jnp.exp(self.log_A + alpha * jnp.log(self.size_scale)), alpha=alpha,
            C=jnp.exp(self.log_C), gamma=jnp.exp(self.log_gamma), size_scale=self.size_scale,
            tokens_scale=self.tokens_scale, **tokens,
        )  # fmt: skip


class LegacySODMJoint(eqx.Module):
    """SODMJoint's layout up to format 2: logs of every coefficient and exponent (CA, CB in units of the scales)."""

    log_E: Array
    log_C: Array
    log_gamma: Array
    log_CA: Array
    log_gammaA: Array
    log_alpha: Array
    log_CB: Array | None
    log_gammaB: Array | None
    log_beta: Array | None
    tokens: bool = eqx.field(static=True, default=True)
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)

    @classmethod
    def sample_init(cls, key: Array, *, n_datasets: int, tokens: bool = True, size_scale: float = 1.0,
                    tokens_scale: float = 1.0) -> LegacySODMJoint:  # fmt: skip
        """The old skeleton."""
        zero, zeros = jnp.zeros(()), jnp.zeros((n_datasets,))
        return cls(zero, zeros, zeros, zeros, zero, zero, zeros if tokens else None, zero if tokens else None,
                   zero if tokens else None, bool(tokens), float(size_scale), float(tokens_scale))  # fmt: skip

    def to_current(self) -> SODMJoint:
        alpha, gammaA = jnp.exp(self.log_alpha), jnp.exp(self.log_gammaA)
        tokens: dict[str, Any] = {}
        if self.tokens:
            beta, gammaB = _exp(self.log_beta), _exp(self.log_gammaB)
            CB = _exp(self.log_CB) * jnp.exp(beta / gammaB * jnp.log(self.tokens_scale))[..., None]
            tokens = {"CB": CB, "gammaB": gammaB, "beta": beta}
        return SODMJoint.from_params(
            E=jnp.exp(self.log_E), C=jnp.exp(self.log_C), gamma=jnp.exp(self.log_gamma),
            CA=jnp.exp(self.log_CA) * jnp.exp(alpha / gammaA * jnp.log(self.size_scale))[..., None], gammaA=gammaA,
            alpha=alpha, size_scale=self.size_scale, tokens_scale=self.tokens_scale, **tokens,
        )  # fmt: skip


class LegacyDML(eqx.Module):
    """DML's layout up to format 2: t, log S, C, log K (over-parameterized)."""

    t: Array
    log_S: Array
    C: Array
    log_K: Array

    @classmethod
    def sample_init(cls, key: Array, *, n_datasets: int, n_domains: int) -> LegacyDML:
        """The old skeleton."""
        zeros = jnp.zeros((n_domains,))
        return cls(jnp.zeros((n_domains, n_datasets)), zeros, zeros, zeros)

    def to_current(self) -> DML:
        return DML.from_params(t=self.t, S=jnp.exp(self.log_S), C=self.C, K=jnp.exp(self.log_K), t_max=None)


class LegacyChinchilla(eqx.Module):
    """Chinchilla's layout up to format 2: logs of A, B (in units of the scales), E, alpha, beta."""

    log_A: Array
    log_B: Array
    log_E: Array
    log_alpha: Array
    log_beta: Array
    size_scale: float = eqx.field(static=True, default=1.0)
    tokens_scale: float = eqx.field(static=True, default=1.0)

    @classmethod
    def sample_init(cls, key: Array, *, size_scale: float = 1.0, tokens_scale: float = 1.0) -> LegacyChinchilla:
        """The old skeleton."""
        zero = jnp.zeros(())
        return cls(zero, zero, zero, zero, zero, float(size_scale), float(tokens_scale))

    def to_current(self) -> Chinchilla:
        alpha, beta = jnp.exp(self.log_alpha), jnp.exp(self.log_beta)
        return Chinchilla.from_params(
            A=jnp.exp(self.log_A + alpha * jnp.log(self.size_scale)),
            B=jnp.exp(self.log_B + beta * jnp.log(self.tokens_scale)),
            E=jnp.exp(self.log_E), alpha=alpha, beta=beta, size_scale=self.size_scale,
            tokens_scale=self.tokens_scale,
        )  # fmt: skip


def _as_written(law: type[AbstractLaw], **defaults: Any) -> type:
    """`law` as files before a format change stored it: today's class with the structure `defaults` of the time,
    the layout those files were written in, so that their skeleton needs no conversion (`load` calls its
    `sample_init` and reads its `CHOICES`)."""

    def sample_init(cls: type, key: Array, **structure: Any) -> AbstractLaw:
        return law.sample_init(key, **{**defaults, **structure})

    return type(f"_AsWritten{law.__name__}", (), {"CHOICES": law.CHOICES, "sample_init": classmethod(sample_init)})


# The classes a format-13 (or earlier) file names whose default layout changed in format 14: CAMELMixture with
# unbounded slopes (a = root_a^2), then the only layout.
FORMAT_13: dict[str, type] = {"CAMELMixture": _as_written(CAMELMixture, a_max=None)}
# The classes a format-11 (or earlier) file names whose default layout changed in format 12: CAMELData's data term
# with unbounded exponents (gamma = raw^2), then the only layout (and, without `mixture_center`, shares from 0).
FORMAT_11: dict[str, type] = {"CAMELData": _as_written(CAMELData, gamma_max=None)}
# The classes a format-7 (or earlier) file names whose default layout changed in format 8: SODMJoint's size and data
# terms in the "roots" coefficient chart, then the only one.
FORMAT_7: dict[str, type] = {"SODMJoint": _as_written(SODMJoint, coefficient_chart="roots")}
# The classes a format-5 file names whose default layout changed in format 6: DML unbounded (raw_kappa = sqrt(kappa))
# and CAMEL without the free law's bound on alpha / beta, then the only layouts.
FORMAT_5: dict[str, type] = {"DML": _as_written(DML, t_max=None), "CAMEL": _as_written(CAMEL, ratio_max=None)}
# The classes a format-4 file names whose default layout changed in format 5: SODM's mixture term in the "log" chart,
# then the only one.
FORMAT_4: dict[str, type] = {
    "SODMAdditive": _as_written(SODMAdditive, mixture_chart="log"),
    "SODMJoint": _as_written(SODMJoint, mixture_chart="log", coefficient_chart="roots"),
}
# The classes a format-2 file names whose layout changed in format 3.
FORMAT_2: dict[str, type] = {
    "SODMAdditive": LegacySODMAdditive,
    "SODMJoint": LegacySODMJoint,
    "DML": LegacyDML,
    "Chinchilla": LegacyChinchilla,
}
_LEGACY = (LegacyCAMEL, LegacyCAMELData, LegacySODMAdditive, LegacySODMJoint, LegacyDML, LegacyChinchilla)


def legacy_layouts(version: int) -> dict[str, type]:
    """The old layouts of the laws a file of `version` stores, by the name the file uses. (Format 4 adds CAMEL's
    and CAMELData's optional `beta_max`, None when absent: format-3 files load as they are; format 5 SODM's
    `mixture_chart`, "log" when absent; format 6 DML's `t_max` and CAMEL's `ratio_max`, None when absent; format 8
    SODMJoint's `coefficient_chart`, "roots" when absent; format 9 CAMELData's `data_term`, "domains" (the
    default) when absent: earlier files load as they are; format 12 CAMELData's `gamma_max`, None when absent, and
    `mixture_center`, None when absent; format 14 CAMELMixture's `a_max`, None when absent.)"""
    return (
        (FORMAT_13 if version < 14 else {})
        | (FORMAT_11 if version < 12 else {})
        | (FORMAT_7 if version < 8 else {})
        | (FORMAT_5 if version < 6 else {})
        | (FORMAT_4 if version < 5 else {})
        | (FORMAT_1 if version < 2 else {})
        | (FORMAT_2 if version < 3 else {})
    )


def upgrade(obj: Any) -> Any:
    """`obj` with every law stored in an old layout converted to today's class."""
    return jax.tree.map(
        lambda x: x.to_current() if isinstance(x, _LEGACY) else x, obj, is_leaf=lambda x: isinstance(x, _LEGACY)
    )
