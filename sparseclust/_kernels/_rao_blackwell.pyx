# SPDX-License-Identifier: BSD-3-Clause
"""The Rao-Blackwell estimator of the topics of one sample of token assignments (Papanikolaou
et al., 2017): every token's sampled topic replaced by its collapsed conditional given the
other tokens' topics, summed per word (see :func:`rb_doc_part`), from the counts of the
assignments (stochastic EM) or fixed word weights."""

from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free
from libc.string cimport memset
from cython.parallel cimport prange

from sparseclust._kernels._parallel cimport sc_set_alloc_fail_thread, sc_thread_malloc
from sparseclust._kernels._sampling cimport _check_layout, _check_topics, zint_t


def _fail_thread_allocations(int thread):
    """For tests of the out-of-memory path only (see sc_parallel.h)."""
    sc_set_alloc_fail_thread(thread)


cdef struct _RB:
    const int32_t* W      # (V, K) counts (counts mode) or NULL
    const float* w        # (V, K) fixed weights (weights mode) or NULL
    const double* inv     # (K,) 1 / (T_k + V beta) (counts mode)
    double beta
    int K


cdef inline double _rb_q(const _RB* r, int v, int k) noexcept nogil:
    """q_vk: (W_vk + beta) / (T_k + V beta), or the fixed weight w_vk."""
    if r.W != NULL:
        return (r.W[<int64_t> v * r.K + k] + r.beta) * r.inv[k]
    return r.w[<int64_t> v * r.K + k]


cdef inline double _rb_q_own(const _RB* r, int v, int k) noexcept nogil:
    """q_vk with one token of topic k taken out of W_vk and T_k (weights: unchanged)."""
    if r.W != NULL:
        return (r.W[<int64_t> v * r.K + k] - 1 + r.beta) / (1.0 / r.inv[k] - 1)
    return r.w[<int64_t> v * r.K + k]


cdef Py_ssize_t _rb_setup(_RB* r, const int32_t[:, ::1] W, const float[:, ::1] w,
                          const double[::1] inv_tot, double beta, Py_ssize_t K) except -1:
    """Fill r from exactly one of W (counts, with inv_tot) and w (fixed weights); returns V."""
    if (W.shape[0] > 0) == (w.shape[0] > 0):
        raise ValueError("give exactly one of W (counts) and w (weights)")
    r.beta = beta
    r.K = <int> K
    r.W = NULL
    r.w = NULL
    r.inv = NULL
    if W.shape[0] > 0:
        if W.shape[1] != K or inv_tot.shape[0] != K:
            raise ValueError("inconsistent shapes")
        r.W = &W[0, 0]
        r.inv = &inv_tot[0]
        return W.shape[0]
    if w.shape[1] != K:
        raise ValueError("inconsistent shapes")
    r.w = &w[0, 0]
    return w.shape[0]


def rb_word_mass(
    const int32_t[:, ::1] W,       # IN (V, K) counts, or (0, 0)
    const float[:, ::1] w,         # IN (V, K) fixed weights, or (0, 0)
    const double[::1] inv_tot,     # IN (K,) 1 / (T_k + V beta) of W (counts mode), or (0,)
    double beta,
    const double[::1] alpha,       # IN (K,)
    double[::1] A,                 # OUT (V,) sum_k alpha_k q_vk
    int n_threads,
):
    """A_v = sum_k alpha_k q_vk, the prior part of the normalizer of every token of word v
    (see :func:`rb_doc_part`)."""
    cdef _RB r
    cdef Py_ssize_t V = _rb_setup(&r, W, w, inv_tot, beta, alpha.shape[0]), v
    cdef int k
    cdef double acc
    if A.shape[0] != V:
        raise ValueError("inconsistent shapes")
    with nogil:
        for v in prange(V, schedule="static", num_threads=n_threads):
            acc = 0.0
            for k in range(r.K):
                acc = acc + alpha[k] * _rb_q(&r, <int> v, k)
            A[v] = acc


