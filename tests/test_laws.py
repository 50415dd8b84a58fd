"""Every law against an independent NumPy formula, its round trips, gradients, zero weights, vmap and jit."""

import equinox as eqx
import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import CASES, RTOL, cast_law, jnp_inputs, make_case, np_camel, np_dml, np_sodm_joint

import camel_jax as cj


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_matches_numpy_reference(name, dtype):
    case = make_case(name)
    law = cast_law(case.law, dtype)
    pred = law(*jnp_inputs(case.inputs, dtype))
    assert pred.dtype == dtype
    # the reference is built from the values given to from_params (derived exponents recomputed in NumPy)
    expected = case.reference(case.given_params(), *case.inputs)
    np.testing.assert_allclose(
        np.asarray(pred, dtype=np.float64), expected, rtol=RTOL[np.dtype(dtype)] * (1 if dtype == jnp.float64 else 10)
    )


@pytest.mark.parametrize("name", CASES)
def test_params_report_the_given_values_and_the_derived_ones(name):
    case = make_case(name)
    params = case.law.params()
    expected = case.expected_params()
    assert set(params) == set(expected), (sorted(params), sorted(expected))
    for key, value in expected.items():
        np.testing.assert_allclose(params[key], value, rtol=1e-12, atol=1e-14, err_msg=key)


@pytest.mark.parametrize("name", CASES)
def test_params_round_trip(name):
    case = make_case(name)
    params = case.law.params()
    rebuilt = type(case.law).from_params(**params, **_static_options(case.law))
    for key, value in rebuilt.params().items():
        np.testing.assert_allclose(value, params[key], rtol=1e-12, atol=1e-14, err_msg=key)
    np.testing.assert_allclose(rebuilt(*jnp_inputs(case.inputs)), case.law(*jnp_inputs(case.inputs)), rtol=1e-12)


def _static_options(law):
    """The structural keywords from_params needs beyond the constrained values."""
    opts = {}
    names = ("tied", "capacity_exponent", "size_scale", "tokens_scale", "scale", "alpha_bounds", "beta_bounds",
             "loss_scale", "center", "t_max", "ratio_max", "alpha_max")  # fmt: skip
    for name in names + ("shared_exponents",):
        if hasattr(law, name):
            opts[name] = getattr(law, name)
    if isinstance(law, cj.CAMELData):  # SODM infers `tokens` from B; CAMELData's G is there either way
        opts["tokens"] = law.tokens
    return opts


@pytest.mark.parametrize("name", CASES)
def test_every_leaf_is_a_free_parameter(name):
    law = make_case(name).law
    leaves = jax.tree.leaves(law)
    assert all(isinstance(leaf, jax.Array) for leaf in leaves), "static structure leaked into the leaves"
    assert cj.laws.n_free_parameters(law) == sum(leaf.size for leaf in leaves)


def test_camel_profiles_are_on_the_simplex_and_tied_exponents_follow_the_theorem():
    law = cj.CAMEL.sample_init(jax.random.key(3), n_datasets=5, n_domains=4)
    np.testing.assert_allclose(jnp.sum(law.t, axis=0), np.ones(5), rtol=1e-14)
    tied = make_case("CAMEL_tied").law
    a = tied.params()["beta"] / 3.0
    np.testing.assert_allclose(tied.params()["alpha"], a / (1 + a), rtol=1e-14)
    assert tied.raw_alpha is None and cj.laws.n_free_parameters(tied) == 3 * 4 + 3 + 3 + 1


def test_camel_with_one_domain_is_a_power_law_in_size():
    law = cj.CAMEL.from_params(t=np.ones((1, 3)), K=[2.5], alpha=[0.7], beta=[0.9], C=1.3)
    r = jnp.asarray(np.random.default_rng(0).dirichlet(np.ones(3), 6))
    M = jnp.linspace(4.0, 12.0, 6)
    power = cj.PowerLaw.from_params(E=1.3, A=2.5, alpha=0.9)
    np.testing.assert_allclose(law(r, M), power(M), rtol=1e-13)


