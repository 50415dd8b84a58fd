"""One loop on the command line (issue 60): fit -> design --fit -> next --fit --candidates design.csv; names travel
through next_runs (issue 55); a batch of distinct runs."""

import dataclasses

import equinox as eqx
import jax
import numpy as np
import pandas as pd
import pytest
from helpers import random_mixtures

import camel_jax as cj
from camel_jax import cli

NAMES = ("r_web", "r_code", "r_math")


def spread_ensemble(B=24):
    """A batch of tied CAMEL laws that disagree (random starts): an ensemble with spread everywhere."""
    laws = jax.vmap(lambda k: cj.CAMEL.sample_init(k, n_datasets=3, n_domains=2, tied=True, capacity_exponent=3.0))(
        jax.random.split(jax.random.key(0), B)
    )
    return cj.BootstrapResult.of_laws(laws)


def named(boot, names):
    """`boot` carrying the mixture column names it was fitted on (BootstrapResult's `names`, where it has one)."""
    if "names" in {f.name for f in dataclasses.fields(cj.BootstrapResult)}:
        return dataclasses.replace(boot, names=tuple(names))

    class Named(cj.BootstrapResult):
        names: tuple = eqx.field(static=True, default=None)

    return Named(**{f.name: getattr(boot, f.name) for f in dataclasses.fields(boot)}, names=tuple(names))


