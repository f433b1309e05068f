# SPDX-License-Identifier: BSD-3-Clause
"""The word tables of the hybrid (sampled) local step of SparseLDA: the dense word weights
of a minibatch's words from its lazily scaled variational statistics S = pi UT^T, exp(E[log
phi]) (``variational_word_weights``), or from the posterior mean of the topics without a
batch's own statistics, for a continued chain of memoized training (``mean_word_weights``);
the bit sets of the listed (non-zero) topics of every word (``positive_bits``, ``set_bits``,
``bit_counts``), the split word tables w_vk = s_v e_k + x_vk that
:func:`sparseclust._kernels._sampler.sample_sweep` reads without a (V, K) table
(``split_word_tables``), and the word-topic counts of the saved sweeps
(``count_word_topics``)."""

from collections import namedtuple

from cython.parallel cimport parallel, prange
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memset
from libc.math cimport INFINITY, exp, log
from scipy.special.cython_special cimport psi as sc_psi

from sparseclust._kernels._parallel cimport sc_set_alloc_fail_thread, sc_thread_malloc
from sparseclust._kernels._sampling cimport (
    _alias_row, _check_word_types, sc_ctz64, sc_digamma, sc_popcount64, sc_prefetch,
)

import numpy as np

from sparseclust._kernels._sampler import build_alias


def _fail_thread_allocations(int thread):
    """For tests of the out-of-memory path only (see sc_parallel.h)."""
    sc_set_alloc_fail_thread(thread)


def variational_word_weights(
    const double[:, ::1] UT,       # IN (V, K) lazily scaled statistics, word-major
    const int64_t[::1] cols,       # IN (n,) word types
    double pi,                     # IN the statistics' scale: S = pi UT^T
    double tau,                    # IN topic-word prior
    const double[::1] norm,        # IN (K,) psi(V tau + T_k)
    float[:, ::1] w,               # OUT (n, K)
    int n_threads,
):
    """Word weights of the sampled local step from lazily scaled statistics, one pass per
    word row: w[i, k] = exp(E[log phi_kv] - m_i), v = cols[i], with E[log phi_kv] =
    psi(tau + pi UT[v, k]) - norm_k and m_i its maximum over k (a per-word constant does not
    change the conditional of that word's tokens). psi is evaluated only where UT[v, k] > 0;
    elsewhere E[log phi_kv] = psi(tau) - norm_k and w = e0_k exp(c - m_i), a product, with
    c = max_k (psi(tau) - norm_k) and e0_k = exp(psi(tau) - norm_k - c): both factors are at
    most 1 (m_i >= c), so neither overflows nor underflows while their product is
    representable, however small tau is (psi(tau) is about -1 / tau)."""
    cdef Py_ssize_t n = cols.shape[0], i
    cdef int K = <int> UT.shape[1], k, fails = 0
    cdef int64_t v, V = UT.shape[0]
    cdef double psi_tau = sc_psi(tau), m, l, u, em, c
    cdef double* buf
    if norm.shape[0] != K or w.shape[0] != n or w.shape[1] != K:
        raise ValueError("inconsistent shapes")
    _check_word_types(cols, V)
    if n == 0 or K == 0:
        return
    c = psi_tau - float(np.min(norm))
    e0_ = np.exp(psi_tau - np.asarray(norm) - c)
    cdef const double[::1] e0 = e0_
    with nogil, parallel(num_threads=n_threads):
        buf = <double*> sc_thread_malloc(K * sizeof(double))
        for i in prange(n, schedule="static"):
            if buf == NULL:
                fails += 1
                continue
            v = cols[i]
            m = -INFINITY
            for k in range(K):
                u = UT[v, k]
                if u > 0.0:
                    l = sc_digamma(tau + pi * u) - norm[k]
                    buf[k] = l
                else:
                    l = psi_tau - norm[k]
                    buf[k] = INFINITY  # a zero entry: w = e0_k exp(c - m)
                if l > m:
                    m = l
            em = exp(c - m)
            for k in range(K):
                if buf[k] == INFINITY:
                    w[i, k] = <float> (e0[k] * em)
                else:
                    w[i, k] = <float> exp(buf[k] - m)
        free(buf)
    if fails:
        raise MemoryError("could not allocate the word-weight scratch space")


