# SPDX-License-Identifier: BSD-3-Clause
"""Per-batch topic-word statistics stored sparse (the (k, v) pairs a batch touched).

The sparse storage must change nothing: every fit equals the same fit with dense (K, V)
per-batch statistics (the local step's output densified by the test) bit for bit (the
arithmetic is the same, entry by entry), and the memoized engine equals a plain numpy
re-implementation of today's dense update S <- S - S_b^old + S_b^new.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import psi

from sparseclust import HDPTopicModel, SparseLDA
from sparseclust._engine import SuffStats, _split_batches, fit_engine
from sparseclust.datasets import load_kos
from sparseclust.topics._lda_model import _LDAModel
from sparseclust.topics._local import TopicTables, local_step, stats_csr

from .test_hdp import densify_local, hdp_corpus

pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
    pytest.mark.kernels,
]


@pytest.fixture(scope="module")
def kos():
    X = load_kos().data[:240]
    X = X[:, np.flatnonzero(np.asarray(X.sum(axis=0)).ravel() > 0)]
    return sp.csr_array(X)


def _densify(stats):
    stats["S"] = stats["S"].toarray()
    return stats


class _DenseLDA(SparseLDA):
    """SparseLDA whose local step returns dense (K, V) batch statistics (the reference)."""

    def _model(self, chains=False):
        model = super()._model(chains)
        local = model.local_step
        model.local_step = lambda X, params: _densify(local(X, params))
        return model


class _DenseHDP(HDPTopicModel):
    """HDPTopicModel whose local step returns dense (K, V) batch statistics."""

    def _model(self, K):
        return densify_local(super()._model(K))


def _fit_pair(cls, X, **params):
    dense_cls = {SparseLDA: _DenseLDA, HDPTopicModel: _DenseHDP}[cls]
    return dense_cls(**params).fit(X), cls(**params).fit(X)


# ---------------------------------------------------------------------------- local step


@pytest.mark.parametrize("L", [None, 3])
def test_local_step_csr_equals_dense_statistics_and_follows_the_batch(kos, L):
    rng = np.random.default_rng(0)
    K, V = 12, kos.shape[1]
    lam = 0.1 + rng.gamma(1.0, 1.0, (K, V))
    C = psi(lam) - psi(lam.sum(axis=1))[:, None]
    Xb = kos[:40]
    res = local_step(Xb, C, 0.1, L=L)
    S = res.topic_word_csr
    assert sp.issparse(S) and S.shape == (K, V) and S.has_canonical_format
    # only the batch's word types appear, at most L topics per entry
    used = np.flatnonzero(np.asarray(Xb.sum(axis=0)).ravel())
    assert np.all(np.isin(S.indices, used))
    if L is not None:
        assert S.nnz <= L * Xb.nnz
    assert np.all(S.data != 0)
    # the numpy reference: the dense responsibilities of the same step, scattered by hand
    # (the statistics of every entry sum to its count)
    np.testing.assert_allclose(np.asarray(S.sum(axis=0)).ravel(),
                               np.asarray(Xb.sum(axis=0)).ravel(), rtol=1e-12)
    # the same kernel writing a full (V, K) table gives the same numbers, bit for bit
    tables = TopicTables(C)
    dense = local_step(Xb, tables, 0.1, L=L, n_threads=1)
    np.testing.assert_array_equal(dense.topic_word_stats, S.toarray())


def test_stats_csr_of_a_block():
    rng = np.random.default_rng(1)
    ST = rng.random((5, 4)) * (rng.random((5, 4)) < 0.5)
    cols = np.array([1, 4, 5, 9, 11])
    S = stats_csr(ST, cols, 12)
    ref = np.zeros((4, 12))
    ref[:, cols] = ST.T
    np.testing.assert_array_equal(S.toarray(), ref)
    assert S.nnz == np.count_nonzero(ST) and S.has_canonical_format


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dense_order", ["C", "F"])
def test_suffstats_in_place_updates_match_the_dense_arithmetic(index_dtype, dense_order):
    # the compiled update (C-contiguous float64, either index width) and the numpy one
    # (a Fortran-ordered accumulator) both add each stored entry once
    rng = np.random.default_rng(2)
    T = np.asarray(rng.random((6, 9)), order=dense_order)
    Sold = sp.random_array((6, 9), density=0.3, random_state=3, format="csr")
    N = sp.random_array((6, 9), density=0.3, random_state=4, format="csr")
    for M in (Sold, N):
        M.indptr = M.indptr.astype(index_dtype)
        M.indices = M.indices.astype(index_dtype)
    tot = SuffStats(S=T.copy(), e=1.5)
    ref = (tot - SuffStats(S=Sold.toarray(), e=0.25)) + SuffStats(S=N.toarray(), e=0.5)
    arr = tot["S"]
    tot.sub_(SuffStats(S=Sold, e=0.25)).add_(SuffStats(S=N, e=0.5))
    assert tot["S"] is arr  # updated in place
    np.testing.assert_array_equal(tot["S"], ref["S"])
    assert tot["e"] == ref["e"]
    acc = SuffStats(S=Sold, e=1.0).densified_copy()
    assert isinstance(acc["S"], np.ndarray)
    np.testing.assert_array_equal(acc["S"], Sold.toarray())
    with pytest.raises(ValueError, match="shape"):
        SuffStats(S=np.zeros((2, 2))).add_(SuffStats(S=sp.csr_array((3, 2))))


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_integer_counts_added_into_int32(index_dtype):
    # csr_add_counts (the Dask SEM fit's whole-data counts): the same integers as numpy's
    # dense sum, duplicate columns in a row included; an entry past int32 raises
    from sparseclust._kernels import _stats

    rng = np.random.default_rng(5)
    W = rng.integers(0, 50, (7, 5)).astype(np.int32)
    rows = rng.integers(0, 7, 40)
    cols = rng.integers(0, 5, 40)
    vals = rng.integers(0, 1000, 40).astype(np.int64)
    order = np.argsort(rows, kind="stable")
    indptr = np.searchsorted(rows[order], np.arange(8)).astype(index_dtype)
    ref = W.astype(np.int64)
    np.add.at(ref, (rows, cols), vals)
    _stats.csr_add_counts(W, indptr, cols[order].astype(index_dtype), vals[order])
    np.testing.assert_array_equal(W, ref)
    big = np.array([2**31 - 1 - int(W[0, 0]) + 1], np.int64)
    one = np.array([0, 1] + [1] * 6, index_dtype)
    with pytest.raises(OverflowError, match="int32"):
        _stats.csr_add_counts(W, one, np.zeros(1, index_dtype), big)
    with pytest.raises(ValueError, match="outside"):
        _stats.csr_add_counts(W, one, np.full(1, 5, index_dtype), np.ones(1, np.int64))


# ------------------------------------------------------------------------------- SparseLDA


def test_memoized_engine_equals_todays_dense_update(kos):
    # reference: the dense memoized loop, S <- S - S_b^old + S_b^new with new arrays
    K, B = 8, 4
    init = SuffStats(S=np.random.default_rng(3).gamma(100.0, 0.01, (K, kos.shape[1])),
                     elbo_local=0.0)
    opts = dict(max_iter=100, tol=0.05, restarts=0)
    model = _LDAModel(0.5 / K, 0.1, 3, opts, 1)
    res = fit_engine(model, kos, init.copy(), algorithm="memoized", max_iter=3, tol=0,
                     n_batches=B, random_state=7)
    ref_model = _LDAModel(0.5 / K, 0.1, 3, opts, 1)
    batches = _split_batches(kos.shape[0], B, np.random.RandomState(7))
    params = ref_model.global_step(init)
    cache = [_densify(ref_model.local_step(kos[b], params)) for b in batches]
    total = cache[0]
    for s in cache[1:]:
        total = total + s
    params = ref_model.global_step(total)
    for _ in range(2):
        for i, b in enumerate(batches):
            s = _densify(ref_model.local_step(kos[b], params))
            total = total - cache[i] + s
            cache[i] = s
            params = ref_model.global_step(total)
    np.testing.assert_array_equal(res.params.lam, params.lam)
    np.testing.assert_array_equal(res.stats["S"], total["S"])
    # the engine cached sparse statistics whose size follows the batch
    for st, b in zip(res.batch_stats, batches, strict=True):
        assert sp.issparse(st["S"]) and st["S"].nnz <= 3 * kos[b].nnz


@pytest.mark.parametrize("algorithm", ["memoized", "batch", "stochastic"])
def test_sparse_lda_sparse_statistics_equal_dense(kos, algorithm):
    dense, sparse = _fit_pair(SparseLDA, kos, n_components=7, L=3,
                              algorithm=algorithm, max_iter=3, tol=0, n_batches=3,
                              batch_size=60, init="random", random_state=0)
    np.testing.assert_array_equal(sparse.components_, dense.components_)
    np.testing.assert_array_equal(sparse.lower_bounds_, dense.lower_bounds_)
    np.testing.assert_array_equal(sparse.transform(kos[:20]), dense.transform(kos[:20]))


def test_sparse_lda_parameters_hold_two_topic_word_arrays(kos):
    # lambda and the (V, K) table; E[log phi] is a view of the table, not a third copy
    m = _LDAModel(0.1, 0.1, 3, dict(max_iter=10, tol=0.05, restarts=0), 1)
    S = np.random.default_rng(0).random((5, kos.shape[1]))
    p = m.global_step(SuffStats(S=S, elbo_local=0.0))
    assert np.shares_memory(p.Elogphi, p.tables.CT)
    lam = 0.1 + S
    np.testing.assert_array_equal(p.lam, lam)
    np.testing.assert_allclose(p.Elogphi, psi(lam) - psi(lam.sum(axis=1))[:, None],
                               rtol=1e-14, atol=1e-14)


def test_partial_fit_after_memoized_fit_is_unchanged(kos):
    out = {}
    for fmt, cls in (("dense", _DenseLDA), ("sparse", SparseLDA)):
        m = cls(n_components=6, max_iter=2, tol=0, init="random", random_state=1)
        out[fmt] = m.fit(kos[:200]).partial_fit(kos[200:])
    np.testing.assert_array_equal(out["dense"].components_, out["sparse"].components_)


# --------------------------------------------------------------------------- HDPTopicModel


def test_hdp_with_moves_sparse_statistics_equal_dense():
    X, _, _ = hdp_corpus(0, K=8, V=80, D=200, length=40)
    dense, sparse = _fit_pair(HDPTopicModel, X, max_components=20, L=4,
                              max_iter=8, tol=0, n_batches=4, random_state=0,
                              local_tol=1e-4)
    tr = sparse.trace_
    # the moves ran and edited the cached batch statistics
    assert sum(e["merges_accepted"] for e in tr) > 0
    assert sum(e["deletes_accepted"] for e in tr) > 0
    assert [e["n_topics"] for e in tr] == [e["n_topics"] for e in dense.trace_]
    np.testing.assert_array_equal(sparse.components_, dense.components_)
    np.testing.assert_array_equal(sparse.lower_bounds_, dense.lower_bounds_)
    np.testing.assert_array_equal(sparse.topic_weights_, dense.topic_weights_)


@pytest.mark.parametrize("algorithm", ["batch", "stochastic"])
def test_hdp_batch_and_stochastic_sparse_statistics_equal_dense(algorithm):
    X, _, _ = hdp_corpus(1, K=5, V=60, D=120, length=30)
    dense, sparse = _fit_pair(HDPTopicModel, X, max_components=10, L=3,
                              algorithm=algorithm, max_iter=4, tol=0, batch_size=40,
                              random_state=0)
    np.testing.assert_array_equal(sparse.components_, dense.components_)
    np.testing.assert_array_equal(sparse.lower_bounds_, dense.lower_bounds_)


@pytest.mark.parametrize("algorithm", ["memoized", "batch"])
def test_fitted_lambda_equals_final_statistics(kos, algorithm):
    # fit ends by computing lambda = tau + max(S, 0) in the memory of the whole-data total S;
    # the callback's copy of lambda after the last pass is computed from S by a separate path
    last = {}

    def keep(info):
        last["components"] = info["components"].copy()

    est = SparseLDA(n_components=6, L=3, algorithm=algorithm, max_iter=3, tol=0, n_batches=3,
                    init="random", topic_word_prior=0.05, random_state=1)
    est.fit(kos, callback=keep)
    np.testing.assert_array_equal(est.components_, last["components"])
    assert est.components_.min() >= 0.05
    np.testing.assert_allclose(est.topic_word_distribution_.sum(axis=1), 1.0, rtol=1e-12)
