"""One name for one law: the registry behind the command line, `backtest` and `backtest_observed`."""

import argparse

import jax
import pytest

import camel_jax as cj
from camel_jax.cli import fit as fit_command
from camel_jax.experiments import _backtest, _observed
from camel_jax.laws import ALIASES, LAWS, law_entry, law_name


@pytest.mark.parametrize("name", list(LAWS))
def test_every_registered_name_builds_its_law_and_is_named_back(name):
    law = cj.law_template(name, jax.random.key(0), n_datasets=3, n_domains=2, size_scale=10.0, tokens=False)
    assert type(law) is LAWS[name].cls
    if "tied" in LAWS[name].form:
        assert law.structure()["tied"] is LAWS[name].form["tied"]
    assert law_name(law) == name


def test_aliases_mean_one_law_everywhere():
    key = jax.random.key(3)
    assert ALIASES == {"camel": "camel-tied", "camel-data": "camel-data-tied", "sodm": "sodm-additive"}
    for alias, name in ALIASES.items():
        assert law_entry(alias) is LAWS[name]
        # the backtest's and the observed backtest's method names build the registry's law, leaf for leaf
        for built in (_backtest._template(alias, 3, key), _observed._template(alias, 3, 10.0, key)):
            assert type(built) is LAWS[name].cls and law_name(built) == name
    assert law_name(_backtest._template("camel-free", 3, key)) == "camel-free"


def test_the_command_line_reads_camel_as_tied_camel_like_the_backtest():
    args = argparse.Namespace(law="camel", seed=0, n_domains=2, capacity_exponent=1.0)
    table = fit_command._Table((None, None), None, ["r_a", "r_b", "r_c"], None, None)
    args.law = law_entry(args.law).name
    assert law_name(fit_command._law_template(args, table)) == "camel-tied"
    assert set(fit_command.AUTO_LAWS) <= set(LAWS)


def test_an_unknown_name_is_one_line_naming_the_registered_ones():
    with pytest.raises(ValueError, match=r"unknown law 'camel-tide'; the registered names are camel-tied, "):
        cj.law_template("camel-tide", jax.random.key(0), n_datasets=3)


@pytest.mark.parametrize("name", list(LAWS))
def test_every_declared_bound_is_an_option_the_registry_passes_on(name):
    """A bound a law declares (`UPPER_BOUNDS`) reaches it through `law_template`: before, `beta_max=3` was dropped
    for camel-data-tied without a word, and a study ran the unbounded law believing it bounded."""
    entry = LAWS[name]
    for field in entry.cls.UPPER_BOUNDS.values():
        assert field in entry.takes, (name, field)
        law = cj.law_template(name, jax.random.key(0), n_datasets=3, n_domains=2, tokens=False, **{field: 2.5})
        assert getattr(law, field) == 2.5, (name, field)
