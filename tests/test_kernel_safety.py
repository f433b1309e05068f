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
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from sparseclust import posteriors
from sparseclust._kernels import (
    _gibbs_tables,
    _gmm_weights,
    _lda_local,
    _rao_blackwell,
    _sampler,
    _sem_tables,
    _stats,
    _tokens,
    _topl,
)
from sparseclust.topics._local import TopicTables, _columns, local_step
from sparseclust.topics._sem import token_layout
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


# ----------------------------------------------------------------------------- sampler kernels
# Every def of the sampler modules (_SAMPLER_MODULES) that allocates per-thread scratch
# (sc_thread_malloc, directly or through the document sweep _run_docs), its module and the
# message of its MemoryError.
_SAMPLER_MESSAGES = {
    "sample_sweep": (_sampler, "could not allocate the sampler scratch space"),
    "sample_sweep_counts": (_sampler, "could not allocate the sampler scratch space"),
    "build_alias": (_sampler, "could not allocate the alias-table scratch space"),
    "build_word_tables": (_sem_tables, "could not allocate the alias-table scratch space"),
    "variational_word_weights": (
        _gibbs_tables, "could not allocate the word-weight scratch space"),
    "mean_word_weights": (_gibbs_tables, "could not allocate the word-weight scratch space"),
    "split_word_tables": (_gibbs_tables, "could not allocate the split-table scratch space"),
    "count_word_topics": (_gibbs_tables, "could not allocate the word-count scratch space"),
    "count_words": (_tokens, "could not allocate the counting scratch space"),
    "rb_doc_part": (_rao_blackwell, "could not allocate the Rao-Blackwellization scratch space"),
}
_SAMPLER_MODULES = (_sampler, _sem_tables, _gibbs_tables, _rao_blackwell, _tokens)
_E2F, _E2I, _E2D, _E1 = (np.zeros((0, 0), np.float32), np.zeros((0, 0), np.int32),
                         np.zeros((0, 0)), np.zeros(0))


@pytest.fixture
def sampler_failures():
    """The sampler modules' allocation failures, switched off again (-1) after the test
    however it ends."""
    try:
        yield
    finally:
        for module in _SAMPLER_MODULES:
            module._fail_thread_allocations(-1)


def _check_sampler_failures(kernel, make, run, untouched):
    """Allocation failures of one sampler kernel. ``make()`` gives fresh inputs and outputs (a
    dict of arrays), ``run(bufs)`` calls the kernel on them and returns what it computed.

    - Every thread's buffers fail: MemoryError with the kernel's message, and the outputs
      named in ``untouched`` keep their contents (the work is skipped, not done in part).
    - One thread's buffers fail (thread 0, and with OpenMP thread 1): the same MemoryError,
      or exactly the normal result (when that thread got no work).
    - After the reset (-1): the same call on the same arrays as the failed one (INOUT
      arrays included) gives exactly the result of a call that never failed.
    """
    module, message = _SAMPLER_MESSAGES[kernel]
    expected = run(make())
    bufs = make()
    before = {name: bufs[name].copy() for name in untouched}
    module._fail_thread_allocations(-2)
    with pytest.raises(MemoryError, match=f"^{re.escape(message)}$"):
        run(bufs)
    module._fail_thread_allocations(-1)
    for name in untouched:
        np.testing.assert_array_equal(bufs[name], before[name], err_msg=f"{kernel}: {name}")
    for thread in sorted({0, _one_thread_fails()}):
        module._fail_thread_allocations(thread)
        try:
            got = run(make())
        except MemoryError as exc:
            assert str(exc) == message
        else:
            _assert_equal_tuples(got, expected)
        finally:
            module._fail_thread_allocations(-1)
    _assert_equal_tuples(run(bufs), expected)
    _assert_equal_tuples(run(make()), expected)


def _sampler_corpus(D=40, V=20, K=6, seed=0):
    """A small corpus (an empty document, entries of zero tokens), its token layout and
    uniform initial topics (uint8)."""
    rng = np.random.default_rng(seed)
    counts = rng.poisson(0.7, (D, V)).astype(np.float64)
    counts[3] = 0.0
    X = sp.csr_array(counts)
    X.data[::9] = 0.0  # entries of zero tokens
    lay = token_layout(X)
    keys = np.arange(D, dtype=np.uint64)
    z0 = np.zeros(int(lay.tokptr[-1]), np.uint8)
    _tokens.random_assign(lay.tokptr, z0, keys, 4, K, 1)
    return lay, keys, z0


