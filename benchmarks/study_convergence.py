"""Fits that finish (issue 29): converged share of the default starts and held-out error, per law.

1. The paper's 66-run design of a simulated world (6 sizes x 11 perturbed mixtures): converged share of 32 default
   starts, the best start's status, its objective's gap to a long run (20,000 L-BFGS steps, 500 Newton steps), and
   the wall time after compilation.
2. dmsl_shukor2025 (skipped with the reason when ../shared is absent): the longest run per mixture and size at
   122M-1.2B trains each law on every domain's loss; converged share, and the mean absolute percentage error of
   the four 2.718B runs (held out), per domain.

3. An upper bound on tied CAMEL's beta (`beta_max`, opt-in): none, c (domain exponents beta / c <= 1) and 3c, on the
   same starts: (a) eleven worlds of the default family, the 66-run design, held-out MAPE at
   M=12 and M=20 against the noiseless truth, converged share and the best start's status, tied k=3 and k=5;
   (b) study 1's protocol (compare_laws: n in 18..66 points, 20 repeats; --quick: 3 n, 3 repeats); (c) dmsl at
   2.718B, every domain.
4. SODM's mixture chart and SODMJoint's coefficient chart (issue 29; run against each checkout for a before/after
   comparison): SODMAdditive and SODMJoint without tokens, 32 default starts, (a) eleven worlds of the default
   family, the 66-run design, held-out MAPE at M=12 and M=20 against the noiseless truth, converged share, the best
   start's status and the fit's wall time; (b) dmsl at 2.718B, every domain.
5. DML's bound on the rate (`t_max`; issue 29): DML k=1 on the 11 design points at M=10 of five worlds, 32 default
   starts, without a bound and with t_max = 5, 10 (the default) and 20: converged share, the best objective and rate
   |t|, MAPE against the noiseless truth at M=10 at 200 unseen mixtures near the design (Dirichlet(40 r_ref)) and
   200 anywhere on the simplex, and leave-one-mixture-out error (11 fits of 10 points) against the observed loss;
   and the rate of DML k=1 fitted to the noiseless truth over the whole simplex (the world's own).
6. CAMELData's chart and bound (format 12; run against each checkout for a before/after comparison): tied k=3, 32
   default starts, (a) without tokens on eleven worlds of the default family, as 4a; (b) dmsl at 2.718B, every
   domain, without and with tokens.

Prints a table; asserts nothing. Run it against another checkout with PYTHONPATH=<that checkout> for a before/after
comparison (the columns are the same).

Usage: python benchmarks/study_convergence.py [--quick] [--only design|dmsl|bound|sodm|dml|camel_data]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from typing import Any

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax.experiments import _simulate  # noqa: E402
from camel_jax.experiments._design import perturbed_mixtures  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = np.array([0.35, 0.25, 0.15, 0.10, 0.15])
SIZES = np.array([4.0, 5.0, 6.0, 7.0, 8.0, 10.0])


def _converged(result) -> np.ndarray:
    return np.isin(np.asarray(result.status), [int(cj.Status.CONVERGED), int(cj.Status.STALLED)])


def _fit(law, inputs, y, restarts, options=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cj.fit(law, inputs, y, key=jax.random.key(1), restarts=restarts, options=options)
        jax.block_until_ready(result.objective)
        t0 = time.perf_counter()
        result = cj.fit(law, inputs, y, key=jax.random.key(1), restarts=restarts, options=options)
        jax.block_until_ready(result.objective)
    return result, time.perf_counter() - t0


def design_cases():
    world = _simulate.default_world(jax.random.key(0))
    runs = world.runs(perturbed_mixtures(REFERENCE), SIZES, noise=0.003, key=jax.random.key(1))
    data = world.mixture_data(runs, "loss_val0")
    r, M, y = np.asarray(data.r), np.asarray(data.size), np.asarray(data.y)
    tied = dict(n_datasets=5, tied=True, capacity_exponent=3.0)
    key = jax.random.key(0)
    cases = {
        "CAMEL tied k=3": (cj.CAMEL.sample_init(key, n_domains=3, **tied), (r, M), y),
        "CAMEL tied k=5": (cj.CAMEL.sample_init(key, n_domains=5, **tied), (r, M), y),
        "CAMEL free k=3": (cj.CAMEL.sample_init(key, n_datasets=5, n_domains=3), (r, M), y),
        "CAMELData tied k=3": (cj.CAMELData.sample_init(key, n_domains=3, tokens=False, **tied), (r, M), y),
        "SODMAdditive": (cj.SODMAdditive.sample_init(key, n_datasets=5, tokens=False), (r, M), y),
        "SODMJoint": (cj.SODMJoint.sample_init(key, n_datasets=5, tokens=False), (r, M), y),
        "DML k=1 (M=10 only)": (cj.DML.sample_init(key, n_datasets=5, n_domains=1), (r[M == 10],), y[M == 10]),
    }
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    try:
        import shared_data

        df = shared_data.epoch_chinchilla()
        cases["Chinchilla (Epoch)"] = (
            cj.Chinchilla.sample_init(key),
            (df["N"].to_numpy(), df["D"].to_numpy()),
            df["loss"].to_numpy(),
        )
    except Exception as error:  # noqa: BLE001 - the data are optional
        print(f"   (Epoch's Chinchilla data skipped: {error})")
    return cases


def section_design(quick: bool) -> None:
    print("\n1. Default options, 32 starts, the paper's 66-run design (Chinchilla: Epoch's 245 runs)")
    print(f"   {'law':22s} {'converged':>9s} {'best start':>11s} {'gap to long run':>16s} {'time':>7s}")
    long = cj.FitOptions(max_steps=5_000 if quick else 20_000, polish=500)
    for name, (law, inputs, y) in design_cases().items():
        result, seconds = _fit(law, inputs, y, 32)
        reference, _ = _fit(law, inputs, y, 32, long)
        gap = (float(result.objective) - float(reference.objective)) / float(reference.objective)
        best = cj.Status(int(np.asarray(result.status)[np.argmin(np.asarray(result.objectives))])).label
        print(f"   {name:22s} {np.mean(_converged(result)):9.0%} {best:>11s} {gap:16.1e} {seconds:6.1f}s", flush=True)


def _dmsl(section: str):
    """dmsl's longest run per mixture and size: (train at 122M-1.2B, test at 2.718B, mixture columns, losses), or
    None (printed) when the data folder is absent."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    import shared_data

    try:
        return shared_data.dmsl_held_out()
    except Exception as error:  # noqa: BLE001
        print(f"\n{section}. dmsl: skipped ({error})")
        return None