@pytest.mark.parametrize("name", CASES)
def test_gradients_match_central_finite_differences(name):
    case = make_case(name, P=6)
    inputs = jnp_inputs(case.inputs)
    params, static = eqx.partition(case.law, eqx.is_array)
    flat, unravel = jax.flatten_util.ravel_pytree(params)
    f = jax.jit(lambda x: jnp.sum(jnp.sin(eqx.combine(unravel(x), static)(*inputs))))
    grad = jax.grad(f)(flat)
    h = 1e-6
    eye = jnp.eye(flat.size)
    fd = np.asarray((jax.vmap(f)(flat[None, :] + h * eye) - jax.vmap(f)(flat[None, :] - h * eye)) / (2 * h))
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["CAMEL", "CAMEL_tied", "CAMELData", "DML", "SODMAdditive", "SODMJoint", "LogLinear",
                                  "CAMELMixture"])
def test_zero_mixture_weights_give_finite_values_and_gradients(name):
    case = make_case(name, zeros=True)
    inputs = jnp_inputs(case.inputs)
    assert np.any(np.asarray(inputs[0]) == 0)
    pred = case.law(*inputs)
    assert np.all(np.isfinite(pred))
    np.testing.assert_allclose(pred, case.reference(case.given_params(), *case.inputs), rtol=1e-10)
    grads = jax.grad(lambda law: jnp.sum(law(*inputs)))(case.law)
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
    grad_r = jax.grad(lambda r: jnp.sum(case.law(r, *inputs[1:])))(inputs[0])
    if name != "SODMAdditive" and name != "SODMJoint":  # d r^gamma / dr is infinite at 0 for gamma < 1
        assert np.all(np.isfinite(grad_r))


@pytest.mark.parametrize("name", CASES)
def test_batched_law_under_vmap_equals_a_loop_and_jit_works(name):
    case = make_case(name)
    inputs = jnp_inputs(case.inputs)
    laws = [make_case(name, seed=s).law for s in range(3)]
    batched = jax.tree.map(lambda *xs: jnp.stack(xs), *laws)
    out = jax.jit(jax.vmap(lambda law: law(*inputs)))(batched)
    for i, law in enumerate(laws):
        np.testing.assert_allclose(out[i], law(*inputs), rtol=1e-13)
    np.testing.assert_allclose(
        eqx.filter_jit(lambda law, *x: law(*x))(case.law, *inputs), case.law(*inputs), rtol=1e-13
    )


def test_from_params_accepts_leading_batch_axes():
    grid = np.linspace(0.2, 0.5, 4)
    laws = cj.Chinchilla.from_params(A=400.0, B=400.0, E=1.7, alpha=grid, beta=grid[::-1])
    assert laws.E1.shape == (4,)
    N, D = jnp.array([1e8, 1e9]), jnp.array([1e10, 1e11])
    out = jax.vmap(lambda law: law(N, D))(laws)
    for i in range(4):
        single = cj.Chinchilla.from_params(A=400.0, B=400.0, E=1.7, alpha=grid[i], beta=grid[::-1][i])
        np.testing.assert_allclose(out[i], single(N, D), rtol=1e-14)


@pytest.mark.parametrize("name", CASES)
def test_sample_init_rebuilds_the_structure_and_is_deterministic(name):
    law = make_case(name).law
    cls = type(law)
    a = cls.sample_init(jax.random.key(7), **law.structure())
    b = cls.sample_init(jax.random.key(7), **law.structure())
    assert jax.tree.structure(a) == jax.tree.structure(law)
    assert all(x.shape == y.shape for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(law)))
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
    many = jax.vmap(lambda k: cls.sample_init(k, **law.structure()))(jax.random.split(jax.random.key(0), 5))
    assert jax.tree.leaves(many)[0].shape[0] == 5
    assert np.all(np.isfinite(jax.vmap(lambda l: l(*jnp_inputs(make_case(name).inputs)))(many)))


def test_size_scale_changes_conditioning_not_predictions():
    base = make_case("CAMEL_scaled")
    p = base.law.params()
    other = cj.CAMEL.from_params(**p, size_scale=1.0)
    inputs = jnp_inputs(base.inputs)
    np.testing.assert_allclose(other(*inputs), base.law(*inputs), rtol=1e-12)


