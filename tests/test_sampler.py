# SPDX-License-Identifier: BSD-3-Clause
"""The token topic sampler kernels (_kernels/_sampler.pyx, _sem_tables.pyx, _gibbs_tables.pyx,
_rao_blackwell.pyx, _tokens.pyx): exact conditionals (chi-square), alias tables, thread-count
bit-identity, counts consistent with the assignments."""

import itertools
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import gammaln
from scipy.stats import chisquare

from sparseclust._kernels import _gibbs_tables, _rao_blackwell, _sampler, _sem_tables, _tokens
from sparseclust.topics._sem import token_layout

pytestmark = pytest.mark.kernels

FROZEN, LIVE = _sampler.FROZEN, _sampler.LIVE
EMPTY2F = np.zeros((0, 0), np.float32)
EMPTY2I = np.zeros((0, 0), np.int32)
EMPTY2D = np.zeros((0, 0))
EMPTY1 = np.zeros(0)


def _tables(w, alpha):
    V, K = w.shape
    prob = np.empty((V, K), np.float32)
    alias = np.empty((V, K), np.int32)
    Q = np.empty(V)
    _sampler.build_alias(w, alpha, prob, alias, Q, 1)
    return prob, alias, Q


def _sweep(lay, z, keys, w, alpha, *, mode, dense, n_inner=1, n_burn=0, seed=1, sweep=1,
           acc=None, Wout=None, ll=None, n_threads=1):
    prob, alias, Q = (EMPTY2F, EMPTY2I, EMPTY1) if dense else _tables(w, alpha)
    return _sampler.sample_sweep(
        lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, keys, w, alpha, prob, alias, Q,
        mode, dense, n_inner, n_burn, seed, sweep,
        EMPTY2D if acc is None else acc, EMPTY2I if Wout is None else Wout,
        EMPTY1 if ll is None else ll, n_threads,
    )


def _problem(K=5, V=4, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.05, 1.0, (V, K)).astype(np.float32)
    alpha = rng.uniform(0.05, 0.6, K)
    return w, alpha


def test_alias_tables_reproduce_the_weights():
    w, alpha = _problem(K=37, V=12, seed=3)
    w[2, 5] = 0.0  # a zero weight must get probability zero
    prob, alias, Q = _tables(w, alpha)
    K = w.shape[1]
    for v in range(w.shape[0]):
        implied = prob[v].astype(np.float64).copy()
        np.add.at(implied, alias[v], 1.0 - prob[v])
        target = alpha * w[v] / (alpha * w[v]).sum()
        np.testing.assert_allclose(implied / K, target, atol=1e-6)
        assert Q[v] == pytest.approx(float((alpha * w[v].astype(np.float64)).sum()), rel=1e-12)


@pytest.mark.parametrize("dense", [False, True])
def test_frozen_draws_follow_the_exact_conditional(dense):
    # many identical documents with their own streams: in FROZEN mode every token of word 3 is
    # drawn from (n_dk + alpha_k) w_3k with n_d the counts of the initial assignments (which
    # include the token itself); topics 1 and 3 are absent, so the alias part is exercised
    w, alpha = _problem()
    K = w.shape[1]
    D = 20000
    X = sp.csr_array(np.tile(np.array([4.0, 0.0, 0.0, 3.0]), (D, 1)))
    lay = token_layout(X)
    init = np.array([2, 2, 4, 0, 4, 2, 0], np.uint16)
    z = np.tile(init, D)
    nd = np.bincount(init, minlength=K)
    _sweep(lay, z, np.arange(D, dtype=np.uint64), w, alpha, mode=FROZEN, dense=dense)
    p = (nd + alpha) * w[3].astype(np.float64)
    counts = np.bincount(z.reshape(D, 7)[:, 4:].ravel().astype(np.int64), minlength=K)
    assert chisquare(counts, 3 * D * p / p.sum()).pvalue > 1e-4
    # the test can fail: a conditional with the token's own topic left out (the collapsed
    # Gibbs conditional) and one with alpha doubled are rejected
    for k_own in range(K):
        if init[4:].tolist().count(k_own):
            own = (nd - (np.arange(K) == k_own) + alpha) * w[3].astype(np.float64)
            assert chisquare(counts, 3 * D * own / own.sum()).pvalue < 1e-6
    p2 = (nd + 2 * alpha) * w[3].astype(np.float64)
    assert chisquare(counts, 3 * D * p2 / p2.sum()).pvalue < 1e-6


@pytest.mark.parametrize("dense", [False, True])
def test_live_first_token_follows_the_exact_conditional(dense):
    # many identical documents (own streams): the first token is resampled from
    # (alpha_k + n_dk^{-0}) w_vk with n^{-0} the counts of the other tokens
    w, alpha = _problem(seed=1)
    K = w.shape[1]
    D = 30000
    row = np.array([1, 0, 3, 2], dtype=np.float64)   # tokens: word0, word2 x3, word3 x2
    X = sp.csr_array(np.tile(row, (D, 1)))
    lay = token_layout(X)
    init = np.array([0, 4, 4, 1, 4, 1], np.uint16)
    z = np.tile(init, D)
    _sweep(lay, z, np.arange(D, dtype=np.uint64), w, alpha, mode=LIVE, dense=dense)
    rest = np.bincount(init[1:], minlength=K)
    p = (alpha + rest) * w[0].astype(np.float64)
    counts = np.bincount(z[::6].astype(np.int64), minlength=K)
    assert chisquare(counts, D * p / p.sum()).pvalue > 1e-4
    # the stochastic-EM conditional (own topic counted) is rejected
    own = (alpha + rest + (np.arange(K) == init[0])) * w[0].astype(np.float64)
    assert chisquare(counts, D * own / own.sum()).pvalue < 1e-6


@pytest.mark.parametrize("dense", [False, True])
def test_live_chain_reaches_the_document_posterior(dense):
    # Gibbs within one 3-token document: after enough sweeps the joint of (z0, z1, z2) is
    # p(z) propto prod_n w_{v_n z_n} * Gamma(sum a) / Gamma(N + sum a) prod_k Gamma(a_k + n_k) /
    # Gamma(a_k), enumerated over all K^3 states
    w, alpha = _problem(K=3, V=3, seed=2)
    K = 3
    D = 30000
    X = sp.csr_array(np.tile(np.array([1.0, 2.0, 0.0]), (D, 1)))
    lay = token_layout(X)
    words = [0, 1, 1]
    z = np.zeros(3 * D, np.uint16)
    _sweep(lay, z, np.arange(D, dtype=np.uint64), w, alpha, mode=LIVE, dense=dense,
           n_inner=12)
    states = list(itertools.product(range(K), repeat=3))
    logp = []
    for s in states:
        nk = np.bincount(s, minlength=K)
        logp.append(sum(np.log(w[v, k]) for v, k in zip(words, s, strict=True))
                    + np.sum(gammaln(alpha + nk) - gammaln(alpha)))
    p = np.exp(np.array(logp) - max(logp))
    p /= p.sum()
    zz = z.reshape(D, 3).astype(np.int64)
    idx = zz[:, 0] * 9 + zz[:, 1] * 3 + zz[:, 2]
    counts = np.bincount(idx, minlength=27)
    # tokens 1 and 2 are exchangeable (same word): compare the symmetrized distribution
    sym = np.array([states.index((a, min(b, c), max(b, c))) for a, b, c in states])
    c2 = np.bincount(sym, weights=counts, minlength=27)
    p2 = np.bincount(sym, weights=p, minlength=27)
    keep = p2 > 0
    assert chisquare(c2[keep], D * p2[keep]).pvalue > 1e-4


def _corpus(D=300, V=60, K=12, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(D, V, density=0.15, random_state=seed, format="csr",
                  data_rvs=lambda n: rng.integers(1, 5, n).astype(np.float64))
    X = X.toarray()
    X[7] = 0  # an empty document
    X = sp.csr_array(X)
    w = rng.uniform(0.01, 1.0, (V, K)).astype(np.float32)
    alpha = np.full(K, 0.3)
    return X, w, alpha


@pytest.mark.parametrize("mode", [FROZEN, LIVE])
@pytest.mark.parametrize("dense", [False, True])
def test_outputs_consistent_with_assignments_and_thread_count(mode, dense):
    X, w, alpha = _corpus()
    D, V = X.shape
    K = w.shape[1]
    lay = token_layout(X)
    keys = np.arange(D, dtype=np.uint64)
    runs = []
    for n_threads in (1, 2, 3):
        z = np.zeros(lay.tokptr[-1], np.uint16)
        _tokens.random_assign(lay.tokptr, z, keys, 5, K, n_threads)
        acc = np.zeros((D, K))
        Wout = np.zeros((V, K), np.int32)
        ll = np.zeros(D)
        changed = _sweep(lay, z, keys, w, alpha, mode=mode, dense=dense, n_inner=3, n_burn=1,
                         acc=acc, Wout=Wout, ll=ll, n_threads=n_threads)
        runs.append((z, acc, Wout, ll, changed))
    for other in runs[1:]:
        for a, b in zip(runs[0], other, strict=True):
            assert np.array_equal(a, b)
    z, acc, Wout, ll, changed = runs[0]
    # the word-topic counts of the two saved sweeps include the last one's, which is z
    word = np.repeat(lay.indices, lay.cnt)
    doc = np.repeat(np.arange(D), np.diff(lay.tokptr))
    W_last = np.zeros((V, K), np.int64)
    np.add.at(W_last, (word, z.astype(np.int64)), 1)
    assert Wout.sum() == 2 * z.size and np.all(Wout >= W_last)
    N_last = np.zeros((D, K))
    np.add.at(N_last, (doc, z.astype(np.int64)), 1)
    assert np.all(acc >= N_last) and acc.sum() == 2 * z.size
    np.testing.assert_array_equal(acc.sum(axis=1), 2 * np.diff(lay.tokptr))
    ref = (gammaln(alpha.sum()) - gammaln(N_last.sum(1) + alpha.sum())
           + (gammaln(N_last + alpha) - gammaln(alpha)).sum(1))
    np.testing.assert_allclose(ll, ref, rtol=1e-10, atol=1e-9)
    assert 0 < changed <= z.size


def test_single_saved_sweep_counts_equal_assignment_counts_uint32():
    X, w, alpha = _corpus(seed=4)
    D, V = X.shape
    K = w.shape[1]
    lay = token_layout(X)
    keys = np.arange(D, dtype=np.uint64)
    z = np.zeros(lay.tokptr[-1], np.uint32)
    _tokens.random_assign(lay.tokptr, z, keys, 9, K, 2)
    W0 = np.zeros((V, K), np.int32)
    _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W0, 2)
    word = np.repeat(lay.indices, lay.cnt)
    ref = np.zeros((V, K), np.int64)
    np.add.at(ref, (word, z.astype(np.int64)), 1)
    np.testing.assert_array_equal(W0, ref)
    Wout = np.zeros((V, K), np.int32)
    _sweep(lay, z, keys, w, alpha, mode=FROZEN, dense=False, Wout=Wout, n_threads=2)
    ref[:] = 0
    np.add.at(ref, (word, z.astype(np.int64)), 1)
    np.testing.assert_array_equal(Wout, ref)


