# SPDX-License-Identifier: BSD-3-Clause
"""HDPTopicModel: stick-breaking objective, local step, statistics, moves and the estimator,
against numpy references written from the definitions (Hughes, Kim & Sudderth 2015)."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import integrate
from scipy.optimize import approx_fprime
from scipy.special import gammaln, psi
from sklearn.base import BaseEstimator, clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from sparseclust import HDPTopicModel, StochasticEMLDA
from sparseclust._engine import DELAY_PASSES
from sparseclust._stickbreak import (
    c_beta,
    dp_sticks,
    expected_beta,
    expected_log_beta,
    expected_log_u,
    hdp_objective,
    optimize_hdp_sticks,
    stick_prior_terms,
    sticks_from_weights,
)
from sparseclust.topics._hdp_model import HDPModel, MoveRound, empty_stats
from sparseclust.topics._hdp_params import HDPParams, stick_value, topic_terms
from sparseclust.topics._hdp_workspace import (
    _fold_delete,
    _merge_fields,
    _numpy_bundle,
    _Workspace,
)
from sparseclust.topics._local import local_step

# ---------------------------------------------------------------------------------------------
# references


def cdir(a):
    return gammaln(np.sum(a)) - np.sum(gammaln(a))


def ref_doc_step(ids, c, C, alpha_vec, alpha_rem, P0, tol=1e-10, max_iter=2000):
    """Dense local step of one document from E[log pi] = P0 (numpy), with the remainder
    entry alpha_rem that no token takes. Returns theta (K + 1,) and R (U, K)."""
    K = C.shape[0]
    P = P0.copy()
    N = np.zeros(K)
    for it in range(max_iter):
        if it > 0:
            P = psi(N + alpha_vec) - psi(N.sum() + alpha_vec.sum() + alpha_rem)
        W = C[:, ids].T + P
        R = np.exp(W - W.max(axis=1, keepdims=True))
        R /= R.sum(axis=1, keepdims=True)
        Nn = c @ R
        delta = np.abs(Nn - N).max()
        N = Nn
        if it > 0 and delta < tol:
            break
    return np.concatenate([N + alpha_vec, [alpha_rem]]), R


def ref_objective(X, docs, lam, rho, omega, alpha, gamma, tau):
    """The HDP objective with the surrogate bound, from its definition, for given local
    parameters ``docs`` = [(theta_d (K + 1,), R_d (U_d, K))] and global ones."""
    K, V = lam.shape
    El = psi(lam) - psi(lam.sum(axis=1))[:, None]
    Eb = expected_beta(rho)
    elu, el1mu = expected_log_u(rho, omega)
    surrogate = K * np.log(alpha) + np.sum(elu + (K - np.arange(K)) * el1mu)
    total = 0.0
    for d, (theta, R) in enumerate(docs):
        row = X[[d]]
        ids, c = row.indices, row.data
        Elogpi = psi(theta) - psi(theta.sum())
        N = c @ R if ids.size else np.zeros(K)
        Nfull = np.concatenate([N, [0.0]])
        total += surrogate + np.sum((alpha * Eb - 1.0) * Elogpi)         # E log p(pi | beta)
        total -= cdir(theta) + np.sum((theta - 1.0) * Elogpi)              # - E log q(pi)
        total += np.sum(Nfull * Elogpi)                                    # E log p(z | pi)
        if ids.size:
            nz = R > 0
            total -= np.sum((c[:, None] * R)[nz] * np.log(R[nz]))        # - E log q(z)
            total += np.sum(c[:, None] * R * El[:, ids].T)                 # E log p(x | z)
    for k in range(K):
        total += cdir(np.full(V, tau)) + np.sum((tau - 1) * El[k])
        total -= cdir(lam[k]) + np.sum((lam[k] - 1) * El[k])
    total += stick_prior_terms(rho, omega, gamma)
    return total


def hdp_corpus(seed, K=20, V=200, D=600, length=60, gamma=2.0, alpha=1.0):
    """Documents from a truncated HDP with K topics on disjoint word blocks plus noise."""
    rng = np.random.RandomState(seed)
    u = rng.beta(1.0, gamma, size=K)
    beta = u * np.concatenate([[1.0], np.cumprod(1 - u)[:-1]])
    beta = beta / beta.sum()
    block = V // K
    phi = np.full((K, V), 0.02 / V)
    for k in range(K):
        phi[k, k * block:(k + 1) * block] += 0.98 / block
    phi /= phi.sum(axis=1, keepdims=True)
    rows = []
    for _ in range(D):
        pi = rng.dirichlet(alpha * beta + 1e-3)
        z = rng.choice(K, size=length, p=pi)
        w = np.array([rng.choice(V, p=phi[k]) for k in z])
        rows.append(np.bincount(w, minlength=V))
    return sp.csr_array(np.asarray(rows, dtype=np.float64)), phi, beta


def small_problem(seed=0, K=5, V=30, D=20):
    rng = np.random.RandomState(seed)
    dense = rng.poisson(0.5, size=(D, V)).astype(float)
    dense[3] = 0.0  # an empty document
    X = sp.csr_array(dense)
    lam = 0.1 + rng.gamma(0.5, 2.0, size=(K, V))
    rho = rng.uniform(0.1, 0.6, K)
    omega = rng.uniform(2.0, 30.0, K)
    return X, lam, rho, omega


def densify_local(model):
    """Make ``model`` (an HDPModel) return its batch statistics S as a dense (K, V) array
    instead of the (K, V) CSR it touched: the same values."""
    local = model._local

    def dense_local(*args, **kwargs):
        stats, acc = local(*args, **kwargs)
        stats["S"] = stats["S"].toarray()
        return stats, acc

    model._local = dense_local
    return model


def dense_model(alpha=0.7, gamma=2.0, tau=0.1, moves=()):
    # statistics stored dense, as the reference formulas here index them
    return densify_local(HDPModel(alpha, gamma, tau, None,
                                  dict(max_iter=2000, tol=1e-10, restarts=0), 1, moves))


def ref_docs(X, params):
    C = params.Elogphi
    return [ref_doc_step(X[[d]].indices, X[[d]].data, C, params.alpha_vec, params.alpha_rem,
                         params.P0) for d in range(X.shape[0])]


# ---------------------------------------------------------------------------------------------
# stick-breaking


def test_objective_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    for K in (1, 4, 12):
        T = -rng.gamma(2.0, 30.0, K + 1)
        x = rng.normal(scale=1.5, size=2 * K)

        def f(z, K=K, T=T):
            return hdp_objective(z, 40.0, T, 0.8, 3.0)[0]

        g = hdp_objective(x, 40.0, T, 0.8, 3.0)[1]
        num = approx_fprime(x, f, 1e-7)
        np.testing.assert_allclose(g, num, rtol=2e-5, atol=1e-5 * np.abs(g).max())


@pytest.mark.kernels
def test_compiled_objective_equals_the_numpy_statement():
    # the optimizer's compiled loop against hdp_objective, sticks near 0 and 1 included
    from sparseclust._kernels._sticks import hdp_objective_grad, trigamma

    rng = np.random.default_rng(5)
    for K in (1, 3, 50, 300):
        T = -rng.gamma(2.0, 500.0, K + 1)
        x = np.concatenate([rng.normal(scale=4.0, size=K), rng.normal(2.0, 3.0, size=K)])
        x[0], x[K - 1] = 39.0, -39.0
        x_in = x.copy()
        f, g = hdp_objective(x, 3000.0, T, 0.5, 1.3, 1e-4)
        g2 = np.full(2 * K, np.nan)
        f2 = hdp_objective_grad(x, 3000.0, T, 0.5, 1.3, 1e-4, g2)
        assert f2 == pytest.approx(f, rel=1e-13)
        np.testing.assert_allclose(g2, g, rtol=1e-11, atol=1e-13 * np.abs(g).max())
        np.testing.assert_array_equal(x, x_in)
    with pytest.raises(ValueError, match="2 \\(T.size - 1\\)"):
        hdp_objective_grad(np.zeros(4), 1.0, np.zeros(4), 0.5, 1.0, 1.0, np.zeros(4))
    from scipy.special import polygamma

    z = np.concatenate([np.logspace(-12, 12, 400), rng.uniform(0, 20, 200)])
    np.testing.assert_allclose(trigamma(z), polygamma(1, z), rtol=1e-13)


def test_objective_is_the_sum_of_its_definitions():
    # L_G + D K log alpha + K c_B(1, gamma) = L_u + D * surrogate + alpha E[beta] . T
    rng = np.random.default_rng(1)
    K, D, alpha, gamma = 7, 25.0, 0.6, 1.7
    rho, omega = rng.uniform(0.05, 0.9, K), rng.uniform(0.5, 40, K)
    T = -rng.gamma(2.0, 10.0, K + 1)
    elu, el1mu = expected_log_u(rho, omega)
    surrogate = K * np.log(alpha) + np.sum(elu + (K - np.arange(K)) * el1mu)
    want = stick_prior_terms(rho, omega, gamma) + D * surrogate + alpha * expected_beta(rho) @ T
    assert stick_value(D, T, alpha, gamma, rho, omega) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("alpha", [0.05, 0.5, 1.0, 5.0, 40.0])
def test_surrogate_bound_is_below_the_exact_cumulant(alpha):
    # supplement Fig. 2 setting: K = 1, beta = [beta_1, 1 - beta_1]
    for b1 in np.linspace(0.01, 0.99, 25):
        exact = gammaln(alpha) - gammaln(alpha * b1) - gammaln(alpha * (1 - b1))
        bound = np.log(alpha) + np.log(b1) + np.log(1 - b1)
        assert bound <= exact + 1e-12
    # and its expectation under q(u_1) = Beta(a, b), by quadrature
    for a, b in [(0.7, 3.0), (5.0, 5.0), (40.0, 2.0)]:
        def integrand(u, a=a, b=b):
            dens = np.exp((a - 1) * np.log(u) + (b - 1) * np.log1p(-u) - (-c_beta(a, b)))
            return dens * (gammaln(alpha) - gammaln(alpha * u) - gammaln(alpha * (1 - u)))

        exact = integrate.quad(integrand, 0, 1, limit=200)[0]
        rho, omega = np.array([a / (a + b)]), np.array([a + b])
        elu, el1mu = expected_log_u(rho, omega)
        assert np.log(alpha) + elu[0] + el1mu[0] <= exact + 1e-8


def test_optimizer_improves_and_never_returns_worse_than_the_start():
    rng = np.random.default_rng(2)
    K, D = 10, 100.0
    T = -np.sort(rng.gamma(2.0, 200.0, K + 1))
    rho0, omega0 = np.full(K, 0.2), np.full(K, 5.0)

    def value(r, o):
        return stick_value(D, T, 0.5, 1.0, r, o)

    rho, omega, _ = optimize_hdp_sticks(D, T, 0.5, 1.0, rho0, omega0)
    assert value(rho, omega) > value(rho0, omega0)
    # restarting from the optimum returns it (or something no worse)
    rho2, omega2, _ = optimize_hdp_sticks(D, T, 0.5, 1.0, rho, omega)
    assert value(rho2, omega2) >= value(rho, omega) - 1e-9 * abs(value(rho, omega))


def test_stick_helpers():
    rho = np.array([0.5, 0.25, 0.9])
    Eb = expected_beta(rho)
    np.testing.assert_allclose(Eb, [0.5, 0.125, 0.3375, 0.0375])
    r2, _ = sticks_from_weights(Eb)
    np.testing.assert_allclose(r2, rho)
    omega = np.array([3.0, 10.0, 2.0])
    elu, el1mu = expected_log_u(rho, omega)
    want = [elu[0], el1mu[0] + elu[1], el1mu[0] + el1mu[1] + elu[2], el1mu.sum()]
    np.testing.assert_allclose(expected_log_beta(rho, omega), want)
    # DP mixture closed form: a = 1 + N_k, b = gamma + sum_{l>k} N_l
    r, o = dp_sticks(np.array([5.0, 3.0, 0.0]), 2.0)
    np.testing.assert_allclose(r * o, [6.0, 4.0, 1.0])
    np.testing.assert_allclose((1 - r) * o, [5.0, 2.0, 2.0])


# ---------------------------------------------------------------------------------------------
# local step and statistics


@pytest.mark.kernels
def test_local_step_matches_numpy_reference_with_remainder_and_beta_start():
    X, lam, rho, omega = small_problem()
    params = HDPParams(lam, rho, omega, 0.7)
    res = local_step(X, params.tables, params.alpha_vec, L=None, max_iter=2000, tol=1e-10,
                     restarts=0, return_doc_topic=True, alpha_rem=params.alpha_rem,
                     init_weights=params.P0)
    docs = ref_docs(X, params)
    N_ref = np.array([th[:-1] - params.alpha_vec for th, _ in docs])
    np.testing.assert_allclose(res.doc_topic, N_ref, atol=1e-8)
    Elogpi = np.array([psi(th) - psi(th.sum()) for th, _ in docs])
    np.testing.assert_allclose(res.sum_Elogpi, Elogpi[:, :-1].sum(0), rtol=1e-9)


def test_local_step_with_fixed_sticks_is_the_lda_local_step_with_per_topic_alpha():
    # moves off, rho fixed: the HDP statistics S and T are those of the LDA local step with
    # alpha_k = alpha E[beta_k] (uniform cold start on both sides)
    X, lam, rho, omega = small_problem(seed=3, K=6)
    params = HDPParams(lam, rho, omega, 0.9)
    params.P0 = np.full(6, -np.log(6))
    m = dense_model(alpha=0.9)
    m.L = 3
    st = m.local_step(X, params)
    ref = local_step(X, lam_Elogphi(lam), params.alpha_vec, L=3, max_iter=2000, tol=1e-10,
                     restarts=0, alpha_rem=params.alpha_rem)
    np.testing.assert_array_equal(st["S"], ref.topic_word_stats)
    np.testing.assert_array_equal(st["T"][:-1], ref.sum_Elogpi)


def lam_Elogphi(lam):
    return psi(lam) - psi(lam.sum(axis=1))[:, None]


def test_whole_data_objective_matches_definition():
    X, lam, rho, omega = small_problem(seed=1)
    alpha, gamma, tau = 0.7, 2.0, 0.1
    params = HDPParams(lam, rho, omega, alpha)
    m = dense_model(alpha, gamma, tau)
    st = m.local_step(X, params)
    got = m.elbo(st, params)
    want = ref_objective(X, ref_docs(X, params), lam, rho, omega, alpha, gamma, tau)
    assert got == pytest.approx(want, rel=1e-9)
    # the objective stays exact when the sticks (hence alpha E[beta]) change after the local
    # step: the theta-dependent terms are statistics
    rho2, omega2 = rho[::-1].copy(), omega * 1.5
    params2 = HDPParams(lam, rho2, omega2, alpha)
    want2 = ref_objective(X, ref_docs(X, params), lam, rho2, omega2, alpha, gamma, tau)
    assert m.elbo(st, params2) == pytest.approx(want2, rel=1e-9)


@pytest.mark.parametrize("L", [None, 3])
def test_merge_statistics_equal_a_from_scratch_evaluation(L):
    X, lam, rho, omega = small_problem(seed=2, K=5, D=30)
    alpha, gamma, tau = 0.7, 2.0, 0.1
    params = HDPParams(lam, rho, omega, alpha)
    m = dense_model(alpha, gamma, tau)
    m.L = L
    pairs = np.array([(a, b) for a in range(5) for b in range(a + 1, 5)], dtype=np.int32)
    m.round = MoveRound(5, pairs, [])
    st = m.visit(X, params, 0)
    g = m.round.batch[0]
    # local parameters of every document, reconstructed from the kernel's per-document outputs
    res = local_step(X, params.tables, params.alpha_vec, L=L, max_iter=2000, tol=1e-10,
                     restarts=0, return_doc_topic=True, alpha_rem=params.alpha_rem,
                     init_weights=params.P0, extra=_capture_R(X))
    docs = _captured_docs(X, res, params)
    for p, (a, b) in enumerate(pairs):
        merged = st.copy()
        _merge_fields(merged, a, b, g["PT"][p], g["PG"][p], g["PA"][p], g["PH"][p])
        keep = [k for k in range(5) if k != b]
        full = keep + [5]
        for f in ("T", "G", "A"):
            merged[f] = merged[f][full]
        merged["S"] = merged["S"][keep]
        lam2 = tau + merged["S"]
        rho2, omega2 = rho[:4].copy(), omega[:4].copy()
        p2 = HDPParams(lam2, rho2, omega2, alpha)
        docs2 = []
        for theta, R in docs:
            th = theta.copy()
            th[a] += th[b]
            R2 = R.copy()
            R2[:, a] += R2[:, b]
            docs2.append((th[full], R2[:, keep]))
        want = ref_objective(X, docs2, lam2, rho2, omega2, alpha, gamma, tau)
        assert m.elbo(merged, p2) == pytest.approx(want, rel=1e-8), (a, b)


_CAPTURED = {}


def _capture_R(X):
    _CAPTURED.clear()

    def extra(piece):
        _CAPTURED["piece"] = piece

    return extra


def _captured_docs(X, res, params):
    """(theta_d, R_d) of every document from the kernel outputs captured by ``_capture_R``."""
    piece = _CAPTURED["piece"]
    out = piece["out"]
    K = params.K
    docs = []
    for d in range(X.shape[0]):
        lo, hi = piece["indptr"][d], piece["indptr"][d + 1]
        R = np.zeros((hi - lo, K))
        if piece["Lk"] > 0:
            for q in range(lo, hi):
                for t in range(piece["Lk"]):
                    k = out["idx"][q, t]
                    if k >= 0:
                        R[q - lo, k] = out["r"][q, t]
        else:
            ET = piece["ET"]
            for q in range(lo, hi):
                v = piece["indices"][q]
                R[q - lo] = out["expP"][d] * ET[v] / out["zs"][q]
        theta = np.concatenate([res.doc_topic[d] + params.alpha_vec, [params.alpha_rem]])
        docs.append((theta, R))
    return docs


def test_fold_of_an_unused_topic_into_the_remainder_is_exact():
    # documents that do not use topic j: folding theta_dj into the remainder entry changes
    # only T, G, A of j and the remainder; check against the definition
    X, lam, rho, omega = small_problem(seed=4, K=5, D=25)
    alpha, gamma, tau = 0.7, 2.0, 0.1
    params = HDPParams(lam, rho, omega, alpha)
    m = dense_model(alpha, gamma, tau)
    m.L = 2
    res = local_step(X, params.tables, params.alpha_vec, L=2, max_iter=2000, tol=1e-10,
                     restarts=0, return_doc_topic=True, alpha_rem=params.alpha_rem,
                     init_weights=params.P0, extra=_capture_R(X))
    docs = _captured_docs(X, res, params)
    unused = np.flatnonzero((res.doc_topic > 0).sum(axis=0) < X.shape[0])
    j = int(unused[0])
    users = np.flatnonzero(res.doc_topic[:, j] > 0)
    rest = np.setdiff1d(np.arange(X.shape[0]), users)
    Xr = X[rest]
    st = m.local_step(Xr, params)
    _fold_delete(st, j, [(params.alpha_all(), Xr.shape[0])])
    keep = [k for k in range(5) if k != j]
    full = keep + [5]
    for f in ("T", "G", "A"):
        st[f] = st[f][full]
    st["S"] = st["S"][keep]
    lam2 = lam[keep]
    rho2, omega2 = rho[:4].copy(), omega[:4].copy()
    p2 = HDPParams(lam2, rho2, omega2, alpha)
    docs2 = []
    for d in rest:
        theta, R = docs[d]
        th = theta.copy()
        th[5] += th[j]
        docs2.append((th[full], R[:, keep]))
    want = ref_objective(Xr, docs2, lam2, rho2, omega2, alpha, gamma, tau)
    assert m.elbo(st, p2) == pytest.approx(want, rel=1e-8)


@pytest.mark.kernels
def test_numpy_bundle_equals_kernel_statistics_of_the_same_documents():
    X, lam, rho, omega = small_problem(seed=5, K=6, D=40)
    params = HDPParams(lam, rho, omega, 0.7)
    m = dense_model()
    m.L = 3
    pairs = np.array([(0, 1), (2, 5), (1, 4)], dtype=np.int32)
    m.round = MoveRound(6, pairs, [0, 1, 2, 3, 4, 5])
    m.visit(X, params, 0)
    g = m.round.batch[0]
    rows = g["targets"][0]
    bundle = _numpy_bundle(rows, g["alpha0"], 6, X.shape[1], pairs)
    m2 = dense_model()
    m2.L = 3
    m2.round = MoveRound(6, pairs, [])
    st = m2.visit(X[rows["doc_ids"]], params, 0)
    g2 = m2.round.batch[0]
    S = np.zeros_like(st["S"])
    S[:, bundle["cols"]] = bundle["Sb"]
    np.testing.assert_allclose(S, st["S"], rtol=1e-12, atol=1e-12)
    for f in ("T", "G", "A"):
        np.testing.assert_allclose(bundle[f], st[f], rtol=1e-10)
    for f in ("LS", "H", "D"):
        assert bundle[f] == pytest.approx(st[f], rel=1e-10)
    for f in ("PT", "PG", "PA", "PH"):
        np.testing.assert_allclose(bundle[f], g2[f], rtol=1e-10, atol=1e-12)


def test_accepted_merge_value_equals_the_objective_of_the_merged_statistics():
    X, lam, rho, omega = small_problem(seed=6, K=5, D=30)
    alpha, gamma, tau = 0.7, 2.0, 0.1
    m = dense_model(alpha, gamma, tau)
    m.L = 3
    pairs = np.array([(a, b) for a in range(5) for b in range(a + 1, 5)], dtype=np.int32)
    m.round = MoveRound(5, pairs, [])
    params = HDPParams(lam, rho, omega, alpha)
    st = m.visit(X, params, 0)
    params = m.global_step(st)
    work = _Workspace(m, st.copy(), params)
    g = m.round.batch[0]
    # force a comparison of the proposal value with the merged statistics' objective
    work.value = -1e300
    assert work.try_merge(0, 1, g["PT"][0], g["PG"][0], g["PA"][0], g["PH"][0])
    stats, p2 = work.compact([])
    assert m.elbo(stats, p2) == pytest.approx(work.value, rel=1e-10)


def _birth_problem(seed=0, K=4, V=40, D=60):
    """A small corpus, random topics and a model with births only (3 fresh topics)."""
    X, lam, rho, omega = small_problem(seed=seed, K=K, V=V, D=D)
    alpha, gamma, tau = 0.7, 2.0, 0.1
    m = dense_model(alpha, gamma, tau, moves=("birth",))
    m.L = 3
    m.sparse_rows = True
    m.move_opts.update(birth_topics=3, birth_share=0.2)
    return X, HDPParams(lam, rho, omega, alpha), m


def _run_birth(m, X, params, k, monkeypatch=None):
    """One birth round at topic k (or the topics k, in order) on a single batch: (workspace,
    batch statistics after, log, the last re-inference's parameters and target documents,
    and every re-inference's in ``calls``)."""
    from sparseclust._moves import RoundLog

    K = params.K
    m.begin_pass(2, K)
    m.round = MoveRound(K, np.zeros((0, 2), dtype=np.int32), [], births=np.atleast_1d(k))
    st = m.visit(X, params, 0)
    seen = {"calls": []}
    reinfer = m.reinfer

    def recording(batches, tmask, cols, params0, counter="delete_local_iters"):
        seen.update(params0=params0, docs=np.flatnonzero(tmask[0]), cols=cols)
        seen["calls"].append(dict(params0=params0, docs=np.flatnonzero(tmask[0]), cols=cols))
        return reinfer(batches, tmask, cols, params0, counter)

    m.reinfer = recording
    work = _Workspace(m, st.copy(), params)
    batch_stats = [st.copy()]
    log = RoundLog()
    return work, batch_stats, log, seen


def test_birth_value_equals_a_from_scratch_objective():
    # the value of a birth proposal (old statistics of the target documents out, the prior
    # of the new entries given to the others, the re-inferred targets in, data terms and
    # sticks of K + J topics) equals the objective evaluated from its definition on every
    # document's local parameters: the re-inferred ones for the targets, the pass's with the
    # new entries of the prior for the others
    from sparseclust._moves import RoundLog

    X, params, m = _birth_problem(seed=3)
    K, tau = params.K, m.tau
    sizes = m.local_step(X, params)["S"].sum(axis=1)
    k = int(np.argmax(sizes))
    work, batch_stats, log, seen = _run_birth(m, X, params, k)
    work.value = -1e300  # accept whatever the proposal is worth: its value is compared
    m._births(work, m.round, batch_stats, [X], log)
    assert log.births_accepted == 1
    J = work.K - K
    assert J == 3
    p0, tdocs, cols = seen["params0"], seen["docs"], seen["cols"]
    assert tdocs.size >= 2 * J
    # local parameters of the pass (every document) and of the re-inference (targets)
    opts = dict(L=3, max_iter=2000, tol=1e-10, restarts=0, force_sparse=True,
                return_doc_topic=True)
    res = local_step(X, params.tables, params.alpha_vec, alpha_rem=params.alpha_rem,
                     init_weights=params.P0, extra=_capture_R(X), **opts)
    docs = _captured_docs(X, res, params)
    Xt = sp.csr_array(X[tdocs][:, cols])
    res_t = local_step(Xt, p0.tables, p0.alpha_vec, alpha_rem=p0.alpha_rem,
                       init_weights=p0.P0, extra=_capture_R(Xt), **opts)
    docs_t = _captured_docs(Xt, res_t, p0)
    a0 = p0.alpha_all()
    # every document that used k was a target (k is removed) or else k stays
    old = np.flatnonzero(work.alive[:K])
    assert old.size == (K - 1 if res.doc_topic[:, k].nonzero()[0].size == tdocs.size else K)
    new_docs = []
    for d, (theta, R) in enumerate(docs):
        if d in tdocs:
            new_docs.append(docs_t[int(np.flatnonzero(tdocs == d)[0])])
        else:
            th = np.concatenate([theta[old], a0[old.size:]])
            new_docs.append((th, np.hstack([R[:, old], np.zeros((R.shape[0], J))])))
    S = np.zeros((old.size + J, X.shape[1]))
    for d, (_, R) in enumerate(new_docs):
        row = X[[d]]
        S[:, row.indices] += (row.data[:, None] * R).T
    lam = tau + S
    want = ref_objective(X, new_docs, lam, work.rho, work.omega, m.alpha, m.gamma, tau)
    assert work.value == pytest.approx(want, rel=1e-9)
    # the batch's edited statistics are the whole-data ones, with the same objective
    stats, p2 = work.compact(batch_stats)
    Sb = batch_stats[0]["S"]
    np.testing.assert_allclose(Sb.toarray() if sp.issparse(Sb) else Sb, S, atol=1e-9)
    np.testing.assert_allclose(stats["S"], S, atol=1e-9)
    for f in ("T", "G", "A"):
        np.testing.assert_allclose(batch_stats[0][f], stats[f], rtol=1e-10)
    assert m.elbo(stats, p2) == pytest.approx(want, rel=1e-9)
    # a rejected proposal (the current value out of reach) leaves the workspace as it was
    work2, bs2, log2, _ = _run_birth(m, X, params, k)
    work2.value = 1e300
    before = work2.stats["S"].copy()
    m._births(work2, m.round, bs2, [X], log2)
    assert (log2.births_tried, log2.births_accepted, work2.K) == (1, 0, K)
    np.testing.assert_array_equal(work2.stats["S"], before)
    assert RoundLog().births_tried == 0


def _block_birth_problem():
    """Two groups of 30 documents on disjoint halves of 40 word types, two topics on each
    half and L = 2: each topic's documents are one group's (a birth at it can replace it)."""
    rng = np.random.RandomState(0)
    dense = np.zeros((60, 40))
    dense[:30, :20] = rng.poisson(1.0, size=(30, 20))
    dense[30:, 20:] = rng.poisson(1.0, size=(30, 20))
    lam = np.full((4, 40), 0.1)
    lam[:2, :20] += rng.gamma(0.5, 2.0, size=(2, 20))
    lam[2:, 20:] += rng.gamma(0.5, 2.0, size=(2, 20))
    m = dense_model(0.7, 2.0, 0.1, moves=("birth",))
    m.L = 2
    m.sparse_rows = True
    m.move_opts.update(birth_topics=3)
    params = HDPParams(lam, rng.uniform(0.1, 0.6, 4), rng.uniform(2.0, 30.0, 4), 0.7)
    return sp.csr_array(dense), params, m


@pytest.mark.parametrize("problem", ["subsamples", "replacing"])
def test_two_births_of_a_round_equal_a_from_scratch_objective(monkeypatch, problem):
    # two births accepted in one round (targets: a subsample of each topic's documents, the
    # second's drawn from the documents the first did not re-infer): the workspace's value
    # and the batch's edited statistics equal the objective from its definition, with every
    # document's local parameters after the round: the first birth's targets re-inferred and
    # then given the second's prior on its new entries, the second's targets re-inferred from
    # their pass state extended by the first birth's prior, the others the pass's extended
    # by both
    from sparseclust.topics import _hdp_birth

    if problem == "subsamples":
        X, params, m = _birth_problem(seed=3, D=90)
        m.move_opts.update(birth_docs=12)
        sizes = m.local_step(X, params)["S"].sum(axis=1)
        k1, k2 = (int(k) for k in np.argsort(-sizes)[:2])
    else:
        # every document of topic 0, then every document of topic 2
        X, params, m = _block_birth_problem()
        m.move_opts.update(birth_docs=40)
        k1, k2 = 0, 2
    K, tau = params.K, m.tau
    work, batch_stats, log, seen = _run_birth(m, X, params, [k1, k2])
    # both proposals are accepted whatever they are worth
    work.accepts = lambda value: True
    monkeypatch.setattr(_hdp_birth, "cannot_pass", lambda *args: False)
    m._births(work, m.round, batch_stats, [X], log)
    assert (log.births_tried, log.births_accepted) == (2, 2)
    c1, c2 = seen["calls"][-2:]
    assert np.intersect1d(c1["docs"], c2["docs"]).size == 0
    assert [op[1] for op in work.ops] == [k1, k2]
    # the births replaced their targets in the second problem only
    assert work.alive[[k1, k2]].tolist() == [problem == "subsamples"] * 2
    K2 = work.K
    opts = dict(L=m.L, max_iter=2000, tol=1e-10, restarts=0, force_sparse=True,
                return_doc_topic=True)

    def local(Xd, p):
        res = local_step(Xd, p.tables, p.alpha_vec, alpha_rem=p.alpha_rem,
                         init_weights=p.P0, extra=_capture_R(Xd), **opts)
        return _captured_docs(Xd, res, p)

    # every document's q(pi_d) (K2 topics + remainder; 0: no entry) and q(z_d) (K2 columns)
    theta = np.zeros((X.shape[0], K2 + 1))
    Rs = []
    for d, (th, R) in enumerate(local(X, params)):
        theta[d, :K], theta[d, K2] = th[:K], th[K]
        Rs.append(np.hstack([R, np.zeros((R.shape[0], K2 - K))]))
    live = np.zeros(K2, dtype=bool)
    live[:K] = True
    K0 = K
    for call, (_, k, J) in zip(seen["calls"][-len(work.ops):], work.ops, strict=True):
        whole = not work.alive[k]
        live[k] = not whole
        slots = np.concatenate([np.flatnonzero(live[:K0]), K0 + np.arange(J)])
        a0 = call["params0"].alpha_all()
        others = np.setdiff1d(np.arange(X.shape[0]), call["docs"])
        if whole:
            assert all(np.allclose(Rs[d][:, k], 0.0) for d in others)
            theta[others, k] = 0.0
        theta[others, K0:K0 + J] = a0[slots.size - J:-1]
        theta[others, K2] = a0[-1]
        Xt = sp.csr_array(X[call["docs"]][:, call["cols"]])
        for d, (th, R) in zip(call["docs"], local(Xt, call["params0"]), strict=True):
            theta[d] = 0.0
            theta[d, slots], theta[d, K2] = th[:-1], th[-1]
            Rs[d] = np.zeros((R.shape[0], K2))
            Rs[d][:, slots] = R
        live[K0:K0 + J] = True
        K0 += J
    np.testing.assert_array_equal(live, work.alive)
    full = np.concatenate([np.flatnonzero(live), [K2]])
    new_docs = [(theta[d, full], Rs[d][:, live]) for d in range(X.shape[0])]
    S = np.zeros((int(live.sum()), X.shape[1]))
    for d, (_, R) in enumerate(new_docs):
        row = X[[d]]
        S[:, row.indices] += (row.data[:, None] * R).T
    want = ref_objective(X, new_docs, tau + S, work.rho, work.omega, m.alpha, m.gamma, tau)
    assert work.value == pytest.approx(want, rel=1e-9)
    stats, p2 = work.compact(batch_stats)
    Sb = batch_stats[0]["S"]
    np.testing.assert_allclose(Sb.toarray() if sp.issparse(Sb) else Sb, S, atol=1e-9)
    for f in ("T", "G", "A"):
        np.testing.assert_allclose(batch_stats[0][f], stats[f], rtol=1e-10)
    assert m.elbo(stats, p2) == pytest.approx(want, rel=1e-9)


def test_extension_of_the_documents_prior_to_new_topics_is_exact():
    # documents whose q(pi_d) gets new entries a'_j (no tokens) and a new remainder entry:
    # T, G, A and LS of the definition, document by document
    from sparseclust.topics._hdp_birth import extend_prior

    rng = np.random.RandomState(0)
    K, J = 4, 3
    T, G, A, LS = np.zeros(K + 1), np.zeros(K + 1), np.zeros(K + 1), 0.0
    want = np.zeros((3, K + J + 1))
    want_LS = 0.0
    a_new, a_rem = rng.uniform(0.01, 0.5, J), 0.03
    groups = []
    for _ in range(3):  # three batches, each with its own prior
        alpha = rng.uniform(0.05, 1.0, K + 1)
        lens = []
        for _ in range(rng.randint(1, 6)):
            N = rng.gamma(1.0, 3.0, K)
            lens.append(N.sum())
            theta = np.concatenate([N + alpha[:K], [alpha[K]]])
            El = psi(theta) - psi(theta.sum())
            T += El
            G += gammaln(theta)
            A += alpha * El
            LS += gammaln(theta.sum())
            th2 = np.concatenate([theta[:K], a_new, [a_rem]])
            a2 = np.concatenate([alpha[:K], a_new, [a_rem]])
            El2 = psi(th2) - psi(th2.sum())
            want += np.stack([El2, gammaln(th2), a2 * El2])
            want_LS += gammaln(th2.sum())
        groups.append((alpha, np.array(lens)))
    *got, got_LS = extend_prior(dict(T=T, G=G, A=A, LS=LS), groups, a_new, a_rem)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10)
    assert got_LS == pytest.approx(want_LS, rel=1e-12)