@pytest.mark.parametrize(
    "name, units",
    [
        ("SODMAdditive", dict(loss_scale=1e-3, size_scale=1e9, tokens_scale=1e11)),
        ("SODMAdditive_notokens", dict(loss_scale=1e3, size_scale=1e6)),
        ("SODMJoint", dict(loss_scale=1e-3, size_scale=1e9, tokens_scale=1e11)),
        ("DML", dict(loss_scale=1e2, center=(0.4, 0.3, 0.2, 0.1))),
        ("Chinchilla", dict(loss_scale=1e-2, size_scale=1e9, tokens_scale=1e10)),
        ("LogLinear_size_tokens", dict(loss_scale=1e-3, size_scale=1e9, tokens_scale=1e11)),
    ],
)
def test_units_change_conditioning_not_predictions(name, units):
    """The static units (loss, size, tokens, DML's mixture center) are coordinates only: the same paper's
    parameters in other units are the same function and report the same parameters."""
    case = make_case(name)
    params = case.law.params()
    other = type(case.law).from_params(**params, **units)
    inputs = jnp_inputs(case.inputs)
    np.testing.assert_allclose(other(*inputs), case.law(*inputs), rtol=1e-11)
    for key, value in other.params().items():
        np.testing.assert_allclose(value, params[key], rtol=1e-11, err_msg=key)


def test_well_posed_limits_are_regular_points():
    """Each law's limits are finite points of its coordinates with finite gradients: a term off (b = 0), a log law
    in size (alpha = 0: SODMAdditive's E1 - b log(N / s_N)), a log law in the mixture (SODM's kappa = 0:
    -sum_j p_j c_j log r_j), and DML's linear limit (kappa = 0: C1 + a . H^T (r - c))."""
    case = make_case("SODMAdditive_notokens")
    law = cj.SODMAdditive.from_params(**case.law.params(), size_scale=1e8, mixture_chart="log")
    inputs = jnp_inputs(case.inputs)
    r, N = case.inputs
    limit = eqx.tree_at(lambda l: (l.raw_alpha, l.root_kappa), law, (jnp.zeros(()), jnp.zeros(())))
    p, c = np.asarray(law.p_roots) ** 2, np.asarray(law.root_c) ** 2
    p = p / p.sum()
    expected = float(law.E1) - float(law.root_bA) ** 2 * np.log(N / 1e8) - np.log(r) @ (p * c)
    np.testing.assert_allclose(limit(*inputs), expected, rtol=1e-12)
    near = eqx.tree_at(lambda l: (l.raw_alpha, l.root_kappa), law, (jnp.full((), 1e-6), jnp.full((), 1e-6)))
    np.testing.assert_allclose(near(*inputs), expected, rtol=1e-9)
    dml = make_case("DML")
    (r,) = dml.inputs
    linear = eqx.tree_at(lambda l: l.raw_kappa, dml.law, jnp.zeros(3))
    H = np.linalg.qr(np.eye(4) - 0.25)[0][:, :3]  # any orthonormal basis of the directions on the simplex
    a_full = np.asarray(dml.law.a) @ cj.laws._terms.helmert(4).T  # [k, n]: the slopes in r
    np.testing.assert_allclose(H @ H.T @ a_full.T, a_full.T, atol=1e-12)
    np.testing.assert_allclose(linear(jnp.asarray(r)), float(dml.law.C1) + (r - 0.25) @ a_full.sum(axis=0),
                               rtol=1e-12)  # fmt: skip
    for limit_law, limit_inputs in ((limit, inputs), (linear, (jnp.asarray(r),))):
        grads = jax.grad(lambda l: jnp.sum(l(*limit_inputs)))(limit_law)
        assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree.leaves(grads))
    off = eqx.tree_at(lambda l: l.root_c, law, jnp.zeros(4))  # no mixture effect: the term is zero
    np.testing.assert_allclose(off(r, N) - off(r[::-1], N), 0.0, atol=1e-12)