def test_sem_word_weights_and_word_loglik():
    rng = np.random.default_rng(0)
    W = rng.integers(0, 4, (20, 6)).astype(np.int32)
    beta = 0.1
    T = W.sum(0)
    w = np.empty(W.shape, np.float32)
    wl = np.empty(20)
    _sem_tables.sem_word_weights(W, 1.0 / (T + 20 * beta), beta, w, wl, 2)
    np.testing.assert_allclose(w, (W + beta) / (T + 20 * beta), rtol=1e-6)
    np.testing.assert_allclose(wl, (gammaln(W + beta) - gammaln(beta)).sum(1), rtol=1e-12)


def test_fold_in_stream_is_reproducible_from_python():
    # the dense FROZEN path draws by inverse CDF over k in order from the documented stream:
    # a numpy reference with the same uniforms gives the same topics
    w, alpha = _problem(K=6, V=5, seed=7)
    X = sp.csr_array(np.array([[2, 0, 1, 3, 0], [0, 4, 0, 0, 1]], dtype=np.float64))
    lay = token_layout(X)
    keys = _tokens.content_keys(lay.indptr, lay.indices, lay.cnt)
    z = np.zeros(lay.tokptr[-1], np.uint16)
    _tokens.random_assign(lay.tokptr, z, keys, 3, 6, 1)
    z_ref = z.astype(np.int64).copy()
    for sweep in (1, 2):
        _sweep(lay, z, keys, w, alpha, mode=FROZEN, dense=True, seed=3, sweep=sweep)
        for d in range(2):
            t0, t1 = lay.tokptr[d], lay.tokptr[d + 1]
            nd = np.bincount(z_ref[t0:t1], minlength=6)
            u = _tokens.uniform_stream(3, sweep, int(keys[d]), t1 - t0)
            t = t0
            for j in range(lay.indptr[d], lay.indptr[d + 1]):
                cum = np.cumsum((nd + alpha) * w[lay.indices[j]].astype(np.float64))
                for _ in range(lay.cnt[j]):
                    z_ref[t] = np.searchsorted(cum, u[t - t0] * cum[-1], side="right")
                    t += 1
        np.testing.assert_array_equal(z, z_ref)


def test_content_keys_depend_on_content_only():
    X = sp.csr_array(np.array([[1, 0, 2], [0, 3, 0], [1, 0, 2]], dtype=np.float64))
    lay = token_layout(X)
    k = _tokens.content_keys(lay.indptr, lay.indices, lay.cnt)
    assert k[0] == k[2] and k[0] != k[1]


# ---------------------------------------------------------------------------------------
# counts path: document part + sparse word part + shared smoothing part


def _count_tables(W, beta, alpha, slots=None, tab=np.int32):
    V, K = W.shape
    T = W.sum(0)
    inv_tot = 1.0 / (T + V * beta)
    if slots is None:
        slots = np.minimum(W.sum(1), K)
    wptr = np.zeros(V + 1, np.int64)
    np.cumsum(slots, out=wptr[1:])
    n = int(wptr[-1])
    wlen = np.empty(V, np.int32)
    wtop = np.empty(n, tab)
    wprob = np.empty(n, np.float32)
    walias = np.empty(n, tab)
    Qw = np.empty(V)
    sprob = np.empty(K, np.float32)
    salias = np.empty(K, np.int32)
    word_ll = np.empty(V)
    Qs = _sem_tables.build_word_tables(W, inv_tot, beta, alpha, wptr, wlen, wtop, wprob, walias,
                                       Qw, sprob, salias, word_ll, 2)
    return inv_tot, (wptr, wlen, wtop, wprob, walias, Qw, sprob, salias), Qs, word_ll


def _sweep_counts(lay, z, keys, W, beta, alpha, *, n_inner=1, n_burn=0, seed=1, sweep=1,
                  acc=None, Wout=None, ll=None, n_threads=1):
    inv_tot, tables, Qs, _ = _count_tables(W, beta, alpha)
    return _sampler.sample_sweep_counts(
        lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, keys, W, inv_tot, beta, alpha,
        *tables, Qs, n_inner, n_burn, seed, sweep,
        EMPTY2D if acc is None else acc, EMPTY2I if Wout is None else Wout,
        EMPTY1 if ll is None else ll, n_threads,
    )


def _count_problem(K=6, V=5, seed=0):
    rng = np.random.default_rng(seed)
    W = rng.integers(0, 6, (V, K)).astype(np.int32)
    W[rng.random((V, K)) < 0.4] = 0
    W[:, 2] = 0      # a topic with no counts (T_k = 0)
    W[1] = 0         # a word with no counts
    W[3, [0, 4]] = [5, 1]
    alpha = rng.uniform(0.05, 0.6, K)
    return W, 0.1, alpha


@pytest.mark.parametrize("tab", [np.int32, np.uint16])
def test_count_tables_reproduce_the_three_parts(tab):
    W, beta, alpha = _count_problem(K=9, V=7, seed=5)
    V, K = W.shape
    inv_tot, (wptr, wlen, wtop, wprob, walias, Qw, sprob, salias), Qs, word_ll = \
        _count_tables(W, beta, alpha, tab=tab)
    T = W.sum(0)
    ref_inv = 1.0 / (T + V * beta)
    for v in range(V):
        nz = np.flatnonzero(W[v])
        assert wlen[v] == nz.size
        o, n = wptr[v], wlen[v]
        assert sorted(wtop[o:o + n].tolist()) == nz.tolist()
        target = alpha * W[v] * ref_inv
        assert Qw[v] == pytest.approx(target.sum(), rel=1e-12)
        if n:
            implied = np.zeros(K)
            np.add.at(implied, wtop[o:o + n], wprob[o:o + n].astype(np.float64))
            np.add.at(implied, walias[o:o + n], 1.0 - wprob[o:o + n])
            np.testing.assert_allclose(implied / n, target / target.sum(), atol=1e-6)
    smooth = alpha * beta * ref_inv
    assert Qs == pytest.approx(smooth.sum(), rel=1e-12)
    implied = sprob.astype(np.float64).copy()
    np.add.at(implied, salias, 1.0 - sprob)
    np.testing.assert_allclose(implied / K, smooth / smooth.sum(), atol=1e-6)
    np.testing.assert_allclose(word_ll, (gammaln(W + beta) - gammaln(beta)).sum(1), rtol=1e-12)
    # too few slots for a word's non-zero counts is an error, not a silent overflow
    with pytest.raises(ValueError, match="slots"):
        slots = (W > 0).sum(1)
        slots[3] -= 1
        _count_tables(W, beta, alpha, slots=slots, tab=tab)


def test_counts_path_draws_follow_the_exact_conditional():
    # many identical documents with their own streams, FROZEN: every token of word v is drawn
    # from (n_dk + alpha_k) (W_vk + beta) / (T_k + V beta), n_d the initial counts; words with
    # and without non-zero counts, a topic without counts, topics absent from the document
    W, beta, alpha = _count_problem()
    V, K = W.shape
    T = W.sum(0)
    D = 20000
    row = np.array([0.0, 3.0, 0.0, 4.0, 0.0])   # word 1: no counts; word 3: two non-zero
    X = sp.csr_array(np.tile(row, (D, 1)))
    lay = token_layout(X)
    init = np.array([2, 5, 5, 0, 5, 2, 0], np.uint16)
    z = np.tile(init, D)
    nd = np.bincount(init, minlength=K)
    _sweep_counts(lay, z, np.arange(D, dtype=np.uint64), W, beta, alpha)
    zz = z.reshape(D, 7).astype(np.int64)
    for v, cols in ((1, slice(0, 3)), (3, slice(3, 7))):
        n = cols.stop - cols.start
        p = (nd + alpha) * (W[v] + beta) / (T + V * beta)
        counts = np.bincount(zz[:, cols].ravel(), minlength=K)
        assert chisquare(counts, n * D * p / p.sum()).pvalue > 1e-4
        # the test can fail: alpha doubled, the smoothing part left out, and the word and
        # smoothing parts without the topic normalizer are rejected
        wrong = [
            (nd + 2 * alpha) * (W[v] + beta) / (T + V * beta),
            nd * (W[v] + beta) / (T + V * beta) + alpha * W[v] / (T + V * beta) + 1e-12,
            nd * (W[v] + beta) / (T + V * beta) + alpha * (W[v] + beta),
        ]
        for q in wrong:
            if v == 1 and q is wrong[1]:
                continue  # no word part and nothing from the smoothing part: degenerate
            assert chisquare(counts, n * D * q / q.sum()).pvalue < 1e-6


