# SPDX-License-Identifier: BSD-3-Clause
"""Token utilities of the samplers: the token layout of a count matrix (``token_counts``),
the documents' random-stream keys (``content_keys``) and streams (``uniform_stream``), the
uniform initial assignment (``random_assign``) and the word-topic counts of an assignment
(``count_words``, with ``rows_sorted``; ``move_counts`` from one assignment to another)."""

from cython.parallel cimport prange
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memset
from libc.math cimport floor as libc_floor

from sparseclust._kernels._parallel cimport sc_set_alloc_fail_thread, sc_thread_malloc
from sparseclust._kernels._sampling cimport (
    _check_layout, _check_topics, _check_word_ids, sc_prefetch, sc_splitmix64, sc_stream_key,
    sc_uniform, zint_t,
)

import numpy as np


def _fail_thread_allocations(int thread):
    """For tests of the out-of-memory path only (see sc_parallel.h)."""
    sc_set_alloc_fail_thread(thread)


cdef enum:
    # count_words prefetches the counts of the entry this many entries ahead
    _COUNT_AHEAD = 8


ctypedef fused real_t:
    float
    double


def token_counts(
    const int64_t[::1] indptr,     # IN (D + 1,) CSR row pointers
    const real_t[::1] data,        # IN (nnz,) counts
    int32_t[::1] cnt,              # OUT (nnz,) floor(data + 0.5)
    int64_t[::1] tokptr,           # OUT (D + 1,) token offsets of the documents
):
    """Tokens per entry (the counts rounded half up) and their offsets per document, without
    temporaries of the size of the corpus.  Returns False if a count exceeds 2**31 - 1."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, d
    cdef int64_t j, tot = 0
    cdef double c
    cdef bint ok = True
    if data.shape[0] != cnt.shape[0] or tokptr.shape[0] != D + 1:
        raise ValueError("inconsistent shapes")
    with nogil:
        tokptr[0] = 0
        for d in range(D):
            for j in range(indptr[d], indptr[d + 1]):
                c = libc_floor(<double> data[j] + 0.5)
                if c > 2147483647.0:
                    ok = False
                    c = 0.0
                cnt[j] = <int32_t> c
                tot += <int32_t> c
            tokptr[d + 1] = tot
    return ok


def random_assign(
    const int64_t[::1] tokptr,     # IN (D + 1,)
    zint_t[::1] z,                 # OUT (n_tokens,)
    const uint64_t[::1] keys,      # IN (D,)
    uint64_t seed,
    int K,
    int n_threads,
):
    """z uniform over the K topics, from the stream (seed, 0, key[d]) of each document.
    ValueError unless tokptr is non-decreasing from tokptr[0] == 0 ("inconsistent token
    layout"), the offsets of :func:`token_counts`."""
    cdef Py_ssize_t D = tokptr.shape[0] - 1, d
    cdef int64_t t
    cdef uint64_t state
    cdef int bad = 0
    if D < 0 or keys.shape[0] != D or tokptr[D] != z.shape[0]:
        raise ValueError("inconsistent shapes")
    with nogil:
        bad = tokptr[0] != 0
        for d in range(D):
            bad = bad | (tokptr[d + 1] < tokptr[d])
    if bad:
        raise ValueError("inconsistent token layout")
    if z.shape[0] == 0:
        return
    with nogil:
        for d in prange(D, schedule="static", num_threads=n_threads):
            state = sc_stream_key(seed, 0, keys[d])
            for t in range(tokptr[d], tokptr[d + 1]):
                z[t] = <zint_t> (<int> (sc_uniform(&state) * K) % K)


cdef inline int64_t _first_at_least(const int32_t[::1] indices, int64_t lo, int64_t hi,
                                    int v) noexcept nogil:
    """First j in [lo, hi) with indices[j] >= v (indices increasing there), else hi."""
    cdef int64_t mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if indices[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline void _count_entry(int32_t* Wrow, const zint_t* zt, int c,
                              int64_t* tb) noexcept nogil:
    """Count the c topics zt[0:c] of one entry into its word's row (and the totals tb)."""
    cdef int r, k
    for r in range(c):
        k = zt[r]
        Wrow[k] += 1
        if tb != NULL:
            tb[k] += 1


def rows_sorted(const int64_t[::1] indptr, const int32_t[::1] indices):
    """True if the word ids strictly increase within every document (one pass, no
    temporaries)."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, d
    cdef int64_t j
    cdef bint ok = True
    with nogil:
        for d in range(D):
            for j in range(indptr[d] + 1, indptr[d + 1]):
                if indices[j] <= indices[j - 1]:
                    ok = False
                    break
            if not ok:
                break
    return ok


def count_words(
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const int32_t[::1] cnt,
    const int64_t[::1] tokptr,
    const zint_t[::1] z,
    int32_t[:, ::1] Wout,          # INOUT (V, K) += word-topic counts of z
    int n_threads,
    int64_t[::1] T_out=None,       # INOUT (K,) += topic totals of z, or None
    bint zero=False,               # Wout = (not +=) the counts: each thread zeroes its rows
    bint sorted_words=False,       # the word ids increase within every document (rows_sorted)
):
    """Word-topic counts of the assignments z (and, with ``T_out``, their topic totals, so
    that the caller need not sum the (V, K) counts).  With ``zero`` the counts replace Wout's
    contents; each thread zeroes its own block of rows first, so clearing the (V, K) array
    is not a serial step before the count.  With ``sorted_words`` (word ids increasing within
    every document, :func:`rows_sorted`) a thread finds its block's entries of a document by
    binary search instead of testing every entry.

    With several threads each thread owns a block of words and scans all entries for its
    words' tokens: no two threads write the same row, so no atomic increments are needed
    (atomic increments on the contended rows of frequent words would cost more than the
    scan of the other threads' entries).  Integer sums: the same for any number of threads.

    Checked first (ValueError, nothing written): the token layout is that of
    :func:`token_counts` (see :func:`sample_sweep`), every z is a topic < K, every word id is
    a row of Wout, and with ``sorted_words`` the word ids do increase within every document
    (an unsorted row would send a thread outside its block of rows)."""
    cdef Py_ssize_t D = indptr.shape[0] - 1
    cdef int K = <int> Wout.shape[1], V = <int> Wout.shape[0], r, b, nb, lo, hi, v, k, fails = 0
    cdef int64_t j, t, j0, j1, jlo, jhi, tq
    cdef Py_ssize_t d
    cdef int64_t* tb
    cdef int64_t* T = NULL
    if D < 0 or tokptr.shape[0] != D + 1 or indices.shape[0] != cnt.shape[0] \
            or tokptr[D] != z.shape[0]:
        raise ValueError("inconsistent shapes")
    if T_out is not None:
        if T_out.shape[0] != K:
            raise ValueError("T_out must have shape (K,)")
        if K > 0:
            T = &T_out[0]
    _check_layout(indptr, cnt, tokptr, z.shape[0])
    _check_topics(z, K)  # the columns of Wout's rows
    _check_word_ids(indices, V)  # the rows of Wout
    if sorted_words and not rows_sorted(indptr, indices):
        raise ValueError("sorted_words needs word ids increasing within every document")
    if V == 0 or K == 0:
        return
    if z.shape[0] == 0:
        if zero:
            memset(&Wout[0, 0], 0, (<size_t> V) * K * sizeof(int32_t))
        return
    nb = max(1, min(n_threads, V))
    with nogil:
        for b in prange(nb, schedule="static", chunksize=1, num_threads=nb):
            lo = <int> ((<int64_t> V * b) // nb)
            hi = <int> ((<int64_t> V * (b + 1)) // nb)
            tb = NULL
            if T != NULL:
                tb = <int64_t*> sc_thread_malloc(K * sizeof(int64_t))
                if tb == NULL:
                    # no scratch for the block's totals: its rows are neither cleared nor
                    # counted (MemoryError after the loop), not counted without their totals
                    fails += 1
                    continue
                memset(tb, 0, K * sizeof(int64_t))
            if zero and hi > lo:
                memset(&Wout[lo, 0], 0, (<size_t> (hi - lo)) * K * sizeof(int32_t))
            if sorted_words:
                for d in range(D):
                    j0 = indptr[d]
                    j1 = indptr[d + 1]
                    jlo = _first_at_least(indices, j0, j1, lo)
                    jhi = _first_at_least(indices, jlo, j1, hi)
                    if jlo == jhi:
                        continue
                    # the block's first token, counted from the nearer end of the document
                    if jlo - j0 <= j1 - jhi:
                        t = tokptr[d]
                        for j in range(j0, jlo):
                            t = t + cnt[j]
                    else:
                        t = tokptr[d + 1]
                        for j in range(jlo, j1):
                            t = t - cnt[j]
                    # tq: the first token of entry j + _COUNT_AHEAD, whose counts are
                    # prefetched (the increments land in rows far apart)
                    tq = t
                    for j in range(jlo, min(jlo + _COUNT_AHEAD, jhi)):
                        tq = tq + cnt[j]
                    for j in range(jlo, jhi):
                        if j + _COUNT_AHEAD < jhi:
                            for r in range(cnt[j + _COUNT_AHEAD]):
                                sc_prefetch(&Wout[indices[j + _COUNT_AHEAD], z[tq + r]], 1)
                            tq = tq + cnt[j + _COUNT_AHEAD]
                        _count_entry(&Wout[indices[j], 0], &z[0] + t, cnt[j], tb)
                        t = t + cnt[j]
            else:
                t = tokptr[0]
                for j in range(indptr[0], indptr[D]):
                    v = indices[j]
                    if v >= lo and v < hi:
                        _count_entry(&Wout[v, 0], &z[0] + t, cnt[j], tb)
                    t = t + cnt[j]
            if tb != NULL:
                with gil:
                    for k in range(K):
                        T[k] += tb[k]
                free(tb)
    if fails:
        raise MemoryError("could not allocate the counting scratch space")


def move_counts(
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const int32_t[::1] cnt,
    const int64_t[::1] tokptr,
    const zint_t[::1] z_old,
    const zint_t[::1] z_new,
    int32_t[:, ::1] W,             # INOUT (V, K): the counts of z_old in, of z_new out
    int64_t[::1] T,                # INOUT (K,): their topic totals
):
    """Move the word-topic counts W and topic totals T of the tokens of a layout from their
    assignments ``z_old`` to ``z_new``: every token whose topic changed takes one count from
    (v, z_old) and gives it to (v, z_new). W and T must hold the tokens' counts under z_old
    (with those of any other tokens); they then hold them under z_new, the integers
    ``count_words`` would give. Serial: one pass over the tokens, writing only where a topic
    changed.

    Checked first (ValueError, nothing written): the token layout (see :func:`count_words`),
    z_old and z_new of the layout's length with every topic < K, every word id a row of W,
    and T of length K. That W and T hold z_old's counts is the caller's contract, not
    checked."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, d
    cdef int K = <int> W.shape[1], V = <int> W.shape[0], r, a, b, v
    cdef int64_t j, t
    if D < 0 or tokptr.shape[0] != D + 1 or indices.shape[0] != cnt.shape[0] \
            or tokptr[D] != z_old.shape[0] or z_new.shape[0] != z_old.shape[0]:
        raise ValueError("inconsistent shapes")
    if T.shape[0] != K:
        raise ValueError("T must have shape (K,)")
    _check_layout(indptr, cnt, tokptr, z_old.shape[0])
    _check_topics(z_old, K)
    _check_topics(z_new, K)
    _check_word_ids(indices, V)
    if z_old.shape[0] == 0:
        return
    with nogil:
        t = 0
        for j in range(indptr[0], indptr[D]):
            v = indices[j]
            for r in range(cnt[j]):
                a = z_old[t]
                b = z_new[t]
                if a != b:
                    W[v, a] -= 1
                    W[v, b] += 1
                    T[a] -= 1
                    T[b] += 1
                t = t + 1


def content_keys(
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const int32_t[::1] cnt,
):
    """A 64-bit hash of every document's (word, count) entries: the stream key of fold-in, so
    a document's draws do not depend on its position in the matrix."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, d
    cdef int64_t j
    cdef uint64_t h, s
    out = np.empty(D, dtype=np.uint64)
    cdef uint64_t[::1] o = out
    with nogil:
        for d in range(D):
            h = 0x243F6A8885A308D3ULL
            for j in range(indptr[d], indptr[d + 1]):
                if cnt[j] <= 0:
                    continue
                s = h ^ <uint64_t> indices[j]
                h = sc_splitmix64(&s)
                s = h ^ <uint64_t> cnt[j]
                h = sc_splitmix64(&s)
            o[d] = h
    return out


def uniform_stream(uint64_t seed, uint64_t sweep, uint64_t key, Py_ssize_t n):
    """The first n uniforms of the stream keyed by (seed, sweep, key) (for reference code)."""
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] o = out
    cdef uint64_t state = sc_stream_key(seed, sweep, key)
    cdef Py_ssize_t i
    for i in range(n):
        o[i] = sc_uniform(&state)
    return out
