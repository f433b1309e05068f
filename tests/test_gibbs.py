# SPDX-License-Identifier: BSD-3-Clause
"""The sampled (hybrid SVI-Gibbs) local step of SparseLDA (Mimno, Hoffman & Blei 2012)."""

import contextlib
import itertools
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import gammaln
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

from sparseclust import SparseLDA
from sparseclust._engine import learning_rate
from sparseclust._kernels import _gibbs_tables, _tokens
from sparseclust.topics import _gibbs
from sparseclust.topics._gibbs import gibbs_local_step


@contextlib.contextmanager
def _no_convergence_warning():
    """The fits below use tol=0 (exactly max_iter passes): no ConvergenceWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        yield

def _corpus(D=60, V=30, K=3, seed=0, doc_len=25):
    rng = np.random.RandomState(seed)
    phi = rng.dirichlet(np.full(V, 0.2), size=K)
    rows = []
    for _ in range(D):
        theta = rng.dirichlet(np.full(K, 0.3))
        z = rng.choice(K, size=doc_len, p=theta)
        rows.append(np.bincount([rng.choice(V, p=phi[k]) for k in z], minlength=V))
    return sp.csr_array(np.asarray(rows, dtype=np.float64))


def _reference(X, Elogphi_T, alpha, B, S, seed, sweep):
    """The dense LIVE sampler in numpy with the kernel's uniforms: sequential initialisation,
    B discarded and S saved sweeps; returns the (K, V) average topic-word counts."""
    D, V = X.shape
    K = Elogphi_T.shape[1]
    X = sp.csr_array(X)
    cols = np.flatnonzero(np.asarray(X.sum(axis=0)).ravel())
    Lw = Elogphi_T[cols]
    w = np.exp(Lw - Lw.max(axis=1, keepdims=True)).astype(np.float32).astype(np.float64)
    local = {v: i for i, v in enumerate(cols)}
    out = np.zeros((K, V))
    for d in range(D):
        toks = []
        for j in range(X.indptr[d], X.indptr[d + 1]):
            toks += [X.indices[j]] * int(np.floor(X.data[j] + 0.5))
        n = len(toks)
        u = _tokens.uniform_stream(seed, sweep, d, n * (1 + B + S))
        nd = np.zeros(K, dtype=np.int64)
        z = np.zeros(n, dtype=np.int64)
        i = 0
        for it in range(1 + B + S):
            for t, v in enumerate(toks):
                if it > 0:
                    nd[z[t]] -= 1
                cum = np.cumsum((nd + alpha) * w[local[v]])
                k = int(np.searchsorted(cum, u[i] * cum[-1], side="right"))
                k = min(k, K - 1)
                i += 1
                z[t] = k
                nd[k] += 1
            if it >= 1 + B:
                for t, v in enumerate(toks):
                    out[z[t], v] += 1
    return out / S


@pytest.mark.kernels
def test_statistics_equal_numpy_reference_with_the_same_streams():
    X = _corpus(D=12, V=15, K=3, doc_len=9)
    rng = np.random.RandomState(1)
    K = 4
    ET = np.log(rng.dirichlet(np.full(X.shape[1], 0.5), size=K)).T.copy()
    res = gibbs_local_step(X, ET, 0.3, n_burnin=2, n_samples=3, seed=12345, sweep=7,
                           dense=True, n_threads=1)
    ref = _reference(X, ET, 0.3, 2, 3, 12345, 7)
    np.testing.assert_array_equal(res.topic_word_csr.toarray(), ref)
    # every token is counted once per saved sweep
    assert res.topic_word_csr.sum() == pytest.approx(X.sum())


def _exact_expected_counts(words, w, alpha):
    """E[N_kv] of the collapsed q(z) propto prod_k Gamma(alpha + n_k) prod_n w_{v_n z_n}, by
    enumeration."""
    K = w.shape[1]
    V = w.shape[0]
    num = np.zeros((K, V))
    tot = 0.0
    for z in itertools.product(range(K), repeat=len(words)):
        nk = np.bincount(z, minlength=K)
        logw = sum(np.log(w[v, k]) for v, k in zip(words, z, strict=True))
        p = np.exp(np.sum(gammaln(alpha + nk)) + logw)
        tot += p
        for v, k in zip(words, z, strict=True):
            num[k, v] += p
    return num / tot


@pytest.mark.parametrize("dense", [True, False])
def test_expected_counts_converge_to_exact_collapsed_posterior(dense):
    # one tiny document (4 tokens, 3 word types, K = 3) copied into many independent chains
    V, K, alpha = 3, 3, 0.4
    rng = np.random.RandomState(3)
    phi = rng.dirichlet(np.ones(V), size=K)
    ET = np.log(phi).T.copy()
    doc = np.array([[2.0, 1.0, 1.0]])
    words = [0, 0, 1, 2]
    n_copies = 4000
    X = sp.csr_array(np.repeat(doc, n_copies, axis=0))
    res = gibbs_local_step(X, ET, alpha, n_burnin=4, n_samples=4, seed=99, sweep=0,
                           dense=dense)
    est = res.topic_word_csr.toarray() / n_copies
    exact = _exact_expected_counts(words, phi.T, alpha)
    # Monte Carlo error of a mean of 4000 chains: a few 0.01 at most
    np.testing.assert_allclose(est, exact, atol=0.04)
    assert np.abs(est - exact).max() > 0  # a sampled estimate, not the exact values


@pytest.mark.kernels
def test_thread_count_invariance_sparse_and_dense_paths():
    X = _corpus(D=200, V=40, K=3)
    rng = np.random.RandomState(5)
    for K, dense in ((150, False), (20, True)):
        ET = np.log(rng.dirichlet(np.full(40, 0.3), size=K)).T.copy()
        out = [gibbs_local_step(X, ET, 0.1, n_burnin=1, n_samples=2, seed=4, sweep=1,
                                dense=dense, return_doc_topic=True, n_threads=n)
               for n in (1, 2, 3)]
        for r in out[1:]:
            assert (r.topic_word_csr != out[0].topic_word_csr).nnz == 0
            np.testing.assert_array_equal(r.doc_topic, out[0].doc_topic)
            assert r.elbo_local == out[0].elbo_local


@pytest.mark.kernels
@pytest.mark.parametrize("block", [1, 20, 60])
def test_blocks_of_documents_give_the_whole_batch_result(monkeypatch, block):
    """Sweeping a batch in blocks of documents (the bounded memory of a large batch) gives
    the statistics, assignments, document-topic counts and objective of one sweep over the
    whole batch, bit for bit: fresh and continued chains, dense and sparse paths, documents
    longer than a block and empty ones."""
    X = _corpus(D=90, V=40, K=3, doc_len=25).tolil()
    X[[3, 40, 89]] = 0  # empty documents, one of them last
    X = sp.csr_array(X)
    rng = np.random.RandomState(2)
    for K, dense in ((150, False), (12, True)):
        ET = np.log(rng.dirichlet(np.full(40, 0.3), size=K)).T.copy()
        # stream keys of a partition that starts at document 1000 of its batch (Dask)
        kw = dict(n_burnin=1, n_samples=3, seed=7, sweep=2, dense=dense,
                  return_doc_topic=True, return_z=True, n_threads=2,
                  keys=np.arange(1000, 1000 + X.shape[0], dtype=np.uint64))
        monkeypatch.setattr(_gibbs, "BLOCK_TOKENS", 1 << 40)
        whole = gibbs_local_step(X, ET, 0.2, **kw)
        cont = gibbs_local_step(X, ET, 0.2, z_init=whole.z, **kw)
        monkeypatch.setattr(_gibbs, "BLOCK_TOKENS", block)
        assert len(list(_gibbs._document_blocks(
            np.concatenate([[0], np.cumsum(X.sum(axis=1))]).astype(np.int64), block))) > 1
        for ref, z0 in ((whole, None), (cont, whole.z)):
            got = gibbs_local_step(X, ET, 0.2, z_init=z0, **kw)
            S, R = got.topic_word_csr, ref.topic_word_csr
            np.testing.assert_array_equal(S.indptr, R.indptr)
            np.testing.assert_array_equal(S.indices, R.indices)
            np.testing.assert_array_equal(S.data, R.data)
            np.testing.assert_array_equal(got.z, ref.z)
            np.testing.assert_array_equal(got.doc_topic, ref.doc_topic)
            assert got.elbo_local == ref.elbo_local


def test_binary_sums_of_count_blocks_equal_their_running_sum():
    rng = np.random.RandomState(3)
    for n in (1, 2, 3, 7, 8, 13):
        blocks = [sp.csc_array(sp.random(6, 9, density=0.3, random_state=rng,
                                         data_rvs=lambda k: rng.randint(1, 9, k)).astype(np.int32))
                  for _ in range(n)]
        sums = _gibbs._BinarySums()
        for b in blocks:
            sums.add(b)
        got = sums.total()
        ref = blocks[0]
        for b in blocks[1:]:
            ref = ref + b
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got.toarray(), ref.toarray())


@pytest.mark.parametrize("algorithm, K", [("memoized", 6), ("stochastic", 200)])
def test_sparse_lda_fits_do_not_depend_on_the_sampler_blocks(monkeypatch, algorithm, K):
    """Whole fits (chains of memoized training; the lazily scaled statistics and split word
    tables of stochastic training) are the same, bit for bit, with blocks of a few
    documents."""
    X = _corpus(D=80, V=40, K=3)
    kw = dict(n_components=K, algorithm=algorithm, n_batches=3, batch_size=40, max_iter=3,
              tol=0, random_state=0)
    ref = SparseLDA(**kw).fit(X)
    monkeypatch.setattr(_gibbs, "BLOCK_TOKENS", 60)
    got = SparseLDA(**kw).fit(X)
    np.testing.assert_array_equal(got.components_, ref.components_)
    assert got.lower_bounds_ == ref.lower_bounds_


def test_document_blocks_cover_the_documents_within_the_budget():
    tokptr = np.cumsum([0, 3, 0, 5, 1, 1, 9, 0, 2, 2]).astype(np.int64)
    for budget in (1, 2, 4, 6, 10, 100):
        blocks = list(_gibbs._document_blocks(tokptr, budget))
        assert blocks[0][0] == 0 and blocks[-1][1] == tokptr.size - 1
        assert all(b0 == a1 for (_, b0), (a1, _) in zip(blocks[:-1], blocks[1:], strict=True))
        for a, b in blocks:
            assert b > a
            assert tokptr[b] - tokptr[a] <= budget or b == a + 1
            # the block is maximal: the next document would exceed the budget
            if b < tokptr.size - 1:
                assert tokptr[b + 1] - tokptr[a] > budget


@pytest.mark.contract
@pytest.mark.kernels
def test_gibbs_fit_deterministic_threads_and_pickle():
    X = _corpus()
    kw = dict(n_components=4, local_step="gibbs", max_iter=4, tol=0, random_state=0)
    with _no_convergence_warning():
        a = SparseLDA(**kw, n_threads=1).fit(X)
    with _no_convergence_warning():
        b = SparseLDA(**kw, n_threads=2).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(c.transform(X), a.transform(X))
    # a different seed gives a different chain
    with _no_convergence_warning():
        d = SparseLDA(**{**kw, "random_state": 1}).fit(X)
    assert not np.array_equal(d.components_, a.components_)


def test_gibbs_transform_is_position_independent_and_near_variational():
    X = _corpus(D=80)
    m = SparseLDA(3, local_step="gibbs", max_iter=15, tol=0, random_state=0)
    with _no_convergence_warning():
        m.fit(X)
    T = m.transform(X)
    perm = np.random.RandomState(0).permutation(X.shape[0])
    np.testing.assert_array_equal(m.transform(X[perm]), T[perm])
    np.testing.assert_allclose(T.sum(axis=1), 1.0)
    # the variational fold-in with the same topics gives close document-topic proportions
    V = m.set_params(local_step="variational").transform(X)
    assert np.mean(np.abs(T - V)) < 0.1


@pytest.mark.parametrize("algorithm", ["memoized", "stochastic", "batch"])
def test_gibbs_algorithms_learn_planted_topics(algorithm):
    Xtr, Xte = _corpus(D=300, seed=0), _corpus(D=100, seed=0)[50:]
    base = SparseLDA(3, max_iter=1, tol=0, random_state=0, init="random",
                     algorithm=algorithm, batch_size=50)
    with _no_convergence_warning():
        base.fit(Xtr)
    m = SparseLDA(3, local_step="gibbs", max_iter=20, tol=0, random_state=0, init="random",
                  algorithm=algorithm, batch_size=50)
    with _no_convergence_warning():
        m.fit(Xtr)
    assert np.isfinite(m.lower_bound_)
    # better than one pass, and level with the variational step under the same algorithm
    v = SparseLDA(3, max_iter=20, tol=0, random_state=0, init="random",
                  algorithm=algorithm, batch_size=50)
    with _no_convergence_warning():
        v.fit(Xtr)
    assert m.score(Xte) > base.score(Xte) + 0.03
    assert m.score(Xte) > v.score(Xte) - 0.03


def test_gibbs_partial_fit_stream_and_after_fit():
    X = _corpus(D=400)
    m = SparseLDA(3, local_step="gibbs", random_state=0, total_samples=400)
    scores = []
    for _ in range(3):
        for s in range(0, 400, 50):
            m.partial_fit(X[s:s + 50])
        scores.append(m.score(X))
    assert m.n_batch_iter_ == 24
    assert scores[-1] > scores[0] - 0.02
    # deterministic
    m2 = SparseLDA(3, local_step="gibbs", random_state=0, total_samples=400)
    for _ in range(3):
        for s in range(0, 400, 50):
            m2.partial_fit(X[s:s + 50])
    np.testing.assert_array_equal(m.components_, m2.components_)
    # after a variational fit, a Gibbs partial_fit adjusts the topics
    with _no_convergence_warning():
        v = SparseLDA(3, max_iter=5, tol=0, random_state=0).fit(X)
    before = v.components_.copy()
    v.set_params(local_step="gibbs").partial_fit(X[:50])
    assert not np.array_equal(before, v.components_)
    assert np.abs(v.components_ - before).max() < np.abs(before).max()


@pytest.mark.contract
def test_gridsearch_over_L_and_local_step(check_search):
    # the search's mean fold scores and choice are those of clones fitted by hand on the same
    # folds (per-token ELBO on the test fold)
    X = _corpus(D=90)
    base = SparseLDA(3, max_iter=3, tol=0, random_state=0)
    with _no_convergence_warning():
        check_search(base, {"L": [1, 2], "local_step": ["variational", "gibbs"]}, X, 3)


def test_gibbs_empty_documents_float32_and_bad_params():
    X = _corpus(D=40).astype(np.float32)
    X = sp.vstack([X, sp.csr_array((2, X.shape[1]), dtype=np.float32)]).tocsr()
    m = SparseLDA(3, local_step="gibbs", max_iter=2, tol=0, random_state=0)
    with _no_convergence_warning():
        T = m.fit_transform(X)
    assert T.dtype == np.float32
    np.testing.assert_allclose(T[-1], 1 / 3, rtol=1e-6)
    with pytest.raises(ValueError, match="n_saved_sweeps"):
        SparseLDA(3, local_step="gibbs", n_saved_sweeps=0).fit(X)
    # the saved sweeps are n_saved_sweeps; n_samples (scikit-learn's word for rows) is gone
    assert "n_samples" not in SparseLDA().get_params()
    with pytest.raises(TypeError, match="n_samples"):
        SparseLDA(3, local_step="gibbs", n_samples=3)
    with pytest.raises(ValueError, match="local_step"):
        SparseLDA(3, local_step="gibs").fit(X)


@pytest.mark.contract
@parametrize_with_checks([SparseLDA(3, local_step="gibbs", max_iter=5, random_state=0)])
def test_sklearn_compatible_gibbs(estimator, check):
    check(estimator)


@pytest.mark.parametrize("rescale_below", [None, 1e-3])
def test_lazy_update_equals_dense_update(monkeypatch, rescale_below):
    from sparseclust.topics._lda_model import _LDAParams

    if rescale_below is not None:
        monkeypatch.setattr(_gibbs, "RESCALE_BELOW", rescale_below)
    rng = np.random.RandomState(0)
    K, V, tau = 7, 50, 0.1
    S = rng.gamma(1.0, 1.0, (K, V))
    lazy = _gibbs.LazyTopicStats(S, -3.0)
    dense, e = S.copy(), -3.0
    for t in range(1, 1501):
        B = sp.random_array((K, V), density=0.05, random_state=rng, format="csr")
        B.data = np.round(B.data * 10)
        rho = learning_rate(t, 0.6, 0.0 if t == 1 else 1.0)  # the first step forgets S
        lazy.step(B, -1.5, rho, 20.0)
        dense = (1 - rho) * dense + rho * 20.0 * B.toarray()
        e = (1 - rho) * e + rho * 20.0 * -1.5
    if rescale_below is not None:
        assert lazy.n_rescaled >= 5
    np.testing.assert_allclose(lazy.dense(), dense, rtol=1e-10, atol=1e-10 * dense.max())
    np.testing.assert_allclose(lazy.totals, dense.sum(axis=1), rtol=1e-10)
    assert lazy.elbo_local == pytest.approx(e, rel=1e-10)
    # the parameters read from the lazy statistics equal the dense ones
    params = _gibbs.LazyParams(lazy, tau)
    ref = _LDAParams.from_stats(dense, tau)
    cols = np.array([3, 7, 40])
    np.testing.assert_allclose(params.log_weights(cols), ref.tables.CT[cols], rtol=1e-10)
    np.testing.assert_allclose(params.Elogphi, ref.Elogphi, rtol=1e-10)


@pytest.mark.kernels
@pytest.mark.parametrize("n_threads", [1, 3])
def test_lazy_word_weights_equal_the_scaled_exp_of_log_weights(n_threads):
    """LazyParams.word_weights (one kernel pass per word row, psi only where the statistics
    are positive) equals exp(log_weights - row max) computed densely in numpy, also after
    steps that leave a small scale pi, and for any thread count."""
    rng = np.random.RandomState(3)
    K, V, tau = 37, 80, 0.1
    S = rng.gamma(1.0, 1.0, (K, V)) * (rng.uniform(size=(K, V)) < 0.2)
    S[:, 5] = 0.0  # a word no topic holds
    lazy = _gibbs.LazyTopicStats(S, 0.0)
    for t in range(1, 30):
        B = sp.random_array((K, V), density=0.05, random_state=rng, format="csr")
        lazy.step(B, 0.0, learning_rate(t, 0.6, 1.0), 7.0)
    params = _gibbs.LazyParams(lazy, tau)
    cols = np.array([0, 5, 17, 17, 79, 42])
    got = params.word_weights(cols, n_threads=n_threads)
    Lw = params.log_weights(cols)
    ref = np.exp(Lw - Lw.max(axis=1, keepdims=True))
    assert got.dtype == np.float32 and got.shape == (cols.size, K)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-30)
    assert np.all(got.max(axis=1) == 1.0)
    with pytest.raises(ValueError, match="out of range"):
        params.word_weights(np.array([V]))


@pytest.mark.kernels
def test_stochastic_gibbs_step_reads_the_kernel_weights_as_the_log_weights():
    """The sampled local step draws the same topics from LazyParams (kernel weights) as from
    its log_weights callable (the numpy path), up to float32 rounding of the weights."""
    X = _corpus(D=60)
    rng = np.random.RandomState(1)
    K, V = 6, X.shape[1]
    lazy = _gibbs.LazyTopicStats(rng.gamma(2.0, 1.0, (K, V)), 0.0)
    params = _gibbs.LazyParams(lazy, 0.1)
    kw = dict(n_burnin=1, n_samples=2, seed=5, sweep=0)
    a = _gibbs.gibbs_local_step(X, params, 0.3, **kw)
    b = _gibbs.gibbs_local_step(X, params.log_weights, 0.3, **kw)
    np.testing.assert_array_equal(a.topic_word_csr.toarray(), b.topic_word_csr.toarray())


def _split_params(K, V, seed):
    """LazyParams over statistics that are zero on most (k, v), after a few lazy steps."""
    rng = np.random.RandomState(seed)
    S = rng.gamma(1.0, 3.0, (K, V)) * (rng.uniform(size=(K, V)) < 0.15)
    S[0] += 1.0  # every word has statistics on some topic
    lazy = _gibbs.LazyTopicStats(S, 0.0)
    for t in range(1, 4):
        B = sp.random_array((K, V), density=0.05, random_state=rng, format="csr")
        lazy.step(B, 0.0, learning_rate(t, 0.6, 1.0), 5.0)
    params = _gibbs.LazyParams(lazy, 0.1)
    assert params.split_tables(np.arange(V), np.ones(K))[1] is not None  # the split path
    return params


def _chi2_pvalue(counts, p):
    from scipy.stats import chisquare

    counts = np.asarray(counts, dtype=float)
    exp = p / p.sum() * counts.sum()
    keep = exp > 0
    return chisquare(counts[keep], exp[keep]).pvalue


def test_split_word_tables_draw_from_the_word_part():
    """Sparse path with the split word tables (shared table over alpha_k e0_k, one per word
    over its topics with statistics): a one-token document draws from alpha_k w_vk in every
    sweep (its own token is out of N_dk), checked by chi-square against exp(E[log phi])."""
    K, V, alpha = 9, 6, 0.7
    params = _split_params(K, V, 0)
    words = np.repeat(np.arange(V), 1500)
    X = sp.csr_array((np.ones(words.size), (np.arange(words.size), words)), shape=(words.size, V))
    res = gibbs_local_step(X, params, alpha, n_burnin=0, n_samples=4, seed=3, sweep=0,
                           dense=False)
    S = res.topic_word_csr.toarray() * 4  # counts over the 4 saved sweeps
    W = np.exp(params.log_weights(np.arange(V)))
    for v in range(V):
        assert _chi2_pvalue(S[:, v], alpha * W[v]) > 1e-3, v


def _two_token_documents(V, D=12000):
    """D documents of two tokens each, words 0 and 2."""
    rows = np.repeat(np.arange(D), 2)
    cols = np.tile([0, 2], D)
    return sp.csr_array((np.ones(2 * D), (rows, cols)), shape=(D, V))


def _assert_two_token_marginals(res, W, alpha):
    """The sampled topics of two-token documents (words 0 and 2) after burn-in have the
    marginals of p(z1, z2) propto w_0,z1 w_2,z2 alpha (alpha + [z1 = z2]) (chi-square)."""
    S = res.topic_word_csr.toarray()
    joint = np.outer(W[0], W[2]) * alpha * (alpha + np.eye(W.shape[1]))
    assert _chi2_pvalue(S[:, 0], joint.sum(axis=1)) > 1e-3
    assert _chi2_pvalue(S[:, 2], joint.sum(axis=0)) > 1e-3


def test_split_word_tables_two_token_documents_match_the_collapsed_joint():
    """Two-token documents (words a, b) with the split tables: after burn-in the topic of the
    first token has the marginal of p(z1, z2) propto w_a,z1 w_b,z2 alpha (alpha + [z1 = z2]),
    the collapsed joint (document part and word part together)."""
    K, V, alpha = 6, 4, 0.5
    params = _split_params(K, V, 1)
    X = _two_token_documents(V)
    W = np.exp(params.log_weights(np.arange(V)))
    res = gibbs_local_step(X, params, alpha, n_burnin=15, n_samples=1, seed=11, sweep=0,
                           dense=False)
    _assert_two_token_marginals(res, W, alpha)
    # and the split path agrees with the full (V, K) table in distribution, not in draws
    full = gibbs_local_step(X, params.log_weights, alpha, n_burnin=15, n_samples=1, seed=11,
                            sweep=0, dense=False)
    _assert_two_token_marginals(full, W, alpha)


@pytest.mark.parametrize("alpha", [0.1, 0.3])
def test_sparse_path_word_part_by_scan_or_alias_matches_the_collapsed_joint(alpha, monkeypatch):
    """The sparse path with a (V, K) weight table: sum_k alpha_k <= SCAN_MAX_PRIOR (alpha
    0.1, K = 6) draws the word part by a scan of the word's weights, without alias tables;
    alpha 0.3 builds them. Both match the collapsed joint of two-token documents, and
    one-token documents draw from alpha_k w_vk alone."""
    from sparseclust.topics import _gibbs

    K, V = 6, 4
    assert (K * alpha <= _gibbs.SCAN_MAX_PRIOR) == (alpha == 0.1)
    built = []
    real = _gibbs._sampler

    class Spy:  # the sampler module, counting the alias tables built
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def build_alias(*args):
            built.append(1)
            return real.build_alias(*args)

    monkeypatch.setattr(_gibbs, "_sampler", Spy())
    rng = np.random.default_rng(2)
    LW = np.log(rng.dirichlet(np.full(K, 0.5), size=V))  # (V, K) log weights
    W = np.exp(LW)
    res = gibbs_local_step(_two_token_documents(V), LW, alpha, n_burnin=15, n_samples=1,
                           seed=11, sweep=0, dense=False)
    _assert_two_token_marginals(res, W, alpha)
    words = np.repeat(np.arange(V), 1500)
    X1 = sp.csr_array((np.ones(words.size), (np.arange(words.size), words)),
                      shape=(words.size, V))
    res = gibbs_local_step(X1, LW, alpha, n_burnin=0, n_samples=4, seed=3, sweep=0,
                           dense=False)
    S1 = res.topic_word_csr.toarray() * 4
    for v in range(V):
        assert _chi2_pvalue(S1[:, v], alpha * W[v]) > 1e-3, v
    assert bool(built) == (alpha == 0.3)


def _unpack_bits(bits, K):
    """The (V, K) booleans of the (V, ceil(K / 64)) uint64 bit sets (bit k & 63 of word
    k >> 6)."""
    k = np.arange(K)
    return ((bits[:, k >> 6] >> (k & 63).astype(np.uint64)) & np.uint64(1)).astype(bool)


def test_split_tables_only_where_the_statistics_are_sparse():
    """Statistics positive on most (k, v) (as after init='random') give no split tables (the
    full alias tables are cheaper); sparse ones do, and their s_v e0_k + x_vk equals the
    dense weights up to the row scale."""
    rng = np.random.RandomState(4)
    K, V = 70, 20
    dense_params = _gibbs.LazyParams(_gibbs.LazyTopicStats(rng.gamma(2.0, 1.0, (K, V)), 0.0),
                                     0.1)
    cols = np.array([0, 3, 3, 19, 7, 12])
    w, split = dense_params.split_tables(cols, np.full(K, 0.1))
    assert split is None
    np.testing.assert_array_equal(w, dense_params.word_weights(cols))
    S0 = rng.gamma(2.0, 1.0, (K, V)) * (rng.uniform(size=(K, V)) < 0.2)
    S0[:, 7] = 0.0  # a word no topic holds
    sparse_params = _gibbs.LazyParams(_gibbs.LazyTopicStats(S0, 0.0), 0.1)
    alpha = rng.uniform(0.05, 0.5, K)
    w, split = sparse_params.split_tables(cols, alpha)
    assert w is None and split is not None
    S = sparse_params.stats.dense()
    held = S[:, cols].T > 0
    np.testing.assert_array_equal(split.wlen, held.sum(axis=1))
    np.testing.assert_array_equal(np.diff(split.wptr), split.wlen)
    dense_w = sparse_params.word_weights(cols).astype(np.float64)
    for i in range(cols.size):
        lo, hi = split.wptr[i], split.wptr[i + 1]
        top = split.wtop[lo:hi]
        np.testing.assert_array_equal(top, np.flatnonzero(held[i]))  # ascending
        # the listed topics before each 64-topic word of the row
        np.testing.assert_array_equal(split.wpre[i], [np.sum(top < 64 * j)
                                                      for j in range(split.wpre.shape[1])])
        x = np.zeros(K)
        x[top] = split.wx[lo:hi]
        full = split.sv[i] * split.e0 + x
        np.testing.assert_allclose(full / full.max(), dense_w[i], rtol=1e-5)
        assert split.Qw[i] == pytest.approx(alpha @ x, rel=1e-6)  # x rounded to float32
    assert split.Qs == pytest.approx(alpha @ split.e0.astype(np.float32), rel=1e-6)


@pytest.mark.parametrize("tau", [0.01, 0.001])
def test_word_weights_with_a_small_topic_word_prior(tau):
    """psi(tau) is about -1 / tau: the prior's share exp(psi(tau) - norm_k) underflows (and
    its inverse scale overflows) for tau <= 0.01 unless the two factors are scaled by a
    common constant. The dense weights and the split tables must still equal exp(E[log phi])
    up to the row scale, from log_weights in float64 (a word without statistics included),
    and stochastic training and partial_fit must run with such a prior."""
    rng = np.random.RandomState(9)
    K, V = 70, 20
    # topics of about 40,000 tokens: norm_k = psi(V tau + T_k) is about 10, and in float32
    # exp(psi(0.01) - norm_k) is 0
    S0 = rng.gamma(2.0, 5000.0, (K, V)) * (rng.uniform(size=(K, V)) < 0.2)
    S0[:, 1] = rng.gamma(2.0, 5000.0, K)  # every topic holds tokens
    S0[:, 7] = 0.0
    params = _gibbs.LazyParams(_gibbs.LazyTopicStats(S0, 0.0), tau)
    cols = np.array([0, 3, 7, 12, 19])
    L = params.log_weights(cols)
    ref = np.exp(L - L.max(axis=1, keepdims=True))
    w = params.word_weights(cols)
    assert np.all(np.isfinite(w))
    np.testing.assert_allclose(w, ref, rtol=1e-5, atol=1e-6)
    alpha = np.full(K, 0.1)
    _, split = params.split_tables(cols, alpha)
    assert split is not None and np.isfinite(split.Qs) and split.Qs > 0
    for i in range(cols.size):
        x = np.zeros(K)
        x[split.wtop[split.wptr[i]:split.wptr[i + 1]]] = split.wx[split.wptr[i]:split.wptr[i + 1]]
        full = split.sv[i] * split.e0 + x
        assert np.all(np.isfinite(full)) and full.max() > 0
        np.testing.assert_allclose(full / full.max(), ref[i], rtol=1e-5, atol=1e-6)
    X = sp.csr_array(rng.poisson(3.0, (60, 40)).astype(float))
    lda = SparseLDA(n_components=100, local_step="gibbs", algorithm="stochastic",
                    topic_word_prior=tau, batch_size=20, max_iter=2, tol=0, random_state=0)
    assert np.isfinite(lda.fit(X).score(X))
    pf = SparseLDA(n_components=100, local_step="gibbs", topic_word_prior=tau,
                   random_state=0).partial_fit(X[:30]).partial_fit(X[30:])
    assert np.all(np.isfinite(pf.components_))


def test_lazy_statistics_do_not_write_into_the_callers_array():
    """For K = 1 the transposed statistics are already contiguous; the lazy statistics must
    still copy them, since their steps add into their own array."""
    S = np.ones((1, 5))
    st = _gibbs.LazyTopicStats(S, 0.0)
    st.step(sp.csr_array(np.ones((1, 5))), 0.0, 0.5, 1.0)
    np.testing.assert_array_equal(S, np.ones((1, 5)))
    np.testing.assert_allclose(st.dense(), np.ones((1, 5)))


def test_lazy_statistics_bits_follow_the_positive_entries():
    """LazyTopicStats.bits is the bit set of UT > 0 after steps that add entries and after a
    step with rho = 1, which forgets the statistics."""
    rng = np.random.RandomState(8)
    K, V = 130, 40
    S = rng.gamma(1.0, 1.0, (K, V)) * (rng.uniform(size=(K, V)) < 0.05)
    lazy = _gibbs.LazyTopicStats(S, 0.0)
    np.testing.assert_array_equal(_unpack_bits(lazy.bits, K), lazy.UT > 0)
    for t in range(1, 12):
        B = sp.random_array((K, V), density=0.02, random_state=rng, format="csr")
        rho = 1.0 if t == 6 else learning_rate(t, 0.6, 1.0)
        lazy.step(B, 0.0, rho, 3.0)
        np.testing.assert_array_equal(_unpack_bits(lazy.bits, K), lazy.UT > 0)
    # padding bits beyond K stay clear
    assert np.all(lazy.bits[:, -1] >> np.uint64(K % 64) == 0)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(lazy)).bits, lazy.bits)


@pytest.mark.kernels
@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("n_words", [9, 700])
@pytest.mark.parametrize("K", [300, 5])
def test_count_word_topics_equals_numpy_counts(n_threads, n_words, K):
    rng = np.random.RandomState(2)
    S = 3
    indices = rng.randint(0, n_words, 40 * n_words // 9).astype(np.int32)
    cnt = rng.randint(0, 4, indices.size).astype(np.int32)
    n_tok = int(cnt.sum())
    zsave = rng.randint(0, K, (n_tok, S)).astype(np.int32)
    jptr, topics, counts = _gibbs_tables.count_word_topics(indices, cnt, zsave, n_words, K,
                                                           n_threads)
    # the threads change nothing, not even the order of a word's topics
    one = _gibbs_tables.count_word_topics(indices, cnt, zsave, n_words, K)
    for a, b in zip((jptr, topics, counts), one, strict=True):
        np.testing.assert_array_equal(a, b)
    got = np.zeros((n_words, K), np.int64)
    for j in range(n_words):
        assert len(set(topics[jptr[j]:jptr[j + 1]])) == jptr[j + 1] - jptr[j]  # distinct
        got[j, topics[jptr[j]:jptr[j + 1]]] = counts[jptr[j]:jptr[j + 1]]
    ref = np.zeros((n_words, K), np.int64)
    tok_word = np.repeat(indices, cnt)
    for s in range(S):
        np.add.at(ref, (tok_word, zsave[:, s]), 1)
    np.testing.assert_array_equal(got, ref)
    # a word's topics in order of first draw: its tokens in entry order, each token's sweeps
    for j in range(n_words):
        seen = list(dict.fromkeys(zsave[tok_word == j].ravel().tolist()))
        np.testing.assert_array_equal(topics[jptr[j]:jptr[j + 1]], seen)
    with pytest.raises(ValueError, match="topic out of range"):
        _gibbs_tables.count_word_topics(indices, cnt, zsave, n_words, K // 2, n_threads)


@pytest.mark.parametrize("split", [False, True])
def test_one_saved_sweep_counts_are_the_returned_assignments(split):
    """With one saved sweep, the step's statistics are the word-topic counts of the returned
    assignments (split tables and full alias tables)."""
    K, V = 90, 30
    X = _corpus(D=80, V=V, K=4, seed=3)
    params = _split_params(K, V, 5)
    lw = params if split else params.log_weights
    res = gibbs_local_step(X, lw, 0.1, n_burnin=2, n_samples=1, seed=4, sweep=1, dense=False,
                           return_z=True)
    lay = _gibbs.token_layout(X)
    ref = np.zeros((K, V))
    np.add.at(ref, (res.z.astype(np.int64), np.repeat(lay.indices, lay.cnt)), 1.0)
    np.testing.assert_array_equal(res.topic_word_csr.toarray(), ref)
    assert res.topic_word_csr.has_sorted_indices


@pytest.mark.kernels
def test_split_word_tables_thread_invariant():
    K, V = 70, 40
    params = _split_params(K, V, 2)
    X = _corpus(D=120, V=V, K=4, seed=5)
    kw = dict(n_burnin=1, n_samples=2, seed=7, sweep=3, dense=False)
    a = gibbs_local_step(X, params, 0.05, n_threads=1, **kw)
    b = gibbs_local_step(X, params, 0.05, n_threads=3, **kw)
    np.testing.assert_array_equal(a.topic_word_csr.toarray(), b.topic_word_csr.toarray())


class _DenseUpdateLDA(SparseLDA):
    """The reference: the engine's dense blend S <- (1 - rho) S + rho c B instead of the
    Gibbs model's lazily scaled one."""

    def _model(self, chains=False):
        model = super()._model(chains)
        model.stochastic_update = None  # the engine then blends the statistics itself
        return model