@pytest.mark.parametrize("n_inner", [1, 3])
def test_counts_path_matches_the_dense_path_in_distribution_and_is_thread_invariant(n_inner):
    X, _, alpha = _corpus(seed=2)
    D, V = X.shape
    K = alpha.size
    lay = token_layout(X)
    keys = np.arange(D, dtype=np.uint64)
    rng = np.random.default_rng(3)
    W = rng.integers(0, 3, (V, K)).astype(np.int32) * (rng.random((V, K)) < 0.3)
    W = W.astype(np.int32)
    W[:, 4] = 0
    W[5] = 0
    runs = []
    for n_threads in (1, 2, 3):
        z = np.zeros(lay.tokptr[-1], np.uint16)
        _tokens.random_assign(lay.tokptr, z, keys, 5, K, n_threads)
        acc = np.zeros((D, K))
        Wout = np.zeros((V, K), np.int32)
        ll = np.zeros(D)
        changed = _sweep_counts(lay, z, keys, W, 0.1, alpha, n_inner=n_inner, acc=acc,
                                Wout=Wout, ll=ll, n_threads=n_threads)
        runs.append((z, acc, Wout, ll, changed))
    for other in runs[1:]:
        for a, b in zip(runs[0], other, strict=True):
            assert np.array_equal(a, b)
    z, acc, Wout, ll, changed = runs[0]
    word = np.repeat(lay.indices, lay.cnt)
    doc = np.repeat(np.arange(D), np.diff(lay.tokptr))
    N_last = np.zeros((D, K))
    np.add.at(N_last, (doc, z.astype(np.int64)), 1)
    assert Wout.sum() == n_inner * z.size and acc.sum() == n_inner * z.size
    if n_inner == 1:
        W_last = np.zeros((V, K), np.int64)
        np.add.at(W_last, (word, z.astype(np.int64)), 1)
        np.testing.assert_array_equal(Wout, W_last)
        np.testing.assert_array_equal(acc, N_last)
    ref = (gammaln(alpha.sum()) - gammaln(N_last.sum(1) + alpha.sum())
           + (gammaln(N_last + alpha) - gammaln(alpha)).sum(1))
    np.testing.assert_allclose(ll, ref, rtol=1e-10, atol=1e-9)
    assert 0 < changed <= z.size
    # same conditional as the dense path with w = (W + beta) / (T + V beta): the pooled topic
    # frequencies of the first sweep over many replicas of the corpus agree (two-sample test)
    if n_inner == 1:
        w = ((W + 0.1) / (W.sum(0) + V * 0.1)).astype(np.float32)
        tot = [np.zeros(K), np.zeros(K)]
        for rep in range(40):
            for i, dense in enumerate((False, True)):
                z = np.zeros(lay.tokptr[-1], np.uint16)
                _tokens.random_assign(lay.tokptr, z, keys, 11, K, 1)
                if dense:
                    _sweep(lay, z, keys, w, alpha, mode=FROZEN, dense=True, seed=100 + rep)
                else:
                    _sweep_counts(lay, z, keys, W, 0.1, alpha, seed=200 + rep)
                tot[i] += np.bincount(z.astype(np.int64), minlength=K)
        table = np.vstack(tot)
        from scipy.stats import chi2_contingency
        assert chi2_contingency(table).pvalue > 1e-4


# ---------------------------------------------------------------------------------------
# counts path with the document's counts live (the default sweep of StochasticEMLDA)


def _sweep_counts_live(lay, z, keys, W, beta, alpha, *, dense, exclude_own=True, seed=1,
                       sweep=1, acc=None, Wout=None, ll=None, n_threads=1, mode=LIVE,
                       live_entry=False, mh_steps=0):
    inv_tot, tables, Qs, _ = _count_tables(W, beta, alpha, tab=np.uint16)
    return _sampler.sample_sweep_counts(
        lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, keys, W, inv_tot, beta, alpha,
        *tables, Qs, 1, 0, seed, sweep,
        EMPTY2D if acc is None else acc, EMPTY2I if Wout is None else Wout,
        EMPTY1 if ll is None else ll, n_threads, dense=dense, mode=mode,
        exclude_own=exclude_own, live_entry=live_entry, mh_steps=mh_steps,
    )


def _live_problem():
    # read-buffer counts W that include the initial assignments of the replicated document
    # (word 0: topic 2; word 3: topics 0, 4, 4, 2), with W[0, 2] = 1 so that taking the
    # token's own topic out changes its weight from (1 + beta) to beta
    W, beta, alpha = _count_problem()
    W[0] = [0, 3, 1, 0, 2, 0]
    W[3] = [2, 0, 1, 0, 4, 0]
    return W, beta, alpha


_LIVE_INIT = np.array([2, 0, 4, 4, 2], np.uint16)  # previous topics of the document's tokens
_LIVE_D = 20000


def _replicated_live_sweep(equal_alpha=False, **kw):
    """One counts sweep over 20000 copies of the document [word 0 once, word 3 four times]
    (previous topics ``_LIVE_INIT``), each with its own random stream: returns the read
    buffer W, beta, alpha, the totals T and the new topics (D, 5)."""
    W, beta, alpha = _live_problem()
    if equal_alpha:
        alpha = np.full(alpha.size, 0.3)
    X = sp.csr_array(np.tile(np.array([1.0, 0.0, 0.0, 4.0, 0.0]), (_LIVE_D, 1)))
    z = np.tile(_LIVE_INIT, _LIVE_D)
    _sweep_counts_live(token_layout(X), z, np.arange(_LIVE_D, dtype=np.uint64), W, beta,
                       alpha, **kw)
    return W, beta, alpha, W.sum(0).astype(np.float64), z.reshape(_LIVE_D, 5).astype(np.int64)


#: the draws of the live counts path: exact (the alias tables or every topic), or 40
#: Metropolis-Hastings cycles from the previous topic, whose chain then follows the same
#: conditional (equal alphas, which it needs)
_DRAWS = {"alias": dict(dense=False), "dense": dict(dense=True),
          "metropolis": dict(dense=False, mh_steps=40, equal_alpha=True)}


@pytest.mark.parametrize("draw, mode, exclude_own",
                         [(d, LIVE, e) for d in _DRAWS for e in (True, False)]
                         + [("alias", FROZEN, True), ("dense", FROZEN, True)])
def test_counts_first_token_follows_the_conditional_without_its_own_topic(draw, mode,
                                                                          exclude_own):
    # many identical documents with their own streams: the first token (word 0, previous
    # topic o = 2) is drawn from (n_dk^{-0} + alpha_k) (W_0k - e_k + beta) / (T_k - e_k +
    # V beta), e = [k = o] with exclude_own, n^{-0} the counts of the document's other tokens
    # (LIVE; FROZEN with exclude_own takes the token out of the previous sweep's n_d, the same
    # counts for the first token)
    W, beta, alpha, T, zz = _replicated_live_sweep(exclude_own=exclude_own, mode=mode,
                                                   **_DRAWS[draw])
    V, K = W.shape
    D, init = _LIVE_D, _LIVE_INIT
    e = (np.arange(K) == 2).astype(np.float64)
    rest = np.bincount(init[1:], minlength=K)
    counts = np.bincount(zz[:, 0], minlength=K)

    def cond(nd, ex):
        return (nd + alpha) * (W[0] - ex + beta) / (T - ex + V * beta)

    p = cond(rest, e if exclude_own else 0.0)
    assert chisquare(counts, D * p / p.sum()).pvalue > 1e-4
    # the test can fail: the frozen (paper) conditional with the token in n_d, and the
    # conditional with the other choice of exclude_own, are rejected
    for q in (cond(rest + e, 0.0), cond(rest, 0.0 if exclude_own else e)):
        assert chisquare(counts, D * q / q.sum()).pvalue < 1e-6


@pytest.mark.parametrize("dense", [False, True])
def test_live_counts_last_token_given_the_new_topics_before_it(dense):
    # the last token (word 3) sees the new topics of the four tokens drawn before it in the
    # same sweep: pooled over documents, its topic frequencies match the sum of the exact
    # conditionals given each document's new topics (a conservative Pearson test)
    W, beta, alpha, T, zz = _replicated_live_sweep(dense=dense)
    V, K = W.shape
    D, init = _LIVE_D, _LIVE_INIT
    nd = np.zeros((D, K))
    np.add.at(nd, (np.repeat(np.arange(D), 4), zz[:, :4].ravel()), 1)
    e = (np.arange(K) == 2).astype(np.float64)
    p = (nd + alpha) * (W[3] - e + beta) / (T - e + V * beta)
    expected = (p / p.sum(1, keepdims=True)).sum(0)
    counts = np.bincount(zz[:, 4], minlength=K)
    assert chisquare(counts, expected).pvalue > 1e-4
    # with the document's counts of the previous sweep instead (the frozen conditional), or
    # without the new topics of the tokens before it, the frequencies do not match
    nd_old = np.bincount(init, minlength=K)
    for q in ((nd_old + alpha) * (W[3] + beta) / (T + V * beta),
              (np.bincount(init[:4], minlength=K) + alpha) * (W[3] - e + beta)
              / (T - e + V * beta)):
        assert chisquare(counts, D * q / q.sum()).pvalue < 1e-6


