"""The contract every law meets, and the small numerical guards the laws share."""

from __future__ import annotations

import abc
import functools
import inspect
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

# An element within this relative distance of its upper bound is at the bound (`AbstractLaw.at_bounds`). The bounds
# are sin^2 coordinates, where the bound is a regular point: on Data Mixing Laws' 5Mix (camel-data-tied, 22 losses)
# the exponents gamma_i at their bound of 3 sit within 2e-6 of it (read in float32), every other one 1% below or more.
AT_BOUND_RTOL = 1e-4

# What an unconverged best start calls for in general (`AbstractLaw.unconverged_hint`).
UNCONVERGED_HINT = (
    "raise FitOptions(max_steps=..., polish=...), give more restarts, or use a law with fewer free parameters "
    "(fewer domains)"
)


class AbstractLaw(eqx.Module):
    """A scaling law: a pure function of its inputs whose array leaves are free parameters.

    Every array leaf of a law is an *unconstrained* parameter (softmax logits for simplex quantities, logs for
    positive ones, raw values for real ones); everything else is a static field. A batch of laws (restarts,
    bootstrap resamples) is the same Module with a leading axis on every leaf.

    A subclass implements:

    - `__call__(*inputs) -> Array`: the prediction, shape [P].
    - `from_params(**constrained)`: build from constrained values (optional leading batch axes).
    - `params() -> dict[str, Array]`: the constrained values, in user units.
    - `sample_init(key, **structure)`: a random starting point, a pure function of `key`.
    - `structure() -> dict`: the keywords that make `sample_init` rebuild this structure.
    - optionally `size_parameters()`: where the model size enters and how many parameters describe it.
    """

    # Structure keywords that are units of the law's internal coordinates (see `with_data_scales`): two laws that
    # differ only in them describe the same family of functions, so warm starts may carry other units.
    UNITS: ClassVar[tuple[str, ...]] = ()
    # Structure keywords whose values are strings, each with the values it admits (SODM's `mixture_chart`): the only
    # strings `load` accepts in a file's structure.
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {}

    @abc.abstractmethod
    def __call__(self, *inputs: Any) -> Array: ...

    @classmethod
    @abc.abstractmethod
    def from_params(cls, *args: Any, **constrained: Any) -> AbstractLaw: ...

    @abc.abstractmethod
    def params(self) -> dict[str, Array]: ...

    @classmethod
    @abc.abstractmethod
    def sample_init(cls, *args: Any, **structure: Any) -> AbstractLaw: ...

    @abc.abstractmethod
    def structure(self) -> dict[str, Any]: ...

    def batch_shape(self) -> tuple[int, ...]:
        """The leading batch axes of this law's leaves (restarts, resamples): () for a single law."""
        mine = jax.tree.leaves(eqx.filter(self, eqx.is_array))[0]
        return tuple(mine.shape[: mine.ndim - _first_leaf_ndim(type(self), self.structure())])

    def with_data_scales(self, inputs: tuple[Any, ...], y: Any) -> dict[str, float]:
        """Structure keywords that set this law's static units from the data to be fitted (e.g. the geometric mean
        of the targets as `loss_scale`), so that its random starts and its conditioning do not depend on the units
        the user measures loss and size in. `fit` rebuilds the template with them before drawing starts; {} (the
        default) keeps the law's own units."""
        return {}

    def in_units(self, **units: Any) -> AbstractLaw:
        """The same function (batch axes kept) stored in other units: `units` are keywords of `UNITS` (e.g.
        `loss_scale=1.0, size_scale=1e9`), the rest of the structure is kept. Use it to move a grid of starts built
        in raw units into the units `fit` sets from the data (`data_template`), where it is solved as well
        conditioned as random starts are. The default rebuilds the law with `from_params` from its `params()` (a
        `ValueError` when they are not finite, e.g. at an infinite limit); a law whose `from_params` does not take
        its structure keywords overrides it.

        **Arguments**:

        - `units`: the new values of some of the law's `UNITS` keywords.

        **Returns**: a law of the same class and structure, in the new units.
        """
        unknown = sorted(set(units) - set(self.UNITS))
        if unknown:
            raise ValueError(f"{type(self).__name__}.in_units takes its units {list(self.UNITS)}; got {unknown}")
        accepted = inspect.signature(type(self).from_params).parameters
        keywords = {k: v for k, v in {**self.structure(), **units}.items() if k in accepted}
        return type(self).from_params(**self.params(), **keywords)

    def size_parameters(self) -> tuple[int, int] | None:
        """(position of the model-size array in `inputs`, number of parameters that shape the size dependence),
        or None for a law without a size input. `fit` warns when the data hold fewer distinct sizes."""
        return None

    def term_variables(self, r: Any) -> Array | None:
        """[P, m]: the log of each power-law term's mixture variable at the mixtures `r` [P, n] (CAMEL's log <t_i, r>),
        the quantities whose trained range bounds where the law's terms were measured (`FitResult.outside_support`:
        below it a term K_i <t_i, r>^-alpha_i grows without limit); None (the default) for a law without such terms."""
        return None

    # {parameter name: the static field holding the upper bound of its range} (see `at_bounds`)
    UPPER_BOUNDS: ClassVar[dict[str, str]] = {}

    def at_bounds(self) -> dict[str, tuple[str, float, np.ndarray]]:
        """The parameters with elements at the upper bound of their range (a bound of the law's parameterization,
        e.g. CAMELData's `gamma_max`, where a fit whose data push an exponent outward stops): {parameter name:
        (the bound's field, its value, [element] booleans in `params()`'s shape)}, for the parameters with a bound
        set and at least one element within `AT_BOUND_RTOL` of it. Such an element is the bound, not an estimate
        (its bootstrap interval collapses onto it)."""
        out = {}
        params = self.params()
        for name, field in self.UPPER_BOUNDS.items():
            bound = getattr(self, field, None)
            if bound is None or name not in params:
                continue
            at = np.asarray(params[name], dtype=float) >= float(bound) * (1.0 - AT_BOUND_RTOL)
            if at.any():
                out[name] = (field, float(bound), at)
        return out

    def default_polish(self) -> int | None:
        """The Newton polish steps `fit`, `bootstrap` and `calibrate` run when no `FitOptions` are given (None: the
        `FitOptions` default, 300); a law whose starts need more to meet the first-order rule says so here."""
        return None

    def unconverged_hint(self) -> str:
        """What to try when this law's best start does not meet its stopping rule: the fix that `fit`'s warning and
        `FitResult.problems` name (a law whose starts fail for a reason of its own says so here)."""
        return UNCONVERGED_HINT


