# SPDX-License-Identifier: BSD-3-Clause
"""The tables of stochastic EM's counts path, built once per sweep from the read buffer W (the
word-topic counts of the previous sweep): the per-word alias tables over the non-zero counts
and the shared smoothing table of :func:`sparseclust._kernels._sampler.sample_sweep_counts`
(``build_word_tables``), the dense word weights (``sem_word_weights``), and the words' terms of
the log joint log p(x | z, beta) (``word_loglik``)."""

from cython.parallel cimport parallel, prange
from libc.stdint cimport int32_t, int64_t, uint16_t
from libc.stdlib cimport free
from scipy.special.cython_special cimport gammaln

from sparseclust._kernels._parallel cimport sc_set_alloc_fail_thread, sc_thread_malloc
from sparseclust._kernels._sampling cimport _LG_TAB, _alias_row, _lg_table, tab_t

import numpy as np


def _fail_thread_allocations(int thread):
    """For tests of the out-of-memory path only (see sc_parallel.h)."""
    sc_set_alloc_fail_thread(thread)


def build_word_tables(
    const int32_t[:, ::1] W,       # IN (V, K) word-topic counts (read buffer), >= 0
    const double[::1] inv_tot,     # IN (K,) 1 / (T_k + V beta)
    double beta,
    const double[::1] alpha,       # IN (K,) alpha_k > 0
    const int64_t[::1] wptr,       # IN (V + 1,) slots per word: >= its number of non-zero counts
    int32_t[::1] wlen,             # OUT (V,) number of non-zero counts of every word
    tab_t[::1] wtop,               # OUT (wptr[V],) their topics (uint16 if K <= 65535)
    float[::1] wprob,              # OUT (wptr[V],) alias probabilities
    tab_t[::1] walias,             # OUT (wptr[V],) alias topics
    double[::1] Qw,                # OUT (V,) sum_k alpha_k W_vk / (T_k + V beta)
    float[::1] sprob,              # OUT (K,) smoothing alias probabilities
    int32_t[::1] salias,           # OUT (K,) smoothing alias topics
    double[::1] word_ll,           # OUT (V,) sum_k [lgamma(W_vk + beta) - lgamma(beta)]
    int n_threads,
):
    """The tables of :func:`sample_sweep_counts` from the read buffer W: for every word (in
    parallel) its topics with W_vk > 0 and Vose's alias table over alpha_k W_vk / (T_k + V beta)
    on them, and the alias table over alpha_k beta / (T_k + V beta) shared by all words.

    W is read once (one pass over each word's row); the tables and the per-word work beyond the
    scan are O(nnz(W)).  Returns Q_s = beta sum_k alpha_k / (T_k + V beta).
    """
    cdef Py_ssize_t V = W.shape[0], v
    cdef int K = <int> W.shape[1], k, n, i, fails = 0, over = 0
    cdef int64_t off
    cdef double* p
    cdef double* s
    cdef int32_t* small
    cdef int32_t* large
    cdef int32_t* al
    cdef double q, ll, lgb = gammaln(beta)
    cdef int32_t c
    lbt = np.empty(_LG_TAB)
    cdef double[::1] lbtv = lbt
    _lg_table(beta, &lbtv[0])
    if alpha.shape[0] != K or inv_tot.shape[0] != K or wptr.shape[0] != V + 1 \
            or wlen.shape[0] != V or Qw.shape[0] != V or word_ll.shape[0] != V \
            or sprob.shape[0] != K or salias.shape[0] != K or wtop.shape[0] < wptr[V] \
            or wprob.shape[0] < wptr[V] or walias.shape[0] < wptr[V]:
        raise ValueError("inconsistent shapes")
    if K == 0:
        raise ValueError("K must be positive")
    if tab_t is uint16_t and K > 65536:
        raise ValueError("uint16 tables need K <= 65536")
    ps = np.empty(K)
    for k in range(K):
        ps[k] = alpha[k] * beta * inv_tot[k]
    Qs = float(ps.sum())
    scratch = np.empty(K)
    sm = np.empty(K, np.int32)
    lg_ = np.empty(K, np.int32)
    cdef double[::1] psv = ps, scv = scratch
    cdef int32_t[::1] smv = sm, lgv = lg_
    _alias_row(&psv[0], K, &sprob[0], &salias[0], &scv[0], &smv[0], &lgv[0])
    if V == 0:
        return Qs
    with nogil, parallel(num_threads=n_threads):
        p = <double*> sc_thread_malloc(K * sizeof(double))
        s = <double*> sc_thread_malloc(K * sizeof(double))
        small = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
        large = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
        al = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
        for v in prange(V, schedule="dynamic", chunksize=64):
            if p == NULL or s == NULL or small == NULL or large == NULL or al == NULL:
                fails += 1
                continue
            off = wptr[v]
            n = 0
            q = 0.0
            ll = 0.0
            for k in range(K):
                c = W[v, k]
                if c > 0:
                    if off + n >= wptr[v + 1]:
                        over += 1
                        break
                    wtop[off + n] = k
                    p[n] = alpha[k] * c * inv_tot[k]
                    q = q + p[n]
                    if c < _LG_TAB:
                        ll = ll + lbtv[c]
                    else:
                        ll = ll + (gammaln(c + beta) - lgb)
                    n = n + 1
            wlen[v] = n
            Qw[v] = q
            word_ll[v] = ll
            if n > 0:
                _alias_row(p, n, &wprob[off], al, s, small, large)
                for i in range(n):  # alias slots -> topics
                    walias[off + i] = wtop[off + al[i]]
        free(p)
        free(s)
        free(small)
        free(large)
        free(al)
    if fails:
        raise MemoryError("could not allocate the alias-table scratch space")
    if over:
        raise ValueError("a word has more non-zero counts than its slots in wptr")
    return Qs