@pytest.mark.parametrize("draw", list(_DRAWS))
@pytest.mark.parametrize("r", [1, 3])
def test_live_entry_token_sees_its_entry_like_collapsed_gibbs(draw, r):
    # live_entry: token r of the entry (document, word 3) (previous topics 0, 4, 4, 2) is drawn
    # with W_3k and T_k of the read buffer minus the previous topics of the entry's tokens
    # 0..r plus the new topics of its tokens 0..r-1, and n_d^{-dn} the document's other
    # tokens: pooled over documents, the frequencies of its topic match the sum of these
    # exact conditionals given each document's draws (a conservative Pearson test)
    W, beta, alpha, T, zz = _replicated_live_sweep(live_entry=True, **_DRAWS[draw])
    V, K = W.shape
    D, init = _LIVE_D, _LIVE_INIT
    t = 1 + r  # token index in the document (token 0 is word 0)
    others = np.hstack([zz[:, :t], np.tile(init[t + 1:], (D, 1))])
    nd = np.zeros((D, K))
    np.add.at(nd, (np.repeat(np.arange(D), others.shape[1]), others.ravel()), 1)
    e = np.zeros((D, K))  # the entry's change so far: new topics of 0..r-1, old of 0..r out
    np.add.at(e, (np.repeat(np.arange(D), r), zz[:, 1:t].ravel()), 1)
    e -= np.bincount(init[1:t + 1], minlength=K)
    p = (nd + alpha) * (W[3] + e + beta) / (T + e + V * beta)
    expected = (p / p.sum(1, keepdims=True)).sum(0)
    counts = np.bincount(zz[:, t], minlength=K)
    assert chisquare(counts, expected).pvalue > 1e-4
    # the own-topic-only conditional (exclude_own without live_entry) does not match
    own = (np.arange(K) == init[t]).astype(np.float64)
    q = (nd + alpha) * (W[3] - own + beta) / (T - own + V * beta)
    assert chisquare(counts, (q / q.sum(1, keepdims=True)).sum(0)).pvalue < 1e-6


# Metropolis-Hastings cycles (mh_steps): the chain's target is checked with the exact draws
# above (_DRAWS)


def test_mh_short_chain_keeps_the_start_and_one_cycle_moves():
    # the chain starts at the previous topic: zero cycles are refused by the estimator but in
    # the kernel mean exact draws, one cycle leaves many tokens at their previous topic (a
    # check that the chain really starts there), and 40 cycles far fewer
    W, beta, alpha, T, zz1 = _replicated_live_sweep(equal_alpha=True, dense=False,
                                                    mh_steps=1)
    stay1 = np.mean(zz1[:, 0] == _LIVE_INIT[0])
    zz40 = _replicated_live_sweep(equal_alpha=True, dense=False, mh_steps=40)[-1]
    stay40 = np.mean(zz40[:, 0] == _LIVE_INIT[0])
    assert stay1 > stay40 + 0.05


def _counted_start(X, K):
    """Token layout, document keys, uniform initial assignments (seed 9) and their word-topic
    counts: the read buffer of a first counts sweep."""
    lay = token_layout(X)
    keys = np.arange(X.shape[0], dtype=np.uint64)
    z0 = np.zeros(lay.tokptr[-1], np.uint16)
    _tokens.random_assign(lay.tokptr, z0, keys, 9, K, 1)
    W = np.zeros((X.shape[1], K), np.int32)
    _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z0, W, 1)
    return lay, keys, z0, W


def test_live_entry_single_token_entries_equal_exclude_own():
    # with one token per entry the entry's change is the token's own topic taken out: the
    # same draws as exclude_own alone
    X, _, alpha = _corpus(seed=4)
    lay, keys, z0, W = _counted_start(sp.csr_array((X > 0).astype(np.float64)), alpha.size)
    out = []
    for live_entry in (False, True):
        z = z0.copy()
        _sweep_counts_live(lay, z, keys, W, 0.1, alpha, dense=False, live_entry=live_entry)
        out.append(z)
    np.testing.assert_array_equal(out[0], out[1])


@pytest.mark.parametrize("live_entry", [False, True])
@pytest.mark.parametrize("dense", [False, True])
def test_live_counts_thread_invariant_and_counts_consistent(dense, live_entry):
    X, _, alpha = _corpus(seed=4)
    D, V = X.shape
    K = alpha.size
    lay, keys, z0, W = _counted_start(X, K)
    runs = []
    for n_threads in (1, 2, 3):
        z = z0.copy()
        Wout = np.zeros((V, K), np.int32)
        ll = np.zeros(D)
        changed = _sweep_counts_live(lay, z, keys, W, 0.1, alpha, dense=dense, Wout=Wout,
                                     ll=ll, n_threads=n_threads, live_entry=live_entry)
        runs.append((z, Wout, ll, changed))
    for other in runs[1:]:
        for a, b in zip(runs[0], other, strict=True):
            assert np.array_equal(a, b)
    z, Wout, ll, changed = runs[0]
    word = np.repeat(lay.indices, lay.cnt)
    doc = np.repeat(np.arange(D), np.diff(lay.tokptr))
    W_new = np.zeros((V, K), np.int64)
    np.add.at(W_new, (word, z.astype(np.int64)), 1)
    np.testing.assert_array_equal(Wout, W_new)
    N = np.zeros((D, K))
    np.add.at(N, (doc, z.astype(np.int64)), 1)
    ref = (gammaln(alpha.sum()) - gammaln(N.sum(1) + alpha.sum())
           + (gammaln(N + alpha) - gammaln(alpha)).sum(1))
    np.testing.assert_allclose(ll, ref, rtol=1e-10, atol=1e-9)
    assert changed == int(np.count_nonzero(z != z0))


def _blocked_live_problem(K=37, V=4, D=40000, seed=3):
    """A replicated document [word 0 once, word 2 three times] over K topics (two full
    blocks of the dense draw and a part of one), previous topics ``init``, and a read buffer
    W that counts them: returns W, beta, alpha, init and the new topics (D, 4) of one live
    dense sweep with ``live_entry``."""
    rng = np.random.default_rng(seed)
    W = rng.integers(0, 4, (V, K)).astype(np.int32)
    init = np.array([20, 35, 3, 35], np.uint16)
    W[0, 20] += 1
    np.add.at(W[2], init[1:].astype(np.int64), 1)
    alpha = rng.uniform(0.05, 0.6, K)
    X = sp.csr_array(np.tile(np.array([1.0, 0.0, 3.0, 0.0]), (D, 1)))
    z = np.tile(init, D)
    _sweep_counts_live(token_layout(X), z, np.arange(D, dtype=np.uint64), W, 0.1, alpha,
                       dense=True, live_entry=True)
    return W, 0.1, alpha, init, z.reshape(D, 4).astype(np.int64)


def test_dense_live_draws_over_several_blocks_follow_the_conditional():
    # the blocked dense draw (K = 37: blocks of 16, 16 and 5 topics): the first token
    # (word 0, previous topic 20, which the read buffer counts) follows the conditional with
    # its own topic out of n_d, W and T; the last token of the entry (word 2) follows the
    # conditional with W and T corrected by the entry's change so far, pooled over documents
    W, beta, alpha, init, zz = _blocked_live_problem()
    V, K = W.shape
    D = zz.shape[0]
    T = W.sum(0).astype(np.float64)
    own = (np.arange(K) == 20).astype(np.float64)
    rest = np.bincount(init[1:], minlength=K)
    p = (rest + alpha) * (W[0] - own + beta) / (T - own + V * beta)
    counts = np.bincount(zz[:, 0], minlength=K)
    assert chisquare(counts, D * p / p.sum()).pvalue > 1e-4
    q = (rest + alpha) * (W[0] + beta) / (T + V * beta)  # the own topic left in: rejected
    assert chisquare(counts, D * q / q.sum()).pvalue < 1e-6
    # token 3 (the entry's third token): n_d the new topics of tokens 0-2; the entry's
    # change e = new topics of tokens 1-2 minus the previous topics of tokens 1-3
    nd = np.zeros((D, K))
    np.add.at(nd, (np.repeat(np.arange(D), 3), zz[:, :3].ravel()), 1)
    e = np.zeros((D, K))
    np.add.at(e, (np.repeat(np.arange(D), 2), zz[:, 1:3].ravel()), 1)
    e -= np.bincount(init[1:], minlength=K)
    p = (nd + alpha) * (W[2] + e + beta) / (T + e + V * beta)
    expected = (p / p.sum(1, keepdims=True)).sum(0)
    counts = np.bincount(zz[:, 3], minlength=K)
    assert expected.min() > 5
    assert chisquare(counts, expected).pvalue > 1e-4
    p0 = (nd + alpha) * (W[2] + beta) / (T + V * beta)  # without the entry's change: rejected
    assert chisquare(counts, (p0 / p0.sum(1, keepdims=True)).sum(0)).pvalue < 1e-6


@pytest.mark.parametrize("live_entry", [False, True])
def test_dense_min_topics_draws_each_document_by_its_topics(live_entry):
    # per-document random streams: with dense_min_topics = m the documents whose previous
    # assignments hold at least m distinct topics get exactly the dense sweep's topics and
    # the others the sparse sweep's, for any number of threads
    rng = np.random.default_rng(7)
    D, V, K = 120, 50, 40
    lengths = rng.integers(1, 120, D)
    X = np.zeros((D, V))
    for d in range(D):
        np.add.at(X[d], rng.integers(0, V, lengths[d]), 1.0)
    X = sp.csr_array(X)
    alpha = np.full(K, 0.2)
    lay, keys, z0, W = _counted_start(X, K)
    m = 25
    runs = {}
    for name, kw in (("sparse", dict(dense=False)), ("dense", dict(dense=True))):
        z = z0.copy()
        _sweep_counts_live(lay, z, keys, W, 0.1, alpha, live_entry=live_entry, **kw)
        runs[name] = z
    assert not np.array_equal(runs["sparse"], runs["dense"])
    n_tok = np.diff(lay.tokptr)
    held = np.array([np.unique(z0[lay.tokptr[d]:lay.tokptr[d + 1]]).size for d in range(D)])
    long_doc = np.repeat(held >= m, n_tok)
    assert 0 < long_doc.mean() < 1
    expected = np.where(long_doc, runs["dense"], runs["sparse"])
    for n_threads in (1, 3):
        z = z0.copy()
        inv_tot, tables, Qs, _ = _count_tables(W, 0.1, alpha, tab=np.uint16)
        _sampler.sample_sweep_counts(
            lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, keys, W, inv_tot, 0.1, alpha,
            *tables, Qs, 1, 0, 1, 1, EMPTY2D, EMPTY2I, EMPTY1, n_threads, dense=False,
            mode=LIVE, exclude_own=True, live_entry=live_entry, dense_min_topics=m)
        np.testing.assert_array_equal(z, expected)


