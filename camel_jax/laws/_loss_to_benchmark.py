"""The multi-loss logistic law from validation losses to benchmark accuracy (CAMEL paper, eq. loss-to-score)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._base import AbstractLaw, as_leaves, count, positive_number
from ._camel import data_scale


def _center(center: Any, n: int) -> tuple[float, ...] | None:
    """A checked loss center: None (zero) or n finite numbers."""
    if center is None:
        return None
    values = tuple(float(c) for c in center)
    if len(values) != n or not all(np.isfinite(values)):
        raise ValueError(f"`center` must be {n} finite numbers (one per validation loss) or None; got {center!r}")
    return values


def _check_concrete(value: Array, ok: Any, name: str, rule: str) -> None:
    if not isinstance(value, jax.core.Tracer) and not bool(jnp.all(ok)):
        raise ValueError(f"parameter `{name}` must be {rule} for a monotone law; got {value}")


class LossToBenchmark(AbstractLaw):
    """Benchmark accuracy from V validation losses.

        Acc(L) = C + A / (1 + exp(k . L + B)) = C + A * sigmoid(-(k . L + B))

    computed in the sigmoid form, which cannot overflow. `proxy_loss(L) = k . L` is the paper's benchmark-proxy
    loss L_b. Reference: Li, Gu & Zhang (2026), Section 2.2, eq. (loss-to-score); the single-loss form follows
    Dubey et al. (2024).

    Two parameterizations (the static field `monotone`):

    - `monotone=False`: `k` [V], `A`, `B`, `C` real (the paper's law as written).
    - `monotone=True`: `k >= 0` (stored as sqrt k) and `0 <= A <= 1` (stored as arcsin sqrt A); `B`, `C` real. A higher
      validation loss can then never raise the accuracy, and the amplitude is an accuracy range. Validation losses
      are nearly collinear (correlations 0.87-0.99 on gadre2024), so the free law trades large positive and
      negative weights and drifts into the sigmoid's linear regime (A of 2-14 there); the monotone law is the
      well-posed one that `fit_benchmarks` fits. The maps k = u^2 and A = sin(v)^2 reach their bounds at finite,
      regular points: a weight the data do not want is exactly 0 at u = 0 and a saturated amplitude is exactly 1
      at v = pi/2, where exp(log k) or a logistic A would send L-BFGS crawling towards infinity.

    **Coordinates** (why the fit is well conditioned). Validation losses sit near some value c (about 3 nats) and
    vary by a small spread s around it, so in k and B the fit's valley is long and thin: raising every k by a
    little moves k . L by 3 times as much, which B must undo. The law is therefore stored as its intercept at the
    center, B_c = B + k . c, and its weights in units of 1 / s (k = k_param^2 / s when monotone): the same
    function, with the level and the slopes decoupled. `center` c (the data's mean losses, rounded to ten times the
    spread; None: 0) and `loss_spread` s (a power of ten near the losses' standard deviation) are static units, set from
    the data by `fit` (`with_data_scales`); `params()` and `from_params` speak the paper's k, A, B, C.

    **Arguments** (`__call__`): `losses` [P, V]. **Returns**: accuracy [P].
    """

    UNITS = ("center", "loss_spread")

    k_param: Float[Array, "*batch V"]  # sqrt(k s) when monotone, else k s
    A_param: Float[Array, "*batch"]
    B_center: Float[Array, "*batch"]  # B + k . c
    C: Float[Array, "*batch"]
    monotone: bool = eqx.field(static=True, default=False)
    center: tuple[float, ...] | None = eqx.field(static=True, default=None)
    loss_spread: float = eqx.field(static=True, default=1.0)

    @property
    def k(self) -> Float[Array, "*batch V"]:
        """The loss weights k (the proxy loss is k . L)."""
        scaled = jnp.square(self.k_param) if self.monotone else self.k_param
        return scaled / self.loss_spread

    def _center_value(self) -> Array:
        """k . c: the proxy loss at the center."""
        if self.center is None:
            return jnp.zeros_like(self.B_center)
        return self.k @ jnp.asarray(self.center, dtype=self.B_center.dtype)

    @property
    def B(self) -> Float[Array, "*batch"]:
        """The offset B of the paper's law."""
        return self.B_center - self._center_value()

    @property
    def A(self) -> Float[Array, "*batch"]:
        """The amplitude A."""
        return jnp.square(jnp.sin(self.A_param)) if self.monotone else self.A_param

    def proxy_loss(self, losses: Float[Array, "P V"]) -> Float[Array, " P"]:
        """The benchmark-proxy loss L_b = k . L."""
        return losses @ self.k

    def from_proxy(self, proxy: Float[Array, " P"]) -> Float[Array, " P"]:
        """Accuracy from the proxy loss: C + A * sigmoid(-(L_b + B))."""
        return self.C + self.A * jax.nn.sigmoid(-(proxy + self.B))

    def __call__(self, losses: Float[Array, "P V"]) -> Float[Array, " P"]:
        centered = losses if self.center is None else losses - jnp.asarray(self.center, dtype=losses.dtype)[None, :]
        return self.C + self.A * jax.nn.sigmoid(-(centered @ self.k + self.B_center))

    def params(self) -> dict[str, Array]:
        return {"k": self.k, "A": self.A, "B": self.B, "C": self.C}

    @classmethod
    def from_params(
        cls,
        *,
        k: ArrayLike,
        A: ArrayLike,
        B: ArrayLike,
        C: ArrayLike,
        monotone: bool = False,
        center: Any = None,
        loss_spread: float = 1.0,
    ) -> LossToBenchmark:
        """Build from constrained values; with `monotone=True`, `k` must be >= 0 and `A` in [0, 1]. `center` and
        `loss_spread` are the internal units (see the class)."""
        p = as_leaves({"k": 1, "A": 0, "B": 0, "C": 0}, {"k": k, "A": A, "B": B, "C": C})
        spread = positive_number(loss_spread, "loss_spread")
        center = _center(center, p["k"].shape[-1])
        offset = p["B"] if center is None else p["B"] + p["k"] @ jnp.asarray(center, dtype=p["k"].dtype)
        units = {"center": center, "loss_spread": spread}
        if monotone:
            _check_concrete(p["k"], p["k"] >= 0, "k", ">= 0")
            _check_concrete(p["A"], (p["A"] >= 0) & (p["A"] <= 1), "A", "in [0, 1]")
            return cls(
                k_param=jnp.sqrt(p["k"] * spread),
                A_param=jnp.arcsin(jnp.sqrt(p["A"])),
                B_center=offset,
                C=p["C"],
                monotone=True,
                **units,
            )
        return cls(k_param=p["k"] * spread, A_param=p["A"], B_center=offset, C=p["C"], **units)

    @classmethod
    def sample_init(
        cls,
        key: Array,
        *,
        n_losses: int,
        monotone: bool = False,
        center: Any = None,
        loss_spread: float = 1.0,
    ) -> LossToBenchmark:
        """A random start with k summing to 0.5-3 in units of 1 / `loss_spread` (higher loss, lower accuracy), A
        in [0.2, 0.95], C in [0, 0.5], and the sigmoid centred within one unit of the `center` losses (of losses
        around 3 without a center). The free law's k scatter around their mean (N(0, 1) / V); the monotone law's
        are a Dirichlet(1) split of the sum."""
        n_losses = count(n_losses, "n_losses")
        spread = positive_number(loss_spread, "loss_spread")
        center = _center(center, n_losses)
        k_k, k_s, k_A, k_B, k_C = jax.random.split(key, 5)
        total = jax.random.uniform(k_s, (), minval=0.5, maxval=3.0) / spread
        if monotone:
            k = total * jax.random.dirichlet(k_k, jnp.ones(n_losses))
        else:
            k = jax.random.normal(k_k, (n_losses,)) / n_losses
            k = k - jnp.mean(k) + total / n_losses
        at = 3.0 * jnp.sum(k) if center is None else k @ jnp.asarray(center, dtype=k.dtype)
        return cls.from_params(
            k=k,
            A=jax.random.uniform(k_A, (), minval=0.2, maxval=0.95),
            B=-at + jax.random.normal(k_B, ()),
            C=jax.random.uniform(k_C, (), minval=0.0, maxval=0.5),
            monotone=monotone,
            center=center,
            loss_spread=spread,
        )

    def in_units(self, center: Any = "keep", loss_spread: Any = "keep", **units: Any) -> LossToBenchmark:
        """The same function (batch axes kept) stored in other units, e.g. to stack laws fitted on different
        losses, whose data-set units differ; a unit not given ("keep") is kept (see `AbstractLaw.in_units`)."""
        if units:
            raise ValueError(f"LossToBenchmark.in_units takes its units {list(self.UNITS)}; got {sorted(units)}")
        center = self.center if isinstance(center, str) and center == "keep" else center
        loss_spread = self.loss_spread if isinstance(loss_spread, str) and loss_spread == "keep" else loss_spread
        return LossToBenchmark.from_params(**self.params(), monotone=self.monotone, center=center,
                                           loss_spread=loss_spread)  # fmt: skip

    def with_data_scales(self, inputs: tuple[Any, ...], y: Any) -> dict[str, Any]:
        """The units of a fit: the losses' mean rounded to ten times their spread (`center`) and the power of ten
        nearest their typical standard deviation (`loss_spread`), so that starts and conditioning do not depend on
        the losses' level or units."""
        L = np.asarray(inputs[0], dtype=np.float64)
        finite = np.all(np.isfinite(L), axis=-1)
        if L.ndim != 2 or finite.sum() < 2:
            return {}
        L = L[finite]
        spread = data_scale(L.std(axis=0))
        # the center to ten times the spread (3.43 nats -> 3.0 at a spread of 0.1): coarse, so that fits on other
        # draws of similar losses (bootstrap, repeats, budgets) share the units and so one compiled program
        unit = 10.0 * spread
        return {"center": tuple(float(x) for x in np.round(L.mean(axis=0) / unit) * unit), "loss_spread": spread}

    def structure(self) -> dict[str, Any]:
        return {
            "n_losses": self.k_param.shape[-1],
            "monotone": self.monotone,
            "center": self.center,
            "loss_spread": self.loss_spread,
        }
