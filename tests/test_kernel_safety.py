# SPDX-License-Identifier: BSD-3-Clause
"""Kernel safety: out-of-memory handling of the parallel kernels and 64-bit index arithmetic.

Allocation failures are injected through each kernel module's ``_fail_thread_allocations``
(thread ``t`` or, with -2, every thread gets NULL from its per-thread buffer allocation).
A kernel must then raise MemoryError -- or, when only one thread's buffer failed and that
thread happened to get no work, return the exact result -- never a result with work silently
missing.

The index tests use arrays of more than 2**31 elements that cost no memory: anonymous
mappings read before they are written are backed by the kernel's shared zero page, and only
the few pages a test writes become real memory.
"""

import mmap
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from sparseclust import posteriors
from sparseclust._kernels import _gmm_weights, _lda_local, _stats, _topl
from sparseclust.topics._local import TopicTables, _columns, local_step
from sparseclust.utils import openmp_enabled

pytestmark = pytest.mark.kernels

INT32_MAX = np.iinfo(np.int32).max


class _FailingAllocations:
    """Context manager: per-thread buffer allocations of ``module`` fail for ``thread``."""

    def __init__(self, module, thread):
        self.module, self.thread = module, thread

    def __enter__(self):
        self.module._fail_thread_allocations(self.thread)

    def __exit__(self, *exc):
        self.module._fail_thread_allocations(-1)


def _one_thread_fails():
    # with OpenMP, the second of two threads; without it, the only thread
    return 1 if openmp_enabled() else 0


def _check_failure_modes(module, run, equal):
    """``run()`` must raise MemoryError when every thread's buffer fails; when one thread's
    fails it must raise or give exactly the result of a normal run; afterwards it works."""
    expected = run()
    with _FailingAllocations(module, -2), pytest.raises(MemoryError):
        run()
    with _FailingAllocations(module, _one_thread_fails()):
        try:
            got = run()
        except MemoryError:
            pass
        else:
            equal(got, expected)
    equal(run(), expected)


def _assert_equal_tuples(a, b):
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_top_l_allocation_failure_raises():
    W = np.random.default_rng(0).standard_normal((2000, 64))
    for method in ("select", "scan"):
        _check_failure_modes(
            _topl,
            lambda m=method: posteriors.top_l_indices(W, 5, method=m, n_threads=2),
            np.testing.assert_array_equal,
        )


def test_summary_statistics_allocation_failure_raises():
    rng = np.random.default_rng(1)
    N, K, D, L = 3000, 40, 5, 3
    X = rng.standard_normal((N, D))
    values, idx = posteriors.responsibilities(rng.standard_normal((N, K)), L)

    def run():
        s = posteriors.summary_statistics(values, idx, X, K, moments="full", n_threads=2)
        return s["N"], s["Sx"], s["Sxx"], s["entropy"]

    _check_failure_modes(_stats, run, _assert_equal_tuples)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gmm_weight_kernels_allocation_failure_raises(dtype):
    rng = np.random.default_rng(2)
    N, K, D, C = 1000, 6, 7, 3
    X = rng.standard_normal((N, D)).astype(dtype)
    chol = np.triu(rng.standard_normal((K, D, D))).astype(dtype)
    off = rng.standard_normal((K, D)).astype(dtype)

    def dense():
        out = np.empty((N, K), dtype=dtype)
        _gmm_weights.mahalanobis_sq(X, chol, off, out, True, 2, 64)
        return out

    cand = np.ascontiguousarray(rng.permuted(np.tile(np.arange(K), (N, 1)), axis=1)[:, :C])
    cand = cand.astype(np.int32)
    order = np.empty(N * C, dtype=np.int64)
    starts = np.empty(K + 1, dtype=np.int64)
    _gmm_weights.group_by_component(cand.reshape(-1), order, starts)
    block = 64
    counts = np.diff(starts)
    n_items = (counts + block - 1) // block
    item_comp = np.repeat(np.arange(K, dtype=np.int64), n_items)
    piece = np.arange(item_comp.size) - (np.cumsum(n_items) - n_items)[item_comp]
    item_start = starts[item_comp] + piece * block
    item_stop = np.minimum(item_start + block, starts[item_comp + 1])

    def grouped():
        out = np.empty(N * C, dtype=dtype)
        _gmm_weights.mahalanobis_sq_grouped(
            X, chol, off, order, item_comp, item_start, item_stop, out, C, True, 2, block
        )
        return out

    _check_failure_modes(_gmm_weights, dense, np.testing.assert_array_equal)
    _check_failure_modes(_gmm_weights, grouped, np.testing.assert_array_equal)
    # the grouped values are the dense ones at the candidate pairs
    np.testing.assert_allclose(
        grouped().reshape(N, C), np.take_along_axis(dense(), cand, axis=1), rtol=1e-5
    )