def candidates(seed=0, P=16):
    rng = np.random.default_rng(seed)
    r = random_mixtures(rng, P, 3)
    sizes = np.tile([4.0, 5.0, 6.0, 8.0], P // 4)
    return pd.DataFrame({**{c: r[:, j] for j, c in enumerate(NAMES)}, "size": sizes, "flops": sizes**3})


def test_next_runs_picks_the_same_runs_whatever_the_order_of_named_columns():
    """Before (issue 55): the candidates' r_* columns reversed picked other runs, with no warning."""
    boot = named(spread_ensemble(), NAMES)
    table = candidates()
    reversed_table = table[[*NAMES[::-1], "size", "flops"]]
    common = dict(budget=1e9, target_size=20.0, key=jax.random.key(1), batch=3, noise=1e-3)
    picks = cj.next_runs(boot, table, **common)
    again = cj.next_runs(boot, reversed_table, **common)
    assert len(picks) == 3 and list(picks.index) == list(again.index)
    np.testing.assert_allclose(picks["score"], again["score"], rtol=1e-9)
    # without names, the columns are named explicitly, in the fit's order
    nameless = spread_ensemble()
    explicit = cj.next_runs(nameless, reversed_table, mixture=list(NAMES), **common)
    assert list(explicit.index) == list(picks.index)
    # a table whose names differ from the fit's is refused, naming the column
    with pytest.raises(ValueError, match="no column 'r_math'"):
        cj.next_runs(boot, table.rename(columns={"r_math": "r_maths"}), **common)
    with pytest.raises(ValueError, match="'r_extra' the fit never saw"):
        cj.next_runs(boot, table.assign(r_extra=0.0), **common)


def test_a_batch_without_replicates_is_distinct_runs():
    """Before: with tied CAMEL, a batch of 4 proposed the same two runs twice each (copies in the table too)."""
    boot = spread_ensemble()
    table = pd.concat([candidates(), candidates()], ignore_index=True)  # every run listed twice
    common = dict(budget=1e12, target_size=20.0, key=jax.random.key(1), batch=4, noise=1e-2)
    again = cj.next_runs(boot, table, **common)  # replicates allowed: the library's default
    distinct = cj.next_runs(boot, table, replace=False, **common)
    runs = distinct[[*NAMES, "size"]].round(12).drop_duplicates()
    assert len(distinct) == 4 and len(runs) == 4
    assert len(again) == 4  # (may repeat a run: a noisy replicate can be worth more than a new one)
    np.testing.assert_allclose(distinct["shift"] ** 2, distinct["score"], rtol=1e-12)
    assert distinct.attrs["noise"] == pytest.approx(1e-2)


def test_next_runs_with_a_token_aware_law_reads_the_candidates_tokens():
    laws = jax.vmap(lambda k: cj.CAMELData.sample_init(k, n_datasets=3, n_domains=2, tokens=True))(
        jax.random.split(jax.random.key(2), 16)
    )
    boot = cj.BootstrapResult.of_laws(laws)
    table = candidates().assign(tokens=lambda t: 20 * t["size"] ** 3 * 1e5)
    common = dict(budget=1e12, target_size=20.0, key=jax.random.key(1), batch=4, noise=1e-3, replace=False)
    out = cj.next_runs(boot, table, tokens="tokens", target_tokens=2e12, **common)
    assert len(out) == 4 and out.index.is_unique
    # the same runs at other tokens are other runs: the scores change
    other = cj.next_runs(boot, table.assign(tokens=table["tokens"] * 4), tokens="tokens", target_tokens=2e12, **common)
    assert not np.allclose(np.sort(out["score"].to_numpy()), np.sort(other["score"].to_numpy()))
    with pytest.raises(ValueError, match="go together"):
        cj.next_runs(boot, table, tokens="tokens", **common)


# --- design's CSV names its mixture columns ------------------------------------------------------------------


def design(tmp_path, *extra):
    out = tmp_path / "design.csv"
    code = cli.main(["design", "--budget", "1e22", "--strategy", "rectangle", "--out", str(out), *extra])
    return code, (pd.read_csv(out) if code == 0 else None)


def test_design_writes_named_mixture_columns_and_reads_parameter_counts(tmp_path, capsys):
    code, table = design(tmp_path, "--sizes", "4,5,6", "--names", "web,code,math", "--mixtures", "5")
    assert code == 0 and [c for c in table.columns if c in ("web", "code", "math")] == ["web", "code", "math"]
    np.testing.assert_allclose(table[["web", "code", "math"]].sum(axis=1), 1.0, rtol=1e-9)
    code, table = design(tmp_path, "--sizes", "4,5,6", "--reference", "0.5,0.3,0.2")
    assert code == 0 and {"r_0", "r_1", "r_2"} <= set(table.columns)
    # parameter counts are parameters, not the paper's size index (before: overflow and "costs inf")
    capsys.readouterr()
    code, table = design(tmp_path, "--sizes", "8.5e7,2e8,4e8", "--reference", "0.5,0.3,0.2", "--tokens", "1e9")
    assert code == 0 and np.all(np.isfinite(table["flops"]))
    np.testing.assert_allclose(table["flops"], 6.0 * table["size"] * 1e9, rtol=1e-12)
    code = cli.main(["design", "--sizes", "4,5,6", "--budget", "1e22", "--out", str(tmp_path / "x.csv")])
    err = capsys.readouterr().err
    assert code == 2 and "needs its mixtures" in err and len(err.strip().splitlines()) == 1


# --- the loop on the command line ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs_csv(tmp_path_factory):
    """Runs with parameter counts and tokens: a capacity law in the mixture plus a data term."""
    rng = np.random.default_rng(0)
    rows = []
    for N in (1e8, 2e8, 4e8, 8e8):
        for _ in range(8):
            r = rng.dirichlet(np.ones(3))
            D = 20 * N * rng.choice([0.5, 1.0, 2.0])
            quality = 0.5 * r[0] + 0.3 * np.sqrt(r[1]) + 0.2 * r[2] ** 0.7
            loss = 1.8 + 4.0 * (N / 1e8) ** -0.25 * (1.2 - quality) + 2.0 * (D / 1e9) ** -0.3 + rng.normal(0, 0.005)
            rows.append({**dict(zip(NAMES, r)), "size": N, "tokens": D, "loss": loss})
    path = tmp_path_factory.mktemp("loop") / "runs.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def loop(runs_csv, folder, law, capsys):
    fit = folder / law
    assert cli.main(["fit", str(runs_csv), "--law", law, "--restarts", "2", "--resamples", "0", "--out", str(fit)]) == 0
    design_csv = folder / f"{law}-design.csv"
    assert cli.main(["design", "--fit", f"{fit}.npz", "--sizes", "1e8,2e8,4e8,8e8", "--budget", "1e21",
                     "--strategy", "rectangle", "--out", str(design_csv)]) == 0  # fmt: skip
    designed = pd.read_csv(design_csv)
    assert [c for c in designed.columns if c.startswith("r_")] == list(NAMES)  # the fit's names
    capsys.readouterr()
    out = folder / f"{law}-next.csv"
    assert cli.main(["next", "--fit", f"{fit}.npz", "--candidates", str(design_csv), "--budget", "1e22",
                     "--size", "1.6e9", "--batch", "4", "--resamples", "8", "--out", str(out)]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    chosen = pd.read_csv(out)
    return designed, chosen, printed


@pytest.mark.parametrize("law", ["camel-tied", pytest.param("camel-data-tied", marks=pytest.mark.slow)])
def test_the_loop_on_the_command_line_proposes_four_distinct_runs(runs_csv, tmp_path, capsys, law):
    designed, chosen, printed = loop(runs_csv, tmp_path, law, capsys)
    assert len(chosen) == 4 and chosen["candidate_row"].is_unique
    assert len(chosen[[*NAMES, "size", "tokens"]].round(12).drop_duplicates()) == 4
    assert printed.count("per FLOP") == 4 and "noise floor" in printed
    assert "more runs stop paying" in printed or "more runs still pay" in printed
    if law == "camel-data-tied":  # a token-aware law: each run is (mixture, size, tokens), the target's tokens said
        assert "tokens at size 1.6e+09" in printed and printed.count(", tokens ") >= 4


def test_a_fit_of_several_targets_is_decided_on_its_weighted_objective():
    """`WeightedTargets`, the ensemble `next` builds for a fit of several losses: weights (1, 0) are target 0."""
    from camel_jax.mixture._next import WeightedTargets

    first, second = spread_ensemble().laws, named(spread_ensemble(), NAMES).laws
    second = jax.tree.map(lambda leaf: leaf[::-1], second)  # another ensemble member per resample
    both = jax.tree.map(lambda a, b: np.stack([a, b], axis=1), first, second)  # [B, T=2, ...]
    B = int(np.shape(jax.tree.leaves(first)[0])[0])
    common = dict(budget=1e9, target_size=20.0, key=jax.random.key(1), batch=3, noise=1e-3, replace=False)
    table = candidates()
    alone = cj.next_runs(cj.BootstrapResult.of_laws(first), table, **common)
    weighted = WeightedTargets(both, np.broadcast_to(np.array([1.0, 0.0]), (B, 2)))
    same = cj.next_runs(cj.BootstrapResult.of_laws(weighted), table, **common)
    assert list(same.index) == list(alone.index)
    # the recommendation r* is an optimizer's answer, met to its tolerance on either path: scores agree to ~1e-8
    np.testing.assert_allclose(same["score"], alone["score"], rtol=1e-6)
    mixed = WeightedTargets(both, np.broadcast_to(np.array([0.5, 0.5]), (B, 2)))
    r, M = np.asarray(table[list(NAMES)]), np.asarray(table["size"])
    np.testing.assert_allclose(
        jax.vmap(lambda law: law(r, M))(mixed),
        0.5 * jax.vmap(lambda law: law(r, M))(first) + 0.5 * jax.vmap(lambda law: law(r, M))(second), rtol=1e-12
    )


def test_gradient_design_ascends_the_variance_removed_per_flop():
    """continuous_next_runs: each run's score is `variance_reduction` at its (rounded) mixture, and ascent beats
    random mixtures at the same size."""
    from camel_jax.mixture._continuous_next import continuous_next_runs

    boot = spread_ensemble()
    out = continuous_next_runs(boot, [4.0, 8.0], [4.0**3, 8.0**3], target_size=20.0, noise=1e-3,
                               key=jax.random.key(0), batch=2, names=NAMES, steps=60)  # fmt: skip
    assert len(out) == 2 and list(out.columns[:3]) == list(NAMES)
    r = out[list(NAMES)].to_numpy()
    np.testing.assert_allclose(r.sum(axis=1), 1.0, rtol=1e-12)
    at = lambda rows, size: np.asarray(  # noqa: E731
        jax.vmap(lambda law: law(np.atleast_2d(rows), np.full(len(np.atleast_2d(rows)), size)))(boot.laws)
    )
    q = at(out.attrs["recommended"], 20.0)[:, 0]
    first = cj.mixture.variance_reduction(q, at(r[0], out["size"].iloc[0]), 1e-3)[0]
    np.testing.assert_allclose(out["score"].iloc[0], first, rtol=1e-6)
    random_r = random_mixtures(np.random.default_rng(5), 64, 3)
    best_random = cj.mixture.variance_reduction(q, at(random_r, out["size"].iloc[0]), 1e-3).max()
    assert out["score"].iloc[0] >= 0.9 * best_random
    assert out["sd_after"].iloc[-1] < out.attrs["sd_before"]


def test_the_conditional_score_is_the_gaussian_conditional_variance_reduction_and_ignores_padding():
    """_conditional_score against NumPy's conditional covariance (Schur complements of the ensemble's covariance),
    and unchanged by the zero columns that pad the chosen outcomes to a fixed width (one compiled ascent)."""
    from camel_jax.mixture._continuous_next import _conditional_score

    rng = np.random.default_rng(3)
    B = 40
    base = rng.normal(size=(B, 4))
    q, Fc, g = base[:, 0] + 0.5 * base[:, 1], base[:, 1:3] + 0.3 * base[:, [0, 0]], base[:, 3] + base[:, 0]
    s2 = 0.05
    S = np.cov(np.column_stack([q, Fc, g]), rowvar=False)
    # Var(q | Fc + noise) minus Var(q | Fc + noise, g + noise): the variance of q that observing g removes
    def conditional_var(S, observed):
        Soo = S[np.ix_(observed, observed)] + s2 * np.eye(len(observed))
        return S[0, 0] - S[0, observed] @ np.linalg.solve(Soo, S[observed, 0])

    expected = conditional_var(S, [1, 2]) - conditional_var(S, [1, 2, 3])
    got = float(_conditional_score(q, Fc, g, s2))
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    padded = np.column_stack([Fc, np.zeros((B, 3))])
    np.testing.assert_allclose(float(_conditional_score(q, padded, g, s2)), expected, rtol=1e-10)
    np.testing.assert_allclose(float(_conditional_score(q, np.zeros((B, 2)), g, s2)),
                               S[0, 3] ** 2 / (S[3, 3] + s2), rtol=1e-10)  # fmt: skip