def test_accepted_delete_values_equal_a_from_scratch_objective(monkeypatch):
    # every round with accepted deletes: the value the workspace computed column by column (the
    # targets re-inferred on their own word types, the data term updated from column sums)
    # equals the whole-data objective recomputed from the compacted statistics
    from sparseclust.topics import _hdp_workspace as hw

    records = []
    compact = hw._Workspace.compact

    def recording_compact(self, batch_stats):
        value, ops = self.value, [op[0] for op in self.ops]
        stats, params = compact(self, batch_stats)
        records.append((value, self.m.elbo(stats, params), ops))
        return stats, params

    monkeypatch.setattr(hw._Workspace, "compact", recording_compact)
    X, _, _ = hdp_corpus(2, K=6, V=120, D=240, length=30)
    HDPTopicModel(max_components=25, L=4, moves="delete", max_iter=8, tol=0, n_batches=3,
                  random_state=0).fit(X)
    rounds = [r for r in records if "delete" in r[2]]
    assert rounds, "no delete was accepted"
    for value, exact, _ in rounds:
        assert value == pytest.approx(exact, rel=1e-10, abs=1e-8)


def test_accepted_birth_values_equal_a_from_scratch_objective(monkeypatch):
    # every round with an accepted birth, over several batches: the value the workspace
    # computed equals the whole-data objective recomputed from the compacted statistics, and
    # the batches' edited statistics add up to the whole-data ones
    from sparseclust.topics import _hdp_workspace as hw

    records = []
    compact = hw._Workspace.compact

    def recording_compact(self, batch_stats):
        value, ops = self.value, [op[0] for op in self.ops]
        stats, params = compact(self, batch_stats)
        total = {f: sum(np.asarray(b[f]) for b in batch_stats) for f in ("T", "G", "A", "LS")}
        # (copies: the engine's next pass edits the whole-data statistics in place)
        whole = {f: np.array(stats[f]) for f in total}
        records.append((value, self.m.elbo(stats, params), ops, total, whole))
        return stats, params

    monkeypatch.setattr(hw._Workspace, "compact", recording_compact)
    X = planted_hdp_corpus(2, K=8, V=80, D=240, length=40)
    HDPTopicModel(max_components=3, moves="birth", max_iter=6, tol=0, n_batches=3,
                  random_state=0).fit(X)
    rounds = [r for r in records if "birth" in r[2]]
    assert rounds, "no birth was accepted"
    for value, exact, _, total, stats in rounds:
        assert value == pytest.approx(exact, rel=1e-10, abs=1e-8)
        for f in ("T", "G", "A", "LS"):
            np.testing.assert_allclose(total[f], stats[f], rtol=1e-9, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# training


def test_memoized_objective_never_decreases_with_moves():
    X, _, _ = hdp_corpus(0, K=8, V=80, D=200, length=40)
    m = HDPTopicModel(max_components=20, L=4, max_iter=15, tol=0, n_batches=4,
                      random_state=0, local_tol=1e-4).fit(X)
    lb = np.asarray(m.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:]))
    tr = m.trace_
    assert sum(e["merges_accepted"] + e["deletes_accepted"] for e in tr) > 0
    assert tr[-1]["n_topics"] < 20


