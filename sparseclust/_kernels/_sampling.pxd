# SPDX-License-Identifier: BSD-3-Clause
# Declarations shared by the token-sampler kernels (_sampler, _sem_tables, _gibbs_tables,
# _rao_blackwell, _tokens): the per-document random streams of sc_sampler.h, the fused integer
# types of the assignments and tables, the log-gamma lookup table, Vose's alias table, the
# binary and linear searches of a cumulative sum, and the checks of the token layout.  All
# inline: every module compiles its own copy, and the hot loops keep them inlined.

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from scipy.special.cython_special cimport gammaln

cdef extern from "sc_sampler.h" nogil:
    uint64_t sc_splitmix64(uint64_t* state)
    uint64_t sc_stream_key(uint64_t seed, uint64_t sweep, uint64_t key)
    double sc_uniform(uint64_t* state)
    void sc_atomic_add_i32(int32_t* p, int32_t v)
    void sc_prefetch(const void* p, long n)
    int sc_popcount64(uint64_t x)
    int sc_ctz64(uint64_t x)
    double sc_digamma(double x)

ctypedef fused zint_t:
    uint8_t
    uint16_t
    uint32_t

ctypedef fused tab_t:
    uint16_t
    int32_t

#: entries of the log-gamma lookup tables of the log joint: lgamma(c + a) - lgamma(a) for the
#: integer counts c < _LG_TAB (computed with the same gammaln, so the values are identical)
cdef enum:
    _LG_TAB = 4096


cdef inline void _lg_table(double a, double* tab) noexcept nogil:
    cdef double lga = gammaln(a)
    cdef int c
    tab[0] = 0.0
    for c in range(1, _LG_TAB):
        tab[c] = gammaln(c + a) - lga


cdef inline int _search(const double* cum, int n, double u) noexcept nogil:
    """First i with cum[i] > u (cum non-decreasing), clamped to n - 1."""
    cdef int lo = 0, hi = n - 1, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if cum[mid] > u:
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef inline int _scan(const double* cum, int n, double u) noexcept nogil:
    """Linear version of _search, for the short document-topic lists."""
    cdef int i
    for i in range(n - 1):
        if cum[i] > u:
            return i
    return n - 1


cdef inline int _alias_row(const double* p, int K, float* prob, int32_t* alias, double* s,
                           int32_t* small, int32_t* large) noexcept nogil:
    """Vose's alias table of the non-negative weights p[0:K] (not all zero)."""
    cdef double tot = 0.0
    cdef int k, ns = 0, nl = 0, l, g
    for k in range(K):
        tot += p[k]
    for k in range(K):
        s[k] = p[k] * K / tot
        if s[k] < 1.0:
            small[ns] = k
            ns += 1
        else:
            large[nl] = k
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        l = small[ns]
        nl -= 1
        g = large[nl]
        prob[l] = <float> s[l]
        alias[l] = g
        s[g] = (s[g] + s[l]) - 1.0
        if s[g] < 1.0:
            small[ns] = g
            ns += 1
        else:
            large[nl] = g
            nl += 1
    while nl > 0:
        nl -= 1
        prob[large[nl]] = 1.0
        alias[large[nl]] = large[nl]
    while ns > 0:  # left over by rounding: probability 1 up to rounding
        ns -= 1
        prob[small[ns]] = 1.0
        alias[small[ns]] = small[ns]
    return 0


cdef inline int _check_word_ids(const int32_t[::1] indices, int64_t V) except -1:
    """ValueError unless every word id of ``indices`` is in [0, V), a row of the (V, K) weight
    or count table: every entry's, also of entries with no tokens (the sweep reads ahead at
    the next entry's row)."""
    cdef Py_ssize_t j
    cdef int bad = 0
    with nogil:
        for j in range(indices.shape[0]):
            bad = bad | (indices[j] < 0) | (indices[j] >= V)
    if bad:
        raise ValueError("word id out of range")
    return 0


cdef inline int _check_topics(const zint_t[::1] z, int K) except -1:
    """ValueError unless every topic of ``z`` is < K (z read as topics: the counts n_dk, the
    rows' columns of count_words and rb_doc_part)."""
    cdef Py_ssize_t t
    cdef int bad = 0
    with nogil:
        for t in range(z.shape[0]):
            bad = bad | (<int64_t> z[t] >= K)
    if bad:
        raise ValueError("topic out of range")
    return 0


cdef inline int _check_layout(const int64_t[::1] indptr, const int32_t[::1] cnt,
                       const int64_t[::1] tokptr, Py_ssize_t n_tok) except -1:
    """ValueError unless (indptr, cnt, tokptr) is a token layout as :func:`token_counts` builds
    it for ``n_tok`` tokens, the invariant every kernel walking the tokens through tokptr
    relies on: indptr non-decreasing within [0, nnz] ("indptr must be non-decreasing within
    [0, nnz]"), the documents' entries' counts >= 0 ("token counts must be >= 0"), and
    tokptr[0] == 0, tokptr[d + 1] - tokptr[d] the sum of document d's counts, tokptr[D] ==
    n_tok ("inconsistent token layout").  One O(D + nnz) scan."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, d
    cdef int64_t nnz = cnt.shape[0], j, tot
    cdef int bad = 0
    if D < 0 or tokptr.shape[0] != D + 1:
        raise ValueError("inconsistent token layout")
    with nogil:
        if indptr[0] < 0 or indptr[D] > nnz:
            bad = 1
        for d in range(D):
            if indptr[d + 1] < indptr[d]:
                bad = 1
                break
        if not bad:
            if tokptr[0] != 0 or tokptr[D] != n_tok:
                bad = 3
            for d in range(D):
                tot = 0
                for j in range(indptr[d], indptr[d + 1]):
                    if cnt[j] < 0:
                        bad = 2
                    tot += cnt[j]
                if bad == 2:
                    break
                if tokptr[d + 1] - tokptr[d] != tot:
                    bad = 3
    if bad == 1:
        raise ValueError("indptr must be non-decreasing within [0, nnz]")
    if bad == 2:
        raise ValueError("token counts must be >= 0")
    if bad == 3:
        raise ValueError("inconsistent token layout")
    return 0


cdef inline int _check_word_types(const int64_t[::1] cols, int64_t V) except -1:
    """ValueError unless every word type of ``cols`` is in [0, V)."""
    cdef Py_ssize_t i
    for i in range(cols.shape[0]):
        if cols[i] < 0 or cols[i] >= V:
            raise ValueError("word type out of range")
    return 0