def test_live_counts_argument_checks():
    W, beta, alpha = _live_problem()
    X = sp.csr_array(np.array([[1.0, 0.0, 0.0, 4.0, 0.0]]))
    lay = token_layout(X)
    z = np.zeros(5, np.uint16)
    inv_tot, tables, Qs, _ = _count_tables(W, beta, alpha)
    keys = np.zeros(1, np.uint64)
    for kw, n_inner in (({"mode": FROZEN, "exclude_own": True}, 2),
                        ({"mode": LIVE, "exclude_own": True}, 2), ({"mode": 7}, 1),
                        ({"mode": LIVE, "live_entry": True}, 1),
                        ({"mode": FROZEN, "exclude_own": True, "live_entry": True}, 1),
                        ({"mode": LIVE, "dense_min_topics": -1}, 1),
                        ({"mode": FROZEN, "dense_min_topics": 3}, 1),
                        ({"mode": LIVE, "mh_steps": 2, "dense_min_topics": 3}, 1)):
        with pytest.raises(ValueError):
            _sampler.sample_sweep_counts(
                lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, keys, W, inv_tot, beta,
                alpha, *tables, Qs, n_inner, 0, 1, 1, EMPTY2D, EMPTY2I, EMPTY1, 1, **kw)


# ---------------------------------------------------------------------------------------
# Rao-Blackwellized counts (rb_word_mass, rb_doc_part, rb_smooth_part)


def _rb_reference(lay, zs, alpha, beta, V, *, W=None, w=None):
    """Sum over the assignments in zs of every token's collapsed conditional, one token at a
    time in numpy: (n_dk^{-i} + alpha_k) q_vk^{-i}, q from the counts W of z with the token
    taken out of W and T, or the fixed weights w."""
    K = alpha.size
    D = lay.tokptr.size - 1
    doc = np.repeat(np.repeat(np.arange(D), np.diff(lay.indptr)), lay.cnt)
    word = np.repeat(lay.indices, lay.cnt)
    ref = np.zeros((V, K))
    for z in zs:
        z = z.astype(np.int64)
        n = np.zeros((D, K))
        np.add.at(n, (doc, z), 1)
        for i in range(z.size):
            d, v, o = doc[i], word[i], z[i]
            nn = n[d].copy()
            nn[o] -= 1
            if W is not None:
                Wv = W[v].astype(np.float64)
                T = W.sum(axis=0).astype(np.float64)
                Wv[o] -= 1
                T[o] -= 1
                q = (Wv + beta) / (T + V * beta)
            else:
                q = w[v].astype(np.float64)
            p = (nn + alpha) * q
            ref[v] += p / p.sum()
    return ref


def _rb(lay, zs, alpha, beta, V, n_threads, *, W=None, w=None, v0=0, v1=None):
    """The kernel's three calls for the words v0 .. v1 - 1."""
    K = alpha.size
    v1 = V if v1 is None else v1
    Wa = EMPTY2I if W is None else W
    wa = EMPTY2F if w is None else w
    inv = EMPTY1 if W is None else 1.0 / (W.sum(axis=0) + V * beta)
    A = np.empty(V)
    _rao_blackwell.rb_word_mass(Wa, wa, inv, beta, alpha, A, n_threads)
    out = np.zeros((v1 - v0, K))
    s = np.zeros(v1 - v0)
    for z in zs:
        _rao_blackwell.rb_doc_part(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, Wa, wa, inv,
                                   beta, alpha, A, out, s, v0, n_threads)
    _rao_blackwell.rb_smooth_part(Wa, wa, inv, beta, alpha, s, out, v0, n_threads)
    return out


@pytest.mark.parametrize("counts", [True, False])
def test_rao_blackwell_counts_against_numpy_and_thread_invariant(counts):
    K = 7
    X = _corpus(D=60, V=25, K=K, seed=4)[0].tocsr()  # with an empty document
    X.data[::7] = 0  # entries of zero tokens
    lay = token_layout(X)
    V = X.shape[1]
    rng = np.random.default_rng(1)
    alpha = rng.uniform(0.05, 0.5, K)
    beta = 0.07
    N = int(lay.tokptr[-1])
    zs = [rng.integers(0, K, N).astype(np.uint16) for _ in range(1 if counts else 3)]
    W = w = None
    if counts:
        W = np.zeros((V, K), np.int32)
        _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, zs[0], W, 1)
    else:
        w = rng.uniform(0.01, 1.0, (V, K)).astype(np.float32)
    got = _rb(lay, zs, alpha, beta, V, 1, W=W, w=w)
    ref = _rb_reference(lay, zs, alpha, beta, V, W=W, w=w)
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5)
    # every token contributes a distribution: the rows hold the words' token counts
    tokens = np.bincount(lay.indices, weights=lay.cnt, minlength=V) * len(zs)
    np.testing.assert_allclose(got.sum(axis=1), tokens, rtol=1e-5, atol=1e-5)
    for nt in (2, 3, 8):
        np.testing.assert_array_equal(_rb(lay, zs, alpha, beta, V, nt, W=W, w=w), got)
    # a block of words alone gives the same rows
    np.testing.assert_array_equal(_rb(lay, zs, alpha, beta, V, 2, W=W, w=w, v0=5, v1=17),
                                  got[5:17])
    # the reference can fail: leaving the token's own topic in the counts differs
    if counts:
        plain = np.zeros((V, K))
        doc = np.repeat(np.repeat(np.arange(X.shape[0]), np.diff(lay.indptr)), lay.cnt)
        n = np.zeros((X.shape[0], K))
        np.add.at(n, (doc, zs[0].astype(np.int64)), 1)
        q = (W + beta) / (W.sum(axis=0) + V * beta)
        p = (n[doc] + alpha) * q[np.repeat(lay.indices, lay.cnt)]
        np.add.at(plain, np.repeat(lay.indices, lay.cnt), p / p.sum(axis=1, keepdims=True))
        assert np.abs(plain - got).max() > 1e-2


def test_rao_blackwell_argument_checks():
    K = 3
    lay = token_layout(_corpus(D=10, V=6, K=K, seed=0)[0])
    alpha = np.full(K, 0.2)
    W = np.zeros((6, K), np.int32)
    w = np.ones((6, K), np.float32)
    A = np.empty(6)
    inv = np.ones(K)
    with pytest.raises(ValueError, match="exactly one"):
        _rao_blackwell.rb_word_mass(W, w, inv, 0.1, alpha, A, 1)
    with pytest.raises(ValueError, match="exactly one"):
        _rao_blackwell.rb_word_mass(EMPTY2I, EMPTY2F, inv, 0.1, alpha, A, 1)
    with pytest.raises(ValueError, match="inconsistent shapes"):
        _rao_blackwell.rb_word_mass(W, EMPTY2F, EMPTY1, 0.1, alpha, A, 1)
    z = np.zeros(int(lay.tokptr[-1]) + 1, np.uint8)
    with pytest.raises(ValueError, match="token layout"):
        _rao_blackwell.rb_doc_part(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, EMPTY2I, w,
                                   EMPTY1, 0.1, alpha, A, np.zeros((6, K)), np.zeros(6), 0, 1)
    z = z[:-1]
    with pytest.raises(ValueError, match="inconsistent shapes"):  # rows past the last word
        _rao_blackwell.rb_doc_part(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, EMPTY2I, w,
                                   EMPTY1, 0.1, alpha, A, np.zeros((3, K)), np.zeros(3), 4, 1)
    with pytest.raises(ValueError, match="inconsistent shapes"):
        _rao_blackwell.rb_smooth_part(EMPTY2I, w, EMPTY1, 0.1, alpha, np.zeros(5),
                                      np.zeros((6, K)), 0, 1)


def test_rows_sorted():
    X = sp.csr_matrix(np.array([[1, 0, 2, 0], [0, 0, 0, 0], [3, 1, 0, 1]], float))
    lay = token_layout(X)
    assert _tokens.rows_sorted(lay.indptr, lay.indices)
    indices = lay.indices.copy()
    indices[[3, 4]] = indices[[4, 3]]  # document 2: words 1, 0, 3
    assert not _tokens.rows_sorted(lay.indptr, indices)
    # a repeated word id within a document is not strictly increasing
    indices[[3, 4]] = 0
    assert not _tokens.rows_sorted(lay.indptr, indices)


def test_count_words_equals_numpy_for_any_thread_count():
    # each thread counts the tokens of its own block of words (no atomics): the counts equal
    # numpy's for any number of threads, with empty documents and zero-token entries
    K = 9
    X = _corpus(D=80, V=31, K=K, seed=6)[0].tocsr()
    X.data[::5] = 0
    lay = token_layout(X)
    z = np.random.default_rng(2).integers(0, K, int(lay.tokptr[-1])).astype(np.uint16)
    assert _tokens.rows_sorted(lay.indptr, lay.indices)
    ref = np.zeros((31, K), np.int64)
    np.add.at(ref, (np.repeat(lay.indices, lay.cnt), z.astype(np.int64)), 1)
    for nt in (1, 2, 3, 8, 64):
        W = np.zeros((31, K), np.int32)
        T = np.full(K, 5, np.int64)  # added to
        _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W, nt, T)
        np.testing.assert_array_equal(W, ref)
        np.testing.assert_array_equal(T, ref.sum(axis=0) + 5)
        # zero=True replaces the contents (each thread clears its own rows) instead of adding
        W.fill(7)
        _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W, nt,
                            zero=True)
        np.testing.assert_array_equal(W, ref)
        # sorted word ids: each thread's entries of a document found by binary search
        T = np.zeros(K, np.int64)
        _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W, nt, T,
                            zero=True, sorted_words=True)
        np.testing.assert_array_equal(W, ref)
        np.testing.assert_array_equal(T, ref.sum(axis=0))
    # no tokens at all: zero=True still clears
    lay0 = token_layout(sp.csr_matrix((3, 31)))
    W.fill(3)
    _tokens.count_words(lay0.indptr, lay0.indices, lay0.cnt, lay0.tokptr, z[:0], W, 2,
                        zero=True)
    assert not W.any()
    with pytest.raises(ValueError, match="T_out"):
        _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W, 1,
                            np.zeros(K + 1, np.int64))