def test_memoized_objective_never_decreases_with_births():
    # from a truncation of 2 below the 6 planted topics: births grow the model, merges and
    # deletes may shrink it, and every pass (its local and global steps, then its moves)
    # raises the objective (tight local convergence, as the monotonicity of memoized
    # training assumes: a cold-started local step stopped at a loose tolerance can land a
    # few nats below the documents' previous local parameters)
    X = planted_hdp_corpus(3, K=6, V=60, D=200, length=40)
    m = HDPTopicModel(max_components=2, max_iter=10, tol=0, n_batches=4, random_state=0,
                      local_tol=1e-4).fit(X)
    lb = np.asarray(m.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:]))
    tr = m.trace_
    assert sum(e["births_accepted"] for e in tr) >= 2
    assert tr[-1]["n_topics"] > 2


def test_births_stay_under_the_topic_cap_and_the_cap_is_validated():
    X = planted_hdp_corpus(3, K=6, V=60, D=200, length=40)
    kw = dict(max_components=2, max_iter=6, tol=0, random_state=0)
    # (a birth that replaces its target adds J - 1 topics, but needs room for J)
    m = HDPTopicModel(max_topics=5, **kw).fit(X)
    assert max(e["n_topics"] for e in m.trace_) <= 5
    assert sum(e["births_accepted"] for e in m.trace_) >= 1
    # without births nothing grows
    m = HDPTopicModel(moves="merge+delete+sort", **kw).fit(X)
    assert max(e["n_topics"] for e in m.trace_) == 2
    with pytest.raises(ValueError, match="max_topics"):
        HDPTopicModel(max_components=10, max_topics=5).fit(X)


