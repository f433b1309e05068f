# SPDX-License-Identifier: BSD-3-Clause
"""The LDA document local step against plain numpy references (Hughes & Sudderth 2016, Alg. 2,
App. C-D)."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import gammaln, psi
from sparseclust._kernels._lda_local import digamma

from sparseclust.topics._local import EPS_REL, TopicTables, infer_doc_topics, local_step

pytestmark = pytest.mark.kernels

# ---------------------------------------------------------------------------------------------
# numpy references: one document at a time, straight from the paper's formulas


def _softmax_rows(W):
    R = np.exp(W - W.max(axis=1, keepdims=True))
    return R / R.sum(axis=1, keepdims=True)


def ref_dense_doc(ids, c, C, alpha, tol, max_iter):
    """DenseStepForDoc (Alg. 2, left) from uniform weights. Returns N, R, P_used, n_iter."""
    K = C.shape[0]
    P = np.full(K, -np.log(K))
    N = np.zeros(K)
    for it in range(max_iter):
        if it > 0:
            P = psi(N + alpha) - psi(np.sum(N + alpha))
        R = _softmax_rows(C[:, ids].T + P)
        Nn = c @ R
        delta = np.abs(Nn - N).max()
        N = Nn
        if it > 0 and delta < tol:
            break
    return N, R, P, it + 1


def ref_sparse_doc(ids, c, C, alpha, L, tol, max_iter, n_select_first=5, select_every=10):
    """LSparseStepForDoc (Alg. 2, right) with the selection schedule and the active set."""
    K = C.shape[0]
    U = ids.size
    eps = EPS_REL * c.sum()
    N = np.zeros(K)
    active = np.ones(K, bool)
    kept = [None] * U
    P = np.full(K, -np.log(K))
    for it in range(max_iter):
        select = it < n_select_first or (select_every > 0 and it % select_every == 0)
        if it > 0:
            drop = active & (N <= eps)
            N[drop] = 0.0
            active &= ~drop
            P = np.full(K, -np.inf)
            P[active] = psi(N[active] + alpha[active]) - psi(alpha.sum() + N[active].sum())
        else:
            select = True
        R = np.zeros((U, K))
        for u in range(U):
            w = C[:, ids[u]] + P
            ks = None if select else [k for k in kept[u] if active[k]]
            if not ks:
                cand = np.flatnonzero(active)
                order = np.lexsort((cand, -w[cand]))  # descending weight, ties to smaller k
                ks = list(cand[order[:L]])
            kept[u] = ks
            wk = w[ks]
            e = np.exp(wk - wk.max())
            R[u, ks] = e / e.sum()
        Nn = c @ R
        delta = np.abs(Nn - N).max()
        N = Nn
        if it > 0 and delta < tol:
            break
    return N, R, P, it + 1


def doc_elbo_bruteforce(c, ids, C, alpha, R):
    """Document ELBO from its definition (App. C, Eq. 46-49) at theta = N + alpha.

    Returns (local part, data part): c_Dir(alpha) - c_Dir(theta) + sum (N + alpha - theta)
    E[log pi] - sum c r log r, and sum c r C.
    """
    N = c @ R
    theta = N + alpha
    Elogpi = psi(theta) - psi(theta.sum())
    cdir = lambda a: gammaln(a.sum()) - gammaln(a).sum()  # noqa: E731
    with np.errstate(divide="ignore", invalid="ignore"):
        rlogr = np.where(R > 0, R * np.log(R), 0.0)
    local = cdir(alpha) - cdir(theta) + np.sum((N + alpha - theta) * Elogpi)
    local -= np.sum(c[:, None] * rlogr)
    data = np.sum(c[:, None] * R * C[:, ids].T)
    return local, data


def reference_local_step(X, C, alpha, L=None, tol=0.05, max_iter=100):
    X = sp.csr_array(X)
    D, V = X.shape
    K = C.shape[0]
    S = np.zeros((K, V))
    N = np.zeros((D, K))
    local = data = 0.0
    sum_elogpi = np.zeros(K)
    for d in range(D):
        a, b = X.indptr[d], X.indptr[d + 1]
        ids, c = X.indices[a:b], X.data[a:b].astype(float)
        if ids.size:
            if L is None:
                Nd, R, _, _ = ref_dense_doc(ids, c, C, alpha, tol, max_iter)
            else:
                Nd, R, _, _ = ref_sparse_doc(ids, c, C, alpha, L, tol, max_iter)
            S[:, ids] += (R * c[:, None]).T
            lo, da = doc_elbo_bruteforce(c, ids, C, alpha, R)
            local += lo
            data += da
            N[d] = Nd
        theta = N[d] + alpha
        sum_elogpi += psi(theta) - psi(theta.sum())
    return dict(N=N, S=S, local=local, data=data, sum_elogpi=sum_elogpi)


# ---------------------------------------------------------------------------------------------
# fixtures


def _problem(seed=0, K=8, V=40, D=25, mean=0.6, lam_shape=0.3):
    rng = np.random.default_rng(seed)
    lam = rng.gamma(lam_shape, 1.0, (K, V)) + 0.05
    C = psi(lam) - psi(lam.sum(1))[:, None]
    counts = rng.poisson(mean, (D, V)).astype(np.float64)
    counts[3] = 0.0  # an empty document
    X = sp.csr_array(counts)
    alpha = rng.uniform(0.05, 0.3, K)
    return X, C, alpha


# ---------------------------------------------------------------------------------------------
# tests


def test_digamma_matches_scipy():
    x = np.concatenate([np.logspace(-8, 6, 3000), np.linspace(0.01, 30, 3000)])
    ours = digamma(x)
    np.testing.assert_allclose(ours, psi(x), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("tol,max_iter", [(1e-9, 1000), (0.05, 100), (0.5, 3)])
def test_dense_matches_numpy_reference(tol, max_iter):
    X, C, alpha = _problem(seed=1)
    ref = reference_local_step(X, C, alpha, L=None, tol=tol, max_iter=max_iter)
    res = local_step(X, C, alpha, L=None, tol=tol, max_iter=max_iter, restarts=0,
                     return_doc_topic=True, n_threads=1)
    np.testing.assert_allclose(res.doc_topic, ref["N"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(res.topic_word_stats, ref["S"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(res.elbo_local, ref["local"], rtol=1e-10)
    np.testing.assert_allclose(res.elbo_data, ref["data"], rtol=1e-10)
    np.testing.assert_allclose(res.sum_Elogpi, ref["sum_elogpi"], rtol=1e-10)
    assert res.n_tokens == X.sum()


@pytest.mark.parametrize("L,K", [(1, 9), (2, 9), (3, 9), (5, 9), (33, 48), (40, 48)])
def test_sparse_matches_numpy_reference(L, K):
    # L > 32 takes the introselect path (std::nth_element) instead of the sorted scan
    X, C, alpha = _problem(seed=2, K=K)
    ref = reference_local_step(X, C, alpha, L=L, tol=0.05, max_iter=100)
    res = local_step(X, C, alpha, L=L, restarts=0, return_doc_topic=True, n_threads=1)
    np.testing.assert_allclose(res.doc_topic, ref["N"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(res.topic_word_stats, ref["S"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(res.elbo_local, ref["local"], rtol=1e-9)
    np.testing.assert_allclose(res.elbo_data, ref["data"], rtol=1e-9)
    np.testing.assert_allclose(res.sum_Elogpi, ref["sum_elogpi"], rtol=1e-9)
    # each word type keeps at most L topics: S has at most L * nnz nonzeros
    assert np.count_nonzero(res.topic_word_stats) <= L * X.nnz


def test_sparse_with_L_equal_K_equals_dense():
    X, C, alpha = _problem(seed=3, K=7)
    kw = dict(tol=1e-10, max_iter=2000, restarts=0, return_doc_topic=True, n_threads=1)
    dense = local_step(X, C, alpha, L=None, **kw)
    sparse = local_step(X, C, alpha, L=7, force_sparse=True, **kw)
    np.testing.assert_allclose(sparse.doc_topic, dense.doc_topic, atol=1e-6)
    np.testing.assert_allclose(sparse.topic_word_stats, dense.topic_word_stats, atol=1e-6)
    np.testing.assert_allclose(sparse.elbo_local + sparse.elbo_data,
                               dense.elbo_local + dense.elbo_data, rtol=1e-8)


@pytest.mark.parametrize("L", [None, 2, 4])
@pytest.mark.parametrize("restarts", [0, 3])
def test_threads_bit_identical(L, restarts):
    X, C, alpha = _problem(seed=4, K=12, V=60, D=150)
    out = [
        local_step(X, C, alpha, L=L, restarts=restarts, return_doc_topic=True, n_threads=t)
        for t in (1, 2, 3)
    ]
    for o in out[1:]:
        assert np.array_equal(o.topic_word_stats, out[0].topic_word_stats)
        assert np.array_equal(o.doc_topic, out[0].doc_topic)
        assert np.array_equal(o.sum_Elogpi, out[0].sum_Elogpi)
        assert o.elbo_local == out[0].elbo_local
        assert o.elbo_data == out[0].elbo_data
        assert o.n_restarts_accepted == out[0].n_restarts_accepted
        assert o.n_iter_total == out[0].n_iter_total



def _kernel_outputs(X, C, alpha, L, restarts, tol, n_threads=1, **flags):
    from sparseclust._kernels import _lda_local
    from sparseclust.topics._local import RESTART_MIN, _check_alpha, _check_counts

    K = C.shape[0]
    indptr, indices, data, _ = _check_counts(X, C.shape[1])
    CT = np.ascontiguousarray(C.T)
    return _lda_local.lda_local_docs(
        indptr, indices, data, CT, np.empty((0, K)), np.empty(0), _check_alpha(alpha, K), L,
        60, tol, 5, 10, restarts, 5, RESTART_MIN, EPS_REL, n_threads, **flags,
    )


@pytest.mark.parametrize("L", [1, 3, 8, 33])
@pytest.mark.parametrize("ties", [False, True])
def test_cold_table_and_bounded_selection_equal_per_document_path(L, ties):
    # the batch-wide cold-start table (top-L of C_{v,:} under uniform P) and the P-ordered
    # bounded selection scan are exact shortcuts: every output must equal the plain path,
    # which selects per document and scans the whole active set
    K = 40
    X, C, alpha = _problem(seed=11, K=K, V=70, D=60, mean=1.5)
    if ties:
        # duplicated topics and rounded weights: equal C_vk (and equal P_dk) for many pairs,
        # so the selections depend on the tie rule (smaller topic index first)
        C = np.round(C, 1)
        C[K // 2 :] = C[: K // 2]
        alpha = np.full(K, 0.1)
    for restarts, tol in ((0, 0.0), (4, 0.05)):
        plain = _kernel_outputs(X, C, alpha, L, restarts, tol, cold_table=False,
                                bounded_select=False)
        assert np.any(plain["idx"] >= 0)
        for flags in (dict(cold_table=True, bounded_select=False),
                      dict(cold_table=False, bounded_select=True), {}):
            for nt in (1, 2):
                fast = _kernel_outputs(X, C, alpha, L, restarts, tol, n_threads=nt, **flags)
                for key in plain:
                    np.testing.assert_allclose(fast[key], plain[key], rtol=1e-12, atol=0,
                                               err_msg=key)
                    assert np.array_equal(fast[key], plain[key]), key

def _doc_elbos(X, C, alpha, **kw):
    X = sp.csr_array(X)
    out = []
    for d in range(X.shape[0]):
        r = local_step(X[[d]], C, alpha, n_threads=1, **kw)
        out.append(r.elbo_local + r.elbo_data)
    return np.array(out)


@pytest.mark.parametrize("L", [None, 3])
def test_restarts_never_decrease_document_elbo(L):
    # small alpha: the cold start leaves junk topics that restarts remove
    X, C, alpha = _problem(seed=5, K=10, V=50, D=40, mean=1.0)
    alpha = np.full(10, 0.02)
    off = _doc_elbos(X, C, alpha, L=L, restarts=0)
    on = _doc_elbos(X, C, alpha, L=L, restarts=10)
    assert np.all(on >= off - 1e-9 * np.abs(off))
    res = local_step(X, C, alpha, L=L, restarts=10)
    assert res.n_restarts_tried > 0
    assert res.n_restarts_accepted > 0
    assert np.sum(on) > np.sum(off)


def test_reported_elbo_matches_bruteforce_with_restarts():
    # with restarts the final state is not the reference's; check the ELBO bookkeeping by
    # recomputing from the returned statistics: sum_d data term = sum_kv S_kv C_kv
    X, C, alpha = _problem(seed=6, K=10, D=30)
    for L in (None, 3):
        res = local_step(X, C, alpha, L=L, restarts=5, return_doc_topic=True)
        np.testing.assert_allclose(res.elbo_data, np.sum(res.topic_word_stats * C), rtol=1e-10)
        np.testing.assert_allclose(res.doc_topic.sum(1), X.sum(1), rtol=1e-10)


def test_empty_documents():
    X, C, alpha = _problem(seed=7)
    X0 = sp.csr_array((5, X.shape[1]))
    for L in (None, 2):
        res = local_step(X0, C, alpha, L=L, return_doc_topic=True)
        assert np.all(res.doc_topic == 0)
        assert np.all(res.topic_word_stats == 0)
        assert res.elbo_local == 0.0 and res.elbo_data == 0.0
        expected = 5 * (psi(alpha) - psi(alpha.sum()))
        np.testing.assert_allclose(res.sum_Elogpi, expected, rtol=1e-12)
        assert res.n_iter_total == 0


def test_float32_counts_and_read_only_inputs():
    X, C, alpha = _problem(seed=8)
    X32 = sp.csr_array(X.astype(np.float32))
    X32.data.setflags(write=False)
    C.setflags(write=False)
    alpha.setflags(write=False)
    for L in (None, 3):
        a = local_step(X, C, alpha, L=L, return_doc_topic=True)
        b = local_step(X32, C, alpha, L=L, return_doc_topic=True)
        assert np.array_equal(a.topic_word_stats, b.topic_word_stats)
        assert np.array_equal(a.doc_topic, b.doc_topic)


def test_duplicates_zeros_and_dense_input_are_canonicalized():
    X, C, alpha = _problem(seed=9)
    X = sp.csr_array(X)
    a = local_step(X, C, alpha, return_doc_topic=True)
    # the same counts split into duplicate entries plus explicit zeros
    coo = X.tocoo()
    half = coo.data / 2
    rows = np.concatenate([coo.row, coo.row, coo.row[:3]])
    cols = np.concatenate([coo.col, coo.col, coo.col[:3]])
    vals = np.concatenate([half, half, np.zeros(3)])
    Xd = sp.csr_array((vals, (rows, cols)), shape=X.shape)
    Xd.has_canonical_format = False
    before = Xd.data.copy()
    b = local_step(Xd, C, alpha, return_doc_topic=True)
    np.testing.assert_allclose(b.doc_topic, a.doc_topic, rtol=1e-12, atol=1e-12)
    assert np.array_equal(Xd.data, before)  # caller's matrix untouched
    c = local_step(X.toarray(), C, alpha, return_doc_topic=True)
    assert np.array_equal(c.doc_topic, a.doc_topic)


def test_dense_underflow_falls_back_to_log_space():
    # word type 6 is explained by topic 0 alone (all other topics 1000 nats lower). A restart
    # proposal that forbids topic 0 leaves exp(C - max C) * exp(P - max P) = 0 for every allowed
    # topic: the dense routine flags the document and the wrapper redoes it in log space.
    from sparseclust._kernels import _lda_local
    from sparseclust.topics._local import RESTART_MIN, _check_counts

    rng = np.random.default_rng(10)
    K, V = 3, 12
    C = np.full((K, V), -8.0)
    C[1, :6] = -1.0
    C[2, 6:] = -1.5
    C[:, 6] = -1006.0
    C[0, 6] = -6.0
    C = C - np.log(np.exp(C).sum(1, keepdims=True))
    counts = np.zeros((6, V))
    counts[:, :6] = rng.poisson(5.0, (6, 6))
    counts[:, 6] = 1.0
    X = sp.csr_array(counts)
    alpha = np.full(K, 0.01)
    kw = dict(restarts=2, return_doc_topic=True, tol=1e-10, max_iter=500)

    t = TopicTables(C)
    ET, rowmax = t.dense_tables()
    ip, ind, dat, _ = _check_counts(X, V)
    raw = _lda_local.lda_local_docs(ip, ind, dat, t.CT, ET, rowmax, alpha, 0, 500, 1e-10, 5,
                                    10, 2, 5, RESTART_MIN, EPS_REL, 1)
    assert raw["underflow"].all()

    dense = local_step(X, C, alpha, **kw)
    ref = local_step(X, C, alpha, L=K, force_sparse=True, **kw)
    assert np.all(np.isfinite(dense.doc_topic))
    np.testing.assert_allclose(dense.doc_topic, ref.doc_topic, atol=1e-8)
    np.testing.assert_allclose(dense.topic_word_stats, ref.topic_word_stats, atol=1e-8)
    np.testing.assert_allclose(dense.elbo_local, ref.elbo_local, rtol=1e-10)
    np.testing.assert_allclose(dense.doc_topic.sum(1), counts.sum(1))
    assert dense.n_restarts_tried == ref.n_restarts_tried > 0


def test_infer_doc_topics_is_dense_local_step():
    X, C, alpha = _problem(seed=11)
    N = infer_doc_topics(X, C, alpha, tol=1e-9, max_iter=1000)
    ref = reference_local_step(X, C, alpha, L=None, tol=1e-9, max_iter=1000)
    np.testing.assert_allclose(N, ref["N"], rtol=1e-10, atol=1e-10)
    assert N.shape == (X.shape[0], C.shape[0])
    # TopicTables can be reused
    N2 = infer_doc_topics(X, TopicTables(C), alpha, tol=1e-9, max_iter=1000)
    assert np.array_equal(N, N2)


def test_bad_input_raises():
    X, C, alpha = _problem(seed=12)
    with pytest.raises(ValueError, match="non-negative"):
        local_step(-X, C, alpha)
    with pytest.raises(ValueError, match="features"):
        local_step(X[:, :5], C, alpha)
    with pytest.raises(ValueError, match="finite"):
        Cn = C.copy()
        Cn[0, 0] = np.nan
        local_step(X, Cn, alpha)
    with pytest.raises(ValueError, match="alpha"):
        local_step(X, C, -1.0)
    with pytest.raises(ValueError, match="L must"):
        local_step(X, C, alpha, L=0)