def test_move_counts_equals_a_new_count():
    # the counts of z_old moved to z_new, with other tokens' counts in W and T beside them,
    # equal counting z_new from scratch (plus the others); empty documents, zero-token
    # entries; the checks write nothing
    K, V = 7, 31
    X = _corpus(D=80, V=V, K=K, seed=6)[0].tocsr()
    X.data[::5] = 0
    lay = token_layout(X)
    N = int(lay.tokptr[-1])
    rng = np.random.default_rng(3)
    z_old = rng.integers(0, K, N).astype(np.uint16)
    z_new = z_old.copy()
    moved = rng.random(N) < 0.4
    z_new[moved] = rng.integers(0, K, int(moved.sum()))
    other = rng.integers(0, 4, (V, K)).astype(np.int32)  # counts of tokens elsewhere

    def counts(z):
        ref = np.zeros((V, K), np.int64)
        np.add.at(ref, (np.repeat(lay.indices, lay.cnt), z.astype(np.int64)), 1)
        return ref + other

    W = counts(z_old).astype(np.int32)
    T = W.sum(axis=0, dtype=np.int64)
    _tokens.move_counts(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z_old, z_new, W, T)
    np.testing.assert_array_equal(W, counts(z_new))
    np.testing.assert_array_equal(T, counts(z_new).sum(axis=0))
    W0, T0 = W.copy(), T.copy()
    for bad, match in (((z_old[:-1], z_new[:-1]), "inconsistent shapes"),
                       ((z_old, z_new[:-1]), "inconsistent shapes"),
                       ((z_old, np.where(moved, K, z_new).astype(np.uint16)), "topic")):
        with pytest.raises(ValueError, match=match):
            _tokens.move_counts(lay.indptr, lay.indices, lay.cnt, lay.tokptr, *bad, W, T)
    with pytest.raises(ValueError, match="T must"):
        _tokens.move_counts(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z_new, z_old, W,
                            np.zeros(K + 1, np.int64))
    with pytest.raises(ValueError, match="word id out of range"):
        _tokens.move_counts(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z_new, z_old,
                            W[:-1], T)
    np.testing.assert_array_equal(W, W0)
    np.testing.assert_array_equal(T, T0)


@pytest.mark.parametrize("sorted_words", [False, True])
def test_count_words_rejects_word_ids_outside_its_rows(sorted_words):
    # a word id >= V names no row of Wout (the unsorted scan used to skip it, losing its
    # tokens); nothing is written
    K = 4
    X = _corpus(D=60, V=12, K=K, seed=1)[0].tocsr()
    lay = token_layout(X)
    z = np.random.default_rng(0).integers(0, K, int(lay.tokptr[-1])).astype(np.uint16)
    W = np.zeros((11, K), np.int32)  # one row short of the corpus' 12 words
    assert lay.indices.max() == 11
    with pytest.raises(ValueError, match="word id out of range"):
        _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W, 2,
                            sorted_words=sorted_words)
    assert not W.any()
    W = np.zeros((12, K), np.int32)  # the largest id is a row: accepted
    _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W, 2,
                        sorted_words=sorted_words)
    assert W.sum() == lay.tokptr[-1]


def test_count_words_sorted_words_refuses_unsorted_rows():
    # with sorted_words each thread binary-searches its block of word ids in a document; a row
    # whose ids do not increase would hand a thread entries of another thread's block
    K = 3
    X = _corpus(D=20, V=10, K=K, seed=2)[0].tocsr()
    lay = token_layout(X)
    d = int(np.flatnonzero(np.diff(lay.indptr) >= 2)[0])
    j0 = int(lay.indptr[d])
    indices = lay.indices.copy()
    indices[j0], indices[j0 + 1] = indices[j0 + 1], indices[j0]
    assert not _tokens.rows_sorted(lay.indptr, indices)
    z = np.zeros(int(lay.tokptr[-1]), np.uint8)
    W = np.zeros((10, K), np.int32)
    with pytest.raises(ValueError, match="sorted_words needs word ids increasing"):
        _tokens.count_words(lay.indptr, indices, lay.cnt, lay.tokptr, z, W, 2,
                            sorted_words=True)
    assert not W.any()
    # the scan over every entry takes any order
    _tokens.count_words(lay.indptr, indices, lay.cnt, lay.tokptr, z, W, 2)
    ref = np.zeros((10, K), np.int64)
    np.add.at(ref, (np.repeat(indices, lay.cnt), z.astype(np.int64)), 1)
    np.testing.assert_array_equal(W, ref)


def test_rao_blackwell_sums_do_not_saturate():
    # the document part is summed in float64: 1000 one-token documents of word 0 still add
    # their mass to a row that already holds 2**24 (a float32 sum would add nothing)
    D, K = 1000, 2
    X = sp.csr_array((np.ones(D), (np.arange(D), np.zeros(D, int))), shape=(D, 1))
    lay = token_layout(X)
    z = np.zeros(D, np.uint8)
    w = np.ones((1, K), np.float32)
    alpha = np.full(K, 0.5)
    A = np.empty(1)
    _rao_blackwell.rb_word_mass(EMPTY2I, w, EMPTY1, 0.1, alpha, A, 1)
    out = np.full((1, K), 2.0**24)
    s = np.zeros(1)
    _rao_blackwell.rb_doc_part(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, EMPTY2I, w, EMPTY1,
                               0.1, alpha, A, out, s, 0, 1)
    _rao_blackwell.rb_smooth_part(EMPTY2I, w, EMPTY1, 0.1, alpha, s, out, 0, 1)
    # one token per document, alone in it: its conditional is alpha w / sum = 1/2 each
    np.testing.assert_allclose(out - 2.0**24, [[500.0, 500.0]], rtol=1e-9)


def test_kernel_digamma_equals_scipy():
    """The weight builders' digamma (recurrence summed as one fraction below 8, asymptotic
    series above) against scipy, from tiny to large arguments."""
    from scipy.special import psi

    x = np.concatenate([np.geomspace(1e-300, 1e8, 4000), np.linspace(0.01, 20.0, 4000),
                        [1e-8, 1e-8 * (1 - 1e-12), 7.999999999, 8.0]])
    got = _gibbs_tables.digamma(x)
    ref = psi(x)
    assert np.all(np.abs(got - ref) <= 1e-13 * np.maximum(1.0, np.abs(ref)))


# ---------------------------------------------------------------------------------------
# input checks at the Python boundary (word ids, topics read on entry) and seq_init


