"""The objective over several validation losses: weights matched by name."""

import numpy as np
import pytest

from camel_jax.mixture._objective import parse_weights, target_weights

TARGETS = ["github", "pile_cc", "arxiv"]


def test_mean_name_and_pairs():
    np.testing.assert_allclose(target_weights(TARGETS), [1 / 3] * 3)
    np.testing.assert_allclose(target_weights(TARGETS, "mean"), [1 / 3] * 3)
    np.testing.assert_allclose(target_weights(TARGETS, "pile_cc"), [0, 1, 0])
    np.testing.assert_allclose(target_weights(TARGETS, {"arxiv": 3.0, "github": 1.0}), [0.25, 0, 0.75])


def test_order_of_the_mapping_does_not_matter():
    a = target_weights(TARGETS, {"arxiv": 0.2, "github": 0.8})
    b = target_weights(TARGETS, {"github": 0.8, "arxiv": 0.2})
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "weights, match",
    [
        ("c4", "no target 'c4'"),
        ({"github": -1.0}, "finite and >= 0"),
        ({"github": float("nan")}, "finite and >= 0"),
        ({"github": 0.0}, "sum to 0"),
    ],
)
def test_bad_weights_are_one_line_errors(weights, match):
    with pytest.raises(ValueError, match=match):
        target_weights(TARGETS, weights)


def test_parse():
    assert parse_weights("mean") == "mean"
    assert parse_weights("a=0.5, b=1") == {"a": 0.5, "b": 1.0}
    with pytest.raises(ValueError, match="twice"):
        parse_weights("mmlu=0.5,mmlu=0.5")
    with pytest.raises(ValueError, match="not a number"):
        parse_weights("a=x")
