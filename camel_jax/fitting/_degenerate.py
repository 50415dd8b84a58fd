"""Degenerate parameters: the values of a fitted law that are limits the solver ran to, not estimates.

`degenerate_parameters` checks one law (a fit's best law, `FitResult.degenerate`); `degenerate_batch` checks a
batch of laws fitted to the same targets under different weights (a bootstrap's resamples), reading each law's
numbers from one compiled, batched call instead of one eager call per law and number (after its first call in a
process, 3Mix's 600 resampled laws took 0.13 s, against ~10 ms a law one by one), with the same rule, law by law.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

# What a degenerate fit calls for (`FitResult.problems`); the command line names the law itself.
DEGENERATE_HINT = (
    "fit a law that handles these data: a token-aware law (sodm-additive, camel-data) when the tokens vary, or the "
    "next best law of `camel-jax fit --law auto`'s held-out ranking"
)
# A level (an irreducible loss) beyond this many times the targets' scale is a value the solver ran to, not a loss.
LEVEL_LIMIT = 1e6
# Any other coefficient (K, A, B) beyond this in absolute value in the data's units (`_params_in_data_units`) is a
# value the solver ran to: the command line never prints it as an estimate (issue 56).
ESTIMATE_LIMIT = 1e6
# A size or tokens exponent whose term changes by more than this factor across the trained range acts as a step.
STEP_FACTOR = 1e6


class _Facts(NamedTuple):
    """The numbers of one law that the rule reads: its `params()`, the same in the data's units, its terms in the
    log-law limit (capacity and data terms, indices), its detached terms ({term: Kt_i}) and, when some term is in
    the log-law limit, its finite coordinates (`log_limit_params`)."""

    params: dict[str, np.ndarray]
    unitless: dict[str, np.ndarray]
    terms: np.ndarray
    data_terms: np.ndarray
    detached: dict[int, float]
    finite: dict[str, np.ndarray] | None


def _exponents(law: Any) -> dict[str, tuple[int, str]]:
    """{parameter name: (position of the input it is the exponent of, "size" or "tokens")} for the shipped laws."""
    from ..laws import CAMEL, CAMELData, Chinchilla, LogLinear, PowerLaw, SODMAdditive, SODMJoint

    tokens = bool(law.structure().get("tokens", False)) if hasattr(law, "structure") else False
    if isinstance(law, CAMELData):
        return {"beta": (1, "size")} | ({"gamma": (2, "tokens")} if tokens else {})
    if isinstance(law, CAMEL):
        return {"beta": (1, "size")}
    if isinstance(law, (SODMAdditive, SODMJoint)):
        return {"alpha": (1, "size")} | ({"beta": (2, "tokens")} if tokens else {})
    if isinstance(law, LogLinear):
        found = {"alpha": (1, "size")} if law.size else {}
        return found | ({"beta": (1 + int(law.size), "tokens")} if law.tokens else {})
    if isinstance(law, Chinchilla):
        return {"alpha": (0, "size"), "beta": (1, "tokens")}
    if isinstance(law, PowerLaw):
        return {"alpha": (0, "size")}
    return {}


def degenerate_parameters(law: Any, inputs: Sequence[Any], y: Any, weights: Any) -> dict[str, str]:
    """The parameter elements of one (unbatched) law that are limits, not estimates, with the reason of each.

    Four kinds, each a value no extrapolation can rest on: a non-finite value (`K inf`, `C -inf`); a level (`C`,
    `E`) beyond `LEVEL_LIMIT` times the targets' scale (`E = -2.98e18` for losses near 3); any other coefficient
    beyond `ESTIMATE_LIMIT` (1e6) in absolute value in the data's units (DML's `K[2] = 3.96e65` on a single-size
    table), read as the same function with loss, sizes and tokens measured in the units `fit` sets from the data
    (`data_units`): a coefficient's raw size depends on the units of its input (SODM's `B = 4.3e8` with `beta =
    0.89` is a term of 0.5 at 1e10 raw tokens, B = 0.54 in units of 1e10), a runaway is large in every unit; and a
    size or tokens exponent whose term changes by more than `STEP_FACTOR` across the trained range (`beta 3.09e4`
    between sizes a factor 6 apart: a step inside the trained sizes, not a power law). CAMEL's terms in the log-law
    limit are not flagged: their K (infinite) and C are stand-ins for the law's finite coordinates
    (`CAMEL.log_limit_params`), which are checked instead (a slope `b[i]` beyond `ESTIMATE_LIMIT`, a level `C1`
    beyond `LEVEL_LIMIT`, times the targets' scale); CAMELData's data terms alike (`G[i]`,
    `CAMELData.log_limit_data_terms`, slope `h[i]`). Nor are a detached term's K_i and row t_i
    (`CAMELMixture.detached_terms`: share 0, a regular point of the coordinates and a legitimate optimum, where
    both are 0): `camel-jax fit` reports the term by its finite coordinates (`CAMELMixture.detached_params`), whose
    coefficient Kt_i is checked instead (`Kt[i]`).

    **Arguments**:

    - `law`: the law (unbatched); `inputs`: the fitted inputs; `y`, `weights`: the targets [P] and weights [P].

    **Returns**: {element name (`K[1]`, `C`): why, in a few words}, in `params()` order (a detached term's `Kt[i]`,
    then a log-law limit's `b[i]`, `h[i]`, `C1`, last).
    """
    if not hasattr(law, "params"):
        return {}
    with np.errstate(all="ignore"):
        return _check(_facts(law, inputs, y), _exponents(law), inputs, y, weights)


def degenerate_batch(laws: Any, inputs: Sequence[Any], y: Any, weights: Any) -> list[dict[str, str]]:
    """`degenerate_parameters` of each of a batch of laws fitted to the same targets `y` [P] under their own
    `weights` ([N, P], or [P] for all): one {element: why} per law, the same rule. `laws` has one leading batch
    axis [N] (a bootstrap's resampled laws of one target). Each number the rule reads comes from one batched call
    where the law's methods allow it (`jax.vmap`), else law by law."""
    if not hasattr(laws, "params"):
        return []
    n = int(jax.tree.leaves(eqx.filter(laws, eqx.is_array))[0].shape[0])
    weights = np.broadcast_to(np.asarray(weights, dtype=float), (n, np.shape(y)[-1]))
    exponents = _exponents(laws)
    with np.errstate(all="ignore"):
        facts = _batched_facts(laws, inputs, y, n)
        return [_check(fact, exponents, inputs, y, weights[i]) for i, fact in enumerate(facts)]


def limit_params(law: Any) -> dict[str, Any]:
    """`law.params()` with the elements that stand for a limit at their values in it, where the solver only
    approached them: a capacity term in the log-law limit (`log_limit_terms`) has K_i infinite, its exponents
    alpha_i and beta_i 0 and C minus infinite; a data term in it (`log_limit_data_terms`) G_i infinite, gamma_i 0
    and C minus infinite; a detached term (`detached_terms`) K_i and row t_i 0 (K_i infinite when the term is in
    the log-law limit too). The law's `params()` elsewhere, and for a law without those limits. One (unbatched)
    law; traceable (`BootstrapResult.interval` reads every resample so, so that a resample in a limit puts its end
    of an interval there: "unbounded", not C = -1.3e34)."""
    p = dict(law.params())

    def at(name: str, where: Any, value: float) -> None:
        if name in p and jnp.shape(p[name])[: jnp.ndim(where)] == jnp.shape(where):
            mask = jnp.reshape(where, jnp.shape(where) + (1,) * (jnp.ndim(p[name]) - jnp.ndim(where)))
            p[name] = jnp.where(mask, value, p[name])

    level = jnp.zeros((), bool)
    if hasattr(law, "detached_terms"):
        off = law.detached_terms()
        at("K", off, 0.0)
        at("t", off, 0.0)
    if hasattr(law, "log_limit_terms"):
        terms = law.log_limit_terms()
        at("K", terms, jnp.inf)
        at("alpha", terms, 0.0)
        at("beta", terms, 0.0)
        level = level | jnp.any(terms)
    if hasattr(law, "log_limit_data_terms"):
        data = law.log_limit_data_terms()
        at("G", data, jnp.inf)
        at("gamma", data, 0.0)
        level = level | jnp.any(data)
    at("C", level, -jnp.inf)
    return p


def in_limits(laws: Any) -> np.ndarray:
    """[N] booleans: which laws of a batch (one leading axis) have a term in a limit that `limit_params` reads at
    its value (a capacity or data term in the log-law limit, a detached term)."""
    n = int(jax.tree.leaves(eqx.filter(laws, eqx.is_array))[0].shape[0])
    methods = ("log_limit_terms", "log_limit_data_terms", "detached_terms")
    flags = [_batched_flags(laws, method, n) for method in methods]
    return np.asarray(np.concatenate(flags, axis=1).any(axis=1), dtype=bool)


def _check(facts: _Facts, exponents: dict, inputs: Sequence[Any], y: Any, weights: Any) -> dict[str, str]:
    """The rule of `degenerate_parameters` on one law's numbers (`_Facts`)."""
    from ._identify import element_names

    w = np.asarray(weights) > 0
    y = np.asarray(y, dtype=float)
    scale = float(np.exp(np.mean(np.log(np.abs(y[w & (y != 0)]))))) if np.any(w & (y != 0)) else 1.0
    excused: set[str] = set()
    if facts.terms.size or facts.data_terms.size:
        excused = {"C", *(f"K[{i}]" for i in facts.terms), *(f"G[{i}]" for i in facts.data_terms)}
    log_limit = set(excused)
    if facts.detached:
        n = int(np.shape(facts.params["t"])[-1])
        excused |= {f"K[{i}]" for i in facts.detached} | {f"t[{i}, {j}]" for i in facts.detached for j in range(n)}
    out: dict[str, str] = {}
    for name, value in facts.params.items():
        in_data_units = np.ravel(facts.unitless.get(name, value))
        for element, v, c in zip(element_names(name, value), np.ravel(value), in_data_units):
            if element not in excused:
                why = _why(name, float(v), float(c), scale, exponents, inputs, w)
                if why:
                    out[element] = why
    for i, coefficient in facts.detached.items():  # the finite coordinate that stands for a detached term's K_i
        if f"K[{i}]" in log_limit:  # also in the log-law limit: Kt_i is infinite there, as K_i is
            continue
        if not np.isfinite(coefficient) or abs(coefficient) > ESTIMATE_LIMIT:
            out[f"Kt[{i}]"] = (f"beyond {ESTIMATE_LIMIT:.0e} in absolute value (the coefficient of a detached "
                               "term, a value the solver ran to)")  # fmt: skip
    if excused and facts.finite is not None:
        out |= _log_limit_runaways(facts.finite, facts.terms, facts.data_terms, scale)
    return out


def _why(name: str, v: float, c: float, scale: float, exponents: dict, inputs: Sequence[Any], w: Any) -> str:
    """Why one element (raw value `v`, `c` in the data's units) is a limit, or "" when it is an estimate."""
    if not np.isfinite(v):
        return "at an infinite limit" if np.isinf(v) else "not a number"
    if name in ("C", "E") and abs(v) > LEVEL_LIMIT * scale:
        side = "above" if v > 0 else "below minus"
        return f"{side} {LEVEL_LIMIT:.0e} times the targets' scale (a level the solver ran to)"
    if not abs(c) <= ESTIMATE_LIMIT and name not in exponents:
        return f"beyond {ESTIMATE_LIMIT:.0e} in absolute value in the data's units (a value the solver ran to)"
    if name in exponents and exponents[name][0] < len(inputs):
        position, kind = exponents[name]
        x = np.asarray(inputs[position], dtype=float)[w]
        span = float(np.log(x.max() / x.min())) if x.size and np.all(x > 0) else 0.0
        if abs(v) * span > np.log(STEP_FACTOR):
            return (f"so large that its term changes by a factor e^{abs(v) * span:.0f} between the smallest and "
                    f"largest trained {kind} (a step inside the trained range, not a power law)")  # fmt: skip
    return ""


def _numbers(tree: dict[str, Any]) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=float) for k, v in tree.items()}


def _facts(law: Any, inputs: Sequence[Any], y: Any) -> _Facts:
    """The numbers of one (unbatched) law, each from its own eager call."""
    terms, data_terms = _log_limit_terms(law)
    detached = _detached_terms(law)
    finite = _numbers(law.log_limit_params()) if terms.size or data_terms.size or detached else None
    unitless = _data_unit_params(law, inputs, y)
    params = _numbers(law.params())
    return _Facts(params, params if unitless is None else _numbers(unitless), terms, data_terms, detached, finite)


def _batched_facts(laws: Any, inputs: Sequence[Any], y: Any, n: int) -> list[_Facts]:
    """`_facts` of each of `n` laws (one leading axis), each number from one `jax.vmap`ped call; law by law when a
    law's methods cannot be vmapped (a Python branch on a value). The data's units: one re-expression of the laws
    whose parameters are all finite, and one per law for the others (a law at an infinite limit re-expresses
    itself, or not, as it does alone)."""
    row = lambda i: jax.tree.map(lambda leaf: leaf[i] if eqx.is_array(leaf) else leaf, laws)  # noqa: E731
    try:
        params = _numbers(_vmapped(laws, "params"))
        terms = _batched_flags(laws, "log_limit_terms", n)
        data_terms = _batched_flags(laws, "log_limit_data_terms", n)
        detached = _batched_flags(laws, "detached_terms", n)
        needed = np.asarray(terms.any(axis=1) | data_terms.any(axis=1) | detached.any(axis=1), dtype=bool)
        finite = _numbers(_vmapped(laws, "log_limit_params")) if needed.any() else None
        kt = _numbers(_vmapped(laws, "detached_params"))["Kt"] if detached.any() else None
    except (TypeError, ValueError):  # a method that branches on a value: law by law
        return [_facts(row(i), inputs, y) for i in range(n)]
    finite_rows = np.flatnonzero([all(np.all(np.isfinite(v[i])) for v in params.values()) for i in range(n)])
    together = _data_unit_params(jax.tree.map(lambda leaf: leaf[finite_rows] if eqx.is_array(leaf) else leaf, laws),
                                 inputs, y, compiled=True) if finite_rows.size else None  # fmt: skip
    position = {int(i): j for j, i in enumerate(finite_rows)} if together is not None else {}
    out = []
    for i in range(n):
        own = {k: v[i] for k, v in params.items()}
        if i in position:
            units = {k: np.asarray(v, dtype=float)[position[i]] for k, v in together.items()}  # type: ignore[union-attr]
        else:
            found = _data_unit_params(row(i), inputs, y)
            units = own if found is None else _numbers(found)
        coordinates = None if finite is None or not needed[i] else {k: v[i] for k, v in finite.items()}
        kts = {} if kt is None else {int(j): float(kt[i][j]) for j in np.flatnonzero(detached[i])}
        out.append(_Facts(own, units, np.flatnonzero(terms[i]), np.flatnonzero(data_terms[i]), kts, coordinates))
    return out


# The batched reads are compiled programs: vmapped eagerly, each of their operations compiles on its own for every
# batch size (tied CAMEL's reads of 32 laws took 3.4 s on their first call in a process, and 3.1 s again for 17).
@eqx.filter_jit
def _vmapped(laws: Any, method: str) -> Any:
    """`getattr(law, method)()` of every law of a batch (one leading axis), as arrays."""
    return jax.vmap(lambda law: jax.tree.map(jnp.asarray, getattr(law, method)()))(laws)


@eqx.filter_jit
def _compiled_in_data_units(laws: Any, units: tuple, defaults: tuple) -> Any:
    """`_in_data_units` of a batch of laws as one program; `units`, `defaults`: (name, value) pairs, static."""
    return _in_data_units(laws, dict(units), dict(defaults))


def _batched_flags(laws: Any, method: str, n: int) -> np.ndarray:
    """[n, m] booleans of a per-term method (`log_limit_terms`, `log_limit_data_terms`, `detached_terms`) of every
    law; [n, 0] for a law without it."""
    if not hasattr(laws, method):
        return np.zeros((n, 0), dtype=bool)
    return np.asarray(_vmapped(laws, method), dtype=bool).reshape(n, -1)


def _log_limit_terms(law: Any) -> tuple[np.ndarray, np.ndarray]:
    """(the capacity terms, the data terms) of a law in their log-law limit (`CAMEL.log_limit_terms`,
    `CAMELData.log_limit_data_terms`), as indices; empty for a law without that limit."""
    none = np.zeros(0, dtype=int)
    terms = np.flatnonzero(np.asarray(law.log_limit_terms())) if hasattr(law, "log_limit_terms") else none
    data = np.flatnonzero(np.asarray(law.log_limit_data_terms())) if hasattr(law, "log_limit_data_terms") else none
    return terms, data


def _log_limit_runaways(finite: dict[str, np.ndarray], terms: np.ndarray, data_terms: np.ndarray,
                        scale: float) -> dict[str, str]:  # fmt: skip
    """The finite coordinates (`log_limit_params`: `finite`) that stand for the excused K_i, G_i and C of terms in
    the log-law limit, checked as those would be: a term's slope (`b`, or CAMELMixture's `a`; a data term's `h`)
    beyond `ESTIMATE_LIMIT` times the targets' scale, or a level `C1` beyond `LEVEL_LIMIT` times it, is a value the
    solver ran to."""
    slope = "b" if "b" in finite else "a"
    checked = [(f"{slope}[{i}]", finite[slope][i]) for i in terms]
    checked += [(f"h[{i}]", finite["h"][i]) for i in data_terms if "h" in finite]
    out = {}
    for name, value in checked:
        if not abs(value) <= ESTIMATE_LIMIT * scale:
            out[name] = (f"beyond {ESTIMATE_LIMIT:.0e} times the targets' scale (the slope of a term in the log-law "
                         "limit, a value the solver ran to)")  # fmt: skip
    level = finite.get("C1")
    if level is not None and not abs(float(level)) <= LEVEL_LIMIT * scale:
        out["C1"] = f"beyond {LEVEL_LIMIT:.0e} times the targets' scale (a log-law limit's level the solver ran to)"
    return out


def _params_in_data_units(law: Any, inputs: Sequence[Any], y: Any) -> dict[str, Any]:
    """`law.params()` of the same function with loss, sizes and tokens measured in the units a fit on these data
    sets (`data_units`; coefficients free of the inputs' units): the law re-expressed in those units (`in_units`)
    and read with its units at the class defaults. The law's own `params()` when it declares no units or cannot be
    re-expressed (a parameter at an infinite limit; CAMELData and CAMELMixture move their own coordinates, exactly
    in the log-law limit too)."""
    found = _data_unit_params(law, inputs, y)
    return law.params() if found is None else found


def _data_unit_params(law: Any, inputs: Sequence[Any], y: Any, compiled: bool = False) -> dict[str, Any] | None:
    """`_params_in_data_units`, or None where it falls back to the law's own `params()`. Batch axes are kept.
    `compiled`: re-express a batch as one compiled program (`_compiled_in_data_units`), eagerly as one law is read
    when the re-expression cannot be compiled (a check on a value)."""
    from ._units import data_units

    units = data_units(law, inputs, y)
    defaults = {f.name: f.default for f in dataclasses.fields(type(law)) if f.name in units}
    if not units or any(value is dataclasses.MISSING for value in defaults.values()):
        return None
    errors = (ValueError, TypeError, FloatingPointError, OverflowError)
    if compiled:
        try:
            return _compiled_in_data_units(law, tuple(sorted(units.items())), tuple(sorted(defaults.items())))
        except errors:
            pass
    try:
        return _in_data_units(law, units, defaults)
    except errors:
        return None


def _in_data_units(law: Any, units: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """`params()` of `law` re-expressed in `units` and read with its units at `defaults` (`_data_unit_params`)."""
    return dataclasses.replace(law.in_units(**units), **defaults).params()


def _detached_terms(law: Any) -> dict[int, float]:
    """The detached terms of a law that has them (`CAMELMixture.detached_terms`: share s_i = 0, a regular point
    where the paper's K_i and row t_i are 0, not estimates), {term: its coefficient Kt_i in the user's units}."""
    if not hasattr(law, "detached_terms"):
        return {}
    coefficients = np.asarray(law.detached_params()["Kt"], dtype=float)
    return {int(i): float(coefficients[i]) for i in np.flatnonzero(np.asarray(law.detached_terms()))}
