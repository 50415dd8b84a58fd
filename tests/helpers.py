"""Shared problems, tolerances and independent NumPy reference implementations of every law."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import camel_jax as cj
from camel_jax.laws import CAMELMixture

RTOL = {np.dtype("float64"): 1e-10, np.dtype("float32"): 1e-5}


@contextlib.contextmanager
def traces_of(name: str) -> Iterator[list[str]]:
    """Collect, while the block runs, JAX's "Finished tracing" log lines of jitted functions named `name`: one
    per compilation of a new program (a cache hit traces nothing)."""
    found: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if message.startswith(f"Finished tracing + transforming {name} ") or message.startswith(
                f"Finished tracing {name} "
            ):
                found.append(message)

    handler = Collect(level=logging.DEBUG)
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    try:
        with jax.log_compiles():
            yield found
    finally:
        logger.removeHandler(handler)


def known_tied_camel():
    """A tied CAMEL law (k=2, n=3, capacity ~ M^3) with known parameters, the ground truth of several tests."""
    return cj.CAMEL.from_params(
        t=np.array([[0.8, 0.3, 0.1], [0.2, 0.7, 0.9]]),
        K=[1.0, 0.6],
        beta=[0.9, 1.5],
        C=1.5,
        tied=True,
        capacity_exponent=3.0,
    )


def random_mixtures(rng: np.random.Generator, P: int, n: int, zeros: bool = False) -> np.ndarray:
    r = rng.dirichlet(np.ones(n), size=P)
    if zeros:
        r[::3, 0] = 0.0
        r[1::3, -1] = 0.0
        r = r / r.sum(axis=1, keepdims=True)
    return r


def make_pipeline(batch=None):
    """A small known pipeline (3 datasets, 3 benchmarks, tied CAMEL k=2); `batch` stacks B copies whose K and C
    grow by 1% per resample."""
    rng = np.random.default_rng(0)
    loss_laws, bench_laws = {}, {}
    for b in ("mmlu", "gsm8k", "humaneval"):
        t = rng.dirichlet(np.ones(2), size=3).T
        kw = dict(
            t=t,
            K=rng.uniform(0.5, 1.5, 2),
            beta=rng.uniform(0.6, 1.2, 2),
            C=rng.uniform(1.0, 2.0),
            tied=True,
            capacity_exponent=3.0,
        )
        bk = dict(k=[1.0], A=0.7, B=-2.0, C=0.25)
        if batch:
            kw = {
                k: (
                    np.stack([np.asarray(v) * (1 + 0.01 * i) for i in range(batch)])
                    if k in ("K", "C")
                    else (np.stack([v] * batch) if k in ("t", "beta") else v)
                )
                for k, v in kw.items()
            }
            bk = {k: np.full(batch, v) if k != "k" else np.tile(v, (batch, 1)) for k, v in bk.items()}
        loss_laws[b] = cj.CAMEL.from_params(**kw)
        bench_laws[b] = cj.LossToBenchmark.from_params(**bk)
    return cj.Pipeline(loss_laws, bench_laws, {"mmlu": 0.5, "gsm8k": 0.3, "humaneval": 0.2})


# --- NumPy references, written from the formulas (not from the JAX code) ----------------------------------


def np_camel(p: dict[str, np.ndarray], r: np.ndarray, M: np.ndarray) -> np.ndarray:
    total = np.full(len(M), float(p["C"]))
    for i in range(len(p["K"])):
        eta = r @ p["t"][i]
        total += p["K"][i] / (eta ** p["alpha"][i] * M ** p["beta"][i])
    return total


def np_camel_data(p, r, M, D=None):
    """CAMEL plus sum_i G_i / (eta_i D)^gamma_i (D = 1 when the data term is at a fixed token count)."""
    total = np_camel(p, r, M)
    D = np.ones(len(M)) if D is None else D
    for i in range(len(p["G"])):
        total += p["G"][i] / ((r @ p["t"][i]) * D) ** p["gamma"][i]
    return total


def np_dml(p, r):
    return sum(p["S"][i] * (p["C"][i] + p["K"][i] * np.exp(r @ p["t"][i])) for i in range(len(p["S"])))


def np_camel_mixture(p, r):
    """C + sum_i K_i / <t_i, r>^alpha_i (CAMEL's law of the mixture at one size)."""
    total = np.full(len(r), float(p["C"]))
    for i in range(len(p["K"])):
        total += p["K"][i] / (r @ p["t"][i]) ** p["alpha"][i]
    return total


def np_sodm_additive(p, r, N, D=None):
    out = p["E"] + p["A"] / N ** p["alpha"] + 1.0 / sum(p["C"][j] * r[:, j] ** p["gamma"][j] for j in range(r.shape[1]))
    if D is not None:
        out = out + p["B"] / D ** p["beta"]
    return out


def np_sodm_joint(p, r, N, D=None):
    out = p["E"] + 1.0 / sum(p["C"][j] * r[:, j] ** p["gamma"][j] for j in range(r.shape[1]))
    out = out + (r @ p["CA"]) ** p["gammaA"] / N ** p["alpha"]
    if D is not None:
        out = out + (r @ p["CB"]) ** p["gammaB"] / D ** p["beta"]
    return out


def np_chinchilla(p, N, D):
    return p["E"] + p["A"] / N ** p["alpha"] + p["B"] / D ** p["beta"]


def np_power_law(p, x):
    return p["E"] + p["A"] / x ** p["alpha"]


def np_log_linear(p, r, M=None, D=None):
    """L = A prod_j (r_j + eps)^b_j / (M^alpha D^beta), as a product (not through logs)."""
    out = p["A"] * np.prod((r + p["eps"]) ** p["b"][None, :], axis=1)
    if M is not None:
        out = out / M ** p["alpha"]
    if D is not None:
        out = out / D ** p["beta"]
    return out


def np_loss_to_benchmark(p, L):
    return p["C"] + p["A"] / (1.0 + np.exp(L @ p["k"] + p["B"]))


def tied_alpha_np(beta: np.ndarray, c: float) -> np.ndarray:
    """CAMEL's tied exponent (Theorem 1): alpha_i = (beta_i / c) / (1 + beta_i / c)."""
    a = np.asarray(beta) / c
    return a / (1.0 + a)


def dml_representative(p: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The representative of DML's parameters that `DML.params()` reports (S = 1, rows of t summing to 0, equal
    C_i), computed from the formula: on the simplex S_i K_i exp(t_i . r) = S_i K_i exp(mean t_i) exp(tc_i . r)."""
    mean = p["t"].mean(axis=1)
    k = len(p["S"])
    return {
        "t": p["t"] - mean[:, None],
        "S": np.ones(k),
        "C": np.full(k, np.sum(p["S"] * p["C"]) / k),
        "K": p["S"] * p["K"] * np.exp(mean),
    }


@dataclass
class Case:
    """One law built by `from_params(**given, **structure)`, its inputs and its NumPy reference.

    `reference(given, *inputs)` works from the constructor's inputs alone (derived quantities such as a tied
    alpha are recomputed in NumPy), never from `law.params()`, so it is independent of the law's
    parameterization."""

    name: str
    law: Any
    inputs: tuple[np.ndarray, ...]
    reference: Callable[..., np.ndarray]
    mixture_input: bool  # inputs[0] is a mixture r
    given: dict[str, Any]  # the constrained values handed to from_params (no structural keywords)

    def given_params(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(v, dtype=np.float64) for k, v in self.given.items()}

    def expected_params(self) -> dict[str, np.ndarray]:
        """What `law.params()` must report: the given values plus the derived ones, recomputed here."""
        return self.given_params() | {k: np.asarray(v) for k, v in self.derived(self.given_params()).items()}

    def derived(self, given: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.name == "CAMEL_tied":
            return {"alpha": tied_alpha_np(given["beta"], 3.0)}
        if self.name == "DML":
            return dml_representative(given)
        if self.name == "CAMELData_tied_shared":
            alpha = tied_alpha_np(given["beta"], 3.0)
            return {"alpha": alpha, "gamma": alpha}
        if self.name in ("CAMELData_linear", "CAMELData_centred"):
            return {"alpha": tied_alpha_np(given["beta"], 3.0)}
        return {}


def make_case(name: str, seed: int = 0, P: int = 12, zeros: bool = False) -> Case:
    rng = np.random.default_rng(seed)
    n, k, V = 4, 3, 5
    r = random_mixtures(rng, P, n, zeros=zeros)
    M = rng.uniform(4, 12, P)
    N = 10 ** rng.uniform(7, 10, P)
    D = 10 ** rng.uniform(9, 11.5, P)
    t = rng.dirichlet(np.ones(k), size=n).T  # [k, n], columns on the simplex

    def case(cls, given, structure, inputs, reference, mixture_input=True):
        return Case(name, cls.from_params(**given, **structure), inputs, reference, mixture_input, given)

    if name == "CAMEL":
        given = dict(
            t=t, K=rng.uniform(0.2, 2, k), alpha=rng.uniform(0.2, 0.9, k), beta=rng.uniform(0.3, 1.2, k), C=1.7
        )
        return case(cj.CAMEL, given, {}, (r, M), np_camel)
    if name == "CAMEL_ratio_bound":
        # the free law within its default bound alpha / beta <= 1/3 (issue 29)
        beta = rng.uniform(0.3, 1.2, k)
        given = dict(t=t, K=rng.uniform(0.2, 2, k), alpha=beta * rng.uniform(0.02, 0.33, k), beta=beta, C=1.7)
        return case(cj.CAMEL, given, dict(ratio_max=1 / 3), (r, M), np_camel)
    if name == "CAMEL_tied":
        given = dict(t=t, K=rng.uniform(0.2, 2, k), beta=rng.uniform(0.3, 1.2, k), C=1.7)

        def ref(p, r, M):
            return np_camel({**p, "alpha": tied_alpha_np(p["beta"], 3.0)}, r, M)

        return case(cj.CAMEL, given, dict(tied=True, capacity_exponent=3.0), (r, M), ref)
    if name == "CAMEL_scaled":
        # K is given in the user's units of N (size_scale only conditions the fit): the reference uses N as is
        given = dict(
            t=t,
            K=rng.uniform(0.2, 2, k) * 1e3,
            alpha=rng.uniform(0.2, 0.9, k),
            beta=rng.uniform(0.2, 0.4, k),
            C=1.7,
        )
        return case(cj.CAMEL, given, dict(size_scale=1e9), (r, N), np_camel)
    if name == "CAMELData":
        given = dict(
            t=t,
            K=rng.uniform(0.2, 2, k) * 1e3,
            alpha=rng.uniform(0.2, 0.9, k),
            beta=rng.uniform(0.2, 0.4, k),
            C=1.7,
            G=rng.uniform(0.2, 2, k) * 1e3,
            gamma=rng.uniform(0.1, 0.4, k),
        )
        return case(cj.CAMELData, given, dict(size_scale=1e9, tokens_scale=1e10), (r, N, D), np_camel_data)
    if name == "CAMELData_centred":
        # shares measured from a mixture c (issue 29: `fit` sets the data's mean) and gamma within 2: the same function
        given = dict(t=t, K=rng.uniform(0.2, 2, k), beta=rng.uniform(0.3, 1.2, k), C=1.7, G=rng.uniform(0.05, 0.5, k),
                     gamma=rng.uniform(0.1, 1.9, k))  # fmt: skip

        def ref_centred(p, r, M):
            return np_camel_data({**p, "alpha": tied_alpha_np(p["beta"], 3.0)}, r, M)

        structure = dict(tied=True, tokens=False, capacity_exponent=3.0, gamma_max=2.0,
                         mixture_center=tuple(np.random.default_rng(99).dirichlet(np.ones(n))))  # same for any seed
        return case(cj.CAMELData, given, structure, (r, M), ref_centred)
    if name == "CAMELData_tied_shared":
        given = dict(t=t, K=rng.uniform(0.2, 2, k), beta=rng.uniform(0.3, 1.2, k), C=1.7, G=rng.uniform(0.05, 0.5, k))

        def ref_data(p, r, M):
            alpha = tied_alpha_np(p["beta"], 3.0)
            return np_camel_data({**p, "alpha": alpha, "gamma": alpha}, r, M)

        structure = dict(tied=True, shared_exponents=True, tokens=False, capacity_exponent=3.0)
        return case(cj.CAMELData, given, structure, (r, M), ref_data)
    if name == "CAMELData_linear":
        d = rng.normal(0, 0.05, n)
        given = dict(t=t, K=rng.uniform(0.2, 2, k), beta=rng.uniform(0.3, 1.2, k), C=1.7, d=d - d.mean())

        def ref_linear(p, r, M):
            alpha = tied_alpha_np(p["beta"], 3.0)
            eta = r @ p["t"].T
            return p["C"] + np.sum(p["K"] * eta**-alpha * M[:, None] ** -p["beta"], axis=1) + r @ p["d"]

        structure = dict(tied=True, tokens=False, capacity_exponent=3.0, data_term="linear")
        return case(cj.CAMELData, given, structure, (r, M), ref_linear)
    if name == "DML":
        given = dict(
            t=rng.normal(size=(k, n)), S=rng.uniform(0.2, 1, k), C=rng.uniform(0, 1, k), K=rng.uniform(0.1, 1, k)
        )
        return case(cj.DML, given, {}, (r,), np_dml)
    if name == "CAMELMixture":
        given = dict(t=t, K=rng.uniform(0.2, 2, k), alpha=rng.uniform(0.1, 0.9, k), C=1.7)
        return case(CAMELMixture, given, dict(alpha_max=1.0, loss_scale=10.0), (r,), np_camel_mixture)
    if name == "SODMAdditive":
        given = dict(
            E=1.5, A=300.0, alpha=0.3, B=2000.0, beta=0.35, C=rng.uniform(1, 5, n), gamma=rng.uniform(0.2, 0.8, n)
        )
        structure = dict(size_scale=1e8, tokens_scale=1e10)  # the units a fit sets (terms of the loss's order)
        return case(cj.SODMAdditive, given, structure, (r, N, D), np_sodm_additive)
    if name == "SODMAdditive_notokens":
        given = dict(E=1.5, A=300.0, alpha=0.3, C=rng.uniform(1, 5, n), gamma=rng.uniform(0.2, 0.8, n))
        return case(cj.SODMAdditive, given, dict(size_scale=1e8), (r, N), np_sodm_additive)
    if name == "SODMJoint":
        given = dict(
            E=1.5,
            C=rng.uniform(1, 5, n),
            gamma=rng.uniform(0.2, 0.8, n),
            CA=rng.uniform(100, 500, n),
            gammaA=1.1,
            alpha=0.3,
            CB=rng.uniform(1000, 3000, n),
            gammaB=0.9,
            beta=0.35,
        )
        return case(cj.SODMJoint, given, dict(size_scale=1e8, tokens_scale=1e10), (r, N, D), np_sodm_joint)
    if name == "LogLinear":
        given = dict(A=3.2, b=rng.normal(0, 0.1, n), eps=rng.uniform(1e-3, 0.1))
        return case(cj.LogLinear, given, {}, (r,), np_log_linear)
    if name == "LogLinear_size_tokens":
        given = dict(A=40.0, b=rng.normal(0, 0.1, n), eps=rng.uniform(1e-3, 0.1), alpha=0.07, beta=0.05)
        return case(cj.LogLinear, given, dict(size_scale=1e8, tokens_scale=1e10, loss_scale=10.0), (r, N, D),
                    np_log_linear)
    if name == "Chinchilla":
        given = dict(A=406.4, B=410.7, E=1.69, alpha=0.34, beta=0.28)
        return case(cj.Chinchilla, given, {}, (N, D), np_chinchilla, False)
    if name == "PowerLaw":
        return case(cj.PowerLaw, dict(E=2.0, A=5.0, alpha=0.5), dict(scale=8.0), (M,), np_power_law, False)
    if name == "LossToBenchmark":
        L = rng.uniform(2.5, 4.5, (P, V))
        given = dict(k=rng.normal(size=V), A=0.7, B=-1.0, C=0.25)
        return case(cj.LossToBenchmark, given, {}, (L,), np_loss_to_benchmark, False)
    if name == "LossToBenchmark_monotone":
        L = rng.uniform(2.5, 4.5, (P, V))
        given = dict(k=rng.uniform(0.1, 1.0, V), A=0.7, B=-1.0, C=0.25)
        return case(cj.LossToBenchmark, given, dict(monotone=True), (L,), np_loss_to_benchmark, False)
    raise KeyError(name)


CASES = [
    "CAMEL",
    "CAMEL_ratio_bound",
    "CAMEL_tied",
    "CAMEL_scaled",
    "CAMELData",
    "CAMELData_tied_shared",
    "CAMELData_linear",
    "CAMELData_centred",
    "DML",
    "CAMELMixture",
    "SODMAdditive",
    "SODMAdditive_notokens",
    "SODMJoint",
    "LogLinear",
    "LogLinear_size_tokens",
    "Chinchilla",
    "PowerLaw",
    "LossToBenchmark",
    "LossToBenchmark_monotone",
]


def jnp_inputs(inputs, dtype=jnp.float64):
    return tuple(jnp.asarray(x, dtype=dtype) for x in inputs)


def cast_law(law, dtype):
    return jax.tree.map(lambda a: a.astype(dtype) if isinstance(a, jax.Array) else a, law)


def tamper(src: Any, dst: Any, edit_meta: Callable | None = None, edit_leaf: Callable | None = None) -> Any:
    """Copy a file written by `cj.save`, changing its metadata (a function of the dict) or its arrays."""
    with np.load(src, allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    meta = json.loads(str(arrays.pop("__meta__")))
    if edit_meta:
        edit_meta(meta)
    if edit_leaf:
        edit_leaf(arrays)
    np.savez(dst, __meta__=np.array(json.dumps(meta)), **arrays)
    return dst
