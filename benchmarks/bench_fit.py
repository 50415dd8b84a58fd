"""Fitting benchmark: camel-jax's vmapped L-BFGS against scipy L-BFGS-B with a jitted JAX gradient.

Prints figures and ratios measured in the same run; asserts nothing. Sections:
1. CAMEL k=5, n=5 (41 free parameters) on the paper's 66-point design (6 sizes x 11 perturbed mixtures) of a
   simulated world, float64, 64 starts x 200 steps: fits/s and best objective, camel-jax vs scipy.
2. A 1,000-resample warm-started CAMEL bootstrap: wall time and peak memory (in a fresh process).
3. Epoch AI's Chinchilla data from Hoffmann's 4,500-start grid with prescreening, compile included (fresh
   process); scipy with a JAX gradient over a random 150 of the grid points, scaled to the full grid.
4. Convergence per law with default options: converged share, the best start's status, its objective gap to a
   20,000-step reference, and the parameters the data leave free.
5. Time to convergence per law: camel-jax's converged share and seconds per start against scipy L-BFGS-B run to
   convergence (the same gradient tolerance, ftol 1e-15, 20,000 iterations) from the same starts, with the best
   objective each reaches and the speed ratio.

Usage: python benchmarks/bench_fit.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import camel_jax as cj  # noqa: E402
from camel_jax.experiments import _simulate  # noqa: E402
from camel_jax.experiments._design import perturbed_mixtures  # noqa: E402
from camel_jax.fitting._fit import random_starts  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = np.array([0.35, 0.25, 0.15, 0.10, 0.15])
SIZES = np.array([4.0, 5.0, 6.0, 7.0, 8.0, 10.0])


def paper_design():
    world = _simulate.default_world(jax.random.key(0))
    runs = world.runs(perturbed_mixtures(REFERENCE), SIZES, noise=0.003, key=jax.random.key(1))
    data = world.mixture_data(runs, "loss_val0")
    return data


def scipy_fits(law_template, inputs, y, starts, maxiter):
    from scipy.optimize import minimize

    params, static = jax.tree_util.tree_map(lambda x: x, starts), None
    import equinox as eqx

    params, static = eqx.partition(starts, eqx.is_array)
    one = jax.tree.map(lambda a: a[0], params)
    _, unravel = jax.flatten_util.ravel_pytree(one)
    flat = jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0])(params)
    w = jnp.ones_like(y)

    @jax.jit
    def value_and_grad(x):
        return jax.value_and_grad(lambda z: cj.fitting.objective(eqx.combine(unravel(z), static), inputs, y, w))(x)

    def fun(x):
        v, g = value_and_grad(jnp.asarray(x))
        return float(v), np.asarray(g, dtype=float)

    fun(np.asarray(flat[0]))  # compile
    start = time.perf_counter()
    best = np.inf
    for x0 in np.asarray(flat):
        res = minimize(fun, x0, jac=True, method="L-BFGS-B", options={"maxiter": maxiter})
        if np.isfinite(res.fun):
            best = min(best, res.fun)
    return time.perf_counter() - start, best


def section_camel(quick: bool) -> None:
    data = paper_design()
    template = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=5)
    starts = jax.vmap(lambda k: cj.CAMEL.sample_init(k, n_datasets=5, n_domains=5))(
        jax.random.split(jax.random.key(3), 64)
    )
    kwargs = dict(key=jax.random.key(0), inits=starts, options=cj.FitOptions(max_steps=200))
    t0 = time.perf_counter()
    jax.block_until_ready(cj.fit(template, data.inputs, data.y, **kwargs).objective)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = cj.fit(template, data.inputs, data.y, **kwargs)
    jax.block_until_ready(result.objective)
    ours = time.perf_counter() - t0
    n_scipy = 16 if quick else 64
    sub = jax.tree.map(lambda a: a[:n_scipy], starts)
    scipy_s, scipy_best = scipy_fits(template, data.inputs, data.y, sub, maxiter=200)
    ours_best_sub = float(np.min(np.asarray(result.objectives)[:n_scipy]))
    print("\n1. CAMEL k=5, n=5 (41 parameters), 66 points, float64, 64 starts x 200 steps")
    print(f"   camel-jax: {64 / ours:8.1f} fits/s  ({ours:.3f} s run, {compile_s:.1f} s first call incl. compile)")
    print(
        f"   scipy L-BFGS-B + jitted JAX grad: {n_scipy / scipy_s:8.1f} fits/s  ({scipy_s:.2f} s for {n_scipy} starts)"
    )
    print(f"   speed ratio: {(64 / ours) / (n_scipy / scipy_s):.1f}x")
    print(
        f"   best objective over the same {n_scipy} starts: camel-jax {ours_best_sub:.6e}, scipy {scipy_best:.6e} "
        f"(ratio {ours_best_sub / scipy_best:.4f}); camel-jax over 64: {float(result.objective):.6e}"
    )


BOOTSTRAP_CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    sys.path.insert(0, {here!r})
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    import camel_jax as cj
    from bench_fit import paper_design
    data = paper_design()
    template = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=5)
    full = cj.fit(template, data.inputs, data.y, key=jax.random.key(0), restarts=64)
    warm = jax.tree.map(lambda a: a[np.argsort(np.asarray(full.objectives))[:4]], full.laws)
    t0 = time.perf_counter()
    boot = cj.bootstrap(full.law, data.inputs, data.y, key=jax.random.key(1), n_resamples={n}, inits=warm,
                        groups=np.asarray(data.group), chunk_size=250, progress=False,
                        options=cj.FitOptions(max_steps=1000))
    jax.block_until_ready(boot.objectives)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(dict(wall=wall, peak_mb=peak, converged=float(np.mean(np.asarray(boot.converged))))))
    """
)