def mean_word_weights(
    const double[:, ::1] S,        # IN (K, V) topic-word statistics
    const int64_t[::1] cols,       # IN (n,) word types, ascending
    const int64_t[::1] ex_ptr,     # IN (V + 1,) excluded statistics E, CSC: column v's
    const int32_t[::1] ex_topics,  # IN       topics ex_topics[ex_ptr[v]:ex_ptr[v + 1]]
    const double[::1] ex_vals,     # IN       and values E_kv >= 0 (empty: none excluded)
    double tau,                    # IN topic-word prior
    const double[::1] lamsum,      # IN (K,) sum_v lambda^{-E}_kv
    float[:, ::1] w,               # OUT (n, K)
    int n_threads,
):
    """Word weights of the sampled local step from the posterior mean of the topics without
    the statistics E, one pass per word row: w[i, k] = (lambda_kv / lamsum_k) / m_i, v =
    cols[i], with lambda_kv = tau + max(S_kv - E_kv, 0) and m_i the row's maximum of
    lambda_kv / lamsum_k (a per-word constant does not change the conditional of that word's
    tokens), so every row's largest weight is 1."""
    cdef Py_ssize_t n = cols.shape[0], i
    cdef int K = <int> S.shape[0], k, fails = 0
    cdef int64_t v, V = S.shape[1], e
    cdef double m, l
    cdef double* buf
    cdef bint excl = ex_ptr.shape[0] > 0
    if lamsum.shape[0] != K or w.shape[0] != n or w.shape[1] != K:
        raise ValueError("inconsistent shapes")
    if excl and (ex_ptr.shape[0] != V + 1 or ex_topics.shape[0] != ex_vals.shape[0]
                 or ex_ptr[V] != ex_vals.shape[0]):
        raise ValueError("inconsistent shapes of the excluded statistics")
    _check_word_types(cols, V)
    for k in range(K):
        if not lamsum[k] > 0.0:
            raise ValueError("the topic totals must be positive")
    if excl:
        for i in range(ex_topics.shape[0]):
            if ex_topics[i] < 0 or ex_topics[i] >= K:
                raise ValueError("topic out of range")
    if n == 0 or K == 0:
        return
    with nogil, parallel(num_threads=n_threads):
        buf = <double*> sc_thread_malloc(K * sizeof(double))
        for i in prange(n, schedule="static"):
            if buf == NULL:
                fails += 1
                continue
            v = cols[i]
            for k in range(K):
                buf[k] = S[k, v]
            if excl:
                for e in range(ex_ptr[v], ex_ptr[v + 1]):
                    buf[ex_topics[e]] -= ex_vals[e]
            m = 0.0
            for k in range(K):
                l = buf[k]
                if l < 0.0:
                    l = 0.0
                l = (l + tau) / lamsum[k]
                buf[k] = l
                if l > m:
                    m = l
            for k in range(K):
                w[i, k] = <float> (buf[k] / m)
        free(buf)
    if fails:
        raise MemoryError("could not allocate the word-weight scratch space")


SplitTables = namedtuple(
    "SplitTables",
    "wptr wlen wtop wx wprob walias Qw sv wpre gcol bits e0 sprob salias Qs")
SplitTables.__doc__ = """The split word tables of :func:`split_word_tables` for
:func:`sample_sweep`, over the n word types ``gcol`` of a minibatch: w_vk = sv_v e0_k + x_vk.

wptr (n + 1,) int64, wlen (n,) int32: word i's listed topics are wtop[wptr[i]:wptr[i + 1]]
(ascending), with excesses wx (same positions; one padding entry at the end) and the alias
table wprob / walias over alpha_k x_vk, of mass Qw[i]; sv (n,): the words' scales; wpre (n,
nw) int32: listed topics before each 64-bit word of the word's row of ``bits`` (the global
(V_all, nw) bit sets); e0 (K,); sprob / salias: the shared alias table over alpha_k e0_k, of
mass Qs."""


