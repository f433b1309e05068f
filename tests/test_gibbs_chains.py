# SPDX-License-Identifier: BSD-3-Clause
"""The Gibbs local step's chains kept between visits of a batch (memoized and batch training)."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import gammaln, psi

from sparseclust import SparseLDA
from sparseclust._kernels import _tokens
from sparseclust.topics import _lda_model
from sparseclust.topics._gibbs import gibbs_local_step

from .test_gibbs import _corpus


def _continue_reference(X, Elogphi_T, alpha, z0, S, seed, sweep):
    """S LIVE sweeps in numpy from the assignments z0 (token order of token_layout), with the
    kernel's uniforms; returns the average (K, V) counts of the S sweeps and the final z."""
    D, V = X.shape
    K = Elogphi_T.shape[1]
    cols = np.flatnonzero(np.asarray(X.sum(axis=0)).ravel())
    Lw = Elogphi_T[cols]
    w = np.exp(Lw - Lw.max(axis=1, keepdims=True)).astype(np.float32).astype(np.float64)
    local = {v: i for i, v in enumerate(cols)}
    out = np.zeros((K, V))
    z_all = np.array(z0, dtype=np.int64)
    t0 = 0
    for d in range(D):
        toks = []
        for j in range(X.indptr[d], X.indptr[d + 1]):
            toks += [X.indices[j]] * int(np.floor(X.data[j] + 0.5))
        n = len(toks)
        z = z_all[t0:t0 + n]
        nd = np.bincount(z, minlength=K)
        u = _tokens.uniform_stream(seed, sweep, d, n * S)
        i = 0
        for _ in range(S):
            for t, v in enumerate(toks):
                nd[z[t]] -= 1
                cum = np.cumsum((nd + alpha) * w[local[v]])
                k = min(int(np.searchsorted(cum, u[i] * cum[-1], side="right")), K - 1)
                i += 1
                z[t] = k
                nd[k] += 1
            for t, v in enumerate(toks):
                out[z[t], v] += 1
        t0 += n
    return out / S, z_all


@pytest.mark.kernels
def test_continued_chain_equals_numpy_reference_with_the_same_streams():
    X = _corpus(D=12, V=15, doc_len=9)
    K = 4
    rng = np.random.RandomState(1)
    ET = np.log(rng.dirichlet(np.full(X.shape[1], 0.5), size=K)).T.copy()
    first = gibbs_local_step(X, ET, 0.3, n_burnin=1, n_samples=1, seed=5, sweep=0,
                             dense=True, n_threads=1, return_z=True)
    assert first.z.dtype == np.uint8 and first.z.size == X.sum()  # K <= 256: one byte
    z0 = first.z.copy()
    res = gibbs_local_step(X, ET, 0.3, n_burnin=2, n_samples=3, seed=5, sweep=1, dense=True,
                           n_threads=1, z_init=first.z, return_z=True)
    np.testing.assert_array_equal(first.z, z0)  # the caller's assignments are not modified
    ref, z_ref = _continue_reference(X, ET, 0.3, z0, 3, 5, 1)
    np.testing.assert_array_equal(res.topic_word_csr.toarray(), ref)
    np.testing.assert_array_equal(res.z, z_ref)
    # the sparse path continues from the same state and draws from the same distribution
    sparse = gibbs_local_step(X, ET, 0.3, n_burnin=2, n_samples=3, seed=5, sweep=1,
                              dense=False, z_init=z0, return_z=True)
    assert sparse.topic_word_csr.sum() == pytest.approx(X.sum())


def test_continued_chain_keeps_the_collapsed_posterior_invariant():
    # chains started from exact draws of the collapsed posterior stay at it after one sweep;
    # the sequential initialisation alone does not draw from it
    V, K, alpha = 3, 3, 0.2
    rng = np.random.RandomState(3)
    phi = rng.dirichlet(np.full(V, 0.7), size=K)
    ET = np.log(phi).T.copy()
    words = [0, 0, 1, 2]  # the token order of the row [2, 1, 1]
    configs = list(itertools.product(range(K), repeat=len(words)))
    logp = np.array([np.sum(gammaln(alpha + np.bincount(z, minlength=K)))
                     + sum(np.log(phi[k, v]) for v, k in zip(words, z, strict=True))
                     for z in configs])
    p = np.exp(logp - logp.max())
    p /= p.sum()
    n_copies = 6000
    X = sp.csr_array(np.repeat([[2.0, 1.0, 1.0]], n_copies, axis=0))
    draws = rng.choice(len(configs), size=n_copies, p=p)
    z0 = np.asarray([configs[i] for i in draws], dtype=np.uint16).ravel()
    res = gibbs_local_step(X, ET, alpha, n_burnin=0, n_samples=1, seed=8, sweep=3,
                           z_init=z0, return_z=True, dense=True)
    # exact E[N_kv] under the posterior
    exact = np.zeros((K, V))
    for pc, z in zip(p, configs, strict=True):
        for v, k in zip(words, z, strict=True):
            exact[k, v] += pc
    est = res.topic_word_csr.toarray() / n_copies
    np.testing.assert_allclose(est, exact, atol=0.035)
    assert not np.array_equal(res.z, z0)
    # the sequential initialisation is measurably off the posterior, so the check above can
    # tell a continued chain from a restarted one; an all-zero state is far off after a sweep
    init = gibbs_local_step(X, ET, alpha, n_burnin=0, n_samples=1, seed=8, sweep=3,
                            dense=True)
    assert np.abs(init.topic_word_csr.toarray() / n_copies - exact).max() > 0.045
    stuck = gibbs_local_step(X, ET, alpha, n_burnin=0, n_samples=1, seed=8, sweep=3,
                             z_init=np.zeros_like(z0), dense=True)
    assert np.abs(stuck.topic_word_csr.toarray() / n_copies - exact).max() > 0.5