def section_dmsl(quick: bool) -> None:
    split = _dmsl("2")
    if split is None:
        return
    train, test, mixture, losses = split
    n = len(mixture)
    key = jax.random.key(0)
    laws = {
        "CAMEL tied k=3": cj.CAMEL.sample_init(key, n_datasets=n, n_domains=3, tied=True, capacity_exponent=3.0),
        "SODMAdditive": cj.SODMAdditive.sample_init(key, n_datasets=n, tokens=False),
    }
    domains = losses[:2] if quick else losses
    print(f"\n2. dmsl_shukor2025: {len(train)} runs at 122M-1.2B (longest per mixture and size), 32 default starts;")
    print(f"   held-out MAPE of the {len(test)} runs at 2.718B")
    print(f"   {'law':16s} {'loss':20s} {'converged':>9s} {'best start':>11s} {'held-out':>9s} {'time':>7s}")
    for name, law in laws.items():
        for loss in domains:
            tr = train[np.isfinite(train[loss])]
            te = test[np.isfinite(test[loss])]
            inputs = (tr[mixture].to_numpy(), tr["size"].to_numpy())
            result, seconds = _fit(law, inputs, tr[loss].to_numpy(), 32)
            pred = np.asarray(result.predict(te[mixture].to_numpy(), te["size"].to_numpy()))
            mape = 100 * np.mean(np.abs(pred / te[loss].to_numpy() - 1))
            best = cj.Status(int(np.asarray(result.status)[np.argmin(np.asarray(result.objectives))])).label
            share = np.mean(_converged(result))
            print(f"   {name:16s} {loss:20s} {share:9.0%} {best:>11s} {mape:8.2f}% {seconds:6.1f}s", flush=True)


BOUNDS = {"none": None, "c": 3.0, "3c": 9.0}  # beta_max for capacity exponent c = 3