def _leaf_ndim(cls: type, structure: dict[str, Any]) -> int:
    """The rank of the first array leaf of one unbatched law of class `cls` and `structure` (by tracing)."""
    single = jax.eval_shape(lambda: cls.sample_init(jax.random.key(0), **structure))  # type: ignore[attr-defined]
    return jax.tree.leaves(single)[0].ndim  # a ShapeDtypeStruct of the same first parameter


@functools.lru_cache(maxsize=256)
def _cached_leaf_ndim(cls: type, items: tuple[tuple[str, Any], ...]) -> int:
    return _leaf_ndim(cls, dict(items))


def _first_leaf_ndim(cls: type, structure: dict[str, Any]) -> int:
    """`_leaf_ndim`, traced once per class and structure (`batch_shape` is asked often, and tracing
    `sample_init` each time showed in profiles); every time when a structure value is unhashable."""
    items = tuple(sorted(structure.items()))
    try:
        hash(items)
    except TypeError:
        return _leaf_ndim(cls, structure)
    return _cached_leaf_ndim(cls, items)


def n_free_parameters(law: eqx.Module) -> int:
    """Number of free scalars of one (unbatched) law: the total size of its array leaves."""
    return int(sum(np.prod(leaf.shape) for leaf in jax.tree.leaves(eqx.filter(law, eqx.is_array))))


def as_leaves(core_ndims: dict[str, int], values: dict[str, ArrayLike]) -> dict[str, Array]:
    """Convert user values to arrays broadcast to one common leading batch shape.

    `core_ndims[name]` is the rank of that parameter for a single law (0 for a scalar, 1 for a vector, ...);
    anything beyond it is a batch axis. Python floats become the default float dtype.
    """
    arrays = {}
    for name, ndim in core_ndims.items():
        value = jnp.asarray(values[name])
        if not jnp.issubdtype(value.dtype, jnp.floating):
            value = value.astype(jnp.result_type(float))
        if value.ndim < ndim:
            raise ValueError(f"parameter `{name}` must have at least {ndim} dimension(s); got shape {value.shape}")
        if not isinstance(value, jax.core.Tracer) and not bool(np.all(np.isfinite(np.asarray(value)))):
            raise ValueError(f"parameter `{name}` must be finite; got {np.asarray(value)}")
        arrays[name] = value
    batches = [arrays[n].shape[: arrays[n].ndim - d] for n, d in core_ndims.items()]
    try:
        common = np.broadcast_shapes(*batches)
    except ValueError as error:
        shapes = {n: arrays[n].shape for n in core_ndims}
        raise ValueError(f"leading batch axes of the parameters do not broadcast: {shapes}") from error
    return {n: jnp.broadcast_to(a, common + a.shape[a.ndim - core_ndims[n] :]) for n, a in arrays.items()}