def _split_tables_for(V, K, seed=0):
    """Split word tables (sample_sweep's LIVE sparse path) for V word types, built from
    sparse statistics by split_word_tables."""
    rng = np.random.default_rng(seed)
    UT = rng.gamma(1.0, 2.0, (V, K)) * (rng.random((V, K)) < 0.3)
    UT[:, 0] += 0.5
    bits = np.empty((V, (K + 63) // 64), np.uint64)
    _gibbs_tables.positive_bits(UT, bits, 1)
    cols = np.arange(V, dtype=np.int64)
    nnz = np.empty(V, np.int32)
    _gibbs_tables.bit_counts(bits, cols, nnz)
    norm = _gibbs_tables.digamma(V * 0.1 + UT.sum(axis=0))
    return _gibbs_tables.split_word_tables(UT, bits, cols, 1.0, 0.1, norm, np.full(K, 0.3), nnz, 1)


def _sweep_any(path, lay, z, keys, w, alpha, *, n_inner=1, n_burn=0, seq_init=False,
               acc=None, ll=None, zsave=None, n_threads=1, seed=1):
    """sample_sweep on one of its paths: frozen/live x dense/sparse, or live-split (the split
    tables of w's shape)."""
    V, K = w.shape
    mode = FROZEN if path.startswith("frozen") else LIVE
    dense = path.endswith("dense")
    split = None
    if path == "live-split":
        split = _split_tables_for(V, K)
        w = np.zeros((0, K), np.float32)
        prob, alias, Q = EMPTY2F, EMPTY2I, EMPTY1
    else:
        prob, alias, Q = (EMPTY2F, EMPTY2I, EMPTY1) if dense else _tables(w, alpha)
    return _sampler.sample_sweep(
        lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, keys, w, alpha, prob, alias, Q, mode,
        dense, n_inner, n_burn, seed, 1, EMPTY2D if acc is None else acc, EMPTY2I,
        EMPTY1 if ll is None else ll, n_threads, seq_init=seq_init, split=split, zsave=zsave)


_PATHS = ["frozen-dense", "frozen-sparse", "live-dense", "live-sparse", "live-split"]


def _small_corpus(zero_entry=False):
    """Four documents over six words (one empty), their token layout and keys; with
    ``zero_entry`` entry 4 (word 1 of document 2) is stored with no tokens."""
    X = sp.csr_array(np.array([[2, 0, 1, 3, 0, 0], [0, 0, 0, 0, 0, 0], [0, 4, 0, 0, 1, 2],
                               [1, 1, 1, 0, 0, 1]], dtype=np.float64))
    if zero_entry:
        X.data[4] = 0.0
    lay = token_layout(X)
    return lay, np.arange(X.shape[0], dtype=np.uint64)


@pytest.mark.parametrize("path", _PATHS)
def test_sample_sweep_rejects_word_ids_out_of_range(path):
    # word ids index the rows of the weights (w, or the split tables' words): V or more, or
    # negative, is a ValueError before anything is written, also on an entry of no tokens
    V, K = 6, 5
    w, alpha = _problem(K=K, V=V, seed=4)
    lay, keys = _small_corpus()
    z0 = np.zeros(lay.tokptr[-1], np.uint8)
    _tokens.random_assign(lay.tokptr, z0, keys, 2, K, 1)
    z = z0.copy()
    _sweep_any(path, lay, z, keys, w, alpha)  # valid ids (V - 1 included) are accepted
    assert lay.indices.max() == V - 1
    lay0, _ = _small_corpus(zero_entry=True)
    assert lay0.cnt[4] == 0
    for j, bad, base in ((0, V, lay), (5, -1, lay), (7, 2**31 - 1, lay), (4, V, lay0)):
        indices = base.indices.copy()
        indices[j] = bad
        bad_lay = base._replace(indices=indices)
        z = np.zeros(bad_lay.tokptr[-1], np.uint8)
        ll = np.full(keys.size, 3.0)
        with pytest.raises(ValueError, match="^word id out of range$"):
            _sweep_any(path, bad_lay, z, keys, w, alpha, ll=ll)
        assert not z.any() and np.all(ll == 3.0)


@pytest.mark.parametrize("path", _PATHS)
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
def test_sample_sweep_rejects_topics_out_of_range_read_on_entry(path, dtype):
    # without seq_init z is read on entry (the document counts: FROZEN, and LIVE before each
    # token is taken out): a topic K or more is a ValueError before anything is written
    V, K = 6, 5
    w, alpha = _problem(K=K, V=V, seed=4)
    lay, keys = _small_corpus()
    z0 = np.zeros(lay.tokptr[-1], dtype)
    _tokens.random_assign(lay.tokptr, z0, keys, 2, K, 1)
    z = z0.copy()
    z[-1] = K - 1
    _sweep_any(path, lay, z, keys, w, alpha)  # K - 1 is a topic
    for bad in (K, np.iinfo(dtype).max):
        z = z0.copy()
        z[3] = bad
        acc = np.zeros((keys.size, K))
        with pytest.raises(ValueError, match="^topic out of range$"):
            _sweep_any(path, lay, z, keys, w, alpha, acc=acc)
        assert z[3] == bad and np.array_equal(np.delete(z, 3), np.delete(z0, 3))
        assert not acc.any()


def _sweep_counts_any(path, lay, z, keys, W, *, ll=None):
    beta, K = 0.1, W.shape[1]
    alpha = np.full(K, 0.2)
    inv_tot, tables, Qs, _ = _count_tables(W, beta, alpha)
    mode = FROZEN if path.startswith("frozen") else LIVE
    exclude_own = path == "live-exclude-own"
    return _sampler.sample_sweep_counts(
        lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, keys, W, inv_tot, beta, alpha,
        *tables, Qs, 1, 0, 1, 1, EMPTY2D, EMPTY2I, EMPTY1 if ll is None else ll, 1,
        dense=path.endswith("dense"), mode=mode, exclude_own=exclude_own)


_COUNT_PATHS = ["frozen-sparse", "frozen-dense", "live-sparse", "live-dense",
                "live-exclude-own"]


@pytest.mark.parametrize("path", _COUNT_PATHS)
def test_sample_sweep_counts_rejects_word_ids_and_topics_out_of_range(path):
    # word ids index the rows of W (also those of entries with no tokens: the live path
    # reads ahead at the next entry's word); z is read on entry in both modes
    V, K = 6, 5
    lay, keys = _small_corpus()
    z0 = np.zeros(lay.tokptr[-1], np.uint16)
    _tokens.random_assign(lay.tokptr, z0, keys, 2, K, 1)
    W = np.zeros((V, K), np.int32)
    _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z0, W, 1)
    z = z0.copy()
    _sweep_counts_any(path, lay, z, keys, W)  # valid input is accepted
    for j, bad in ((0, V), (5, -1), (7, 2**31 - 1)):
        indices = lay.indices.copy()
        indices[j] = bad
        z = z0.copy()
        ll = np.full(keys.size, 3.0)
        with pytest.raises(ValueError, match="^word id out of range$"):
            _sweep_counts_any(path, lay._replace(indices=indices), z, keys, W, ll=ll)
        assert np.array_equal(z, z0) and np.all(ll == 3.0)
    lay0, _ = _small_corpus(zero_entry=True)  # an entry of no tokens, its word id V
    indices = lay0.indices.copy()
    indices[4] = V
    with pytest.raises(ValueError, match="^word id out of range$"):
        _sweep_counts_any(path, lay0._replace(indices=indices),
                          np.zeros(lay0.tokptr[-1], np.uint16), keys, W)
    for bad in (K, 65535):
        z = z0.copy()
        z[2] = bad
        with pytest.raises(ValueError, match="^topic out of range$"):
            _sweep_counts_any(path, lay, z, keys, W)
        assert z[2] == bad and np.array_equal(np.delete(z, 2), np.delete(z0, 2))


def _seq_init_reference(lay, keys, w, alpha, n_inner, seed):
    """The topics after the dense LIVE sweeps with seq_init, in numpy from the documented
    streams: the first sweep draws every token given the new topics of the tokens before it
    (no previous topic), the next ones take the token's topic out first; one uniform per
    token, inverse CDF over the topics in order."""
    K = alpha.size
    z = np.full(int(lay.tokptr[-1]), -1, np.int64)
    for d in range(keys.size):
        t0, t1 = lay.tokptr[d], lay.tokptr[d + 1]
        u = iter(_tokens.uniform_stream(seed, 1, int(keys[d]), n_inner * (t1 - t0)))
        nd = np.zeros(K, np.int64)
        for it in range(n_inner):
            t = t0
            for j in range(lay.indptr[d], lay.indptr[d + 1]):
                for _ in range(lay.cnt[j]):
                    if it > 0:
                        nd[z[t]] -= 1
                    cum = np.cumsum((nd + alpha) * w[lay.indices[j]].astype(np.float64))
                    k = min(int(np.searchsorted(cum, next(u) * cum[-1], side="right")), K - 1)
                    nd[k] += 1
                    z[t] = k
                    t += 1
    return z


@pytest.mark.parametrize("path", ["live-dense", "live-sparse", "live-split"])
@pytest.mark.parametrize("n_inner", [1, 2])
def test_seq_init_does_not_read_the_initial_topics(path, n_inner):
    # with seq_init z is not read on entry: z full of anything (topics, values >= K up to the
    # largest of the dtype, random bytes) gives the same draws, outputs and changed count.
    # The first sweep reads no previous topic, so every token counts as changed there.
    V, K = 6, 5
    w, alpha = _problem(K=K, V=V, seed=8)
    lay, keys = _small_corpus()
    n = int(lay.tokptr[-1])
    rng = np.random.default_rng(0)
    results = []
    for dtype in (np.uint8, np.uint16, np.uint32):
        top = np.iinfo(dtype).max
        for z in (np.zeros(n, dtype), np.full(n, 3, dtype), np.full(n, K + 5, dtype),
                  np.full(n, top, dtype), rng.integers(0, top, n, dtype=dtype,
                                                       endpoint=True)):
            acc = np.zeros((keys.size, K))
            ll = np.zeros(keys.size)
            zsave = np.empty((n, n_inner), np.int32)
            changed = _sweep_any(path, lay, z, keys, w, alpha, n_inner=n_inner, seq_init=True,
                                 acc=acc, ll=ll, zsave=zsave, seed=3)
            results.append((z.astype(np.int64), acc, ll, zsave, changed))
    z, acc, ll, zsave, changed = results[0]
    for other in results[1:]:
        for a, b in zip(results[0], other, strict=True):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(zsave[:, -1], z)
    assert z.max() < K
    if n_inner == 1:
        assert changed == n  # every token, whatever z held
    else:
        assert changed == np.count_nonzero(zsave[:, 1] != zsave[:, 0])
    if path == "live-dense":
        # the draws themselves against a numpy reference of the sequential initialisation
        np.testing.assert_array_equal(z, _seq_init_reference(lay, keys, w, alpha, n_inner, 3))


# ---------------------------------------------------------------------------------------
# count_words and rb_doc_part: topics; every kernel that walks the tokens: the token layout


def _rb_call(lay, z, K, counts, *, out=None, s=None):
    """rb_doc_part over all words of _small_corpus in counts mode (W the counts of z, or of
    topics 0 when z holds values >= K) or weights mode."""
    V = 6
    alpha = np.full(K, 0.3)
    if counts:
        W = np.zeros((V, K), np.int32)
        W[:, 0] = 5
        w, inv = EMPTY2F, 1.0 / (W.sum(0) + V * 0.1)
    else:
        W, inv = EMPTY2I, EMPTY1
        w = _problem(K=K, V=V, seed=2)[0]
    A = np.empty(V)
    _rao_blackwell.rb_word_mass(W, w, inv, 0.1, alpha, A, 1)
    out = np.zeros((V, K)) if out is None else out
    s = np.zeros(V) if s is None else s
    _rao_blackwell.rb_doc_part(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W, w, inv, 0.1,
                               alpha, A, out, s, 0, 1)
    return out, s


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
@pytest.mark.parametrize("sorted_words", [False, True])
@pytest.mark.parametrize("zero", [False, True])
def test_count_words_rejects_topics_out_of_range(dtype, sorted_words, zero):
    # z indexes the columns of Wout's rows (and of the totals): a topic K or more is a
    # ValueError before anything is written (zero=True clears no row either)
    V, K = 6, 5
    lay, keys = _small_corpus()
    z0 = np.zeros(lay.tokptr[-1], dtype)
    _tokens.random_assign(lay.tokptr, z0, keys, 2, K, 1)
    z0[-1] = K - 1  # the largest topic is accepted
    W = np.zeros((V, K), np.int32)
    T = np.zeros(K, np.int64)
    _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z0, W, 2, T_out=T,
                        zero=zero, sorted_words=sorted_words)
    assert W.sum() == z0.size and np.array_equal(T, np.bincount(z0, minlength=K))
    for bad in (K, np.iinfo(dtype).max):
        z = z0.copy()
        z[4] = bad
        W = np.full((V, K), 7, np.int32)
        T = np.full(K, 7, np.int64)
        with pytest.raises(ValueError, match="^topic out of range$"):
            _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W, 2,
                                T_out=T, zero=zero, sorted_words=sorted_words)
        assert np.all(W == 7) and np.all(T == 7)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