def digamma(const double[::1] x):  # IN (n,) > 0
    """psi(x) of the kernel's weight builders (``sc_digamma``), for tests against scipy."""
    out = np.empty(x.shape[0])
    cdef double[::1] o = out
    cdef Py_ssize_t i
    for i in range(x.shape[0]):
        o[i] = sc_digamma(x[i])
    return out


def positive_bits(
    const double[:, ::1] UT,       # IN (V, K)
    uint64_t[:, ::1] bits,         # OUT (V, ceil(K / 64)) bit k & 63 of word k >> 6: UT > 0
    int n_threads,
):
    """The bit sets of the positive entries of every row of UT."""
    cdef Py_ssize_t V = UT.shape[0], v
    cdef int K = <int> UT.shape[1], k, nw = <int> bits.shape[1], j
    cdef uint64_t b
    if bits.shape[0] != V or nw != (K + 63) // 64:
        raise ValueError("inconsistent shapes")
    if V == 0:
        return
    with nogil:
        for v in prange(V, schedule="static", num_threads=n_threads):
            for j in range(nw):
                b = 0
                for k in range(j * 64, min(K, j * 64 + 64)):
                    if UT[v, k] > 0.0:
                        b = b | ((<uint64_t> 1) << (k - j * 64))
                bits[v, j] = b


def set_bits(
    uint64_t[:, ::1] bits,         # INOUT (V, nw)
    const int32_t[::1] topics,     # IN (m,) k
    const int32_t[::1] words,      # IN (m,) v
):
    """Set bit (v, k) for every pair (topics[i], words[i])."""
    cdef Py_ssize_t m = topics.shape[0], i
    cdef int k, v, V = <int> bits.shape[0], nw = <int> bits.shape[1]
    if words.shape[0] != m:
        raise ValueError("inconsistent shapes")
    for i in range(m):
        k = topics[i]
        v = words[i]
        if v < 0 or v >= V or k < 0 or k >= 64 * nw:
            raise ValueError("bit out of range")
        bits[v, k >> 6] |= (<uint64_t> 1) << (k & 63)


def bit_counts(
    const uint64_t[:, ::1] bits,   # IN (V_all, nw)
    const int64_t[::1] cols,       # IN (n,) rows
    int32_t[::1] out,              # OUT (n,) set bits of each row
):
    """The number of set bits of the rows ``cols``."""
    cdef Py_ssize_t n = cols.shape[0], i
    cdef int j, nw = <int> bits.shape[1], c
    if out.shape[0] != n:
        raise ValueError("inconsistent shapes")
    _check_word_types(cols, bits.shape[0])
    with nogil:
        for i in range(n):
            c = 0
            for j in range(nw):
                c = c + sc_popcount64(bits[cols[i], j])
            out[i] = c