def test_stochastic_gibbs_lazy_fit_equals_dense_fit():
    X = _corpus(D=200)
    kw = dict(n_components=3, local_step="gibbs", algorithm="stochastic", batch_size=20,
              max_iter=3, tol=0, random_state=0)
    a = SparseLDA(**kw).fit(X)
    b = _DenseUpdateLDA(**kw).fit(X)
    np.testing.assert_allclose(a.components_, b.components_, rtol=1e-10)
    assert a.lower_bound_ == pytest.approx(b.lower_bound_, rel=1e-10)
    # partial_fit continues from the lazy state, also with the variational step
    a.partial_fit(X[:20])
    b.partial_fit(X[:20])
    np.testing.assert_allclose(a.components_, b.components_, rtol=1e-10)
    a.set_params(local_step="variational").partial_fit(X[:20])
    b.set_params(local_step="variational").partial_fit(X[:20])
    np.testing.assert_allclose(a.components_, b.components_, rtol=1e-10)
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(c.components_, a.components_)


def test_default_minibatch_size_depends_on_the_local_step():
    """batch_size=None: stochastic fit takes minibatches of 4096 with the Gibbs step and of 256
    with the variational step (the step counts say so, and the fits equal those with the
    explicit sizes); partial_fit's default delay uses 256 with either step."""
    rng = np.random.RandomState(0)
    D, V = 4100, 30
    X = sp.csr_array(rng.poisson(0.15, size=(D, V)).astype(float))
    kw = dict(n_components=3, algorithm="stochastic", max_iter=2, tol=0, random_state=0)
    for step, size in (("gibbs", 4096), ("variational", 256)):
        m = SparseLDA(local_step=step, **kw).fit(X)
        assert m.n_batch_iter_ == 2 * -(-D // size)
        ref = SparseLDA(local_step=step, batch_size=size, **kw).fit(X)
        np.testing.assert_array_equal(m.components_, ref.components_)
        assert m.get_params()["batch_size"] is None
    # partial_fit: the default delay is four passes of 256-document minibatches whatever the
    # step, delta = 4 ceil(1000 / 256) = 16, so the second step is (16 + 2)^(-kappa)
    for step in ("gibbs", "variational"):
        m = SparseLDA(n_components=3, local_step=step, total_samples=1000, random_state=0)
        m.partial_fit(X[:100])
        m.partial_fit(X[100:200])
        assert m._svi_state.t == 2
        assert m._svi_state.rho == pytest.approx((16 + 2) ** -m.kappa, rel=1e-12)
    with pytest.raises(ValueError, match="batch_size"):
        SparseLDA(batch_size=0).fit(X)


def test_default_sweeps_are_five_burnin_and_twenty_saved_per_memoized_visit():
    """n_burnin=5, n_saved_sweeps=None: a memoized fit's first visit of a batch runs 1 + 5 + 20
    sweeps per document and a revisit continues the chain for 20 (the trace's local_iters),
    and so does a stochastic fit of a matrix; a stochastic fit with one minibatch runs
    1 + 5 + 5. Each fit equals one with the explicit values but not one with (2, 3)."""
    X = _corpus(D=60)
    kw = dict(n_components=4, local_step="gibbs", n_batches=2, max_iter=2, tol=0,
              random_state=0)
    m = SparseLDA(**kw).fit(X)
    assert [e["local_iters"] for e in m.trace_] == [60 * 26, 60 * 20]
    ref = SparseLDA(n_burnin=5, n_saved_sweeps=20, **kw).fit(X)
    np.testing.assert_array_equal(m.components_, ref.components_)
    other = SparseLDA(n_burnin=2, n_saved_sweeps=3, **kw).fit(X)
    assert [e["local_iters"] for e in other.trace_] == [60 * 6, 60 * 3]
    assert not np.array_equal(m.components_, other.components_)
    # batch training (one batch) and a single memoized batch restart every visit: 5 saved
    for other_kw in (dict(algorithm="batch"), dict(n_batches=1)):
        b = SparseLDA(**dict(kw, **other_kw)).fit(X)
        assert [e["local_iters"] for e in b.trace_] == [60 * 11] * 2
    kw.update(algorithm="stochastic", batch_size=30)
    m = SparseLDA(**kw).fit(X)
    assert [e["local_iters"] for e in m.trace_] == [60 * 26, 60 * 20]
    ref = SparseLDA(n_burnin=5, n_saved_sweeps=20, **kw).fit(X)
    np.testing.assert_array_equal(m.components_, ref.components_)
    one = SparseLDA(**dict(kw, batch_size=60)).fit(X)
    assert [e["local_iters"] for e in one.trace_] == [60 * 11] * 2
    ref = SparseLDA(n_burnin=5, n_saved_sweeps=5, **dict(kw, batch_size=60)).fit(X)
    np.testing.assert_array_equal(one.components_, ref.components_)
    # partial_fit: 5 saved sweeps
    pf = SparseLDA(**kw).partial_fit(X)
    pf5 = SparseLDA(n_saved_sweeps=5, **kw).partial_fit(X)
    np.testing.assert_array_equal(pf.components_, pf5.components_)
    assert not np.array_equal(pf.components_,
                              SparseLDA(n_saved_sweeps=20, **kw).partial_fit(X).components_)


def test_memoized_gibbs_stops_on_window_means_of_its_noisy_objective():
    # the Gibbs step's objective is a Monte Carlo estimate: memoized training compares the
    # mean of the last 3 passes with the 3 before them (no stop before pass 6), as stochastic
    # training does; the variational step compares single passes
    from sparseclust._engine import _windowed_change

    X = _corpus(D=60)
    kw = dict(n_components=3, n_batches=2, max_iter=20, tol=1e6, random_state=0)
    g = SparseLDA(local_step="gibbs", **kw).fit(X)
    assert g.n_iter_ == 6 and g.converged_
    lb = [e["elbo"] for e in g.trace_]
    n_tokens = float(X.sum())
    for t, e in enumerate(g.trace_):
        np.testing.assert_allclose(e["elbo_change"], _windowed_change(lb[:t + 1], 3, n_tokens))
    v = SparseLDA(local_step="variational", **kw).fit(X)
    assert v.n_iter_ == 2 and v.converged_


def _rs_state_equal(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_transform_is_the_dense_variational_step_whichever_step_trained():
    """transform of a Gibbs-fitted model is the dense variational local step with its
    topics: equal to the same model's transform with local_step='variational' and to
    scikit-learn's LatentDirichletAllocation.transform given the same topics and priors; it
    neither reads nor advances random_state, and a pickled copy transforms identically."""
    from sklearn.decomposition import LatentDirichletAllocation

    X = _corpus(D=40)
    for random_state in (None, np.random.RandomState(3)):
        m = SparseLDA(3, max_iter=3, random_state=random_state, local_tol=1e-10,
                      local_max_iter=5000).fit(X)
        assert m.local_step == "gibbs"
        before = random_state.get_state() if random_state is not None else None
        a = m.transform(X)
        np.testing.assert_array_equal(m.transform(X), a)
        if random_state is not None:
            assert _rs_state_equal(random_state.get_state(), before)
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(m)).transform(X), a)
        np.testing.assert_array_equal(m.set_params(random_state=12345).transform(X), a)
        np.testing.assert_array_equal(
            pickle.loads(pickle.dumps(m)).set_params(local_step="variational").transform(X), a)
    sk = LatentDirichletAllocation(3, doc_topic_prior=m.doc_topic_prior_,
                                   topic_word_prior=m.topic_word_prior_, max_iter=1,
                                   mean_change_tol=1e-12, max_doc_update_iter=5000,
                                   random_state=0).fit(X)
    g = pickle.loads(pickle.dumps(m))
    g.components_ = sk.components_.copy()
    np.testing.assert_allclose(g.transform(X), sk.transform(X), atol=1e-6)