def _split_inputs(V_all, K, seed, *, excluded=False):
    """Arguments of split_word_tables over sparse statistics (every word holds some topic)."""
    rng = np.random.default_rng(seed)
    UT = rng.gamma(1.0, 2.0, (V_all, K)) * (rng.random((V_all, K)) < 0.3)
    UT[:, 0] += 0.5
    bits = np.empty((V_all, (K + 63) // 64), np.uint64)
    _gibbs_tables.positive_bits(UT, bits, 1)
    cols = np.arange(V_all, dtype=np.int64)
    nnz = np.empty(V_all, np.int32)
    _gibbs_tables.bit_counts(bits, cols, nnz)
    tau, pi = 0.1, 1.5
    norm = _gibbs_tables.digamma(V_all * tau + pi * UT.sum(axis=0))
    alpha = rng.uniform(0.1, 0.5, K)
    kw = {}
    if excluded:  # word i's excluded statistics on its first listed topic (topic 0)
        kw = dict(ex_ptr=np.arange(V_all + 1, dtype=np.int64),
                  ex_top=np.zeros(V_all, np.int32), ex_val=np.full(V_all, 0.25))
    return (UT, bits, cols, pi, tau, norm, alpha, nnz), kw


def _split_fields(split):
    return tuple(np.asarray(f) for f in split)


_SWEEP_PATHS = ["frozen-dense", "frozen-sparse", "live-dense", "live-sparse", "live-seq-init",
                "live-split"]


@pytest.mark.parametrize("path", _SWEEP_PATHS)
def test_sample_sweep_allocation_failure(path, sampler_failures):
    K, V = 6, 20
    lay, keys, z0 = _sampler_corpus(V=V, K=K)
    D = keys.size
    rng = np.random.default_rng(1)
    alpha = np.full(K, 0.3)
    mode = _sampler.FROZEN if path.startswith("frozen") else _sampler.LIVE
    dense = path.endswith("dense")
    split = None
    w = rng.uniform(0.05, 1.0, (V, K)).astype(np.float32)
    prob, alias, Q = _E2F, _E2I, _E1
    if path == "live-split":
        args, _ = _split_inputs(V, K, 2)
        split = _gibbs_tables.split_word_tables(*args[:6], alpha, args[7], 1)
        w = np.zeros((0, K), np.float32)
    elif not dense:
        prob, alias, Q = np.empty((V, K), np.float32), np.empty((V, K), np.int32), np.empty(V)
        _sampler.build_alias(w, alpha, prob, alias, Q, 1)
    n_inner, n_burn = 2, 1

    def make():
        return dict(z=z0.copy(), acc=np.zeros((D, K)), Wout=np.zeros((V, K), np.int32),
                    ll=np.full(D, -7.0), zsave=np.full((z0.size, n_inner - n_burn), -1, np.int32))

    def run(b):
        changed = _sampler.sample_sweep(
            lay.indptr, lay.indices, lay.cnt, lay.tokptr, b["z"], keys, w, alpha, prob, alias,
            Q, mode, dense, n_inner, n_burn, 5, 2, b["acc"], b["Wout"], b["ll"], 2,
            seq_init=path == "live-seq-init", split=split, zsave=b["zsave"])
        return b["z"], b["acc"], b["Wout"], b["ll"], b["zsave"], np.array([changed])

    _check_sampler_failures("sample_sweep", make, run, ["z", "acc", "Wout", "ll", "zsave"])
    # the normal result is a real sweep: the saved counts are those of the tokens' topics
    b = make()
    run(b)
    assert b["Wout"].sum() == z0.size and np.all(b["ll"][lay.tokptr[1:] > lay.tokptr[:-1]] < 0)


def _word_tables(W, beta, alpha, tab):
    V, K = W.shape
    inv_tot = 1.0 / (W.sum(axis=0) + V * beta)
    wptr = np.zeros(V + 1, np.int64)
    np.cumsum(np.count_nonzero(W, axis=1) + 1, out=wptr[1:])  # one spare slot per word
    n = int(wptr[-1])

    def make():
        return dict(wlen=np.full(V, -1, np.int32), wtop=np.full(n, 77, tab),
                    wprob=np.full(n, -1.0, np.float32), walias=np.full(n, 77, tab),
                    Qw=np.full(V, -1.0), sprob=np.full(K, -1.0, np.float32),
                    salias=np.full(K, -1, np.int32), word_ll=np.full(V, -1.0))

    def run(b):
        Qs = _sem_tables.build_word_tables(W, inv_tot, beta, alpha, wptr, b["wlen"], b["wtop"],
                                           b["wprob"], b["walias"], b["Qw"], b["sprob"],
                                           b["salias"], b["word_ll"], 2)
        return (*b.values(), np.array([Qs]))

    return inv_tot, wptr, make, run


@pytest.mark.parametrize("tab", [np.uint16, np.int32])
def test_build_word_tables_allocation_failure(tab, sampler_failures):
    rng = np.random.default_rng(3)
    W = (rng.integers(0, 4, (30, 7)) * (rng.random((30, 7)) < 0.4)).astype(np.int32)
    W[5] = 0
    _, _, make, run = _word_tables(W, 0.1, rng.uniform(0.1, 0.5, 7), tab)
    # (the shared smoothing table sprob / salias is built before the per-word loop)
    _check_sampler_failures("build_word_tables", make, run,
                            ["wlen", "wtop", "wprob", "walias", "Qw", "word_ll"])
    b = make()
    run(b)
    np.testing.assert_array_equal(b["wlen"], np.count_nonzero(W, axis=1))


@pytest.mark.parametrize("path", ["frozen-sparse", "frozen-dense", "live-exclude-own",
                                  "live-entry", "live-dense"])
def test_sample_sweep_counts_allocation_failure(path, sampler_failures):
    K, V = 6, 20
    lay, keys, z0 = _sampler_corpus(V=V, K=K, seed=5)
    D = keys.size
    W = np.zeros((V, K), np.int32)
    _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z0, W, 1)
    beta, alpha = 0.1, np.full(K, 0.25)
    inv_tot, wptr, make_tables, run_tables = _word_tables(W, beta, alpha, np.uint16)
    t = make_tables()
    Qs = float(run_tables(t)[-1][0])
    mode = _sampler.FROZEN if path.startswith("frozen") else _sampler.LIVE
    dense = path.endswith("dense")
    exclude_own = path in ("live-exclude-own", "live-entry")
    n_inner = 1 if exclude_own else 2

    def make():
        return dict(z=z0.copy(), acc=np.zeros((D, K)), Wout=np.zeros((V, K), np.int32),
                    ll=np.full(D, -7.0))

    def run(b):
        changed = _sampler.sample_sweep_counts(
            lay.indptr, lay.indices, lay.cnt, lay.tokptr, b["z"], keys, W, inv_tot, beta,
            alpha, wptr, t["wlen"], t["wtop"], t["wprob"], t["walias"], t["Qw"], t["sprob"],
            t["salias"], Qs, n_inner, 0, 5, 2, b["acc"], b["Wout"], b["ll"], 2, dense=dense,
            mode=mode, exclude_own=exclude_own, live_entry=path == "live-entry")
        return b["z"], b["acc"], b["Wout"], b["ll"], np.array([changed])

    _check_sampler_failures("sample_sweep_counts", make, run, ["z", "acc", "Wout", "ll"])
    b = make()
    run(b)
    assert b["Wout"].sum() == n_inner * z0.size


def test_build_alias_allocation_failure(sampler_failures):
    rng = np.random.default_rng(6)
    V, K = 30, 9
    w = rng.uniform(0.0, 1.0, (V, K)).astype(np.float32)
    alpha = rng.uniform(0.1, 0.5, K)

    def make():
        return dict(prob=np.full((V, K), -1.0, np.float32), alias=np.full((V, K), -1, np.int32),
                    Q=np.full(V, -1.0))

    def run(b):
        _sampler.build_alias(w, alpha, b["prob"], b["alias"], b["Q"], 2)
        return b["prob"], b["alias"], b["Q"]

    _check_sampler_failures("build_alias", make, run, ["prob", "alias", "Q"])
    np.testing.assert_allclose(run(make())[2], (alpha * w.astype(np.float64)).sum(axis=1),
                               rtol=1e-12)


def test_variational_word_weights_allocation_failure(sampler_failures):
    (UT, _, _, pi, tau, norm, _, _), _ = _split_inputs(25, 8, 7)
    cols = np.array([3, 0, 24, 3, 11], np.int64)

    def make():
        return dict(w=np.full((cols.size, 8), -1.0, np.float32))

    def run(b):
        _gibbs_tables.variational_word_weights(UT, cols, pi, tau, norm, b["w"], 2)
        return (b["w"],)

    _check_sampler_failures("variational_word_weights", make, run, ["w"])
    # each row is exp(E[log phi] - its maximum): its largest weight is 1
    np.testing.assert_allclose(run(make())[0].max(axis=1), 1.0, rtol=1e-6)


def _mean_weight_inputs(K=6, V=30, seed=7):
    """Dense statistics S, ascending word types, the excluded statistics E (CSC over all V
    columns, inside ``cols``) and the topic totals of lambda^{-E}."""
    rng = np.random.default_rng(seed)
    S = rng.gamma(0.3, 3.0, (K, V))
    S[S < 0.4] = 0.0
    cols = np.sort(rng.choice(V, 12, replace=False)).astype(np.int64)
    E = np.zeros((K, V))
    E[:, cols] = np.where(rng.random((K, cols.size)) < 0.5,
                          rng.random((K, cols.size)) * 1.5 * S[:, cols], 0.0)
    ex = sp.csc_array(E)
    tau = 0.1
    lamsum = (np.maximum(S - E, 0.0) + tau).sum(axis=1)
    return S, cols, ex, E, tau, lamsum


def test_mean_word_weights_matches_numpy_and_refuses_bad_input():
    S, cols, ex, E, tau, lamsum = _mean_weight_inputs()
    K = S.shape[0]
    ptr, top, val = ex.indptr.astype(np.int64), ex.indices.astype(np.int32), ex.data
    lam = np.maximum(S - E, 0.0) + tau
    ref = (lam / lamsum[:, None])[:, cols].T
    ref /= ref.max(axis=1, keepdims=True)
    for threads in (1, 2):
        w = np.empty((cols.size, K), np.float32)
        _gibbs_tables.mean_word_weights(S, cols, ptr, top, val, tau, lamsum, w, threads)
        np.testing.assert_allclose(w, ref, rtol=1e-6)
    # nothing excluded: empty arrays
    w = np.empty((cols.size, K), np.float32)
    _gibbs_tables.mean_word_weights(S, cols, np.zeros(0, np.int64), np.zeros(0, np.int32),
                                    np.zeros(0), tau, lamsum, w, 1)
    ref0 = ((S + tau) / lamsum[:, None])[:, cols].T
    np.testing.assert_allclose(w, ref0 / ref0.max(axis=1, keepdims=True), rtol=1e-6)
    bad_top = top.copy()
    bad_top[0] = K
    with pytest.raises(ValueError, match="topic out of range"):
        _gibbs_tables.mean_word_weights(S, cols, ptr, bad_top, val, tau, lamsum, w, 1)
    with pytest.raises(ValueError, match="word type out of range"):
        _gibbs_tables.mean_word_weights(S, cols + S.shape[1], ptr, top, val, tau, lamsum, w, 1)
    with pytest.raises(ValueError, match="topic totals must be positive"):
        _gibbs_tables.mean_word_weights(S, cols, ptr, top, val, tau, 0 * lamsum, w, 1)
    with pytest.raises(ValueError, match="inconsistent shapes"):
        _gibbs_tables.mean_word_weights(S, cols, ptr[:-1], top, val, tau, lamsum, w, 1)


def test_mean_word_weights_allocation_failure(sampler_failures):
    S, cols, ex, _, tau, lamsum = _mean_weight_inputs(K=9, V=40, seed=3)
    ptr, top, val = ex.indptr.astype(np.int64), ex.indices.astype(np.int32), ex.data

    def make():
        return dict(w=np.full((cols.size, S.shape[0]), -1.0, np.float32))

    def run(b):
        _gibbs_tables.mean_word_weights(S, cols, ptr, top, val, tau, lamsum, b["w"], 2)
        return (b["w"],)

    _check_sampler_failures("mean_word_weights", make, run, ["w"])
    np.testing.assert_allclose(run(make())[0].max(axis=1), 1.0, rtol=1e-6)


def test_count_word_topics_allocation_failure(sampler_failures):
    rng = np.random.default_rng(5)
    n_words, K, S = 300, 12, 2
    indices = rng.integers(0, n_words, 900).astype(np.int32)
    cnt = rng.integers(0, 3, indices.size).astype(np.int32)
    zsave = rng.integers(0, K, (int(cnt.sum()), S)).astype(np.int32)

    def run(_):
        return _gibbs_tables.count_word_topics(indices, cnt, zsave, n_words, K, 2)

    _check_sampler_failures("count_word_topics", dict, run, [])
    # every token of every saved sweep is counted once
    assert run(None)[2].sum() == S * cnt.sum()


@pytest.mark.parametrize("excluded", [False, True])
def test_split_word_tables_allocation_failure(excluded, sampler_failures):
    args, kw = _split_inputs(25, 70, 8, excluded=excluded)

    def run(_):
        return _split_fields(_gibbs_tables.split_word_tables(*args, 2, **kw))

    _check_sampler_failures("split_word_tables", dict, run, [])
    np.testing.assert_array_equal(run(None)[1], args[7])  # wlen: the words' listed topics


@pytest.mark.parametrize("sorted_words", [False, True])
@pytest.mark.parametrize("zero", [False, True])
def test_count_words_allocation_failure(zero, sorted_words, sampler_failures):
    # the per-thread scratch is the topic totals' (T_out)
    K, V = 6, 20
    lay, _, z0 = _sampler_corpus(V=V, K=K, seed=9)

    def make():
        return dict(W=np.full((V, K), 3, np.int32), T=np.full(K, 5, np.int64))

    def run(b):
        _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z0, b["W"], 2,
                            b["T"], zero=zero, sorted_words=sorted_words)
        return b["W"], b["T"]

    _check_sampler_failures("count_words", make, run, ["W", "T"])
    ref = np.zeros((V, K), np.int64)
    np.add.at(ref, (np.repeat(lay.indices, lay.cnt), z0.astype(np.int64)), 1)
    W, T = run(make())
    np.testing.assert_array_equal(W, ref + (0 if zero else 3))
    np.testing.assert_array_equal(T, ref.sum(axis=0) + 5)