def test_bad_chain_state_raises():
    X = _corpus(D=5)
    ET = np.log(np.full((X.shape[1], 3), 1.0 / X.shape[1]))
    n = int(X.sum())
    with pytest.raises(ValueError, match="tokens"):
        gibbs_local_step(X, ET, 0.1, n_burnin=0, n_samples=1, seed=0, sweep=0,
                         z_init=np.zeros(n - 1, np.uint16))
    with pytest.raises(ValueError, match="topics in"):
        gibbs_local_step(X, ET, 0.1, n_burnin=0, n_samples=1, seed=0, sweep=0,
                         z_init=np.full(n, 3, np.uint16))


@pytest.mark.parametrize("algorithm", ["memoized", "batch"])
def test_fit_continues_each_batch_chain(monkeypatch, algorithm):
    X = _corpus(D=90)
    n_tok = int(X.sum())
    seen = []
    orig = _lda_model.gibbs_local_step

    def spy(X, *args, z_init=None, **kw):
        res = orig(X, *args, z_init=z_init, **kw)
        seen.append((None if z_init is None else z_init.copy(), res.z))
        return res

    monkeypatch.setattr(_lda_model, "gibbs_local_step", spy)
    n_batches = 3 if algorithm == "memoized" else 1
    m = SparseLDA(3, local_step="gibbs", algorithm=algorithm, n_batches=n_batches,
                  max_iter=3, tol=0, random_state=0, n_burnin=2, n_saved_sweeps=2).fit(X)
    assert len(seen) == 3 * n_batches
    local = [e["local_iters"] for e in m.trace_]
    if algorithm == "batch":
        # one batch: nothing to exclude it from, every pass restarts the chains
        assert all(z0 is None and z is None for z0, z in seen)
        assert local == [90 * 5] * 3
        return
    # the first pass starts the chains, every later visit continues the batch's own chain
    for i, (z0, _) in enumerate(seen):
        if i < n_batches:
            assert z0 is None
        else:
            np.testing.assert_array_equal(z0, seen[i - n_batches][1])
    assert sum(s[1].size for s in seen[:n_batches]) == n_tok
    # sweeps per document: 1 + n_burnin + n_saved_sweeps on the first pass, n_saved_sweeps after
    assert local == [90 * 5, 90 * 2, 90 * 2]


def _log_weights_reference(S, tau, mean):
    """Dense (V, K) log word weights of lambda = tau + max(S, 0): psi(lambda) - psi(sum) or,
    with ``mean``, log(lambda / sum)."""
    lam = np.maximum(S, 0.0) + tau
    if mean:
        return (np.log(lam) - np.log(lam.sum(axis=1, keepdims=True))).T
    return (psi(lam) - psi(lam.sum(axis=1, keepdims=True))).T