def split_word_tables(
    const double[:, ::1] UT,       # IN (V_all, K) lazily scaled statistics, word-major
    const uint64_t[:, ::1] bits,   # IN (V_all, nw) a superset of the bit sets of UT > 0
    const int64_t[::1] cols,       # IN (n,) word types
    double pi,                     # IN the statistics' scale: S = pi UT^T
    double tau,                    # IN topic-word prior
    const double[::1] norm,        # IN (K,) psi(V tau + T_k)
    const double[::1] alpha,       # IN (K,)
    const int32_t[::1] nnz,        # IN (n,) set bits of the rows (bit_counts)
    int n_threads,
    bint mean=False,               # IN log posterior mean instead of E[log phi]
    const int64_t[::1] ex_ptr=None,  # IN (n + 1,) word i's excluded statistics are
    const int32_t[::1] ex_top=None,  # IN   ex_val[ex_ptr[i]:ex_ptr[i + 1]] of the topics
    const double[::1] ex_val=None,   # IN   ex_top[...] (S units, >= 0), or None
):
    """The split word tables (:class:`SplitTables`) of the sampled local step from lazily
    scaled statistics, in O(K / 64 + listed topics) per word (no O(K) pass).

    With E[log phi_kv] = psi(tau + pi UT[v, k]) - norm_k, e0_k = exp(psi(tau) - norm_k) (the
    value where UT[v, k] = 0) and m_v the maximum of log e0 and of E[log phi_kv] over the
    listed topics (any per-word constant leaves the conditional of the word's tokens
    unchanged; m_v bounds every exponent of the row), the weights exp(E[log phi_kv] - m_v)
    are s_v e0_k + x_vk with s_v = exp(c - m_v) and x_vk = exp(E[log phi_kv] - m_v) - s_v e0_k,
    > 0 only on the listed topics (those of the word's bit set). psi is evaluated there
    only. The prior's shares are stored scaled by c = max_k log e0_k, e0_k = exp(psi(tau) -
    norm_k - c) <= 1 (and s_v <= 1), so a small tau (psi(tau) is about -1 / tau) neither
    underflows the shared table nor overflows s_v; s_v is 0 only where the prior's share is
    negligible against the word's listed topics.

    With ``mean``, log E[phi_kv] = log(tau + S_kv) - norm_k (norm_k = log(V tau + T_k)) takes
    the place of E[log phi_kv] (and log tau that of psi(tau)): the posterior mean, which is
    exactly e0_k + x_vk with x_vk = S_kv / (V tau + T_k). With the excluded statistics
    (``ex_ptr``, ``ex_top``, ``ex_val``), S_kv = max(pi UT[v, k] - ex_kv, 0) (the caller
    gives ``norm`` of the totals with the same exclusion); an excluded entry lies in the
    word's bit set or is ignored (its statistics are then 0 already)."""
    cdef Py_ssize_t n = cols.shape[0], i
    cdef int K = <int> UT.shape[1], nw = <int> bits.shape[1], k, j, ln, fails = 0
    cdef int64_t v, off, e
    cdef uint64_t b
    cdef double psi_tau = log(tau) if mean else sc_psi(tau), lmax0 = -INFINITY, l, m, q, x
    cdef double sv_i, u
    cdef bint has_ex = ex_ptr is not None
    cdef double* p
    cdef double* sc
    cdef double* exd
    cdef int32_t* small
    cdef int32_t* large
    cdef int32_t* al
    if (norm.shape[0] != K or alpha.shape[0] != K or bits.shape[0] != UT.shape[0]
            or nw != (K + 63) // 64 or nnz.shape[0] != n):
        raise ValueError("inconsistent shapes")
    _check_word_types(cols, UT.shape[0])
    if has_ex:
        if ex_top is None or ex_val is None or ex_ptr.shape[0] != n + 1:
            raise ValueError("inconsistent shapes")
        if (ex_ptr[0] != 0 or ex_top.shape[0] != ex_ptr[n] or ex_val.shape[0] != ex_ptr[n]
                or np.any(np.diff(ex_ptr) < 0)):
            raise ValueError("inconsistent exclusion lists")
        if ex_top.shape[0] and (np.min(ex_top) < 0 or np.max(ex_top) >= K):
            raise ValueError("excluded topic out of range")
    for k in range(K):
        if psi_tau - norm[k] > lmax0:
            lmax0 = psi_tau - norm[k]
    e0_ = np.exp(psi_tau - np.asarray(norm) - lmax0)
    cdef const double[::1] e0 = e0_
    wptr_ = np.zeros(n + 1, np.int64)
    np.cumsum(nnz, out=wptr_[1:])
    cdef const int64_t[::1] wptr = wptr_
    cdef int64_t tot = wptr_[n]
    wlen_ = np.empty(n, np.int32)
    wtop_ = np.empty(tot, np.int32)
    wx_ = np.zeros(tot + 1, np.float32)  # (one padding entry, see _split_weight)
    wprob_ = np.empty(tot, np.float32)
    walias_ = np.empty(tot, np.int32)
    Qw_ = np.empty(n)
    sv_ = np.empty(n)
    wpre_ = np.empty((n, nw), np.int32)
    cdef int32_t[::1] wlen = wlen_
    cdef int32_t[::1] wtop = wtop_
    cdef float[::1] wx = wx_
    cdef float[::1] wprob = wprob_
    cdef int32_t[::1] walias = walias_
    cdef double[::1] Qw = Qw_
    cdef double[::1] sv = sv_
    cdef int32_t[:, ::1] wpre = wpre_
    if n > 0 and K > 0:
        with nogil, parallel(num_threads=n_threads):
            p = <double*> sc_thread_malloc(K * sizeof(double))
            sc = <double*> sc_thread_malloc(K * sizeof(double))
            small = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
            large = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
            al = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
            exd = <double*> sc_thread_malloc(K * sizeof(double)) if has_ex else NULL
            if exd != NULL:
                memset(exd, 0, K * sizeof(double))
            for i in prange(n, schedule="static"):
                if (p == NULL or sc == NULL or small == NULL or large == NULL or al == NULL
                        or (has_ex and exd == NULL)):
                    fails += 1
                    continue
                if has_ex:
                    for e in range(ex_ptr[i], ex_ptr[i + 1]):
                        exd[ex_top[e]] = exd[ex_top[e]] + ex_val[e]
                v = cols[i]
                off = wptr[i]
                ln = 0
                m = lmax0
                # the listed topics first, their statistics fetched ahead (scattered over
                # the row: one cache miss each, overlapped instead of one per psi)
                for j in range(nw):
                    wpre[i, j] = ln
                    b = bits[v, j]
                    while b != 0 and ln < nnz[i]:
                        k = j * 64 + sc_ctz64(b)
                        b = b & (b - 1)
                        sc_prefetch(&UT[v, k], 1)
                        wtop[off + ln] = k
                        ln = ln + 1
                for j in range(ln):
                    k = wtop[off + j]
                    u = pi * max(UT[v, k], 0.0)
                    if has_ex:
                        u = max(u - exd[k], 0.0)
                    if mean:
                        l = log(tau + u) - norm[k]
                    else:
                        l = sc_digamma(tau + u) - norm[k]
                    p[j] = l
                    if l > m:
                        m = l
                sv_i = exp(lmax0 - m)
                sv[i] = sv_i
                q = 0.0
                for j in range(ln):
                    k = wtop[off + j]
                    x = exp(p[j] - m) - sv_i * e0[k]
                    if x < 0.0:
                        x = 0.0
                    wx[off + j] = <float> x
                    p[j] = alpha[k] * x
                    q = q + p[j]
                wlen[i] = ln
                Qw[i] = q
                if ln > 0 and q > 0.0:
                    _alias_row(p, ln, &wprob[off], al, sc, small, large)
                    for j in range(ln):
                        walias[off + j] = wtop[off + al[j]]
                else:
                    for j in range(ln):
                        wprob[off + j] = 1.0
                        walias[off + j] = wtop[off + j]
                if has_ex:
                    for e in range(ex_ptr[i], ex_ptr[i + 1]):
                        exd[ex_top[e]] = 0.0
            free(p)
            free(sc)
            free(small)
            free(large)
            free(al)
            free(exd)
    if fails:
        raise MemoryError("could not allocate the split-table scratch space")
    if np.any(wlen_ != np.asarray(nnz)):
        raise ValueError("nnz does not count the bits of the rows")
    sprob_ = np.empty((1, K), np.float32)
    salias_ = np.empty((1, K), np.int32)
    Qs_ = np.empty(1)
    build_alias(e0_.astype(np.float32)[None, :], alpha, sprob_, salias_, Qs_, 1)
    return SplitTables(wptr_, wlen_, wtop_, wx_, wprob_, walias_, Qw_, sv_, wpre_,
                       np.ascontiguousarray(cols, dtype=np.int64), np.asarray(bits), e0_,
                       sprob_[0], salias_[0], float(Qs_[0]))


def count_word_topics(
    const int32_t[::1] indices,    # IN (nnz,) word of every entry, in [0, n_words)
    const int32_t[::1] cnt,        # IN (nnz,) tokens per entry (>= 0)
    const int32_t[:, ::1] zsave,   # IN (n_tokens, S) topics of every saved sweep, entry order
    int n_words,
    int K,
    int n_threads=1,
):
    """The word-topic counts of the saved sweeps of :func:`sample_sweep` (``zsave``, a row of S
    topics per token), word by word: returns ``(jptr, topics, counts)`` with word j's topics
    (distinct, in order of first draw: token by token, each token's sweeps in order) and their
    counts at jptr[j]:jptr[j + 1]. O(tokens x sweeps + words), with no (V, K) table: the
    tokens are grouped by word (a counting sort), then the words are counted in parallel, each
    by one thread in one (K,) array of that thread that is reset after each word, into a
    region of the output of min(K, tokens x S) entries, and the regions are packed in word
    order: the result does not depend on ``n_threads``. A token's S topics are one contiguous
    row, so counting a word reads one row per token."""
    cdef Py_ssize_t m = indices.shape[0], j
    cdef int64_t n_tok = zsave.shape[0], t, qq, o = 0, base, e
    cdef int S = <int> zsave.shape[1], s, nl, c, r, k, v
    cdef int bad = 0, fails = 0
    cdef int32_t* mark
    cdef int32_t* lst
    cdef const int32_t* zrow
    if cnt.shape[0] != m:
        raise ValueError("inconsistent shapes")
    start_ = np.zeros(n_words + 1, np.int64)
    region_ = np.zeros(n_words + 1, np.int64)
    cdef int64_t[::1] start = start_
    cdef int64_t[::1] region = region_
    t = 0
    for j in range(m):
        v = indices[j]
        c = cnt[j]
        if c > 0:
            if v < 0 or v >= n_words:
                raise ValueError("word id out of range")
            start[v + 1] += c
            t += c
    if t != n_tok:
        raise ValueError("zsave does not hold the tokens of cnt")
    for v in range(n_words):
        # a word's distinct topics: at most K, and at most one per token and sweep
        region[v + 1] = region[v] + min(<int64_t> K, start[v + 1] * S)
    np.cumsum(start_, out=start_)
    fill_ = start_[:n_words].copy()
    perm_ = np.empty(n_tok, np.int64)
    nlist_ = np.zeros(n_words, np.int32)
    jptr_ = np.zeros(n_words + 1, np.int64)
    top_ = np.empty(region[n_words], np.int32)
    val_ = np.empty(region[n_words], np.int32)
    cdef int64_t[::1] fill = fill_
    cdef int64_t[::1] perm = perm_
    cdef int32_t[::1] nlist = nlist_
    cdef int64_t[::1] jptr = jptr_
    cdef int32_t[::1] top = top_
    cdef int32_t[::1] val = val_
    with nogil:
        t = 0
        for j in range(m):
            v = indices[j]
            for r in range(cnt[j]):
                perm[fill[v]] = t
                fill[v] += 1
                t += 1
    if n_words > 0 and K > 0 and S > 0:
        with nogil, parallel(num_threads=n_threads):
            mark = <int32_t*> sc_thread_malloc(2 * <size_t> K * sizeof(int32_t))
            lst = mark + K if mark != NULL else NULL
            if mark != NULL:
                memset(mark, 0, K * sizeof(int32_t))
            for v in prange(n_words, schedule="dynamic", chunksize=64):
                if mark == NULL:
                    fails += 1
                    continue
                nl = 0
                for qq in range(start[v], start[v + 1]):
                    zrow = &zsave[perm[qq], 0]
                    for s in range(S):
                        k = zrow[s]
                        if k < 0 or k >= K:
                            bad += 1
                            continue
                        if mark[k] == 0:
                            lst[nl] = k
                            nl = nl + 1
                        mark[k] += 1
                base = region[v]
                for r in range(nl):
                    k = lst[r]
                    top[base + r] = k
                    val[base + r] = mark[k]
                    mark[k] = 0
                nlist[v] = nl
            free(mark)
    if fails:
        raise MemoryError("could not allocate the word-count scratch space")
    if bad:
        raise ValueError("topic out of range")
    with nogil:
        # pack the regions in word order (o <= base: an ascending copy is safe)
        for v in range(n_words):
            base = region[v]
            for e in range(nlist[v]):
                top[o + e] = top[base + e]
                val[o + e] = val[base + e]
            o += nlist[v]
            jptr[v + 1] = o
    return jptr_, top_[:o], val_[:o]