def test_dml_bound_on_the_rate_is_the_same_function_and_a_regular_point():
    """DML's `t_max` (the default) holds each term's rate |t_i| (the norm of its row of t less the row's mean) in
    [0, t_max] by kappa_i = t_max sin(raw_i)^2 / |a_i|: within the bound the law is the NumPy formula (and the
    unbounded law), at the bound the raw coordinate is stationary (a start can stop there), past it from_params
    refuses, and a term off (a_i = 0) keeps finite gradients."""
    rng = np.random.default_rng(3)
    r = jnp.asarray(rng.dirichlet(np.ones(4), 9))
    t = rng.normal(size=(2, 4))
    t -= t.mean(axis=1, keepdims=True)
    t *= np.array([[3.0], [1.2]]) / np.linalg.norm(t, axis=1, keepdims=True)  # rates 3 and 1.2
    given = {"t": t, "S": np.array([0.7, 0.4]), "C": np.array([0.5, 1.0]), "K": np.array([0.3, 0.8])}
    bounded = cj.DML.from_params(**given, t_max=3.0)  # the first term at the bound, the second within it
    unbounded = cj.DML.from_params(**given, t_max=None)
    assert bounded.structure()["t_max"] == 3.0 and unbounded.structure()["t_max"] is None
    expected = np_dml(given, np.asarray(r))
    np.testing.assert_allclose(bounded(r), expected, rtol=1e-10)
    np.testing.assert_allclose(unbounded(r), expected, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(bounded.kappa) * np.linalg.norm(bounded.a, axis=-1), [3.0, 1.2], rtol=1e-10)
    np.testing.assert_allclose(bounded.params()["t"], t, rtol=1e-10)
    np.testing.assert_allclose(unbounded.raw_kappa, np.sqrt(unbounded.kappa), rtol=1e-14)  # t_max=None: sqrt(kappa)
    grad = jax.grad(lambda raw: jnp.sum(eqx.tree_at(lambda l: l.raw_kappa, bounded, raw)(r)))(bounded.raw_kappa)
    assert abs(float(grad[0])) < 1e-12 < abs(float(grad[1]))
    with pytest.raises(ValueError, match="t_max"):
        cj.DML.from_params(**given, t_max=2.9)
    off = eqx.tree_at(lambda l: l.a, bounded, bounded.a.at[1].set(0.0))
    grads = jax.grad(lambda law: jnp.sum(law(r)))(off)
    assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree.leaves(grads))
    # the default starts: bounded, each rate at most 0.9 t_max
    keys = jax.random.split(jax.random.key(0), 64)
    starts = jax.vmap(lambda key: cj.DML.sample_init(key, n_datasets=4, n_domains=3))(keys)
    assert starts.t_max == cj.laws._dml.T_MAX
    assert float(jnp.max(starts.kappa * jnp.linalg.norm(starts.a, axis=-1))) <= 0.9 * starts.t_max


def test_the_linear_limit_of_the_mixture_term_is_a_regular_point():
    """SODM's "linear" chart: as kappa -> 0 (equal C, every gamma -> 1, K -> infinity) the mixture term less n K
    tends to n (mean(a) - sum_j a_j r_j - sum_j b_j r_j log r_j), a = H p_tilt, b = gamma_tilt, a zero weight
    included; the limit is finite, with gradients that match finite differences there and nearby."""
    case = make_case("SODMAdditive_notokens")
    law, (r, N) = case.law, case.inputs
    assert law.mixture_chart == "linear"
    r = np.concatenate([r, [[0.5, 0.0, 0.3, 0.2]]])  # a zero weight: r^gamma = 0, r log r = 0
    N = np.concatenate([N, [3e8]])
    limit = eqx.tree_at(lambda l: l.root_kappa, law, jnp.zeros(()))
    a = np.asarray(law.p_tilt) @ cj.laws._terms.helmert(4).T
    b = np.asarray(law.gamma_tilt)
    r_log_r = np.where(r > 0, r * np.log(np.where(r > 0, r, 1.0)), 0.0)
    z = np.log(N / 1e8)
    size = -float(law.root_bA) ** 2 * z * cj.laws._camel.exprel(-float(law.raw_alpha) ** 2 * z)
    expected = float(law.E1) + size + 4 * (a.mean() - r @ a - r_log_r @ b)
    np.testing.assert_allclose(limit(jnp.asarray(r), jnp.asarray(N)), expected, rtol=1e-12)
    near = eqx.tree_at(lambda l: l.root_kappa, law, jnp.full((), 1e-5))  # kappa = 1e-10
    np.testing.assert_allclose(near(jnp.asarray(r), jnp.asarray(N)), expected, rtol=1e-9)

    def total(leaves, at):
        return jnp.sum(eqx.combine(leaves, at)(jnp.asarray(r), jnp.asarray(N)))

    for point in (limit, near, eqx.tree_at(lambda l: l.root_kappa, law, jnp.full((), 0.3))):
        leaves, rest = eqx.partition(point, eqx.is_array)
        grads = jax.grad(total)(leaves, rest)
        for get in (lambda l: l.root_kappa, lambda l: l.p_tilt, lambda l: l.gamma_tilt):
            value = np.asarray(get(leaves), dtype=float)
            analytic = np.atleast_1d(np.asarray(get(grads)))
            assert np.all(np.isfinite(analytic))
            numeric = []
            for i in range(value.size):
                step = np.zeros(value.size)
                step[i] = 1e-6
                plus = eqx.tree_at(get, leaves, jnp.asarray((value.ravel() + step).reshape(value.shape)))
                minus = eqx.tree_at(get, leaves, jnp.asarray((value.ravel() - step).reshape(value.shape)))
                numeric.append((float(total(plus, rest)) - float(total(minus, rest))) / 2e-6)
            np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-7)
    off = eqx.tree_at(lambda l: (l.p_tilt, l.gamma_tilt), law, (jnp.zeros(3), jnp.zeros(4)))  # equal C, gamma = 1
    np.testing.assert_allclose(off(jnp.asarray(r), jnp.asarray(N)) - float(off.E1) - size, 0.0, atol=1e-12)


