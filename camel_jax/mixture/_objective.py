"""The objective of a fit of several validation losses: one weight per target, matched by name.

A fit of T targets (one per validation domain, say) predicts T losses for a mixture; a decision needs one number.
`target_weights` turns what a user says ("their mean", "this domain", "these weights") into a weight vector w [T]
(>= 0, summing to 1) in the fit's own target order, so that the objective is `predictions @ w`. Names, never
positions: a weight for a target the fit does not have is an error naming it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np


def parse_weights(text: str, name: str = "--weights") -> str | dict[str, float]:
    """A command line's objective: a bare word (`mean`, or one target's name) or `name=w,name=w` pairs.

    **Arguments**:

    - `text`: what the user wrote.
    - `name`: the flag, for messages.

    **Returns**: the word, or a dict {name: weight}. A name given twice, or a weight that is not a number, is a
    `ValueError` naming it.
    """
    text = text.strip()
    if "=" not in text:
        if not text:
            raise ValueError(f"{name} is empty: give `mean`, a target's name, or name=weight pairs")
        return text
    weights: dict[str, float] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"{name} must be a name or name=number pairs; got {item!r}")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{name}: the weight of {key!r} is not a number: {value.strip()!r}") from None
        if key in weights:
            raise ValueError(f"{name} names {key!r} twice: give each name once")
        weights[key] = number
    return weights


def target_weights(targets: Sequence[str], weights: str | Mapping[str, float] | None = None) -> np.ndarray:
    """One weight per target of a fit, in the fit's target order, summing to 1.

    **Arguments**:

    - `targets`: the fit's target names, in its order (T of them).
    - `weights`: `None` or `"mean"`: their mean (1/T each); a target's name: that target alone; a mapping
      {name: weight >= 0}: those targets with those weights (normalized to sum to 1; targets not named weigh 0).

    **Returns**: a float64 array [T] of weights >= 0 summing to 1.

    A name the fit does not have, a negative or non-finite weight, or weights summing to 0 is a `ValueError` naming
    it, before any compute.
    """
    targets = [str(t) for t in targets]
    if len(targets) == 0:
        raise ValueError("the fit has no targets to weigh")
    if weights is None or (isinstance(weights, str) and weights == "mean" and "mean" not in targets):
        return np.full(len(targets), 1.0 / len(targets))
    if isinstance(weights, str):
        weights = {weights: 1.0}
    if not isinstance(weights, Mapping):
        raise TypeError(f"`weights` must be None, 'mean', a target's name or a mapping; got {type(weights).__name__}")
    unknown = [str(k) for k in weights if str(k) not in targets]
    if unknown:
        raise ValueError(f"the fit has no target {unknown[0]!r}; its targets are {targets}")
    w = np.zeros(len(targets))
    for key, value in weights.items():
        value = float(value)
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"the weight of target {key!r} is {value!r}: weights must be finite and >= 0")
        w[targets.index(str(key))] = value
    total = float(w.sum())
    if not total > 0:
        raise ValueError("the weights sum to 0: give at least one target a positive weight")
    return w / total