def _lda_problem(seed=3, D=400, V=300, K=12):
    rng = np.random.default_rng(seed)
    X = sp.csr_array(rng.poisson(0.3, (D, V)).astype(np.float64))
    lam = rng.gamma(0.5, 1.0, (K, V)) + 0.05
    C = np.log(lam / lam.sum(axis=1, keepdims=True))
    return X, C, np.full(K, 0.1)


@pytest.mark.parametrize("L", [None, 3])
def test_lda_local_step_allocation_failure_raises(L):
    X, C, alpha = _lda_problem()

    def run():
        res = local_step(X, C, alpha, L=L, restarts=0, return_doc_topic=True, n_threads=2)
        return res.doc_topic, res.topic_word_stats, res.elbo_local

    _check_failure_modes(_lda_local, run, _assert_equal_tuples)


@pytest.mark.parametrize("dense", [True, False])
def test_lda_summary_never_drops_word_types(dense):
    # the summary step alone: before, a thread without its scratch buffer skipped its word
    # types and the statistics came back short without an error
    X, C, alpha = _lda_problem(seed=4)
    tables = TopicTables(C)
    K, V = C.shape
    indptr = X.indptr.astype(np.int64)
    indices = X.indices.astype(np.int32)
    data = X.data
    if dense:
        ET, rowmax = tables.dense_tables()
        Lk = 0
    else:
        ET, rowmax, Lk = np.empty((0, K)), np.empty(0), 4
    out = _lda_local.lda_local_docs(
        indptr, indices, data, tables.CT, ET, rowmax, alpha, Lk, 100, 0.05, 5, 10, 0, 5,
        1e-3, 1e-8, 2,
    )
    col_ptr, col_pos, col_doc = _columns(indptr, indices, V)

    def run():
        ST = np.zeros((V, K))
        elogpi = np.zeros(K)
        _lda_local.lda_summary(
            col_ptr, col_pos, col_doc, data, out["N"], out["expP"], out["zs"], out["r"],
            out["idx"], ET, alpha, out["psi_sum"], np.zeros(X.shape[0], dtype=np.int32), ST,
            elogpi, int(dense), 2,
        )
        return ST, elogpi

    _check_failure_modes(_lda_local, run, _assert_equal_tuples)
    ST, _ = run()
    # every token is accounted for: the statistics sum to the corpus's token count
    np.testing.assert_allclose(ST.sum(), X.sum(), rtol=1e-12)


# ----------------------------------------------------------------------------- 64-bit indices