def test_chinchilla_is_exact_at_large_sizes():
    # in the units a fit of such data sets (orders of magnitude of N and D), every term is of the loss's order
    law = cj.Chinchilla.from_params(A=406.4, B=410.7, E=1.69, alpha=0.34, beta=0.28, size_scale=1e11,
                                    tokens_scale=1e13)  # fmt: skip
    N, D = np.array([1e11, 1e12]), np.array([1e13, 1e14])
    np.testing.assert_allclose(
        law(jnp.asarray(N), jnp.asarray(D)), 1.69 + 406.4 / N**0.34 + 410.7 / D**0.28, rtol=1e-14
    )
    np.testing.assert_allclose(
        law.log_loss(jnp.asarray(N), jnp.asarray(D)), np.log(1.69 + 406.4 / N**0.34 + 410.7 / D**0.28), rtol=1e-14
    )


def test_loss_to_benchmark_does_not_overflow_and_exposes_the_proxy_loss():
    law = cj.LossToBenchmark.from_params(k=[400.0, 300.0], A=0.6, B=-2.0, C=0.25)
    L = jnp.array([[3.0, 4.0], [-3.0, -4.0]])
    acc = law(L)
    assert np.all(np.isfinite(acc))
    np.testing.assert_allclose(acc, [0.25, 0.85], rtol=1e-12)
    np.testing.assert_allclose(law.proxy_loss(L), [2400.0, -2400.0])


def test_bad_parameters_raise_clear_errors():
    with pytest.raises(ValueError, match="`K` must be > 0"):
        cj.CAMEL.from_params(t=np.full((2, 3), 0.5), K=[1.0, -1.0], alpha=[0.5, 0.5], beta=[0.5, 0.5], C=1.0)
    with pytest.raises(ValueError, match="`t` must sum to 1"):
        cj.CAMEL.from_params(t=np.full((2, 3), 0.4), K=[1.0, 1.0], alpha=[0.5, 0.5], beta=[0.5, 0.5], C=1.0)
    with pytest.raises(ValueError, match="determined by `beta`"):
        cj.CAMEL.from_params(t=np.full((2, 3), 0.5), K=[1.0, 1.0], alpha=[0.5, 0.5], beta=[0.5, 0.5], C=1.0, tied=True)
    with pytest.raises(ValueError, match="`alpha` is required"):
        cj.CAMEL.from_params(t=np.full((2, 3), 0.5), K=[1.0, 1.0], beta=[0.5, 0.5], C=1.0)
    with pytest.raises(ValueError, match="inside its bounds"):
        cj.CAMEL.from_params(
            t=np.full((2, 3), 0.5), K=[1.0, 1.0], beta=[0.5, 3.0], C=1.0, tied=True, beta_bounds=(0, 2)
        )
    with pytest.raises(ValueError, match="tied CAMEL only"):
        cj.CAMEL.from_params(
            t=np.full((2, 3), 0.5), K=[1.0, 1.0], alpha=[0.5, 0.5], beta=[0.5, 1.0], C=1.0, beta_bounds=(0.0, 2.0)
        )
    with pytest.raises(ValueError, match="do not broadcast"):
        cj.Chinchilla.from_params(A=np.ones(3), B=np.ones(2), E=1.0, alpha=0.3, beta=0.3)


def test_bounded_exponents_stay_in_bounds():
    law = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True, beta_bounds=(0.2, 2.0))
    huge = eqx.tree_at(lambda l: l.raw_beta, law, jnp.array([50.0, -50.0]))
    p = huge.params()
    np.testing.assert_allclose(p["beta"], [2.0, 0.2], rtol=1e-12)
    rebuilt = cj.CAMEL.from_params(**law.params(), tied=True, beta_bounds=(0.2, 2.0))
    np.testing.assert_allclose(rebuilt.raw_beta, law.raw_beta, rtol=1e-10)
    with pytest.raises(ValueError, match="alpha_bounds"):
        cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, alpha_bounds=(0.1, 0.9))