@pytest.mark.parametrize("counts", [True, False])
def test_rb_doc_part_rejects_topics_out_of_range(dtype, counts):
    # z indexes n_dk, alpha_k and the columns of W, w and out: a topic K or more is a
    # ValueError before anything is written
    K = 5
    lay, keys = _small_corpus()
    z0 = np.zeros(lay.tokptr[-1], dtype)
    _tokens.random_assign(lay.tokptr, z0, keys, 2, K, 1)
    z0[-1] = K - 1  # the largest topic is accepted
    out, s = _rb_call(lay, z0, K, counts)
    assert np.all(np.isfinite(out)) and np.all(s > 0)
    for bad in (K, np.iinfo(dtype).max):
        z = z0.copy()
        z[0] = bad
        out = np.full((6, K), 3.0)
        s = np.full(6, 3.0)
        with pytest.raises(ValueError, match="^topic out of range$"):
            _rb_call(lay, z, K, counts, out=out, s=s)
        assert np.all(out == 3.0) and np.all(s == 3.0)


_LAYOUT = "^inconsistent token layout$"
_COUNTS = r"^token counts must be >= 0$"
_INDPTR = r"^indptr must be non-decreasing within \[0, nnz\]$"


def _bad_layouts():
    """Layouts of _small_corpus (indptr [0, 3, 3, 6, 10], tokptr [0, 6, 6, 13, 17]) broken in
    one array each, tokptr[-1] still the number of tokens: (name, layout, message, whether
    tokptr alone is broken: non-decreasing from 0, random_assign's check)."""
    lay, _ = _small_corpus()
    assert list(lay.indptr) == [0, 3, 3, 6, 10] and list(lay.tokptr) == [0, 6, 6, 13, 17]

    def tok(*t):
        return lay._replace(tokptr=np.array(t, np.int64))

    def cnt(**kv):
        c = lay.cnt.copy()
        for j, v in kv.items():
            c[int(j[1:])] = v
        return lay._replace(cnt=c)

    def ptr(*p):
        return lay._replace(indptr=np.array(p, np.int64))

    return [
        ("tokptr[0] = 1", tok(1, 6, 6, 13, 17), _LAYOUT, True),
        ("tokptr[0] < 0", tok(-2**40, 6, 6, 13, 17), _LAYOUT, True),
        ("decreasing tokptr", tok(0, 6, 2, 13, 17), _LAYOUT, True),
        ("tokptr beyond z", tok(0, 2**40, 2**40, 13, 17), _LAYOUT, True),
        ("document boundary moved", tok(0, 5, 6, 13, 17), _LAYOUT, False),
        ("tokens of an empty document", tok(0, 6, 8, 13, 17), _LAYOUT, False),
        ("cnt one more", cnt(j0=3), _LAYOUT, False),
        ("negative cnt, sums kept", cnt(j0=-1, j1=4), _COUNTS, False),
        ("negative cnt", cnt(j6=-1), _COUNTS, False),
        ("cnt -2**31", cnt(j9=-2**31), _COUNTS, False),
        ("decreasing indptr", ptr(0, 3, 2, 6, 10), _INDPTR, False),
        ("indptr past nnz", ptr(0, 3, 3, 6, 11), _INDPTR, False),
        ("negative indptr", ptr(-1, 3, 3, 6, 10), _INDPTR, False),
    ]


_LAYOUT_IDS = [b[0] for b in _bad_layouts()]


def _layout_kernels():
    """Every def that walks the tokens through tokptr: {name: run(lay, z, outs)}, run writing
    nothing but z and the output arrays it appends to ``outs`` (all 3 on entry)."""
    V, K = 6, 5
    w, alpha = _problem(K=K, V=V, seed=4)
    lay0, keys = _small_corpus()
    zt = np.zeros(lay0.tokptr[-1], np.uint16)
    _tokens.random_assign(lay0.tokptr, zt, keys, 2, K, 1)
    W = np.zeros((V, K), np.int32)
    _tokens.count_words(lay0.indptr, lay0.indices, lay0.cnt, lay0.tokptr, zt, W, 1)

    def new(outs, *arrays):
        outs.extend(arrays)
        return arrays

    kernels = {}
    for path in _PATHS:
        def run(lay, z, outs, path=path):
            acc, ll = new(outs, np.full((keys.size, K), 3.0), np.full(keys.size, 3.0))
            _sweep_any(path, lay, z, keys, w, alpha, n_inner=2, n_burn=1, acc=acc, ll=ll)
        kernels["sample_sweep " + path] = run
    for path in ("live-dense", "live-sparse", "live-split"):
        def run(lay, z, outs, path=path):
            (ll,) = new(outs, np.full(keys.size, 3.0))
            _sweep_any(path, lay, z, keys, w, alpha, seq_init=True, ll=ll)
        kernels["sample_sweep seq_init " + path] = run
    for path in _COUNT_PATHS:
        def run(lay, z, outs, path=path):
            (ll,) = new(outs, np.full(keys.size, 3.0))
            _sweep_counts_any(path, lay, z, keys, W, ll=ll)
        kernels["sample_sweep_counts " + path] = run
    for zero, sw in itertools.product((False, True), (False, True)):
        def run(lay, z, outs, zero=zero, sw=sw):
            Wc, T = new(outs, np.full((V, K), 3, np.int32), np.full(K, 3, np.int64))
            _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, Wc, 2,
                                T_out=T, zero=zero, sorted_words=sw)
        kernels[f"count_words zero={zero} sorted_words={sw}"] = run

    def run(lay, z, outs):
        Wc, T = new(outs, np.full((V, K), 3, np.int32), np.full(K, 3, np.int64))
        _tokens.move_counts(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z,
                            (z + 1) % K, Wc, T)
    kernels["move_counts"] = run
    for counts in (True, False):
        def run(lay, z, outs, counts=counts):
            out, s = new(outs, np.full((V, K), 3.0), np.full(V, 3.0))
            _rb_call(lay, z, K, counts, out=out, s=s)
        kernels[f"rb_doc_part counts={counts}"] = run
    return zt, kernels


def test_layout_tests_cover_every_def_walking_tokptr():
    # every def of the kernel source that indexes tokptr (token_counts builds it) is among
    # the kernels of the layout tests (random_assign: its own check, below)
    kernels_dir = Path(__file__).resolve().parents[1] / "sparseclust" / "_kernels"
    modules = ("_sampler", "_sem_tables", "_gibbs_tables", "_rao_blackwell", "_tokens")
    blocks = [b for name in modules  # the top-level statements
              for b in re.split(r"\n(?=[A-Za-z_@])", (kernels_dir / f"{name}.pyx").read_text())]
    defs = {b[4:].split("(", 1)[0] for b in blocks if b.startswith("def ") and "tokptr[" in b}
    _, kernels = _layout_kernels()
    covered = {name.split()[0] for name in kernels} | {"random_assign", "token_counts"}
    assert defs and defs <= covered, defs - covered


@pytest.mark.parametrize("case", range(len(_LAYOUT_IDS)), ids=_LAYOUT_IDS)
def test_kernels_reject_inconsistent_token_layouts(case):
    # the layout of token_counts (tokptr[0] == 0, tokptr[d + 1] - tokptr[d] the sum of the
    # document's counts, counts >= 0, indptr non-decreasing within [0, nnz]) is checked
    # before the tokens are walked: a ValueError with the exact message and nothing written
    _, lay, message, tokptr_only = _bad_layouts()[case]
    zt, kernels = _layout_kernels()
    for name, run in kernels.items():
        z, outs = zt.copy(), []
        with pytest.raises(ValueError, match=message):
            run(lay, z, outs)
        assert np.array_equal(z, zt) and all(np.all(o == 3) for o in outs), name
    z = np.full(zt.size, 9, np.uint16)
    if tokptr_only:  # random_assign reads tokptr alone: non-decreasing from 0
        with pytest.raises(ValueError, match=_LAYOUT):
            _tokens.random_assign(lay.tokptr, z, np.arange(4, dtype=np.uint64), 2, 5, 1)
        assert np.all(z == 9)


def test_kernels_accept_valid_token_layouts():
    # the edge cases of valid layouts: an entry of no tokens, empty first and last documents
    # (tokptr[D - 1] == tokptr[D] == len(z)), no documents at all
    zt, kernels = _layout_kernels()
    lay0, _ = _small_corpus(zero_entry=True)
    assert lay0.cnt[4] == 0
    z0 = np.minimum(zt[:lay0.tokptr[-1]], 4)
    for name, run in kernels.items():
        run(lay0, z0.copy(), [])
        if name.startswith(("count_words", "rb_doc_part")):
            # the same counts with empty documents around (the sweeps' keys are per document)
            X = sp.csr_array(np.array([[0, 0, 0, 0, 0, 0], [2, 0, 1, 3, 0, 0],
                                       [0, 0, 0, 0, 0, 0]], dtype=np.float64))
            lay = token_layout(X)
            assert list(lay.tokptr) == [0, 0, 6, 6]
            run(lay, z0[:6].copy(), [])
            empty = token_layout(sp.csr_array((0, 6)))
            run(empty, np.zeros(0, np.uint16), [])
    for lay in (lay0, token_layout(sp.csr_array((0, 6)))):
        z = np.full(lay.tokptr[-1], 9, np.uint16)
        _tokens.random_assign(lay.tokptr, z, np.arange(lay.tokptr.size - 1, dtype=np.uint64),
                              2, 5, 1)
        assert np.all(z < 5)