def test_planted_number_of_topics_is_recovered_from_below():
    """K = 6 planted block topics (V = 60, 200 documents of 40 tokens), truncation 2, the
    defaults otherwise: births grow the model to 5-7 live topics on every one of seeds 0,
    1, 2 (all reported) and the default stopping rule stops before max_iter. Seeds 0-4 all
    end with 6 topics, after 8-12 passes."""
    found = []
    for seed in range(3):
        X = planted_hdp_corpus(seed, K=6, V=60, D=200, length=40)
        m = HDPTopicModel(max_components=2, random_state=seed).fit(X)
        found.append(m.n_components_)
        assert m.converged_ and m.n_iter_ < m.max_iter
        assert sum(e["births_accepted"] for e in m.trace_) >= 2
    assert all(abs(n - 6) <= 1 for n in found), found


def test_a_fit_that_ends_at_or_above_its_truncation_warns_that_k_is_a_lower_bound():
    """Six planted topics (V = 60, 200 documents): from a truncation of 2 births grow the
    model and the fit warns (TruncationWarning, naming the start and the end); from 30 the
    merges and deletes remove topics and it does not warn, nor does a fit whose moves are
    births alone (the number is then not chosen by merges and deletes)."""
    from sparseclust import TruncationWarning

    X = planted_hdp_corpus(0, K=6, V=60, D=200, length=40)
    with pytest.warns(TruncationWarning) as record:
        m = HDPTopicModel(max_components=2, random_state=0).fit(X)
    assert m.n_components_ > 2
    assert [str(w.message) for w in record] == [
        f"HDPTopicModel started from max_components=2 topics and grew to {m.n_components_}, "
        f"so the number it learned is a lower bound: births grow a small start only part of "
        f"the way. Fit again from a larger max_components to let the merge and delete moves "
        f"choose the number."]
    assert record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        assert HDPTopicModel(max_components=30, random_state=0).fit(X).n_components_ < 30
        grown = HDPTopicModel(max_components=2, moves="birth+sort", random_state=0).fit(X)
    assert grown.n_components_ > 2


@pytest.mark.slow
def test_planted_twenty_topics_are_recovered_from_five():
    """K = 20 planted block topics (V = 200, 1,000 documents of 50 tokens), truncation 5,
    the defaults otherwise: within 3 of 20 live topics on at least 4 of seeds 0-4 (all
    reported)."""
    found = []
    for seed in range(5):
        X = planted_hdp_corpus(seed, K=20, V=200, D=1000, length=50)
        found.append(HDPTopicModel(max_components=5, random_state=seed).fit(X).n_components_)
    assert sum(abs(n - 20) <= 3 for n in found) >= 4, found


def _with_merge_screen(screen):
    """HDPTopicModel whose model screens merges at ``screen`` nats per document instead of
    the fixed ``move_opts['merge_screen']`` (the reference fits of the test below)."""

    class Screened(HDPTopicModel):
        def _model(self, K):
            model = super()._model(K)
            model.move_opts["merge_screen"] = screen
            return model

    return Screened


def test_merge_screen_skips_stick_optimizations_without_changing_the_fit(monkeypatch):
    """A merge proposal far below the current objective at its warm-start sticks is rejected
    without optimizing them (``merge_screen``); the fit is the same as one that optimizes
    every proposal (a screen of +inf nats, set by the test), with fewer stick optimizations.
    A screen of -inf nats rejects every merge."""
    from sparseclust.topics import _hdp_model, _hdp_workspace

    calls = []
    real = _hdp_model.optimize_hdp_sticks

    def counting(*args, **kw):
        calls.append(args[1])
        return real(*args, **kw)

    # the model's global step and sort, and the workspace's proposals
    monkeypatch.setattr(_hdp_model, "optimize_hdp_sticks", counting)
    monkeypatch.setattr(_hdp_workspace, "optimize_hdp_sticks", counting)
    X = planted_hdp_corpus(1, D=200)  # merges are accepted in passes 2, 3 and 4
    kw = dict(max_components=40, max_iter=6, tol=0, random_state=1, init="kmeans++")
    fits, n_calls = {}, {}
    for screen in (None, np.inf, -np.inf):
        calls.clear()
        cls = HDPTopicModel if screen is None else _with_merge_screen(screen)
        fits[screen] = cls(**kw).fit(X)
        n_calls[screen] = len(calls)
    screened, full = fits[None], fits[np.inf]
    assert sum(e["merges_accepted"] for e in full.trace_) > 0
    assert n_calls[None] < n_calls[np.inf]
    np.testing.assert_array_equal(screened.components_, full.components_)
    np.testing.assert_array_equal(screened.lower_bounds_, full.lower_bounds_)
    assert [e["merges_accepted"] for e in screened.trace_] == [
        e["merges_accepted"] for e in full.trace_]
    assert sum(e["merges_accepted"] for e in fits[-np.inf].trace_) == 0
    assert sum(e["merges_tried"] for e in fits[-np.inf].trace_) > 0