@pytest.mark.parametrize("counts", [True, False])
def test_rb_doc_part_allocation_failure(counts, sampler_failures):
    K, V = 6, 20
    lay, _, z0 = _sampler_corpus(V=V, K=K, seed=10)
    beta, alpha = 0.1, np.full(K, 0.3)
    if counts:
        W = np.zeros((V, K), np.int32)
        _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z0, W, 1)
        w, inv = _E2F, 1.0 / (W.sum(axis=0) + V * beta)
    else:
        W, inv = _E2I, _E1
        w = np.random.default_rng(11).uniform(0.05, 1.0, (V, K)).astype(np.float32)
    A = np.empty(V)
    _rao_blackwell.rb_word_mass(W, w, inv, beta, alpha, A, 1)
    v0, n = 2, 15

    def make():
        return dict(out=np.full((n, K), 0.5), s=np.full(n, 0.25))

    def run(b):
        _rao_blackwell.rb_doc_part(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z0, W, w, inv,
                                   beta, alpha, A, b["out"], b["s"], v0, 2)
        return b["out"], b["s"]

    _check_sampler_failures("rb_doc_part", make, run, ["out", "s"])
    # with the prior part, every token of the words v0 .. v0 + n - 1 adds one distribution
    out, s = run(make())
    _rao_blackwell.rb_smooth_part(W, w, inv, beta, alpha, s - 0.25, out, v0, 1)
    tokens = np.bincount(lay.indices, weights=lay.cnt, minlength=V)[v0:v0 + n]
    np.testing.assert_allclose(out.sum(axis=1) - 0.5 * K, tokens, rtol=1e-9)


def test_sampler_allocation_failure_tests_cover_every_allocating_kernel():
    # the defs of the sampler modules that allocate per-thread scratch, directly or through
    # the document sweep: each has a test above (a new one needs its own)
    allocating = set()
    for module in _SAMPLER_MODULES:
        src = (Path(__file__).resolve().parents[1] / "sparseclust" / "_kernels"
               / f"{module.__name__.rsplit('.', 1)[1]}.pyx").read_text()
        for block in re.split(r"^(?=(?:def|cdef|cpdef) )", src, flags=re.M):
            m = re.match(r"def (\w+)\(", block)
            if m and ("sc_thread_malloc(" in block or "_run_docs(" in block):
                allocating.add((m.group(1), module.__name__))
    assert allocating == {(k, mod.__name__) for k, (mod, _) in _SAMPLER_MESSAGES.items()}