def test_camel_ratio_bound_is_a_regular_point_and_can_be_dropped():
    """The free law's alpha_i / beta_i <= ratio_max by g_i = ratio_max sin(raw_i)^2: the same function as the
    unbounded law (and the NumPy formula) inside the bound, stationary at it, and the default of a free start."""
    t = np.array([[0.8, 0.3, 0.1], [0.2, 0.7, 0.9]])
    r = np.array([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]])
    M = np.array([4.0, 9.0, 20.0])
    given = dict(t=t, K=[1.0, 0.6], alpha=[0.5, 0.1], beta=[1.5, 0.8], C=1.5)  # alpha / beta = 1/3 and 1/8
    bounded = cj.CAMEL.from_params(**given, ratio_max=1 / 3)
    unbounded = cj.CAMEL.from_params(**given)
    assert bounded.ratio_max == pytest.approx(1 / 3) and unbounded.ratio_max is None  # from_params: opt-in
    np.testing.assert_allclose(bounded(r, M), np_camel({k: np.asarray(v) for k, v in given.items()}, r, M), rtol=1e-12)
    np.testing.assert_allclose(bounded(r, M), unbounded(r, M), rtol=1e-12)
    for name, value in bounded.params().items():
        np.testing.assert_allclose(value, unbounded.params()[name], rtol=1e-12, err_msg=name)
    grad = jax.grad(lambda raw: jnp.sum(eqx.tree_at(lambda l: l.raw_alpha, bounded, raw)(r, M)))(bounded.raw_alpha)
    assert abs(float(grad[0])) < 1e-12 < abs(float(grad[1]))
    with pytest.raises(ValueError, match="ratio_max"):
        cj.CAMEL.from_params(**{**given, "alpha": [0.6, 0.1]}, ratio_max=1 / 3)
    with pytest.raises(ValueError, match="ratio_max"):
        cj.CAMEL.from_params(t=t, K=[1.0, 0.6], beta=[1.5, 0.8], C=1.5, tied=True, ratio_max=0.5)
    with pytest.raises(ValueError, match="ratio_max"):
        cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, ratio_max="none")
    free = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2)
    assert free.ratio_max == pytest.approx(1 / 3) and free.structure()["ratio_max"] == free.ratio_max
    assert bool(jnp.all(free.ratio <= 0.9 / 3 + 1e-12))
    assert cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True).ratio_max is None
    loose = cj.CAMEL.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, ratio_max=None)
    assert loose.ratio_max is None and bool(jnp.any(loose.ratio > 1 / 3))  # the previous starts, alpha / beta <= 3


def test_camel_log_law_limit_is_a_regular_point():
    """beta = 0 is the log law C1 - sum_i b_i (g_i log eta_i + log(M / s_M)): finite, with finite gradients."""
    law = cj.CAMEL.from_params(t=np.array([[0.7, 0.2], [0.3, 0.8]]), K=[0.4, 0.3], beta=[0.5, 0.2], C=1.0, tied=True,
                               capacity_exponent=3.0)  # fmt: skip
    r = jnp.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]])
    M = jnp.array([1.0, 4.0, 16.0])
    at_zero = eqx.tree_at(lambda l: l.raw_beta, law, jnp.zeros(2))
    t, b = np.asarray(law.t), np.asarray(law.b)
    eta = np.asarray(r) @ t.T
    expected = float(law.C1) - np.sum(b[None, :] * (np.log(eta) / 3.0 + np.log(np.asarray(M))[:, None]), axis=1)
    np.testing.assert_allclose(at_zero(r, M), expected, rtol=1e-12)
    grads = jax.grad(lambda l: jnp.sum(l(r, M)))(at_zero)
    assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree.leaves(grads))
    near = eqx.tree_at(lambda l: l.raw_beta, law, jnp.full(2, 1e-5))  # beta = 1e-10: the power law is the log law
    np.testing.assert_allclose(near(r, M), expected, rtol=1e-8)