def safe_log(x: Array) -> Array:
    """log(x) for x > 0, and a finite value (with zero gradient) elsewhere.

    The double-`where` keeps the untaken branch from producing a NaN gradient at x <= 0.
    """
    positive = x > 0
    return jnp.where(positive, jnp.log(jnp.where(positive, x, 1.0)), jnp.log(jnp.finfo(x.dtype).tiny))


def safe_pow(x: Array, exponent: Array) -> Array:
    """x ** exponent for x >= 0 and exponent > 0, with 0 ** exponent = 0 and finite gradients at x = 0.

    A mixture weight may be exactly zero; `exp(exponent * log x)` there would give `0 * -inf = nan` in the
    gradient with respect to the exponent.
    """
    positive = x > 0
    return jnp.where(positive, jnp.exp(exponent * jnp.log(jnp.where(positive, x, 1.0))), 0.0)


def positive(raw: Array, bounds: tuple[float, float] | None) -> Array:
    """Map an unconstrained value to a positive one: exp(raw), or lo + (hi - lo) sigmoid(raw) within bounds."""
    if bounds is None:
        return jnp.exp(raw)
    lo, hi = bounds
    return lo + (hi - lo) * jax.nn.sigmoid(raw)


def positive_inverse(value: Array, bounds: tuple[float, float] | None, name: str) -> Array:
    """Inverse of `positive`; checks (on concrete values) that `value` is admissible."""
    if not isinstance(value, jax.core.Tracer):
        v = np.asarray(value)
        if bounds is None and np.any(v <= 0):
            raise ValueError(f"parameter `{name}` must be > 0; got {v}")
        if bounds is not None and np.any((v <= bounds[0]) | (v >= bounds[1])):
            raise ValueError(f"parameter `{name}` must lie strictly inside its bounds {bounds}; got {v}")
    if bounds is None:
        return jnp.log(value)
    lo, hi = bounds
    u = (value - lo) / (hi - lo)
    return jnp.log(u) - jnp.log1p(-u)


def check_bounds(bounds: tuple[float, float] | None, name: str) -> tuple[float, float] | None:
    if bounds is None:
        return None
    lo, hi = (float(b) for b in bounds)
    if not 0 <= lo < hi:
        raise ValueError(f"`{name}` must be (lo, hi) with 0 <= lo < hi; got {bounds}")
    return (lo, hi)


def simplex_logits(t: Array, axis: int, name: str) -> Array:
    """Logits whose softmax over `axis` gives back `t` (columns on the simplex, strictly positive)."""
    if not isinstance(t, jax.core.Tracer):
        v = np.asarray(t)
        if np.any(v <= 0):
            raise ValueError(f"`{name}` must be strictly positive (softmax parameterization); got min {v.min()}")
        sums = v.sum(axis=axis)
        if np.any(np.abs(sums - 1) > 1e-6):
            raise ValueError(f"`{name}` must sum to 1 along axis {axis}; got sums {sums}")
    return jnp.log(t)


def simplex_from_roots(u: Array, axis: int) -> Array:
    """Points on the simplex as normalized squares, u^2 / sum(u^2) along `axis`: a face of the simplex (a zero
    weight) is a regular point of these coordinates, where softmax logits would have to run to -infinity."""
    square = u * u
    return square / jnp.sum(square, axis=axis, keepdims=True)


def simplex_roots(t: Array, axis: int, name: str) -> Array:
    """Coordinates whose `simplex_from_roots` gives back `t` (columns on the simplex, zeros allowed): sqrt(t)."""
    if not isinstance(t, jax.core.Tracer):
        v = np.asarray(t)
        if np.any(v < 0):
            raise ValueError(f"`{name}` must be >= 0 (a distribution); got min {v.min()}")
        sums = v.sum(axis=axis)
        if np.any(np.abs(sums - 1) > 1e-6):
            raise ValueError(f"`{name}` must sum to 1 along axis {axis}; got sums {sums}")
    return jnp.sqrt(t)


def log_uniform(key: Array, shape: tuple[int, ...], lo: float, hi: float) -> Array:
    """Samples whose log is uniform on [log lo, log hi]: returns the log."""
    return jax.random.uniform(key, shape, minval=np.log(lo), maxval=np.log(hi))


def positive_number(value: Any, name: str) -> float:
    """A structural constant (a scale, an exponent) as a float: finite and > 0, else a `ValueError` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{name}` must be a number; got {value!r}")
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"`{name}` must be finite and > 0; got {value!r}")
    return float(value)


def count(value: Any, name: str, least: int = 1) -> int:
    """A count (datasets, domains, restarts, steps): an integer >= `least`, else an error naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{name}` must be an integer; got {value!r}")
    if value < least:
        raise ValueError(f"`{name}` must be >= {least}; got {value}")
    return int(value)