EPOCH_CHILD = textwrap.dedent(
    """
    import json, sys, time
    t0 = time.perf_counter()
    sys.path.insert(0, {tests!r})
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    import camel_jax as cj
    import shared_data
    df = shared_data.epoch_chinchilla()
    t1 = time.perf_counter()
    res = cj.fit(cj.Chinchilla.sample_init(jax.random.key(0)), (df["N"].to_numpy(), df["D"].to_numpy()),
                 df["loss"].to_numpy(), key=jax.random.key(0), inits=cj.Chinchilla.hoffmann_grid(),
                 options=cj.FitOptions(prescreen={k}))
    jax.block_until_ready(res.objective)
    t2 = time.perf_counter()
    print(json.dumps(dict(fit_s=t2 - t1, with_import_s=t2 - t0, objective=float(res.objective))))
    """
)


def child(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def section_bootstrap(quick: bool) -> None:
    n = 200 if quick else 1000
    stats = child(BOOTSTRAP_CHILD.format(here=HERE, n=n))
    print(f"\n2. Warm-started CAMEL bootstrap (k=5, grouped by mixture), {n} resamples x 4 starts")
    print(
        f"   wall {stats['wall']:.1f} s (incl. compile), peak memory {stats['peak_mb']:.0f} MB, "
        f"{100 * stats['converged']:.0f}% converged"
    )


def section_epoch(quick: bool) -> None:
    tests = os.path.join(os.path.dirname(HERE), "tests")
    sys.path.insert(0, tests)
    try:
        import shared_data

        df = shared_data.epoch_chinchilla()
    except FileNotFoundError as error:
        print(f"\n3. Epoch grid: skipped ({error})")
        return

    for k in (32, 64):
        stats = child(EPOCH_CHILD.format(tests=tests, k=k))
        print(
            f"\n3. Epoch Chinchilla, 4,500-start grid, prescreen={k}: fit {stats['fit_s']:.2f} s incl. compile "
            f"(process {stats['with_import_s']:.2f} s incl. imports), "
            f"objective {stats['objective']:.7e} (Epoch 1.0182740e-3)"
        )
    grid = cj.Chinchilla.hoffmann_grid()
    n_sub = 40 if quick else 150
    pick = np.random.default_rng(0).choice(4500, n_sub, replace=False)
    sub = jax.tree.map(lambda a: a[pick], grid)
    inputs = (jnp.asarray(df["N"].to_numpy()), jnp.asarray(df["D"].to_numpy()))
    scipy_s, scipy_best = scipy_fits(None, inputs, jnp.asarray(df["loss"].to_numpy()), sub, maxiter=15000)
    print(
        f"   scipy L-BFGS-B + JAX grad over {n_sub} grid points: {scipy_s:.1f} s -> {scipy_s * 4500 / n_sub:.0f} s "
        f"for the full grid (best {scipy_best:.7e})"
    )


def convergence_cases():
    """The laws of issue 10 on the 66-point design (and Chinchilla on Epoch's data when present)."""
    data = paper_design()
    tied = dict(n_datasets=5, tied=True, capacity_exponent=3.0)
    sodm = dict(n_datasets=5, tokens=False)
    cases = {
        "CAMEL tied k=3": (cj.CAMEL.sample_init(jax.random.key(0), n_domains=3, **tied), data.inputs, data.y),
        "CAMEL tied k=5": (cj.CAMEL.sample_init(jax.random.key(0), n_domains=5, **tied), data.inputs, data.y),
        "CAMEL free k=3": (cj.CAMEL.sample_init(jax.random.key(0), n_datasets=5, n_domains=3), data.inputs, data.y),
        "SODMAdditive": (cj.SODMAdditive.sample_init(jax.random.key(0), **sodm), data.inputs, data.y),
        "SODMJoint": (cj.SODMJoint.sample_init(jax.random.key(0), **sodm), data.inputs, data.y),
        "CAMELData tied k=3": (
            cj.CAMELData.sample_init(jax.random.key(0), n_domains=3, tokens=False, **tied), data.inputs, data.y
        ),
    }
    one_size = np.asarray(data.size) == 10.0
    dml = cj.DML.sample_init(jax.random.key(0), n_datasets=5, n_domains=1)
    cases["DML k=1 (M=10 only)"] = (dml, (data.r[one_size],), data.y[one_size])
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    try:
        import shared_data

        df = shared_data.epoch_chinchilla()
        inputs = (df["N"].to_numpy(), df["D"].to_numpy())
        cases["Chinchilla (Epoch)"] = (cj.Chinchilla.sample_init(jax.random.key(0)), inputs, df["loss"].to_numpy())
    except FileNotFoundError:
        pass
    return {name: case for name, case in cases.items() if any(part in name for part in LAWS)}


# which convergence cases to run (--law): substrings of their names
LAWS: list[str] = [""]


def section_convergence(quick: bool) -> None:
    """Converged share of 64 default starts, the best start's status, its gap to a 20,000-step reference, and how
    many parameters the data leave free (`FitResult.identifiability`)."""
    print("\n4. Convergence with default options (64 starts, 1,000 L-BFGS steps, Newton polish of the best)")
    print(f"   {'law':22s} {'converged':>9s} {'best start':>11s} {'gap to 20k-step ref':>20s} {'not identified':>15s}")
    for name, (law, inputs, y) in convergence_cases().items():
        t0 = time.perf_counter()
        result = cj.fit(law, inputs, y, key=jax.random.key(1))
        seconds = time.perf_counter() - t0
        reference = cj.fit(
            law, inputs, y, key=jax.random.key(1), options=cj.FitOptions(max_steps=5_000 if quick else 20_000)
        )
        gap = (float(result.objective) - float(reference.objective)) / float(reference.objective)
        report = result.identifiability()
        print(
            f"   {name:22s} {np.mean(np.asarray(result.converged)):9.0%} "
            f"{cj.Status(int(result.best_status)).label:>11s} "
            f"{gap:20.1e} {len(report.not_identified):>6d}/{len(report.names):<3d} ({seconds:.1f} s)"
        )


def scipy_to_convergence(template, inputs, y, starts, tol):
    """scipy L-BFGS-B (jitted JAX value and gradient) from each start, run to convergence: projected-gradient
    inf-norm <= `tol` (the same absolute bound camel-jax uses) or no further relative decrease at machine precision,
    at most 20,000 iterations. Returns (seconds, objectives, converged flags)."""
    import equinox as eqx
    from scipy.optimize import minimize

    params, static = eqx.partition(starts, eqx.is_array)
    _, unravel = jax.flatten_util.ravel_pytree(jax.tree.map(lambda a: a[0], params))
    flat = np.asarray(jax.vmap(lambda p: jax.flatten_util.ravel_pytree(p)[0])(params))
    arrays = tuple(jnp.asarray(x) for x in inputs)
    w = jnp.ones_like(jnp.asarray(y))

    @jax.jit
    def value_and_grad(x):
        return jax.value_and_grad(lambda z: cj.fitting.objective(eqx.combine(unravel(z), static), arrays,
                                                                 jnp.asarray(y), w))(x)

    def fun(x):
        v, g = value_and_grad(jnp.asarray(x))
        return float(v), np.asarray(g, dtype=float)

    fun(flat[0])  # compile outside the timing
    objectives, converged = [], []
    t0 = time.perf_counter()
    for x0 in flat:
        res = minimize(fun, x0, jac=True, method="L-BFGS-B",
                       options={"maxiter": 20_000, "maxfun": 40_000, "gtol": tol, "ftol": 1e-15})  # fmt: skip
        value, grad = fun(res.x)
        objectives.append(value)
        converged.append(bool(np.max(np.abs(grad)) <= tol) or "REL_REDUCTION" in str(res.message))
    return time.perf_counter() - t0, np.array(objectives), np.array(converged)


def section_scipy(quick: bool) -> None:
    """Per law: camel-jax's default fit (its converged share and wall time after compilation, the median of three
    runs) against scipy's L-BFGS-B run to convergence from the same starts; the best objective each reaches and the
    speed ratio (seconds per start), measured in the same run."""
    n_ours, n_scipy = 32, 4 if quick else 8
    print(f"\n5. Time to convergence: camel-jax ({n_ours} default starts, after compilation) vs scipy L-BFGS-B to "
          f"convergence from the first {n_scipy} of the same starts")  # fmt: skip
    print(f"   {'law':22s} {'ours conv':>9s} {'s/start':>8s} {'best obj':>13s} | {'scipy conv':>10s} {'s/start':>8s} "
          f"{'best obj':>13s} | {'speed':>6s}")  # fmt: skip
    for name, (law, inputs, y) in convergence_cases().items():
        template = cj.fitting.data_template(law, inputs, y)
        starts = random_starts(template, jax.random.key(1), n_ours)
        kwargs = dict(key=jax.random.key(1), inits=starts)
        jax.block_until_ready(cj.fit(template, inputs, y, **kwargs).objective)  # compile
        seconds_ours = []
        for _ in range(3):  # the median of three runs: one run of a small law takes milliseconds, and varies
            t0 = time.perf_counter()
            result = cj.fit(template, inputs, y, **kwargs)
            jax.block_until_ready(result.objective)
            seconds_ours.append(time.perf_counter() - t0)
        ours = float(np.median(seconds_ours)) / n_ours
        tol = float(cj.FitOptions().gradient_tolerance(result.weights))
        sub = jax.tree.map(lambda a: a[:n_scipy], starts)
        seconds, objectives, converged = scipy_to_convergence(template, inputs, y, sub, tol)
        theirs = seconds / n_scipy
        ours_sub = np.asarray(result.objectives)[:n_scipy]
        print(f"   {name:22s} {np.mean(np.asarray(result.converged)):9.0%} {ours:8.4f} {np.min(ours_sub):13.6e} | "
              f"{np.mean(converged):10.0%} {theirs:8.4f} {np.nanmin(objectives):13.6e} | {theirs / ours:5.1f}x",
              flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=["camel", "bootstrap", "epoch", "convergence", "scipy"])
    parser.add_argument("--law", action="append", help="run only the convergence cases whose name contains this")
    args = parser.parse_args()
    if args.law:
        LAWS[:] = args.law
    print(f"camel-jax {cj.__version__}, jax {jax.__version__}, devices {jax.devices()}, {os.cpu_count()} CPU cores")
    sections = {
        "camel": section_camel,
        "bootstrap": section_bootstrap,
        "epoch": section_epoch,
        "convergence": section_convergence,
        "scipy": section_scipy,
    }
    for name, section in sections.items():
        if args.only in (None, name):
            section(args.quick)


if __name__ == "__main__":
    main()