def test_sodm_joint_coefficient_charts_are_the_same_function_with_regular_limits():
    """SODMJoint's "uniform" coefficient chart (the default) and "roots" chart (files up to format 7) are the NumPy
    formula; in the uniform chart h_A = 0 (gammaA -> infinity with pA -> uniform) is a finite point, where the size
    term is A (exp(2 e . r / A - alpha log m) - 1) plus its constant, and so is a weight pA_j = 0 (e_j = -1 / h_A), with
    finite gradients that match finite differences."""
    case = make_case("SODMJoint")
    given, inputs = case.law.params(), jnp_inputs(case.inputs)
    expected = np_sodm_joint({k: np.asarray(v) for k, v in given.items()}, *case.inputs)
    units = dict(size_scale=1e8, tokens_scale=1e10)
    for chart in ("uniform", "roots"):
        law = cj.SODMJoint.from_params(**given, **units, coefficient_chart=chart)
        assert law.coefficient_chart == chart and law.structure()["coefficient_chart"] == chart
        np.testing.assert_allclose(law(*inputs), expected, rtol=1e-12)
        for key, value in law.params().items():
            np.testing.assert_allclose(value, given[key], rtol=1e-11, err_msg=key)
    law = case.law
    assert law.coefficient_chart == "uniform" and law.pA_roots is None and law.root_aA is None
    r, N, _ = case.inputs
    e = np.asarray(law.pA_tilt) @ cj.laws._terms.helmert(4).T
    limit = eqx.tree_at(lambda l: l.root_hA, law, jnp.zeros(()))
    without_size = eqx.tree_at(lambda l: l.root_bA, limit, jnp.zeros(()))  # isolates the size term at m = 1
    A = 1.0 / float(law.root_kappaA) ** 2
    z = np.log(N / 1e8)
    size = A * (np.exp(2 * r @ e / A - float(law.root_bA) ** 2 / A * z) - np.exp(2 * r @ e / A))
    np.testing.assert_allclose(limit(*inputs) - without_size(*inputs), law.loss_scale * size, rtol=1e-9)
    near = eqx.tree_at(lambda l: l.root_hA, law, jnp.full((), 1e-7))
    np.testing.assert_allclose(near(*inputs), limit(*inputs), rtol=1e-10)
    # a zero weight: 1 + h e_0 = 0 gives pA_0 = 0, the formula with CA_0 = 0
    h = float(law.root_hA) ** 2
    e_zero = np.concatenate([[-1.0 / h], e[1:] - (e[1:].sum() - 1.0 / h) / 3.0])
    assert abs(e_zero.sum()) < 1e-12 and e_zero[0] == -1.0 / h
    zero = eqx.tree_at(lambda l: l.pA_tilt, law, jnp.asarray(e_zero @ cj.laws._terms.helmert(4)))
    params = {k: np.asarray(v) for k, v in zero.params().items()}
    assert params["CA"][0] < 1e-12 * params["CA"].max()
    np.testing.assert_allclose(zero(*inputs), np_sodm_joint(params, *case.inputs), rtol=1e-10)
    for point in (limit, zero):
        leaves, rest = eqx.partition(point, eqx.is_array)
        total = lambda l, rest=rest: jnp.sum(eqx.combine(l, rest)(*inputs))  # noqa: E731
        grads = jax.grad(total)(leaves)
        for get in (lambda l: l.root_hA, lambda l: l.pA_tilt):
            value = np.atleast_1d(np.asarray(get(leaves), dtype=float))
            analytic = np.atleast_1d(np.asarray(get(grads)))
            numeric = []
            for i in range(value.size):
                step = np.zeros(value.size)
                step[i] = 1e-6
                at = lambda v, get=get: eqx.tree_at(get, leaves, jnp.asarray(v.reshape(np.shape(get(leaves)))))  # noqa: E731
                numeric.append((float(total(at(value + step))) - float(total(at(value - step)))) / 2e-6)
            np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-6)