def _design_and_truth(seed: int, mixes: Any) -> tuple[Any, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The default world of key `seed`: its 66-run design (0.3% noise, loss_val0) and the noiseless truth (r, M, y)
    at M=12 and M=20 for the same mixtures."""
    world = _simulate.default_world(jax.random.key(seed))
    data = world.mixture_data(world.runs(mixes, SIZES, noise=0.003, key=jax.random.key(1)), "loss_val0")
    truth = world.mixture_data(world.runs(mixes, np.array([12.0, 20.0]), noise=0.0, key=jax.random.key(2)), "loss_val0")
    return data, (np.asarray(truth.r), np.asarray(truth.size), np.asarray(truth.y))


def _tied(n_domains: int, bound: str, n_datasets: int = 5):
    return cj.CAMEL.sample_init(jax.random.key(0), n_datasets=n_datasets, n_domains=n_domains, tied=True,
                                capacity_exponent=3.0, beta_max=BOUNDS[bound])  # fmt: skip


def section_bound(quick: bool) -> None:
    print("\n3a. Tied CAMEL with and without the bound on beta, 66-run design, 32 default starts; held-out MAPE (%)")
    print(f"   {'world':>5s} {'k':>2s} {'bound':>6s} {'converged':>9s} {'best start':>11s} {'M=12':>7s} {'M=20':>7s}")
    mixes = perturbed_mixtures(REFERENCE)
    rows = []
    for seed in range(4 if quick else 11):
        data, (r_t, M_t, y_t) = _design_and_truth(seed, mixes)
        for k in (3, 5):
            for bound in BOUNDS:
                result, _ = _fit(_tied(k, bound), data.inputs, data.y, 32)
                ape = np.abs(np.asarray(result.predict(r_t, M_t)) / y_t - 1)
                best = cj.Status(int(result.best_status)).label
                row = (seed, k, bound, np.mean(_converged(result)), best, 100 * ape[M_t == 12].mean(),
                       100 * ape[M_t == 20].mean())  # fmt: skip
                rows.append(row)
                print(f"   {seed:5d} {k:2d} {bound:>6s} {row[3]:9.0%} {best:>11s} {row[5]:6.3f}% "
                      f"{row[6]:6.3f}%", flush=True)  # fmt: skip
    for k in (3, 5):
        for bound in BOUNDS:
            sel = [row for row in rows if row[1] == k and row[2] == bound]
            unconverged = sum(row[4] not in ("converged", "stalled") for row in sel)
            share, at12, at20 = (np.mean([row[i] for row in sel]) for i in (3, 5, 6))
            print(f"   mean k={k} bound={bound}: converged {share:.0%}, best start unconverged in "
                  f"{unconverged}/{len(sel)} worlds, M=12 {at12:.3f}%, M=20 {at20:.3f}%")  # fmt: skip

    print("\n3b. Study 1's protocol (world 0, 0.2% noise), tied CAMEL k=3 with each bound: mean MAPE (%)")
    world = _simulate.default_world(jax.random.key(0))
    runs = world.runs(mixes, [4, 5, 6, 7, 8, 10, 12, 20], noise=0.002, key=jax.random.key(1))
    data = world.mixture_data(runs, "loss_val0")
    laws = {f"bound {bound}": _tied(3, bound) for bound in BOUNDS}
    n_points = [18, 42, 66] if quick else [18, 24, 30, 36, 42, 48, 54, 60, 66]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = cj.experiments.compare_laws(laws, data, [4, 5, 6, 7, 8, 10], [12, 20], n_points=n_points,
                                repeats=3 if quick else 20, key=jax.random.key(0), restarts=8)  # fmt: skip
    print(table.groupby(["test_size", "law", "n_points"])["error"].mean().unstack("n_points").round(3).to_string())

    split = _dmsl("3c")
    if split is None:
        return
    train, test, mixture, losses = split
    print("\n3c. dmsl_shukor2025, tied CAMEL k=3, held-out MAPE at 2.718B with each bound (converged shares)")
    for loss in losses[:2] if quick else losses:
        tr, te = train[np.isfinite(train[loss])], test[np.isfinite(test[loss])]
        out = []
        for bound in BOUNDS:
            result, _ = _fit(_tied(3, bound, len(mixture)), (tr[mixture].to_numpy(), tr["size"].to_numpy()),
                             tr[loss].to_numpy(), 32)  # fmt: skip
            pred = np.asarray(result.predict(te[mixture].to_numpy(), te["size"].to_numpy()))
            out.append((100 * np.mean(np.abs(pred / te[loss].to_numpy() - 1)), np.mean(_converged(result))))
        print(f"   {loss:20s} " + " / ".join(f"{b} {e:.3f}% ({c:.0%})" for b, (e, c) in zip(BOUNDS, out)), flush=True)


def _sodm(name: str, n_datasets: int):
    cls = getattr(cj, name)
    return cls.sample_init(jax.random.key(0), n_datasets=n_datasets, tokens=False)


def section_sodm(quick: bool) -> None:
    chart = getattr(_sodm("SODMAdditive", 5), "mixture_chart", "log (the only chart)")
    coefficients = getattr(_sodm("SODMJoint", 5), "coefficient_chart", "roots (the only chart)")
    laws = {name: (lambda n, name=name: _sodm(name, n), False) for name in ("SODMAdditive", "SODMJoint")}
    _worlds_and_dmsl("4", f"SODM, mixture chart {chart}, SODMJoint's coefficient chart {coefficients}", laws, quick)


def _camel_data(n_datasets: int, tokens: bool):
    return cj.CAMELData.sample_init(jax.random.key(0), n_datasets=n_datasets, n_domains=3, tied=True,
                                    capacity_exponent=3.0, tokens=tokens)  # fmt: skip


def section_camel_data(quick: bool) -> None:
    law = _camel_data(5, False)
    layout = (f"gamma_max {getattr(law, 'gamma_max', None)}, polish {getattr(law, 'default_polish', lambda: None)()}"
              f"{', shares from the data mean' if hasattr(law, 'mixture_center') else ''}")  # fmt: skip
    laws = {"CAMELData": (lambda n: _camel_data(n, False), False),
            "CAMELData+D": (lambda n: _camel_data(n, True), True)}  # fmt: skip
    _worlds_and_dmsl("6", f"CAMELData tied k=3 ({layout}; +D: with tokens)", laws, quick)


def _worlds_and_dmsl(section: str, title: str, laws: dict[str, tuple[Any, bool]], quick: bool) -> None:
    """(a) eleven worlds of the default family (4 with --quick), the 66-run design, 32 default starts: converged share,
    the best start's status, held-out MAPE at M=12 and M=20 against the truth and the fit's wall time, per law
    without tokens; (b) dmsl at 2.718B, every domain (2 with --quick), per law (with tokens where it takes them).
    `laws`: {name: (a function of n_datasets giving the template, whether it takes tokens)}."""
    print(f"\n{section}a. {title}: 66-run design, 32 default starts; held-out MAPE (%) vs the truth")
    print(f"   {'world':>5s} {'law':13s} {'converged':>9s} {'best start':>11s} {'M=12':>7s} {'M=20':>7s} {'time':>6s}")
    mixes = perturbed_mixtures(REFERENCE)
    rows = []
    names = [name for name, (_, tokens) in laws.items() if not tokens]
    for seed in range(4 if quick else 11):
        data, (r_t, M_t, y_t) = _design_and_truth(seed, mixes)
        for name in names:
            result, seconds = _fit(laws[name][0](5), data.inputs, data.y, 32)
            ape = np.abs(np.asarray(result.predict(r_t, M_t)) / y_t - 1)
            best = cj.Status(int(result.best_status)).label
            row = (seed, name, np.mean(_converged(result)), best, 100 * ape[M_t == 12].mean(),
                   100 * ape[M_t == 20].mean(), seconds)  # fmt: skip
            rows.append(row)
            print(f"   {seed:5d} {name:13s} {row[2]:9.0%} {best:>11s} {row[4]:6.3f}% {row[5]:6.3f}% {seconds:5.1f}s",
                  flush=True)  # fmt: skip
    for name in names:
        sel = [row for row in rows if row[1] == name]
        unconverged = sum(row[3] not in ("converged", "stalled") for row in sel)
        share, at12, at20, seconds = (np.mean([row[i] for row in sel]) for i in (2, 4, 5, 6))
        print(f"   mean {name}: converged {share:.0%}, best start unconverged in {unconverged}/{len(sel)} worlds, "
              f"M=12 {at12:.3f}%, M=20 {at20:.3f}%, {seconds:.1f}s a fit")  # fmt: skip

    split = _dmsl(f"{section}b")
    if split is None:
        return
    train, test, mixture, losses = split
    print(f"\n{section}b. dmsl_shukor2025, {len(train)} runs at 122M-1.2B, 32 default starts; held-out MAPE at 2.718B")
    print(f"   {'law':13s} {'loss':20s} {'converged':>9s} {'best start':>11s} {'held-out':>9s} {'time':>6s}")
    for name, (make, tokens) in laws.items():
        errors, shares = [], []
        for loss in losses[:2] if quick else losses:
            tr, te = train[np.isfinite(train[loss])], test[np.isfinite(test[loss])]
            columns = ["size", "tokens"] if tokens else ["size"]
            inputs = (tr[mixture].to_numpy(), *(tr[c].to_numpy() for c in columns))
            result, seconds = _fit(make(len(mixture)), inputs, tr[loss].to_numpy(), 32)
            pred = np.asarray(result.predict(te[mixture].to_numpy(), *(te[c].to_numpy() for c in columns)))
            mape = 100 * np.mean(np.abs(pred / te[loss].to_numpy() - 1))
            best = cj.Status(int(result.best_status)).label
            errors.append(mape)
            shares.append(np.mean(_converged(result)))
            print(f"   {name:13s} {loss:20s} {shares[-1]:9.0%} {best:>11s} {mape:8.3f}% {seconds:5.1f}s", flush=True)
        print(f"   mean {name}: converged {np.mean(shares):.0%}, held-out {np.mean(errors):.3f}%")


DML_BOUNDS = {"none": None, "5": 5.0, "10": 10.0, "20": 20.0}


def _rate(law) -> float:
    """The best law's largest rate |t_i| (the norm of its row of t less the row's mean)."""
    return float(np.max(np.linalg.norm(np.asarray(law.params()["t"]), axis=-1)))


def section_dml(quick: bool) -> None:
    print("\n5. DML k=1, the design's 11 points at M=10, 32 default starts, by bound on the rate t_max; MAPE (%)")
    print("   vs the noiseless truth at 200 unseen mixtures near the design and 200 anywhere; leave-one-mixture-out")
    print("   (LOMO) vs the observed loss")
    print(f"   {'world':>5s} {'t_max':>5s} {'converged':>9s} {'objective':>11s} {'rate':>8s} {'near':>8s} "
          f"{'anywhere':>9s} {'LOMO':>7s}")  # fmt: skip
    rng = np.random.default_rng(0)
    unseen = {"near": rng.dirichlet(40 * REFERENCE, 200), "anywhere": rng.dirichlet(np.ones(5), 200)}
    mixes = perturbed_mixtures(REFERENCE)
    leave_one_out = 1.0 - np.eye(len(mixes))
    for seed in range(2 if quick else 5):
        world = _simulate.default_world(jax.random.key(seed))
        data = world.mixture_data(world.runs(mixes, SIZES, noise=0.003, key=jax.random.key(1)), "loss_val0")
        at10 = np.asarray(data.size) == 10.0
        r, y = np.asarray(data.r)[at10], np.asarray(data.y)[at10]
        truth = {}
        for name, m in unseen.items():
            t = world.mixture_data(world.runs(m, np.array([10.0]), noise=0.0, key=jax.random.key(2)), "loss_val0")
            truth[name] = (np.asarray(t.r), np.asarray(t.y))
        for bound, t_max in DML_BOUNDS.items():
            law = cj.DML.sample_init(jax.random.key(0), n_datasets=5, n_domains=1, t_max=t_max)
            result, _ = _fit(law, (r,), y, 32)
            mape = {name: 100 * np.mean(np.abs(np.asarray(result.predict(rt)) / yt - 1)) for name, (rt, yt) in
                    truth.items()}  # fmt: skip
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                folds = cj.fit(law, (r,), np.tile(y, (len(y), 1)), weights=leave_one_out, key=jax.random.key(1),
                               restarts=32)  # fmt: skip
            lomo = 100 * np.mean(np.abs(np.diag(np.asarray(folds.predict(r))) / y - 1))
            print(f"   {seed:5d} {bound:>5s} {np.mean(_converged(result)):9.0%} {float(result.objective):11.4e} "
                  f"{_rate(result.law):8.3g} {mape['near']:7.3g}% {mape['anywhere']:8.3g}% {lomo:6.3f}%", flush=True)
        own = []
        for name, (rt, yt) in truth.items():
            law = cj.DML.sample_init(jax.random.key(0), n_datasets=5, n_domains=1, t_max=None)
            own.append(f"{name} {_rate(_fit(law, (rt,), yt, 16)[0].law):.2f}")
        print(f"   world {seed}: rate of DML k=1 fitted to the noiseless truth, " + ", ".join(own), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=["design", "dmsl", "bound", "sodm", "dml", "camel_data"])
    args = parser.parse_args()
    print(f"camel-jax from {os.path.dirname(cj.__file__)}, jax {jax.__version__}, {os.cpu_count()} CPU cores")
    if args.only in (None, "design"):
        section_design(args.quick)
    if args.only in (None, "dmsl"):
        section_dmsl(args.quick)
    if args.only in (None, "bound"):
        section_bound(args.quick)
    if args.only in (None, "sodm"):
        section_sodm(args.quick)
    if args.only in (None, "dml"):
        section_dml(args.quick)
    if args.only in (None, "camel_data"):
        section_camel_data(args.quick)


if __name__ == "__main__":
    main()