def test_lower_bound_warning_needs_merge_or_delete_rounds_and_a_kept_start():
    """warn_if_lower_bound: silent when no round tried a merge or a delete, or when the fit
    ended below its start; otherwise one TruncationWarning that says whether the model kept
    its start or grew."""
    from sparseclust._moves import TruncationWarning, warn_if_lower_bound

    tried = [dict(merges_tried=0, deletes_tried=0), dict(merges_tried=0, deletes_tried=3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        warn_if_lower_bound("M", [dict(merges_tried=0, deletes_tried=0)] * 3, 5, 9, "k", "x")
        warn_if_lower_bound("M", [dict(births_tried=4)], 5, 9, "k", "x")
        warn_if_lower_bound("M", tried, 5, 4, "k", "x")
    for learned, says in ((5, "kept all of them"), (9, "grew to 9")):
        with pytest.warns(TruncationWarning, match=f"^M started from k=5 x and {says}, so"):
            warn_if_lower_bound("M", tried, 5, learned, "k", "x")


def test_cannot_pass_extrapolates_the_last_gain():
    from sparseclust._moves import cannot_pass, improves

    # -40 + 2 * 60 passes 0; -90 + 2 * 10 does not
    assert not cannot_pass([-100.0, -40.0], 2, 0.0)
    assert cannot_pass([-100.0, -90.0], 2, 0.0)
    # one value, or no round left: the last round's own test decides
    assert not cannot_pass([-100.0], 5, 0.0)
    assert not cannot_pass([-100.0, -90.0], 0, 0.0)
    # a round that lost ground extrapolates no gain
    assert cannot_pass([-10.0, -20.0], 10, 0.0)
    assert not cannot_pass([20.0, 10.0], 5, 0.0)  # (a loss is not extrapolated either)
    # the threshold is the acceptance test's own
    old = -1e6
    edge = old + 1e-13 * abs(old)  # not an improvement by improves()
    assert not improves(edge, old)
    assert cannot_pass([edge - 2.0, edge - 1.0], 1, old)
    assert not cannot_pass([edge - 2.0, edge - 1.0], 2, old)


def test_topic_terms_from_parts_of_a_column_block_equal_a_from_scratch_evaluation():
    # the birth's value after a round: per-topic parts outside the targets' word types, from
    # the current statistics, plus the parts over those word types of the proposal
    from sparseclust.topics._hdp_params import _row_parts, _terms_from_parts, topic_terms

    rng = np.random.RandomState(0)
    K, V, tau = 5, 40, 0.1
    S = rng.gamma(0.3, 5.0, (K, V))
    lam = tau + S
    cols = np.sort(rng.choice(V, 12, replace=False))
    Q, E, Lam = _row_parts(S, lam, tau)
    q0, e0, l0 = _row_parts(S[:, cols], lam[:, cols], tau)
    S_new = S.copy()
    S_new[:, cols] = rng.gamma(0.3, 5.0, (K, cols.size))
    S_new[0, cols[0]] = -1e-12  # a rounding negative: lambda clips it, the terms keep it
    lam_new = tau + np.maximum(S_new, 0.0)
    q1, e1, l1 = _row_parts(S_new[:, cols], lam_new[:, cols], tau)
    got = _terms_from_parts(Q - q0 + q1, E - e0 + e1, Lam - l0 + l1, V, tau)
    El = psi(lam_new) - psi(lam_new.sum(axis=1))[:, None]
    np.testing.assert_allclose(got, topic_terms(S_new, lam_new, El, tau), rtol=1e-12)


def test_birth_early_stop_cuts_rounds_without_changing_the_fit(monkeypatch):
    """A birth's refinement stops once the rounds left cannot lift its value past the current
    objective at the last round's gain; on planted data the fit is the same as one that runs
    every round (the early stop disabled by the test), and the stop did fire. The values of
    the rounds a birth runs rise."""
    from sparseclust.topics import _hdp_birth

    real = _hdp_birth.cannot_pass
    calls = []

    def spy(values, n_left, old):
        stop = real(values, n_left, old)
        calls.append((list(values), stop))
        return stop

    def never(values, n_left, old):
        calls.append((list(values), False))
        return False

    X = planted_hdp_corpus(3, K=6, V=60, D=200, length=40)
    kw = dict(max_components=2, max_iter=10, tol=0, n_batches=4, random_state=0)
    fits, stops = {}, {}
    for name, fn in (("stopped", spy), ("full", never)):
        calls.clear()
        monkeypatch.setattr(_hdp_birth, "cannot_pass", fn)
        fits[name] = HDPTopicModel(**kw).fit(X)
        stops[name] = sum(stop for _, stop in calls)
        for values, _ in calls:
            assert np.all(np.diff(values) >= -1e-9 * np.abs(values[1:]))
    assert stops["stopped"] > 0
    assert sum(e["births_accepted"] for e in fits["full"].trace_) >= 1
    np.testing.assert_array_equal(fits["stopped"].components_, fits["full"].components_)
    np.testing.assert_array_equal(fits["stopped"].lower_bounds_, fits["full"].lower_bounds_)


@pytest.mark.parametrize("birth_docs", [2000, 30])
def test_birth_round_values_equal_a_from_scratch_objective(monkeypatch, birth_docs):
    """The value of a birth's proposal after each refinement round, assembled from per-topic
    parts, equals the objective computed from the proposal's whole topic-word statistics,
    whether the fresh topics replace the target (every document that uses it is a target)
    or join it (a sample of 30 target documents)."""
    from sparseclust.topics import _hdp_birth

    real = _hdp_birth._round_value
    checked = []

    def checking(work, idx, cols, parts_out, S_blk, stats, full, rho, omega):
        got = real(work, idx, cols, parts_out, S_blk, stats, full, rho, omega)
        T, G, A, LS, H, D = stats
        tau, m = work.m.tau, work.m
        S = np.zeros((S_blk.shape[0], work.V))
        S[:idx.size] = work.stats["S"][idx]
        S[:, cols] = S_blk
        lam = tau + np.maximum(S, 0.0)
        El = psi(lam) - psi(lam.sum(axis=1))[:, None]
        want = (topic_terms(S, lam, El, tau).sum() - LS + G[full].sum() - A[full].sum() + H
                + stick_value(float(D), T[full], m.alpha, m.gamma, rho, omega))
        checked.append((got, want, S_blk.shape[0] > idx.size))
        return got

    class Targets(HDPTopicModel):
        def _model(self, K):
            model = super()._model(K)
            model.move_opts["birth_docs"] = birth_docs
            return model

    monkeypatch.setattr(_hdp_birth, "_round_value", checking)
    X = planted_hdp_corpus(3, K=6, V=60, D=200, length=40)
    Targets(max_components=2, max_iter=8, tol=0, n_batches=4, random_state=0).fit(X)
    assert len(checked) >= 2
    for got, want, _ in checked:
        assert got == pytest.approx(want, rel=1e-11, abs=1e-7)


def test_live_topics_sorted_and_transform_rows_sum_to_one():
    X, _, _ = hdp_corpus(1, K=6, V=60, D=150, length=40)
    m = HDPTopicModel(max_components=15, max_iter=10, tol=0, random_state=0).fit(X)
    sizes = m.components_.sum(axis=1)
    assert np.all(np.diff(sizes) <= 0)
    assert m.components_.shape == (m.n_components_, X.shape[1])
    np.testing.assert_allclose(m.topic_word_distribution_.sum(axis=1), 1.0)
    Z = m.transform(X)
    assert Z.shape == (X.shape[0], m.n_components_)
    np.testing.assert_allclose(Z.sum(axis=1), 1.0)
    assert m.topic_weights_.shape == (m.n_components_,)
    assert np.all(m.doc_topic_prior_ > 0)


@pytest.mark.kernels
def test_threads_bit_identical():
    X, _, _ = hdp_corpus(2, K=6, V=60, D=300, length=50)
    kw = dict(max_components=12, max_iter=6, tol=0, random_state=0, n_batches=3)
    a = HDPTopicModel(n_threads=1, **kw).fit(X)
    b = HDPTopicModel(n_threads=2, **kw).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.lower_bounds_ == b.lower_bounds_


def test_threads_bit_identical_with_births():
    # births fit fresh topics and re-infer documents with the local step: the same bits for
    # any thread count
    X = planted_hdp_corpus(1, K=6, V=60, D=200, length=40)
    kw = dict(max_components=2, max_iter=5, tol=0, random_state=0, n_batches=3)
    a = HDPTopicModel(n_threads=1, **kw).fit(X)
    b = HDPTopicModel(n_threads=2, **kw).fit(X)
    assert sum(e["births_accepted"] for e in a.trace_) > 0
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.lower_bounds_ == b.lower_bounds_
    assert [e["n_topics"] for e in a.trace_] == [e["n_topics"] for e in b.trace_]


@pytest.mark.contract
def test_same_random_state_same_fit_pickle_and_empty_documents():
    X, _, _ = hdp_corpus(3, K=5, V=50, D=120, length=30)
    X = sp.vstack([X, sp.csr_array((2, X.shape[1]))]).tocsr()
    a = HDPTopicModel(max_components=10, max_iter=5, tol=0, random_state=4).fit(X)
    b = HDPTopicModel(max_components=10, max_iter=5, tol=0, random_state=4).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(c.transform(X), a.transform(X))
    Z = a.transform(X[-2:])
    np.testing.assert_allclose(Z.sum(axis=1), 1.0)
    Z32 = a.transform(X.astype(np.float32))
    assert Z32.dtype == np.float32


def test_init_estimator_starts_from_its_counts():
    # init=StochasticEMLDA(...): the HDP starts from that sampler's counts, fitted with
    # max_components topics, document prior alpha / max_components and the model's tau,
    # sorted by size, as a model whose initial statistics are those counts
    X, _, _ = hdp_corpus(6, K=4, V=40, D=80, length=25)
    K, alpha, tau = 8, 0.7, 0.05
    sem = StochasticEMLDA(n_components=K, max_iter=10, random_state=2, n_threads=1)
    ref = clone(sem).set_params(doc_topic_prior=alpha / K, topic_word_prior=tau).fit(X)
    S = ref.components_ - tau
    S = S[np.argsort(-S.sum(axis=1), kind="stable")]

    class FromCounts(HDPTopicModel):
        def _init_stats(self, X, rng):
            st = empty_stats(K, X.shape[1])
            st["S"] = S.copy()
            return st

    kw = dict(max_components=K, alpha=alpha, topic_word_prior=tau, max_iter=3, tol=0,
              random_state=0)
    a = HDPTopicModel(init=sem, **kw).fit(X)
    b = FromCounts(**kw).fit(X)
    np.testing.assert_allclose(a.components_, b.components_, rtol=1e-12)
    np.testing.assert_allclose(a.topic_weights_, b.topic_weights_, rtol=1e-12)
    with pytest.raises(ValueError, match="must have n_components=8"):
        HDPTopicModel(init=StochasticEMLDA(n_components=4), **kw).fit(X)


def test_default_init_is_stochastic_em_on_counts_and_kmeanspp_on_weights():
    # init='auto': min(SEM_INIT_SWEEPS, SEM_SWEEPS_PER_PASS * max_iter) stochastic EM sweeps
    # for memoized training on integer counts (the same fit as init='sem'), k-means++ for
    # fractional weights, which the sweeps would round, and for stochastic training
    from sparseclust.topics._hdp import SEM_INIT_SWEEPS, SEM_SWEEPS_PER_PASS

    X, _, _ = hdp_corpus(7, K=4, V=40, D=60, length=20)
    K, alpha, tau = 6, 0.7, 0.05
    kw = dict(max_components=K, alpha=alpha, topic_word_prior=tau, max_iter=2, tol=0,
              random_state=3)
    n_sweeps = min(SEM_INIT_SWEEPS, SEM_SWEEPS_PER_PASS * kw["max_iter"])
    assert n_sweeps == 32  # max_iter bounds the start
    assert min(SEM_INIT_SWEEPS, SEM_SWEEPS_PER_PASS * HDPTopicModel().max_iter) == 800
    auto = HDPTopicModel(**kw).fit(X)
    sem = HDPTopicModel(init="sem", **kw).fit(X)
    np.testing.assert_array_equal(auto.components_, sem.components_)
    # the start, built independently from the documentation: the counts (lambda - tau) of
    # StochasticEMLDA with max_components topics, n_sweeps sweeps of one block, document
    # prior alpha / max_components and the model's tau, seeded by the first draw from the
    # model's random_state, sorted by size; from them the same passes give the same model
    rng = np.random.RandomState(3)
    ref = StochasticEMLDA(K, max_iter=n_sweeps, doc_topic_prior=alpha / K,
                          topic_word_prior=tau, init="random", sweep_blocks=1,
                          random_state=rng.randint(2**31)).fit(X)
    S = np.maximum(ref.components_ - tau, 0.0)
    S = S[np.argsort(-S.sum(axis=1), kind="stable")]

    class FromCounts(HDPTopicModel):
        def _init_stats(self, X, rng):
            rng.randint(2**31)  # the draw that seeded the sampler
            st = empty_stats(K, X.shape[1])
            st["S"] = S.copy()
            return st

    np.testing.assert_array_equal(
        HDPTopicModel(**kw)._init_stats(X, np.random.RandomState(3))["S"], S)
    np.testing.assert_array_equal(FromCounts(**kw).fit(X).components_, auto.components_)
    # ... which the k-means++ start is not (so the checks above tell the two apart)
    km_S = HDPTopicModel(init="kmeans++", **kw)._init_stats(X, np.random.RandomState(3))["S"]
    assert km_S.shape == S.shape and np.abs(km_S - S).max() > 1.0
    Xw = X * 0.37
    np.testing.assert_array_equal(HDPTopicModel(**kw).fit(Xw).components_,
                                  HDPTopicModel(init="kmeans++", **kw).fit(Xw).components_)
    # stochastic training and partial_fit start from k-means++ on the first minibatch
    st = dict(kw, algorithm="stochastic", batch_size=20)
    np.testing.assert_array_equal(HDPTopicModel(**st).fit(X).components_,
                                  HDPTopicModel(init="kmeans++", **st).fit(X).components_)
    np.testing.assert_array_equal(
        HDPTopicModel(**kw).partial_fit(X[:30]).components_,
        HDPTopicModel(init="kmeans++", **kw).partial_fit(X[:30]).components_)
    assert not np.allclose(HDPTopicModel(init="sem", **kw).partial_fit(X[:30]).components_,
                           HDPTopicModel(**kw).partial_fit(X[:30]).components_)

    # 'sem' is init=StochasticEMLDA(max_components, max_iter=n_sweeps, init='random',
    # sweep_blocks=1) with the model's seed
    est = HDPTopicModel(init=StochasticEMLDA(K, max_iter=n_sweeps, init="random",
                                             sweep_blocks=1), **kw).fit(X)
    np.testing.assert_array_equal(est.components_, sem.components_)
    longer = HDPTopicModel(init=StochasticEMLDA(K, max_iter=SEM_INIT_SWEEPS, init="random"),
                           **kw).fit(X)
    assert not np.allclose(longer.components_, sem.components_)


class _FixedTopics(BaseEstimator):
    """A stand-in topic model whose fit returns given topic-word counts (for init=)."""

    def __init__(self, n_components=3, doc_topic_prior=None, topic_word_prior=0.1,
                 counts=None):
        self.n_components = n_components
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.counts = counts

    def fit(self, X, y=None):
        self.components_ = np.asarray(self.counts, dtype=float) + self.topic_word_prior
        return self


def test_duplicate_topics_that_split_the_documents_are_merged():
    # two block topics; the initial topics split block A in two by documents, so the halves
    # are never used together (negative co-usage) and only their shared words can propose
    # their merge
    rng = np.random.RandomState(0)
    V, D, n = 20, 200, 30
    rows = np.zeros((D, V))
    for d in range(D):
        lo = 0 if d < D // 2 else V // 2
        rows[d] = np.bincount(rng.randint(lo, lo + V // 2, n), minlength=V)
    X = sp.csr_array(rows)
    counts = np.vstack([rows[:50].sum(0), rows[50:100].sum(0), rows[100:].sum(0)])
    kw = dict(max_components=3, moves="merge", L=None, max_iter=6, tol=0, random_state=0,
              init=_FixedTopics(3, counts=counts))
    words = HDPTopicModel(**kw).fit(X)
    assert words.n_components_ == 2
    assert sum(e["merges_accepted"] for e in words.trace_) == 1
    # the merged topic is block A: half of the corpus, on words 0..9
    phi = words.topic_word_distribution_
    block_a = phi[:, :10].sum(axis=1)
    assert sorted(np.round(block_a).tolist()) == [0.0, 1.0] and np.all(abs(block_a - 0.5) > 0.45)
    np.testing.assert_allclose(words.topic_weights_[0], words.topic_weights_[1], rtol=0.2)


def test_bad_input():
    X, _, _ = hdp_corpus(4, K=4, V=40, D=60, length=20)
    with pytest.raises(ValueError, match="Negative"):
        HDPTopicModel(max_components=5).fit(-X.toarray())
    Xn = X.toarray()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError):
        HDPTopicModel(max_components=5).fit(Xn)
    m = HDPTopicModel(max_components=5, max_iter=3, random_state=0).fit(X)
    with pytest.raises(ValueError, match="features"):
        m.transform(X[:, :-1])
    with pytest.raises(ValueError, match="features"):
        m.partial_fit(X[:, :-1])
    with pytest.raises(ValueError, match="moves"):
        HDPTopicModel(moves="split").fit(X)
    with pytest.raises(ValueError):
        HDPTopicModel(L=0).fit(X)
    X0 = X.copy()
    HDPTopicModel(max_components=5, max_iter=2, random_state=0).fit(X)
    assert (X0 != X).nnz == 0


@pytest.mark.contract
def test_partial_fit_stream_and_gridsearch(check_search):
    X, _, _ = hdp_corpus(5, K=5, V=50, D=300, length=40)
    m = HDPTopicModel(max_components=10, random_state=0, total_samples=300)
    s0 = None
    for start in range(0, 300, 50):
        m.partial_fit(X[start:start + 50])
        if s0 is None:
            s0 = m.score(X)
    assert m.score(X) > s0
    assert m.n_batch_iter_ == 6
    # GridSearchCV over L and gamma (a short sampler start, to keep the fits cheap): its mean
    # fold scores are those of clones fitted on each training fold of the same splitter and
    # scored on the test fold, and it picks the best of them
    base = HDPTopicModel(max_components=8, max_iter=3, tol=0, random_state=0,
                         init=StochasticEMLDA(8, max_iter=20))
    check_search(base, {"L": [2, 4], "gamma": [1.0, 5.0]}, X[:150], 2)


def test_partial_fit_after_fit_continues_from_the_fitted_model():
    """After a memoized fit, partial_fit starts from statistics that reproduce the fitted
    model: the training data's document statistics (T, G, A, LS, H, D) with S from lambda.
    Their objective under the fitted parameters is the fitted lower bound, their global step
    gives back the fitted sticks, and a step on the training documents keeps the topic
    weights. (With S alone, D = 0 restarted the sticks from the topic sizes and the blended
    statistics counted a fraction of the documents: E[beta] moved by about 0.1 on KOS.)"""
    X, _, _ = hdp_corpus(7, K=5, V=60, D=300, length=40)
    # a fit near its fixed point (tol='auto' would stop after the moves, a few passes in)
    m = HDPTopicModel(max_components=10, max_iter=30, tol=1e-4, random_state=0).fit(X)
    st = m._fitted_stats
    assert st["D"] == 300
    model = m._model(m._params.K)
    np.testing.assert_allclose(model.elbo(st, m._params), m.lower_bound_, rtol=1e-10)
    model.rho, model.omega = m._params.rho, m._params.omega
    p = model.global_step(st)
    np.testing.assert_allclose(p.Ebeta, m._params.Ebeta, atol=1e-6)
    beta0 = m._params.Ebeta.copy()
    m.partial_fit(X)
    assert np.abs(m._params.Ebeta - beta0).max() < 5e-4
    # a pickle keeps what partial_fit continues from
    m2 = pickle.loads(pickle.dumps(m))
    np.testing.assert_array_equal(m2._fitted_stats["T"], m._fitted_stats["T"])


def test_partial_fit_extends_trace_and_lower_bounds():
    """partial_fit appends one trace_ entry and one lower bound per step (as SparseLDA and
    SparseGaussianMixture do) instead of leaving them at fit's or resetting them. A stochastic
    fit of 2 one-minibatch passes continued by partial_fit on the same documents records the
    bound a 3-pass fit records for its third pass."""
    X, _, _ = hdp_corpus(8, K=4, V=40, D=60, length=30)
    kw = dict(max_components=6, algorithm="stochastic", batch_size=60, tol=0, random_state=0)
    full = HDPTopicModel(max_iter=3, **kw).fit(X)
    m = HDPTopicModel(max_iter=2, **kw).fit(X)
    bounds, trace = list(m.lower_bounds_), list(m.trace_)
    m.partial_fit(X)
    assert len(m.lower_bounds_) == len(m.trace_) == 3
    assert m.lower_bounds_[:2] == bounds and m.trace_[:2] == trace
    np.testing.assert_allclose(m.lower_bounds_[2], full.lower_bounds_[2], rtol=1e-9)
    entry = m.trace_[-1]
    assert entry["pass"] is None and entry["step"] == m.n_batch_iter_ == 3
    assert entry["elbo"] == m.lower_bound_ == m.lower_bounds_[-1]
    np.testing.assert_allclose(entry["elbo_change"],
                               abs(bounds[-1] - entry["elbo"]) / X.sum(), rtol=1e-12)
    assert entry["elapsed"] >= trace[-1]["elapsed"]
    assert entry["n_live"] == m.n_components_
    # from scratch: one entry per step, the first with an infinite change
    fresh = HDPTopicModel(max_components=6, random_state=0, total_samples=60)
    for start in (0, 20, 40):
        fresh.partial_fit(X[start:start + 20])
    assert len(fresh.trace_) == len(fresh.lower_bounds_) == 3
    assert [e["step"] for e in fresh.trace_] == [1, 2, 3]
    assert np.isinf(fresh.trace_[0]["elbo_change"])
    assert fresh.lower_bound_ == fresh.lower_bounds_[-1]


def test_stochastic_default_delay_is_four_passes_of_minibatches():
    """delta=None is DELAY_PASSES * ceil(D / batch_size) for the D documents the statistics
    are scaled to, in fit and in partial_fit (as for SparseLDA), and differs from delta=1."""
    X, _, _ = hdp_corpus(6, K=5, V=50, D=130, length=30)
    kw = dict(max_components=6, algorithm="stochastic", batch_size=20, max_iter=3, tol=0,
              random_state=0)
    auto = HDPTopicModel(**kw).fit(X)
    explicit = HDPTopicModel(delta=DELAY_PASSES * 7, **kw).fit(X)  # ceil(130 / 20) = 7
    np.testing.assert_array_equal(auto.components_, explicit.components_)
    one = HDPTopicModel(delta=1.0, **kw).fit(X)
    assert not np.allclose(one.components_, auto.components_)
    scaled = HDPTopicModel(total_samples=1000, **kw).fit(X)
    scaled_explicit = HDPTopicModel(total_samples=1000, delta=DELAY_PASSES * 50, **kw).fit(X)
    np.testing.assert_array_equal(scaled.components_, scaled_explicit.components_)
    pf = HDPTopicModel(**kw).partial_fit(X[:20]).partial_fit(X[20:40])  # scaled to 20 docs
    pf_explicit = (HDPTopicModel(delta=DELAY_PASSES * 1, **kw)
                   .partial_fit(X[:20]).partial_fit(X[20:40]))
    np.testing.assert_array_equal(pf.components_, pf_explicit.components_)


@pytest.mark.contract
@parametrize_with_checks([HDPTopicModel(max_components=4, max_iter=3, random_state=0)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def planted_hdp_corpus(seed, K=20, V=200, D=1000, length=50):
    """K block topics with Dir(5)-distributed top-level weights; documents mix a few."""
    rng = np.random.RandomState(seed)
    beta = rng.dirichlet(np.full(K, 5.0))
    block = V // K
    phi = np.full((K, V), 0.05 / V)
    for k in range(K):
        phi[k, k * block:(k + 1) * block] += 0.95 / block
    phi /= phi.sum(axis=1, keepdims=True)
    cdf = phi.cumsum(axis=1)
    rows = []
    for _ in range(D):
        pi = rng.dirichlet(beta * K / 2 + 1e-3)
        z = rng.choice(K, size=length, p=pi)
        w = (rng.rand(length)[:, None] > cdf[z]).sum(axis=1)
        rows.append(np.bincount(w, minlength=V))
    return sp.csr_array(np.asarray(rows, dtype=np.float64))


@pytest.mark.parametrize("stop", ["fixed passes", "default stopping rule"])
def test_planted_number_of_topics_is_recovered_from_a_larger_truncation(stop):
    """K = 10 planted block topics (V = 100, 200 documents of 50 tokens), truncation 50,
    otherwise the defaults: every one of seeds 0, 1, 2 (all reported, not hand-picked) ends
    with 8 to 12 live topics, after a first pass that kept more than 3 K of them live (the
    moves, not the start, find the number). Either after 10 passes (tol=0) or with the
    default stopping rule (tol='auto': 1e-2 after the stochastic EM start), which must stop
    before max_iter and not while the moves are still removing topics.

    Seeds 0..12 all pass both variants (10-12 topics; 39-48 live after the first pass)."""
    K = 10
    kw = dict(max_iter=10, tol=0) if stop == "fixed passes" else {}
    found = []
    for seed in range(3):
        X = planted_hdp_corpus(seed, K=K, V=100, D=200, length=50)
        m = HDPTopicModel(max_components=5 * K, random_state=seed, **kw).fit(X)
        assert m.trace_[0]["n_live"] > 3 * K
        found.append(m.n_components_)
        if stop != "fixed passes":
            assert m.converged_ and m.n_iter_ < m.max_iter
    assert all(abs(n - K) <= 2 for n in found), found


def _first_stopping_pass(m, n_tokens, tol):
    """The documented stopping rule, recomputed from a fit's lower bounds and accepted moves
    (fits without the sort move, so that a pass without accepted moves changes the objective
    only by its local and global steps): the first pass t > 1 that accepted no merge or
    delete and whose objective changed by less than tol nats per token; None if none."""
    L = m.lower_bounds_
    for t in range(1, len(L)):
        e = m.trace_[t]
        if (e["merges_accepted"] == 0 and e["deletes_accepted"] == 0
                and abs(L[t] - L[t - 1]) / n_tokens < tol):
            return t + 1
    return None


def test_auto_tol_is_large_after_the_sampler_start_only():
    from sparseclust.topics._hdp import (
        DEFAULT_TOL,
        SEM_INIT_SWEEPS,
        SEM_START_TOL,
        SEM_SWEEPS_PER_PASS,
    )

    X = planted_hdp_corpus(0, D=60)
    kw = dict(max_components=8, max_iter=2, random_state=0)
    for init, algorithm, tol in [("auto", "memoized", SEM_START_TOL),
                                 ("sem", "batch", SEM_START_TOL),
                                 (StochasticEMLDA(8, max_iter=5), "memoized", SEM_START_TOL),
                                 ("kmeans++", "memoized", DEFAULT_TOL),
                                 ("auto", "stochastic", DEFAULT_TOL)]:
        m = HDPTopicModel(init=init, algorithm=algorithm, **kw).fit(X)
        assert m.tol_ == tol and m.tol == "auto"
    assert HDPTopicModel(tol=3e-3, **kw).fit(X).tol_ == 3e-3
    # tf-idf-like weights: 'auto' starts from k-means++, so the small tol
    assert HDPTopicModel(**kw).fit(X * 0.5).tol_ == DEFAULT_TOL

    # the stop itself: tol='auto' ends training at the pass where the rule with the resolved
    # tol says, recomputed from a tol=0 fit of the same passes (plus two); from the sampler
    # that is earlier than the small tol would stop, from k-means++ later than the large one
    n_tokens = float(X.sum())
    for init, tol, other in [("auto", SEM_START_TOL, DEFAULT_TOL),
                             ("kmeans++", DEFAULT_TOL, SEM_START_TOL)]:
        kw = dict(max_components=8, moves="merge+delete", random_state=0, init=init)
        auto = HDPTopicModel(max_iter=40, **kw).fit(X)
        assert auto.converged_ and auto.tol_ == tol
        # the same start: the sampler's sweeps follow max_iter, so pin them to auto's
        same_start = dict(kw, init=StochasticEMLDA(
            8, max_iter=min(SEM_INIT_SWEEPS, SEM_SWEEPS_PER_PASS * 40), init="random",
            sweep_blocks=1)) \
            if init == "auto" else kw
        full = HDPTopicModel(max_iter=auto.n_iter_ + 2, tol=0, **same_start).fit(X)
        np.testing.assert_array_equal(full.lower_bounds_[:auto.n_iter_], auto.lower_bounds_)
        assert _first_stopping_pass(full, n_tokens, tol) == auto.n_iter_
        stop_other = _first_stopping_pass(full, n_tokens, other)
        if other < tol:
            assert stop_other is None  # not within two passes after the stop
        else:
            assert stop_other < auto.n_iter_


@pytest.mark.kernels
def test_top_weight_cosine_and_pair_union_match_dense_formulas():
    from sparseclust._moves import merge_pair_union, top_weight_cosine

    rng = np.random.RandomState(5)
    W = rng.gamma(0.3, 1.0, (7, 40))
    W[3] = 0.0  # an empty topic scores 0 with every other
    n = 6
    cut = np.zeros_like(W)
    for k in range(W.shape[0]):
        top = np.argsort(-W[k], kind="stable")[:n]
        cut[k, top] = W[k, top]
    norms = np.linalg.norm(cut, axis=1)
    ref = cut @ cut.T / np.outer(np.where(norms > 0, norms, 1), np.where(norms > 0, norms, 1))
    np.fill_diagonal(ref, 0.0)
    sim = top_weight_cosine(W, n_top=n)
    np.testing.assert_allclose(sim, ref, rtol=1e-12, atol=1e-15)
    assert np.all(sim[3] == 0) and sim.max() <= 1 + 1e-12
    # with n_top >= V the cut keeps every entry: the plain cosine
    full = W @ W.T / np.outer(np.maximum(np.linalg.norm(W, axis=1), 1e-300),
                              np.maximum(np.linalg.norm(W, axis=1), 1e-300))
    np.fill_diagonal(full, 0.0)
    np.testing.assert_allclose(top_weight_cosine(W, n_top=100), full, rtol=1e-12, atol=1e-15)

    u = merge_pair_union([[0, 1], [2, 5]], [[1, 0], [3, 4], [2, 5], [0, 6]], max_pairs=3)
    np.testing.assert_array_equal(u, [[0, 1], [2, 5], [3, 4]])
    assert merge_pair_union(np.zeros((0, 2)), max_pairs=5).shape == (0, 2)


def test_adaptive_delete_budget_halves_on_rejection_and_recovers_on_acceptance():
    from sparseclust._moves import AdaptiveBudget

    b = AdaptiveBudget(20)
    seen = []
    for _ in range(6):  # rounds that try proposals and accept none
        b.update(tried=b.value, accepted=0)
        seen.append(b.value)
    assert seen == [10, 5, 2, 1, 1, 1]
    b.update(tried=0, accepted=0)  # a round without proposals says nothing
    assert b.value == 1
    b.update(tried=1, accepted=1)
    assert b.value == 2
    b.update(tried=2, accepted=2)
    assert b.value == 4
    b.update(tried=4, accepted=9)  # more accepted than the budget (skips counted) stays capped
    assert b.value == 18
    b.update(tried=4, accepted=4)
    assert b.value == 20
    assert AdaptiveBudget(0).value == 0 and AdaptiveBudget(3, low=5).low == 3
    with pytest.raises(ValueError, match="rule"):
        AdaptiveBudget(20, rule="shrink")


@pytest.mark.parametrize("rule", ["grow", "follow"])
def test_adaptive_budget_rules_differ_only_on_partly_accepted_rounds(rule):
    from sparseclust._moves import AdaptiveBudget

    def run(rounds):
        b = AdaptiveBudget(20, rule=rule)
        out = []
        for tried, accepted in rounds:
            b.update(tried=tried, accepted=accepted)
            out.append(b.value)
        return out

    # all rejected, all accepted, nothing tried: the same under both rules
    assert run([(20, 0), (10, 0), (5, 5), (10, 10), (0, 0)]) == [10, 5, 10, 20, 20]
    # one cheap acceptance among many rejections, then rejections
    partly = run([(18, 1), (20, 0), (3, 2)])
    if rule == "grow":
        assert partly == [20, 10, 20]
    else:  # twice the number accepted, but at least half the budget
        assert partly == [10, 5, 4]
    b = AdaptiveBudget(20, rule=rule)
    b.update(tried=20, accepted=15)  # a large demand is met either way
    assert b.value == 20


def test_rounds_of_a_kind_wait_after_rejections_and_resume_after_an_acceptance():
    # after the n-th round in a row of rejected births the next one waits cooldown * 2**(n-1)
    # passes; an accepted birth lets the next pass propose again; each kind has its own wait
    from sparseclust._moves import MoveBook

    book = MoveBook()
    book.move_opts = dict(cooldown=2, max_deletes=4)
    book.init_book()
    due = []
    for p in range(1, 20):
        book.begin_pass(p, 3)
        due.append(book.due("births"))
        if due[-1]:
            book.end_kind("births", 1, 0)
        else:
            book.end_kind("births", 0, 0)  # a round without births says nothing
    # rejected at pass 1 (wait 2), 4 (wait 4), 9 (wait 8), 18
    assert [p for p, d in enumerate(due, start=1) if d] == [1, 4, 9, 18]
    book.begin_pass(19, 3)
    assert book.due("deletes")  # another kind: no wait
    book.end_kind("births", 1, 1)
    book.begin_pass(20, 3)
    assert book.due("births")


def test_birth_targets_visit_every_component_across_rounds():
    # targets: fewest rejected births first, then largest; so rounds of births move on to
    # components not tried yet instead of proposing again at the same largest ones
    from sparseclust._moves import MoveBook, select_births

    size = np.array([50.0, 400.0, 10.0, 300.0, 200.0, 3.0])
    assert select_births(size, max_candidates=3).tolist() == [1, 3, 4]
    assert select_births(size, max_candidates=9, min_size=5.0).tolist() == [1, 3, 4, 0, 2]
    tried = np.array([0, 2, 0, 1, 0, 0])
    assert select_births(size, max_candidates=4, tried=tried).tolist() == [4, 0, 2, 5]
    assert select_births(size, max_candidates=6, tried=tried, min_size=5.0,
                         allowed=np.array([1, 1, 0, 1, 1, 1], bool)).tolist() == [4, 0, 3, 1]
    # the book counts each component's rejected births by identity, which a renumbering
    # keeps and a merge renews
    book = MoveBook()
    book.moves = ("merge", "birth")
    book.move_opts = dict(cooldown=1, max_deletes=4)
    book.init_book()
    book.begin_pass(1, 6)
    chosen = []
    for p in range(1, 8):
        book.begin_pass(p, 6)
        targets = select_births(size, max_candidates=2, allowed=book.birthable(),
                                tried=book.birth_rejections())
        chosen.append(targets.tolist())
        for k in targets:
            book.reject_birth(k)
    # every component is tried before any is tried a third time
    first = [k for ks in chosen for k in ks]
    assert sorted(first[:6]) == list(range(6))
    assert book.birth_rejections().sum() == len(first)
    assert book.birth_rejections().max() - book.birth_rejections().min() <= 1
    book.permute_book(np.arange(6)[::-1])
    assert book.birth_rejections().tolist() == np.bincount(first, minlength=6)[::-1].tolist()


def test_birth_schedule_loop_and_target_sample_of_the_move_book():
    # the birth machinery the topic model and the mixture share (sparseclust._moves)
    from sparseclust._moves import MoveBook, RoundLog, subsample_targets

    book = MoveBook()
    book.moves = ("merge", "birth")
    book.move_opts = dict(cooldown=3, max_deletes=4)
    book.init_book()
    book.begin_pass(2, 4)
    # births wait for a round that accepted no merge or delete (and, if asked, tried some);
    # a single component may try one from the first round on
    assert not book.births_settled() and book.births_settled(single=True)
    book.round_logs.append(RoundLog(merges_tried=2).as_dict())
    assert book.births_settled() and book.births_settled(require_tried=True)
    book.round_logs.append(RoundLog().as_dict())
    assert book.births_settled() and not book.births_settled(require_tried=True)
    book.round_logs.append(RoundLog(merges_tried=1, merges_accepted=1).as_dict())
    assert not book.births_settled()
    # with first=True the first round that proposes moves proposes births too (rounds
    # before it, which tried nothing, do not count), and later rounds follow the rule above
    first = MoveBook()
    first.moves = ("merge", "birth")
    first.move_opts = dict(cooldown=3, max_deletes=4)
    first.init_book()
    assert first.births_settled(first=True) and not first.births_settled()
    first.round_logs.append(RoundLog().as_dict())
    assert first.births_settled(first=True, require_tried=True)
    first.round_logs.append(RoundLog(merges_tried=3, merges_accepted=2).as_dict())
    assert not first.births_settled(first=True)
    first.round_logs.append(RoundLog(merges_tried=1).as_dict())
    assert first.births_settled(first=True, require_tried=True)
    # the loop skips touched, removed and item-less targets, remembers a rejection
    alive = np.array([True, True, False, True])
    tried, applied = [], []

    def run(log, accept):
        book.run_births([0, 1, 2, 3], lambda: alive, log,
                        lambda k, rng: None if k == 1 else {0: np.arange(3)},
                        lambda k, items, rng: tried.append(k) or (k if k in accept else None),
                        lambda k, items, res: applied.append(res))

    log = RoundLog()
    log.touched.add(0)
    run(log, accept=())
    assert tried == [3] and applied == [] and (log.births_tried, log.births_accepted) == (1, 0)
    assert book.birthable().tolist() == [True, True, True, False]
    log = RoundLog()
    run(log, accept=(0, 3))
    assert tried == [3, 0, 3] and applied == [0, 3] and log.births_accepted == 2
    assert {0, 3} <= log.touched
    # a birth's stream depends on its target's identity and the pass only
    a, b = book.birth_rng(2).rand(3), book.birth_rng(2).rand(3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, book.birth_rng(1).rand(3))
    # the target sample: all items when they fit, else a uniform sample of the budget
    targets = {0: np.arange(10), 2: np.arange(5, 9)}
    assert subsample_targets(targets, 14, np.random.RandomState(0)) is targets
    got = subsample_targets(targets, 6, np.random.RandomState(0))
    assert sum(t.size for t in got.values()) == 6
    for bb, t in got.items():
        assert np.all(np.isin(t, targets[bb])) and np.all(np.diff(t) > 0)


def test_rejected_delete_rounds_shrink_the_next_rounds():
    # once no delete is accepted, the rounds try fewer and fewer proposals
    rng = np.random.default_rng(0)
    phi = rng.dirichlet(np.full(80, 0.05), size=8)  # 8 planted topics, truncation 40
    theta = rng.dirichlet(np.full(8, 0.3), size=300)
    X = sp.csr_array(np.vstack([rng.multinomial(60, t @ phi) for t in theta]).astype(float))
    # deletes accepted in passes 2-4, then rounds of 3, 2, 2, 1, 1 rejected proposals
    m = HDPTopicModel(40, L=4, max_iter=9, tol=0, random_state=0, n_threads=1).fit(X)
    tried = [e.get("deletes_tried", 0) for e in m.trace_]
    accepted = [e.get("deletes_accepted", 0) for e in m.trace_]
    budget = 20  # the default ``max_deletes``
    assert any(t > 0 and a == 0 for t, a in zip(tried, accepted, strict=True))
    for t, a in zip(tried, accepted, strict=True):
        assert t <= budget
        if t > 0:  # HDPModel's rule, 'follow' (see AdaptiveBudget)
            if a == 0:
                budget = max(1, budget // 2)
            elif a >= t:
                budget = min(20, max(2 * budget, 2 * a))
            else:
                budget = min(20, max(1, budget // 2, 2 * a))


def test_local_iters_count_the_pass_and_delete_iters_the_reinference():
    # the delete proposals re-run the local step on their documents after the pass; the
    # trace keeps those iterations apart, so a pass's local_iters is the same with and
    # without deletes (the passes before the first accepted move are the same fits)
    rng = np.random.default_rng(0)
    phi = rng.dirichlet(np.full(80, 0.05), size=8)
    theta = rng.dirichlet(np.full(8, 0.3), size=300)
    X = sp.csr_array(np.vstack([rng.multinomial(60, t @ phi) for t in theta]).astype(float))
    kw = dict(L=4, max_iter=2, tol=0, random_state=0, n_threads=1, init="kmeans++")
    with_del = HDPTopicModel(40, moves="delete", **kw).fit(X)
    without = HDPTopicModel(40, moves="none", **kw).fit(X)
    assert with_del.trace_[1]["deletes_tried"] > 0
    assert ([e["local_iters"] for e in with_del.trace_]
            == [e["local_iters"] for e in without.trace_])
    assert all(e["local_iters"] > 0 and e["delete_local_iters"] == 0 for e in without.trace_)
    assert with_del.trace_[0]["delete_local_iters"] == 0
    assert with_del.trace_[1]["delete_local_iters"] > 0


def test_stopping_rule_excludes_the_jump_of_accepted_moves():
    # the rule on a scripted sequence of passes: (objective before the moves, after them,
    # merges accepted); 1000 tokens, tol = 1e-3 nats per token, i.e. 1 nat
    from types import SimpleNamespace

    def passes_run(script, tol=1e-3):
        est = HDPTopicModel(tol=tol)
        model = SimpleNamespace(pre_move_elbo=None, birth_pending=lambda: False)
        snaps = []
        stopper = est._stopper(lambda info: False, snaps, model, 1000.0)
        for t, (pre, post, merges) in enumerate(script, start=1):
            model.pre_move_elbo = pre
            snaps.append(dict(merges_accepted=merges, deletes_accepted=0, sorted=True))
            if stopper(dict(elbo=post, elbo_change=np.inf)):
                return t, est._converged, [s["progress"] for s in snaps]
        return len(script), est._converged, [s["progress"] for s in snaps]

    # converged local/global steps (0.5 nat per pass) with a merge accepted in every pass
    # (a jump of 50 nats): the progress excludes the jumps, but no pass stops while a move
    # is accepted (the number of topics is still being learned)
    script = [(-1000.0, -900.0, 1), (-880.0, -800.0, 1), (-799.5, -749.5, 1),
              (-749.0, -699.0, 1), (-698.5, -648.5, 1)]
    n, conv, prog = passes_run(script)
    assert (n, conv) == (5, False)
    np.testing.assert_allclose(prog[1:], [0.02, 0.0005, 0.0005, 0.0005])
    # ... and the first pass below tol without a move stops (a sort never blocks)
    n, conv, prog = passes_run(script[:3] + [(-749.0, -749.0, 0), (-748.5, -748.5, 0)])
    assert (n, conv) == (4, True)
    # without a move, the first pass below tol stops
    script = [(-1000.0, -1000.0, 0), (-900.0, -900.0, 0), (-899.5, -899.5, 0)]
    assert passes_run(script)[:2] == (3, True)
    # a move after a pass of large progress: one more pass is needed
    script = [(-1000.0, -1000.0, 0), (-900.0, -850.0, 1), (-849.5, -849.5, 0)]
    assert passes_run(script)[:2] == (3, True)
    script = [(-1000.0, -1000.0, 0), (-900.0, -850.0, 1), (-849.5, -800.0, 1)]
    assert passes_run(script)[:2] == (3, False)
    # tol = 0 never stops
    assert passes_run([(-1.0, -1.0, 0)] * 4, tol=0)[:2] == (4, False)


def test_converged_fit_stops_early_within_tolerance_of_a_longer_fit():
    X, _, _ = hdp_corpus(3, K=8, V=80, D=150, length=50)
    n_tokens = float(X.sum())
    tol = 1e-3
    kw = dict(max_components=20, L=4, n_batches=3, random_state=0)
    m = HDPTopicModel(tol=tol, max_iter=60, **kw).fit(X)
    assert m.converged_ and m.n_iter_ < 60
    prog = [e["progress"] for e in m.trace_]
    assert prog[-1] < tol and all(np.isfinite(prog[1:]))
    # passes that accepted no move: the progress is the change of the whole objective
    for e, prev in zip(m.trace_[1:], m.trace_[:-1], strict=True):
        if not (e["merges_accepted"] or e["deletes_accepted"] or e["sorted"]):
            assert e["progress"] == pytest.approx(abs(e["elbo"] - prev["elbo"]) / n_tokens,
                                                  rel=1e-9)
    # the same start as m's: the sampler's sweeps follow max_iter (min(800, 16 * 60))
    start = StochasticEMLDA(20, max_iter=800, init="random", sweep_blocks=1)
    longer = HDPTopicModel(tol=0, max_iter=m.n_iter_ + 15, init=start, **kw).fit(X)
    np.testing.assert_allclose(longer.lower_bounds_[:m.n_iter_], m.lower_bounds_, rtol=1e-12)
    gain = (longer.lower_bound_ - m.lower_bound_) / n_tokens
    assert 0.0 <= gain < 10 * tol
    assert longer.n_components_ == m.n_components_


def test_convergence_warning_only_when_max_iter_ends_training():
    """Running out of passes warns; a callback that stops training does not (as for
    SparseLDA)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    X, _, _ = hdp_corpus(3, K=8, V=80, D=150, length=50)
    kw = dict(max_components=20, L=4, n_batches=3, random_state=0, tol=1e-6)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        HDPTopicModel(max_iter=2, **kw).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        m = HDPTopicModel(max_iter=5, **kw).fit(X, callback=lambda info: info["pass"] == 2)
    assert m.n_iter_ == 2 and not m.converged_



def test_fit_callback_sees_every_pass_with_the_trace_entry():
    """fit(callback=): once per pass with the pass's trace entry fields plus n_passes and
    components (the topics of the truncation, as SparseLDA's callback), True stops."""
    X, _, _ = hdp_corpus(4, K=4, V=40, D=80, length=30)
    seen = []

    def cb(info):
        seen.append({k: (v.copy() if isinstance(v, np.ndarray) else v)
                     for k, v in info.items()})
        return info["pass"] == 3

    m = HDPTopicModel(max_components=8, max_iter=10, tol=0, random_state=0).fit(X, callback=cb)
    assert [i["pass"] for i in seen] == [1, 2, 3] and m.n_iter_ == 3
    assert all(i["n_passes"] == 10 for i in seen)
    for info, entry in zip(seen, m.trace_, strict=True):
        for key in ("pass", "elapsed", "elbo", "n_topics", "n_live"):
            assert info[key] == entry[key]
    np.testing.assert_array_equal(seen[-1]["components"][m._live], m.components_)