def _lazy_zeros(shape, dtype):
    """A zero array whose pages are only allocated when written (reads map the zero page)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if sys.platform.startswith("linux"):
        # MAP_NORESERVE (0x4000 on Linux): no swap accounting for the untouched pages
        buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            # reads then map the huge zero page: 512 times fewer page faults
            buf.madvise(mmap.MADV_HUGEPAGE)
        return np.frombuffer(buf, dtype=dtype).reshape(shape)
    return np.zeros(shape, dtype=dtype)  # calloc: also lazily zeroed on other systems


def test_top_l_rows_beyond_int32_elements():
    # N * K > 2**31 weights: row n starts at element n * K, past the int32 range for the last
    # rows. K = 2048 and L = 1 take the sorted-insertion scan, one compare per weight.
    K = 2048
    N = INT32_MAX // K + 3
    W = _lazy_zeros((N, K), np.float32)
    marks = {N - 1: 1500, N - 2: 7, N // 2: 2047, 0: 3}
    for n, k in marks.items():
        W[n, k] = 1.0
    vals, idx = posteriors.responsibilities(W, 1, n_threads=2)
    assert idx.shape == (N, 1)
    for n, k in marks.items():
        assert idx[n, 0] == k and vals[n, 0] == 1.0
    # unmarked rows are all-zero: the tie goes to column 0
    assert idx[N - 3, 0] == 0 and idx[1, 0] == 0


@pytest.mark.parametrize("L", [None, 2])
def test_lda_kernels_word_rows_beyond_int32_elements(L):
    # a vocabulary with V * K > 2**31 entries in the (V, K) topic tables: the rows of the last
    # word types start past the int32 range. Only the rows of the words that occur are ever
    # read or written, so the result must equal the same problem on those rows alone.
    K = 1024
    V = INT32_MAX // K + 8
    rng = np.random.default_rng(5)
    words = np.array([0, 11, V // 2, V - 2, V - 1])  # ascending
    C_used = np.ascontiguousarray(np.log(rng.dirichlet(np.full(words.size, 0.5), size=K)).T)
    counts = rng.poisson(2.0, (6, words.size)).astype(np.float64)
    counts[2] = 0.0
    alpha = np.full(K, 0.05)
    Lk = 0 if L is None else L

    def run(CT, cols, V_, zeros):
        X = sp.csr_array((counts.ravel().copy(), np.tile(cols, counts.shape[0]),
                          np.arange(0, counts.size + 1, cols.size)), shape=(counts.shape[0], V_))
        X.eliminate_zeros()
        indptr = X.indptr.astype(np.int64)
        indices = X.indices.astype(np.int32)
        if Lk == 0:
            rowmax = np.zeros(V_)
            ET = zeros((V_, K))
            rowmax[cols] = CT[cols].max(axis=1)
            ET[cols] = np.exp(CT[cols] - rowmax[cols, None])
        else:
            ET, rowmax = np.empty((0, K)), np.empty(0)
        out = _lda_local.lda_local_docs(
            indptr, indices, X.data, CT, ET, rowmax, alpha, Lk, 100, 0.05, 5, 10, 0, 5, 1e-3,
            1e-8, 2,
        )
        col_ptr, col_pos, col_doc = _columns(indptr, indices, V_)
        ST = zeros((V_, K))
        elogpi = np.zeros(K)
        _lda_local.lda_summary(
            col_ptr, col_pos, col_doc, X.data, out["N"], out["expP"], out["zs"], out["r"],
            out["idx"], ET, alpha, out["psi_sum"], np.zeros(X.shape[0], dtype=np.int32), ST,
            elogpi, int(Lk == 0), 2,
        )
        return out, ST[cols].copy(), elogpi

    CT_big = _lazy_zeros((V, K), np.float64)
    CT_big[words] = C_used
    big, S_big, e_big = run(CT_big, words, V, lambda shape: _lazy_zeros(shape, np.float64))
    small, S_small, e_small = run(C_used, np.arange(words.size), words.size, np.zeros)
    for key in ("N", "elbo", "data", "psi_sum"):
        np.testing.assert_array_equal(big[key], small[key])
    np.testing.assert_array_equal(S_big, S_small)
    np.testing.assert_array_equal(e_big, e_small)
    assert S_big.sum() == pytest.approx(counts.sum())


def test_index_range_guards():
    W = np.lib.stride_tricks.as_strided(np.zeros(1), shape=(1, INT32_MAX + 1), strides=(0, 0))
    with pytest.raises(ValueError, match="columns"):
        posteriors.responsibilities(W, 1)
    with pytest.raises(ValueError, match="int32"):
        posteriors.summary_statistics(np.ones((1, 1)), np.zeros((1, 1), np.int32),
                                      np.ones((1, 1)), INT32_MAX + 1)


def test_left_to_right_allocation_failure_raises():
    from sparseclust._kernels import _left_to_right
    from sparseclust.metrics import left_to_right_score

    rng = np.random.default_rng(4)
    X = sp.csr_array(rng.poisson(0.5, size=(40, 15)).astype(float))
    phi = rng.dirichlet(np.ones(15), size=4)
    _check_failure_modes(
        _left_to_right,
        lambda: left_to_right_score(phi, X, n_particles=3, random_state=0, n_threads=2),
        lambda a, b: np.testing.assert_array_equal(a, b),
    )