def test_default_is_the_gibbs_step_with_a_fixed_number_of_passes():
    """SparseLDA() samples (local_step='gibbs'); max_iter=None and tol=None mean 25 passes,
    all run, without a ConvergenceWarning, and 50 passes with tol 1e-4 for the variational
    step; explicit values are used as given."""
    from sklearn.exceptions import ConvergenceWarning

    from sparseclust.topics._sparse_lda import (
        GIBBS_MAX_ITER,
        VARIATIONAL_MAX_ITER,
        VARIATIONAL_TOL,
    )

    assert SparseLDA().local_step == "gibbs"
    assert (GIBBS_MAX_ITER, VARIATIONAL_MAX_ITER, VARIATIONAL_TOL) == (25, 50, 1e-4)
    X = _corpus(D=40)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        g = SparseLDA(3, random_state=0).fit(X)
    assert g.n_iter_ == GIBBS_MAX_ITER and len(g.trace_) == GIBBS_MAX_ITER
    assert not g.converged_
    assert SparseLDA(3, max_iter=4, random_state=0).fit(X).n_iter_ == 4
    # a tol > 0 compares window means of 3 passes (see the stopping-rule test above)
    assert SparseLDA(3, tol=1e6, random_state=0).fit(X).n_iter_ == 6
    v = SparseLDA(3, local_step="variational", random_state=0, n_batches=2)
    v.fit(X)
    assert v.converged_ and v.n_iter_ < VARIATIONAL_MAX_ITER
    change = np.abs(np.diff(v.lower_bounds_)) / X.sum()
    assert change[-1] < VARIATIONAL_TOL and np.all(change[:-1] >= VARIATIONAL_TOL)
    with pytest.warns(ConvergenceWarning, match="did not converge in 50 passes"):
        SparseLDA(3, local_step="variational", tol=1e-30, L=None, random_state=0).fit(X)
