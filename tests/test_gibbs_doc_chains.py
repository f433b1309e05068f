# SPDX-License-Identifier: BSD-3-Clause
"""The Gibbs local step's document chains in stochastic training: kept between the visits of
a document, continued with the document's own share of the stochastic statistics excluded."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import psi

from sparseclust import SparseLDA
from sparseclust._engine import learning_rate
from sparseclust.topics import _gibbs, _lda_model
from sparseclust.topics._gibbs import DocumentChains
from sparseclust.topics._sem import token_layout

from .test_gibbs import _corpus, _split_params


def _excluded(params, cols, seed):
    """Sparse statistics on the word types ``cols``, some above the statistics they are
    taken from (the weights clip at the prior)."""
    rng = np.random.RandomState(seed)
    K, V = params.shape
    S = params.stats.dense()
    E = np.zeros((K, V))
    E[:, cols] = S[:, cols] * rng.uniform(0.0, 1.5, (K, cols.size))
    E[rng.uniform(size=(K, V)) < 0.5] = 0.0
    return E


def _reference_log_weights(S, E, tau, mean):
    """Dense (V, K) log weights of lambda = tau + max(S - E, 0): log(lambda / sum_v lambda)
    or psi(lambda) - psi(sum_v lambda)."""
    lam = np.maximum(S - E, 0.0) + tau
    f = np.log if mean else psi
    return (f(lam) - f(lam.sum(axis=1))[:, None]).T


@pytest.mark.kernels
def test_excluded_weights_match_dense_reference():
    mean = True  # revisits sample with the posterior mean
    K, V, tau = 70, 20, 0.1
    params = _split_params(K, V, 2)
    cols = np.array([0, 3, 7, 12, 19])
    E = _excluded(params, cols, 5)
    S = params.stats.dense()
    before = params.log_weights(cols)
    view = params.excluding(sp.csr_array(E))
    ref = _reference_log_weights(S, E, tau, mean)[cols]
    np.testing.assert_allclose(view.log_weights(cols), ref, rtol=1e-12, atol=1e-12)
    w = view.word_weights(cols).astype(np.float64)
    np.testing.assert_allclose(w, np.exp(ref - ref.max(axis=1, keepdims=True)), rtol=1e-6)
    # the split word tables (the sampler's sparse path): s_v e0_k + x_vk, up to the row scale
    alpha = np.random.RandomState(0).uniform(0.05, 0.5, K)
    dense, split = view.split_tables(cols, alpha)
    assert dense is None and split is not None
    for i in range(cols.size):
        lo, hi = split.wptr[i], split.wptr[i + 1]
        x = np.zeros(K)
        x[split.wtop[lo:hi]] = split.wx[lo:hi]
        full = split.sv[i] * split.e0 + x
        np.testing.assert_allclose(full / full.max(), w[i], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(split.Qw[i], np.sum(alpha * x), rtol=1e-5)
    bad = E.copy()
    bad[0, cols[0]] = -1.0
    with pytest.raises(ValueError, match=">= 0"):
        params.excluding(sp.csr_array(bad))
    # the statistics and the parameters they came from are unchanged
    np.testing.assert_array_equal(params.stats.dense(), S)
    np.testing.assert_array_equal(params.log_weights(cols), before)
    # the same weights as the dense statistics' parameters with the same exclusion
    count = _lda_model._CountParams.from_stats(S, tau)
    np.testing.assert_allclose(count.log_weights(cols, exclude=sp.csr_array(E), mean=mean),
                               ref, rtol=1e-12, atol=1e-12)


def test_split_tables_bad_exclusion_lists():
    params = _split_params(70, 20, 2)
    cols = np.array([0, 3], dtype=np.int64)
    st = params.stats
    nnz = np.empty(2, np.int32)
    _gibbs._gibbs_tables.bit_counts(st.bits, cols, nnz)
    args = (st.UT, st.bits, cols, float(st.pi), 0.1, params._norm, np.ones(70), nnz, 1)
    with pytest.raises(ValueError, match="shapes"):
        _gibbs._gibbs_tables.split_word_tables(*args, ex_ptr=np.zeros(2, np.int64),
                                               ex_top=np.zeros(0, np.int32),
                                               ex_val=np.zeros(0))
    with pytest.raises(ValueError, match="out of range"):
        _gibbs._gibbs_tables.split_word_tables(*args, ex_ptr=np.array([0, 1, 1]),
                                               ex_top=np.array([70], np.int32),
                                               ex_val=np.ones(1))


def _shares_reference(events, n_docs):
    """Each document's weight in the stochastic statistics after the steps ``events`` =
    [(rows, rho, scale)]: S <- (1 - rho) S + rho scale S_batch."""
    a = np.zeros(n_docs)
    for rows, rho, scale in events:
        a *= 1.0 - rho
        if rows is not None:
            a[rows] += rho * scale
    return a


def test_document_shares_follow_the_decayed_steps(monkeypatch):
    X = _corpus(D=8)
    ch = DocumentChains(X)
    rng = np.random.RandomState(0)
    events = []
    for t in range(1, 40):
        rows = np.sort(rng.choice(8, 3, replace=False)) if t % 5 else None
        rho = 1.0 if t == 10 else learning_rate(t, 0.6, 0.5)
        ch.step(rows, rho, 8 / 3)
        events.append((rows, rho, 8 / 3))
        np.testing.assert_allclose(ch.pi * ch.A, _shares_reference(events, 8), rtol=1e-12,
                                   atol=1e-300)
    # the lazy scale renormalises below RESCALE_BELOW (here after every step or two)
    monkeypatch.setattr(_gibbs, "RESCALE_BELOW", 0.6)
    for t in range(40, 60):
        rows = np.sort(rng.choice(8, 3, replace=False))
        rho = learning_rate(t, 0.6, 0.5) * 3
        ch.step(rows, rho, 8 / 3)
        events.append((rows, rho, 8 / 3))
        assert 0.6 <= ch.pi <= 1.0
        np.testing.assert_allclose(ch.pi * ch.A, _shares_reference(events, 8), rtol=1e-12)


def test_own_statistics_are_the_weighted_assignment_counts():
    X = _corpus(D=10, V=12)
    K = 4
    ch = DocumentChains(X)
    rows = np.array([1, 4, 5, 9])
    ch.step(rows, 0.3, 2.5)
    ch.step(np.array([0, 4]), 0.2, 5.0)
    Xb = X[rows]
    n_tok = int(Xb.sum())
    z = np.random.RandomState(1).randint(0, K, n_tok).astype(np.uint8)
    E = ch.own_statistics(Xb, rows, z, (K, X.shape[1])).toarray()
    a = ch.pi * ch.A
    ref = np.zeros((K, X.shape[1]))
    t = 0
    for i, d in enumerate(rows):
        for j in range(Xb.indptr[i], Xb.indptr[i + 1]):
            for _ in range(int(np.floor(Xb.data[j] + 0.5))):
                ref[z[t], Xb.indices[j]] += a[d]
                t += 1
    assert t == n_tok
    np.testing.assert_allclose(E, ref, rtol=1e-12)


def _spy(monkeypatch):
    """Record every stochastic local step: the minibatch's rows, the z_init given, the
    assignments returned, the weights' excluded statistics (None without), and every step's
    (rows, rho, scale)."""
    calls, steps = [], []
    orig_step = _lda_model.gibbs_local_step
    orig_before = _lda_model._GibbsLDAModel.before_step
    orig_after = _lda_model._GibbsLDAModel.after_step
    pending = []

    def before(self, X, rows):
        pending.append(None if rows is None else rows.copy())
        return orig_before(self, X, rows)

    def after(self, rho, scale):
        steps.append((self._stepped, rho, scale))
        return orig_after(self, rho, scale)

    def spy(X, log_weights, *args, z_init=None, **kw):
        res = orig_step(X, log_weights, *args, z_init=z_init, **kw)
        ex = getattr(log_weights, "excluded", None)
        calls.append(dict(rows=pending.pop() if pending else None, X=X,
                          z_init=None if z_init is None else z_init.copy(), z=res.z,
                          excluded=None if ex is None else ex.toarray(),
                          mean=getattr(log_weights, "mean", None)))
        return res

    monkeypatch.setattr(_lda_model, "gibbs_local_step", spy)
    monkeypatch.setattr(_lda_model._GibbsLDAModel, "before_step", before)
    monkeypatch.setattr(_lda_model._GibbsLDAModel, "after_step", after)
    return calls, steps


def _per_document(X, z):
    """Split the assignments z of the rows of X (token order) by document."""
    return np.split(np.asarray(z), token_layout(X).tokptr[1:-1])


@pytest.mark.parametrize("delta", [2.0, 0.0])
def test_stochastic_fit_continues_every_document_chain(monkeypatch, delta):
    # delta = 0: the first step (rho = 1) forgets the initial statistics
    X = _corpus(D=90)
    K, V, tau = 60, X.shape[1], 0.1
    calls, steps = _spy(monkeypatch)
    m = SparseLDA(K, local_step="gibbs", algorithm="stochastic", batch_size=30, max_iter=3,
                  tol=0, topic_word_prior=tau, kappa=0.6, delta=delta, random_state=0,
                  n_burnin=2, n_saved_sweeps=3).fit(X)
    assert len(calls) == 9 and len(steps) == 9
    assert (steps[0][1] == 1.0) == (delta == 0.0)
    assert np.all(np.isfinite(m.components_))
    last = {}
    for i, c in enumerate(calls):
        rows = c["rows"]
        docs = _per_document(c["X"], c["z"])
        assert len(docs) == rows.size
        if i < 3:  # the first pass starts every document's chain
            assert c["z_init"] is None and c["excluded"] is None
        else:
            # a revisit continues each document's chain from its previous visit ...
            for d, z0 in zip(rows, _per_document(c["X"], c["z_init"]), strict=True):
                np.testing.assert_array_equal(z0, last[d])
            # ... with the posterior mean of the statistics without the documents' own share
            # (their weights in the stochastic statistics times their assignments)
            a = _shares_reference(steps[:i], X.shape[0])
            ref = np.zeros((K, V))
            Xb = c["X"]
            for j, (d, z0) in enumerate(zip(rows, _per_document(Xb, c["z_init"]),
                                            strict=True)):
                words = np.repeat(Xb.indices[Xb.indptr[j]:Xb.indptr[j + 1]],
                                  np.floor(Xb.data[Xb.indptr[j]:Xb.indptr[j + 1]] + 0.5)
                                  .astype(np.int64))
                np.add.at(ref, (z0.astype(np.int64), words), a[d])
            np.testing.assert_allclose(c["excluded"], ref, rtol=1e-10, atol=1e-12)
            assert c["mean"] is True
        for d, z in zip(rows, docs, strict=True):
            last[d] = z
        np.testing.assert_array_equal(steps[i][0], rows)
    # sweeps per document: 1 + n_burnin + n_saved_sweeps on the first pass, n_saved_sweeps after
    assert [e["local_iters"] for e in m.trace_] == [90 * 6, 90 * 3, 90 * 3]


@pytest.mark.kernels
def test_stochastic_chains_default_sweeps_and_reproducibility():
    # enough tokens per minibatch (about 4,000, times 20 sweeps) that n_threads=2 runs two
    # threads
    X = _corpus(D=400, V=60, doc_len=40)
    X[5] = 0.0  # an empty document
    X = sp.csr_array(X)
    X.eliminate_zeros()
    Xc = X.copy()
    kw = dict(n_components=70, local_step="gibbs", algorithm="stochastic", batch_size=100,
              max_iter=2, tol=0, random_state=3)
    a = SparseLDA(**kw, n_threads=1).fit(X)
    # n_saved_sweeps=None: 20 saved sweeps per visit of a kept chain (and 5 burn-in sweeps first)
    assert [e["local_iters"] for e in a.trace_] == [400 * 26, 400 * 20]
    assert np.all(np.isfinite(a.components_))
    b = SparseLDA(**kw, n_threads=2).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    c = SparseLDA(**kw, n_threads=1).fit(X)
    np.testing.assert_array_equal(a.components_, c.components_)
    d = SparseLDA(**dict(kw, random_state=4), n_threads=1).fit(X)
    assert not np.array_equal(a.components_, d.components_)
    np.testing.assert_array_equal(X.toarray(), Xc.toarray())
    import pickle

    np.testing.assert_array_equal(pickle.loads(pickle.dumps(a)).transform(X), a.transform(X))


@pytest.mark.parametrize("case", ["one_minibatch", "partial_fit"])
def test_stochastic_restarts(monkeypatch, case):
    # one minibatch per pass (its documents' share is all the statistics) and partial_fit
    # (no fixed documents): every visit starts afresh, with 5 saved sweeps
    X = _corpus(D=60)
    calls, _ = _spy(monkeypatch)
    m = SparseLDA(3, local_step="gibbs", algorithm="stochastic", max_iter=3, tol=0,
                  random_state=0, batch_size=60 if case == "one_minibatch" else 20)
    if case == "partial_fit":
        for _ in range(2):
            for lo in range(0, 60, 20):
                m.partial_fit(X[lo:lo + 20])
        assert len(calls) == 6
        assert m.trace_[-1]["local_iters"] == 20 * 11
    else:
        m.fit(X)
        assert len(calls) == 3
        per_pass = 60 * 11
        assert [e["local_iters"] for e in m.trace_] == [per_pass] * 3
    assert all(c["z_init"] is None and c["excluded"] is None for c in calls)