def test_camel_data_linear_data_term_is_regular_at_zero_and_checks_its_arguments():
    """The "linear" data term (CAMELData without tokens, opt-in): d = 0 (no data term) is a regular point, the
    gradient there matches finite differences, any d builds (its mean joins C: the same function), and the
    arguments that do not belong to it are refused."""
    t = np.array([[0.8, 0.3, 0.1], [0.2, 0.7, 0.9]])
    r = np.array([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]])
    M = np.array([4.0, 9.0, 6.0])
    common = dict(t=t, K=[1.0, 0.6], beta=[0.5, 1.5], tied=True, capacity_exponent=3.0, tokens=False)
    law = cj.CAMELData.from_params(**common, C=1.5, d=[0.0, 0.0, 0.0])
    assert law.data_term == "linear" and law.root_h is None and law.raw_gamma is None
    camel = cj.CAMEL.from_params(t=t, K=[1.0, 0.6], beta=[0.5, 1.5], C=1.5, tied=True, capacity_exponent=3.0)
    np.testing.assert_allclose(law(r, M), camel(r, M), rtol=1e-13)  # d = 0: CAMEL itself
    params, static = eqx.partition(law, eqx.is_array)
    flat, unravel = jax.flatten_util.ravel_pytree(params)
    f = jax.jit(lambda x: jnp.sum(jnp.sin(eqx.combine(unravel(x), static)(jnp.asarray(r), jnp.asarray(M)))))
    grad = jax.grad(f)(flat)
    h = 1e-6
    eye = jnp.eye(flat.size)
    fd = np.asarray((jax.vmap(f)(flat[None, :] + h * eye) - jax.vmap(f)(flat[None, :] - h * eye)) / (2 * h))
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7)
    assert np.all(np.abs(np.asarray(jax.grad(lambda tilt: jnp.sum(
        eqx.tree_at(lambda l: l.d_tilt, law, tilt)(r, M)))(law.d_tilt))) > 1e-3)  # fmt: skip
    shifted = cj.CAMELData.from_params(**common, C=1.0, d=[0.6, 0.4, 0.5])  # mean 0.5 joins C
    reference = cj.CAMELData.from_params(**common, C=1.5, d=[0.1, -0.1, 0.0])
    np.testing.assert_allclose(shifted(r, M), reference(r, M), rtol=1e-13)
    np.testing.assert_allclose(shifted.params()["d"], [0.1, -0.1, 0.0], atol=1e-14)
    assert cj.CAMELData.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True,
                                    tokens=False).data_term == "domains"  # fmt: skip
    with pytest.raises(ValueError, match="tokens=False"):
        cj.CAMELData.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, data_term="linear")
    with pytest.raises(ValueError, match="shared_exponents"):
        cj.CAMELData.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tied=True, tokens=False,
                                 shared_exponents=True, data_term="linear")  # fmt: skip
    with pytest.raises(ValueError, match="data_term"):
        cj.CAMELData.sample_init(jax.random.key(0), n_datasets=3, n_domains=2, tokens=False, data_term="log")
    with pytest.raises(ValueError, match="not both"):
        cj.CAMELData.from_params(**common, C=1.5, d=[0.0, 0.0, 0.0], G=[0.1, 0.1], gamma=[0.3, 0.3])
    with pytest.raises(ValueError, match="built from `d`"):
        cj.CAMELData.from_params(**common, C=1.5, G=[0.1, 0.1], gamma=[0.3, 0.3], data_term="linear")


@pytest.mark.slow  # one fit's compile: 38 s on the shared 2-core machine
def test_log_linear_fit_is_the_least_squares_fit_of_log_loss_on_log_shares():
    """Under log residuals with a Huber delta never reached, the log-linear law with its offset fixed at its
    fitted value is ordinary least squares of log L on (1, log(r_j + eps_j), log M): the fitted (c, b,
    alpha) equal NumPy's lstsq on the same design, and a known law is recovered from noiseless data."""
    rng = np.random.default_rng(0)
    r = rng.dirichlet(np.ones(4), 60)
    r[:10, 0] = 0.0
    r[:10] /= r[:10].sum(axis=1, keepdims=True)
    M = 10 ** rng.uniform(7, 9, 60)
    truth = cj.LogLinear.from_params(A=30.0, b=[0.02, -0.05, 0.01, -0.03], eps=0.01, alpha=0.06)
    y = np.asarray(truth(jnp.asarray(r), jnp.asarray(M))) * np.exp(rng.normal(0, 0.003, 60))
    template = cj.LogLinear.sample_init(jax.random.key(0), n_datasets=4, size=True)
    result = cj.fit(template, (r, M), y, key=jax.random.key(1), restarts=8, options=cj.FitOptions(delta=1.0))
    p = {k: np.asarray(v) for k, v in result.law.params().items()}
    X = np.c_[np.ones(60), np.log(r + p["eps"]), -np.log(M)]
    coef = np.linalg.lstsq(X, np.log(y), rcond=None)[0]
    np.testing.assert_allclose(p["b"], coef[1:5], atol=1e-7)
    np.testing.assert_allclose(p["alpha"], coef[5], atol=1e-7)
    np.testing.assert_allclose(np.log(p["A"]), coef[0], atol=1e-6)
    np.testing.assert_allclose(p["b"], [0.02, -0.05, 0.01, -0.03], atol=0.01)