def rb_doc_part(
    const int64_t[::1] indptr,     # IN (D + 1,) CSR row pointers
    const int32_t[::1] indices,    # IN (nnz,) word ids
    const int32_t[::1] cnt,        # IN (nnz,) tokens per entry (>= 0)
    const int64_t[::1] tokptr,     # IN (D + 1,) token offsets of the documents
    const zint_t[::1] z,           # IN (n_tokens,) topic of every token, entry order
    const int32_t[:, ::1] W,       # IN (V, K) word-topic counts of z (counts mode), or (0, 0)
    const float[:, ::1] w,         # IN (V, K) fixed word weights (weights mode), or (0, 0)
    const double[::1] inv_tot,     # IN (K,) 1 / (T_k + V beta) of W (counts mode), or (0,)
    double beta,
    const double[::1] alpha,       # IN (K,) alpha_k > 0
    const double[::1] A,           # IN (V,) rb_word_mass
    double[:, ::1] out,            # INOUT (n, K) += the document part of words v0..v0+n-1
    double[::1] s,                 # INOUT (n,) += sum over the word's tokens of 1 / Z
    int v0,
    int n_threads,
):
    """The document part of the Rao-Blackwellized word-topic counts of the words v0 ..
    v0 + n - 1 (n = out.shape[0]; only their rows of W or w are read).

    The Rao-Blackwellized counts replace every token's sampled topic by its collapsed
    conditional given the other tokens' topics,

        R_vk = sum_{tokens i of word v} p(z_i = k | z_{-i}),
        p(z_i = k | z_{-i})  propto  (n_dk^{-i} + alpha_k) q_vk^{-i},

    with n_d the document's counts of z and, in counts mode, q_vk = (W_vk + beta) / (T_k + V
    beta) from the counts W of z, the token's own topic o taken out of n_d, W and T (q^{-i}
    differs from q at o only: q'_vo = (W_vo - 1 + beta) / (T_o - 1 + V beta)); in weights mode
    q = w is fixed and only n_d loses the token.  (R + beta) / (sum_v R_v + V beta) is the
    estimator of the topics of Papanikolaou et al. (2017): one sample's topics with the
    sampling noise of every token's assignment integrated out.

    With A_v = sum_k alpha_k q_vk, the normalizer of a token of entry (d, v) with own topic o
    is Z = A_v + sum_{k: n_dk > 0} n_dk q_vk - (n_do + alpha_o) q_vo + (n_do - 1 + alpha_o)
    q'_vo, its sum over the document's topics computed once per entry.  The token adds
    n_dk q_vk / Z to the document's topics k != o, (n_do - 1 + alpha_o) q'_vo / Z - alpha_o
    q_vo / Z to o (here, into ``out``), and alpha_k q_vk / Z to every topic k, which
    :func:`rb_smooth_part` adds once per word from s_v = sum of 1 / Z over the word's tokens.
    Cost O(topics in the document + tokens) per entry, plus one scan of z.

    Parallel over blocks of words: every word's sums are accumulated by one thread in
    document order, so the result is bit-identical for any number of threads (each thread
    scans all documents for the entries of its words).  The sums are float64 (a float32 sum
    over a frequent word's documents drifts and stops growing at 2**24).  In counts mode W
    must hold the counts of z (in the rows of v0 .. v0 + n - 1) and inv_tot their totals'.

    Checked first (ValueError, nothing written): the token layout is that of
    :func:`token_counts` (see :func:`sample_sweep`) and every z is a topic < K.
    """
    cdef _RB r
    cdef Py_ssize_t D = indptr.shape[0] - 1, d
    cdef Py_ssize_t V = _rb_setup(&r, W, w, inv_tot, beta, alpha.shape[0])
    cdef int K = r.K, n = <int> out.shape[0], nb, b, lo, hi, k, i, na, v, o, c, fails = 0
    cdef int64_t j, t
    cdef int32_t* nd
    cdef int32_t* act
    cdef double* e
    cdef double z0, zz, ssum, qo, qo1, ao
    if out.shape[1] != K or A.shape[0] != V or s.shape[0] != n or v0 < 0 or v0 + n > V:
        raise ValueError("inconsistent shapes")
    if indices.shape[0] != cnt.shape[0] or D < 0 or tokptr.shape[0] != D + 1 \
            or tokptr[D] != z.shape[0]:
        raise ValueError("inconsistent token layout")
    _check_layout(indptr, cnt, tokptr, z.shape[0])
    _check_topics(z, K)  # n_dk, alpha_k and the columns of W, w and out
    if n == 0 or K == 0 or z.shape[0] == 0:
        return
    nb = max(1, min(n_threads, n))
    with nogil:
        for b in prange(nb, schedule="static", chunksize=1, num_threads=nb):
            lo = v0 + <int> ((<int64_t> n * b) // nb)
            hi = v0 + <int> ((<int64_t> n * (b + 1)) // nb)
            nd = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
            act = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
            e = <double*> sc_thread_malloc(K * sizeof(double))
            if nd == NULL or act == NULL or e == NULL:
                fails += 1
            else:
                memset(nd, 0, K * sizeof(int32_t))
                for d in range(D):
                    na = 0
                    for t in range(tokptr[d], tokptr[d + 1]):
                        k = z[t]
                        if nd[k] == 0:
                            act[na] = k
                            e[k] = 0.0
                            na = na + 1
                        nd[k] += 1
                    t = tokptr[d]
                    for j in range(indptr[d], indptr[d + 1]):
                        v = indices[j]
                        if v < lo or v >= hi or cnt[j] <= 0:
                            t = t + cnt[j]
                            continue
                        z0 = A[v]
                        for i in range(na):
                            z0 = z0 + nd[act[i]] * _rb_q(&r, v, act[i])
                        ssum = 0.0
                        for c in range(cnt[j]):
                            o = z[t]
                            ao = alpha[o]
                            qo = _rb_q(&r, v, o)
                            qo1 = _rb_q_own(&r, v, o)
                            zz = 1.0 / (z0 - (nd[o] + ao) * qo + (nd[o] - 1 + ao) * qo1)
                            ssum = ssum + zz
                            e[o] = e[o] + zz * ((nd[o] - 1 + ao) * qo1 - (nd[o] + ao) * qo)
                            t = t + 1
                        s[v - v0] = s[v - v0] + ssum
                        for i in range(na):
                            k = act[i]
                            out[v - v0, k] = out[v - v0, k] + (
                                e[k] + nd[k] * _rb_q(&r, v, k) * ssum)
                            e[k] = 0.0
                    for i in range(na):
                        nd[act[i]] = 0
            free(nd)
            free(act)
            free(e)
    if fails:
        raise MemoryError("could not allocate the Rao-Blackwellization scratch space")


def rb_smooth_part(
    const int32_t[:, ::1] W,       # IN (V, K) counts, or (0, 0)
    const float[:, ::1] w,         # IN (V, K) fixed weights, or (0, 0)
    const double[::1] inv_tot,     # IN (K,) 1 / (T_k + V beta) of W (counts mode), or (0,)
    double beta,
    const double[::1] alpha,       # IN (K,)
    const double[::1] s,           # IN (n,) from rb_doc_part
    double[:, ::1] out,            # INOUT (n, K) += alpha_k q_vk s_v, v = v0 + row
    int v0,
    int n_threads,
):
    """The prior part of the Rao-Blackwellized counts of the words v0 .. v0 + n - 1,
    alpha_k q_vk s_v (see :func:`rb_doc_part`)."""
    cdef _RB r
    cdef Py_ssize_t V = _rb_setup(&r, W, w, inv_tot, beta, alpha.shape[0]), i
    cdef Py_ssize_t n = out.shape[0]
    cdef int k
    if s.shape[0] != n or out.shape[1] != r.K or v0 < 0 or v0 + n > V:
        raise ValueError("inconsistent shapes")
    with nogil:
        for i in prange(n, schedule="static", num_threads=n_threads):
            for k in range(r.K):
                out[i, k] = out[i, k] + (
                    alpha[k] * _rb_q(&r, <int> (v0 + i), k) * s[i])