def sem_word_weights(
    const int32_t[:, ::1] W,       # IN (V, K) word-topic counts (read buffer)
    const double[::1] inv_tot,     # IN (K,) 1 / (T_k + V beta)
    double beta,
    float[:, ::1] w,               # OUT (V, K) (W_vk + beta) / (T_k + V beta)
    double[::1] word_ll,           # OUT (V,) sum_k [lgamma(W_vk + beta) - lgamma(beta)]
    int n_threads,
):
    """Stochastic-EM word weights from the counts, and the words' terms of log p(x | z, beta)
    (:func:`word_loglik`)."""
    cdef Py_ssize_t V = W.shape[0], v
    cdef int K = <int> W.shape[1], k
    if inv_tot.shape[0] != K or w.shape[0] != V or w.shape[1] != K or word_ll.shape[0] != V:
        raise ValueError("inconsistent shapes")
    with nogil:
        for v in prange(V, schedule="static", num_threads=n_threads):
            for k in range(K):
                w[v, k] = <float> ((W[v, k] + beta) * inv_tot[k])
    word_loglik(W, beta, word_ll, n_threads)


def word_loglik(
    const int32_t[:, ::1] W,       # IN (V, K) word-topic counts
    double beta,
    double[::1] word_ll,           # OUT (V,) sum_k [lgamma(W_vk + beta) - lgamma(beta)]
    int n_threads,
):
    """The words' terms of log p(x | z, beta) from the counts (the dense counts path, which
    needs no tables)."""
    cdef Py_ssize_t V = W.shape[0], v
    cdef int K = <int> W.shape[1], k
    cdef double lgb = gammaln(beta), ll
    if word_ll.shape[0] != V:
        raise ValueError("inconsistent shapes")
    lbt = np.empty(_LG_TAB)
    cdef double[::1] lbtv = lbt
    _lg_table(beta, &lbtv[0])
    with nogil:
        for v in prange(V, schedule="static", num_threads=n_threads):
            ll = 0.0
            for k in range(K):
                if W[v, k] > 0:
                    if W[v, k] < _LG_TAB:
                        ll = ll + lbtv[W[v, k]]
                    else:
                        ll = ll + gammaln(W[v, k] + beta) - lgb
            word_ll[v] = ll