def test_revisit_weights_exclude_the_batch_own_statistics(monkeypatch):
    # a revisited batch samples with the weights of lambda^{-b} = tau + S - S_b (dense
    # reference from the statistics without the batch): the posterior mean; a first visit
    # with E[log phi] of all statistics
    X = _corpus(D=60)
    tau = 0.1
    captured = []
    orig = _lda_model.gibbs_local_step

    def spy(Xb, log_weights, *args, **kw):
        res = orig(Xb, log_weights, *args, **kw)
        cols = np.flatnonzero(np.asarray(Xb.sum(axis=0)).ravel())
        if hasattr(log_weights, "word_weights"):  # the sampler's float32 weights
            lw = np.log(log_weights.word_weights(cols).astype(np.float64))
        else:
            lw = np.array(log_weights(cols))
        captured.append((cols, lw, res.topic_word_csr.toarray()))
        return res

    monkeypatch.setattr(_lda_model, "gibbs_local_step", spy)
    totals = []
    engine_step = _lda_model._GibbsLDAModel.global_step
    engine_init = _lda_model._GibbsLDAModel.initial_params

    def keep(S):
        totals.append(np.array(S.toarray() if sp.issparse(S) else S))

    def keep_total(self, stats):
        keep(stats["S"])
        return engine_step(self, stats)

    def keep_init(self, stats):
        keep(stats["S"])
        return engine_init(self, stats)

    monkeypatch.setattr(_lda_model._GibbsLDAModel, "global_step", keep_total)
    monkeypatch.setattr(_lda_model._GibbsLDAModel, "initial_params", keep_init)
    SparseLDA(3, local_step="gibbs", algorithm="memoized", n_batches=2, max_iter=2, tol=0,
        topic_word_prior=tau, random_state=0).fit(X)
    # statistics: totals[0] the initial ones, totals[1] after pass 1 (the batch algorithm's
    # one global step), totals[2] after pass 2's visit of batch 0
    # first visits (pass 1): E[log phi] of the initial statistics
    # (float32 weights, each row scaled to maximum 1: compared up to the row's constant)
    for cols, lw, _ in captured[:2]:
        ref = _log_weights_reference(totals[0], tau, False)[cols]
        np.testing.assert_allclose(lw, ref - ref.max(axis=1, keepdims=True), rtol=0,
                                   atol=1e-6)
    # pass 2, batch 0: the statistics after pass 1 without the batch's own
    mean = True
    cols, lw, _ = captured[2]
    ref = _log_weights_reference(totals[1] - captured[0][2], tau, mean)[cols]
    ref -= ref.max(axis=1, keepdims=True)
    np.testing.assert_allclose(lw, ref, rtol=0, atol=1e-6)
    # ... and not those of the whole statistics
    whole = _log_weights_reference(totals[1], tau, mean)[cols]
    assert np.abs(lw - (whole - whole.max(axis=1, keepdims=True))).max() > 0.1
    # pass 2, batch 1: the statistics after batch 0's revisit, without batch 1's pass-1 ones
    cols, lw, _ = captured[3]
    ref = _log_weights_reference(totals[2] - captured[1][2], tau, mean)[cols]
    np.testing.assert_allclose(lw, ref - ref.max(axis=1, keepdims=True), rtol=0, atol=1e-6)


@pytest.mark.kernels
def test_count_params_log_weights_match_dense_formulas():
    rng = np.random.RandomState(4)
    K, V, tau = 4, 30, 0.2
    S = rng.gamma(0.3, 2.0, size=(K, V)) * (rng.rand(K, V) < 0.5)
    cols = np.array([1, 4, 5, 17, 29])
    old = np.zeros((K, V))
    old[:, cols] = S[:, cols] * rng.rand(K, cols.size)  # part of S, on cols only
    for S_in in (S, sp.csr_array(S)):
        params = _lda_model._CountParams.from_stats(S_in, tau)
        for mean in (False, True):
            np.testing.assert_allclose(params.log_weights(cols, mean=mean),
                                       _log_weights_reference(S, tau, mean)[cols],
                                       rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(
                params.log_weights(cols, exclude=sp.csr_array(old), mean=mean),
                _log_weights_reference(S - old, tau, mean)[cols], rtol=1e-12, atol=1e-12)
        # the E[log phi] table is built on first use, from the same statistics
        np.testing.assert_allclose(params.Elogphi, _log_weights_reference(S, tau, False).T,
                                   rtol=1e-12, atol=1e-12)
    # statistics outside the word types cannot be excluded from their weights
    bad = np.zeros((K, V))
    bad[0, 2] = 1.0
    with pytest.raises(ValueError, match="outside"):
        params.log_weights(cols, exclude=sp.csr_array(bad))
    # lambda stored in the statistics' memory (the end of a fit): the same weights
    params = _lda_model._CountParams.from_stats(S.copy(), tau)
    params.materialize(overwrite_stats=True)
    np.testing.assert_allclose(params.log_weights(cols, exclude=sp.csr_array(old), mean=True),
                               _log_weights_reference(S - old, tau, True)[cols],
                               rtol=1e-12, atol=1e-12)


def _record_restarts(monkeypatch):
    """Spy on the Gibbs local step: one entry per call, True for a restarted chain (no
    z_init given and none kept)."""
    calls = []
    orig = _lda_model.gibbs_local_step

    def spy(*args, z_init=None, **kw):
        calls.append(z_init is None and not kw.get("return_z"))
        return orig(*args, z_init=z_init, **kw)

    monkeypatch.setattr(_lda_model, "gibbs_local_step", spy)
    return calls


def test_stream_fit_keeps_no_chains(monkeypatch):
    # a CorpusStream's fit caches only its minibatches' statistics: every visit restarts,
    # with 5 saved sweeps
    from sparseclust.datasets import CorpusStream

    X = _corpus(D=60)
    calls = _record_restarts(monkeypatch)
    parts = [X[lo:lo + 20] for lo in range(0, 60, 20)]
    stream = CorpusStream(lambda: iter(parts), n_features=X.shape[1], n_documents=60,
                          batch_size=20, feature_names=None, source="memory")
    m = SparseLDA(3, local_step="gibbs", max_iter=2, tol=0, random_state=0).fit(stream)
    assert calls == [True] * 6
    assert [e["local_iters"] for e in m.trace_] == [60 * 11, 60 * 11]
