# SPDX-License-Identifier: BSD-3-Clause
"""Left-to-right estimator of log p(w_d) under LDA with fixed topics (Wallach, Murray,
Salakhutdinov & Mimno 2009, Alg. 3).

For a document with tokens w_1, ..., w_N (in a fixed order), topics phi (K, V) and a Dirichlet
prior alpha on the document's topic proportions (integrated out), each of R particles keeps
topic assignments z_1, ..., z_{n-1} of the tokens before position n.  At position n every
particle first resamples z_1, ..., z_{n-1} once in order, each from its collapsed conditional

    p(z_m = k | z_{-m}, w)  propto  (alpha_k + N_k^{-m}) phi_{k, w_m},

then contributes

    p_n^(r) = sum_k phi_{k, w_n} (alpha_k + N_k) / (n - 1 + sum_k alpha_k)

(N_k the particle's counts over z_{<n}), and finally draws z_n from
p(z_n = k | z_{<n}, w_{<=n}) propto (alpha_k + N_k) phi_{k, w_n}.  The estimate is

    log p(w_d) ~= sum_n log( (1/R) sum_r p_n^(r) ).

Cost: O(R N^2 K / 2) per document.

Random streams: particle r of document d draws from the SplitMix64 stream keyed by
(seed, r, d) (``sc_sampler.h``), so the result is bit-identical for any number of threads.
"""

from cython.parallel cimport parallel, prange
from libc.math cimport log
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memset

from sparseclust._kernels._parallel cimport sc_set_alloc_fail_thread, sc_thread_malloc

cdef extern from "sc_sampler.h" nogil:
    uint64_t sc_stream_key(uint64_t seed, uint64_t sweep, uint64_t key)
    double sc_uniform(uint64_t* state)


def _fail_thread_allocations(int thread):
    """Make the per-thread scratch allocations of ``thread`` fail (-2: all threads, -1: none);
    for tests of the MemoryError path."""
    sc_set_alloc_fail_thread(thread)


cdef inline int _draw(const double* phi_v, const double* alpha, const int32_t* nk, double* cum,
                      int K, uint64_t* state) noexcept nogil:
    """Draw k with probability proportional to (alpha_k + nk_k) phi_v[k]."""
    cdef double tot = 0.0, u
    cdef int k, lo, hi, mid
    for k in range(K):
        tot += (alpha[k] + nk[k]) * phi_v[k]
        cum[k] = tot
    u = sc_uniform(state) * tot
    lo = 0
    hi = K - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if cum[mid] > u:
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef double _doc(const int32_t* words, int64_t N, const double* phi_t, const double* alpha,
                 double sum_alpha, int K, int R, uint64_t seed, uint64_t d, int32_t* z,
                 int32_t* nk, double* cum, uint64_t* states) noexcept nogil:
    """log p(w_d) estimate of one document with N >= 1 tokens ``words``."""
    cdef int64_t n, m
    cdef int r, k, v
    cdef int32_t* zr
    cdef int32_t* nr
    cdef const double* phi_v
    cdef double pn, s, ll = 0.0
    memset(nk, 0, <size_t> R * K * sizeof(int32_t))
    for r in range(R):
        states[r] = sc_stream_key(seed, <uint64_t> r, d)
    for n in range(N):
        pn = 0.0
        v = words[n]
        for r in range(R):
            zr = z + <int64_t> r * N
            nr = nk + <int64_t> r * K
            # one Gibbs sweep over the earlier tokens
            for m in range(n):
                nr[zr[m]] -= 1
                k = _draw(phi_t + <int64_t> words[m] * K, alpha, nr, cum, K, &states[r])
                zr[m] = k
                nr[k] += 1
            phi_v = phi_t + <int64_t> v * K
            s = 0.0
            for k in range(K):
                s += phi_v[k] * (alpha[k] + nr[k])
            pn += s / (n + sum_alpha)
            k = _draw(phi_v, alpha, nr, cum, K, &states[r])
            zr[n] = k
            nr[k] += 1
        ll += log(pn / R)
    return ll


def left_to_right_docs(
    const int64_t[::1] tokptr,     # IN (D + 1,) token offsets of the documents
    const int32_t[::1] words,      # IN (n_tokens,) word id of every token, in scoring order
    const double[:, ::1] phi_t,    # IN (V, K) phi transposed: phi_t[v, k] = p(v | k) > 0
    const double[::1] alpha,       # IN (K,) alpha_k > 0
    int n_particles,               # R >= 1
    uint64_t seed,
    double[::1] out,               # OUT (D,) log p(w_d) estimates (0 for empty documents)
    int n_threads,
):
    """Left-to-right estimates of every document's log-likelihood (see the module docstring)."""
    cdef Py_ssize_t D = tokptr.shape[0] - 1, d
    cdef int K = <int> phi_t.shape[1], R = n_particles
    cdef int64_t max_len = 0, N
    cdef double sum_alpha = 0.0
    cdef int fails = 0, k
    cdef int32_t* z
    cdef int32_t* nk
    cdef double* cum
    cdef uint64_t* states
    if alpha.shape[0] != K or out.shape[0] != D or tokptr[D] != words.shape[0]:
        raise ValueError("inconsistent shapes")
    if R < 1 or K < 1:
        raise ValueError("n_particles and K must be positive")
    for k in range(K):
        sum_alpha += alpha[k]
    for d in range(D):
        N = tokptr[d + 1] - tokptr[d]
        if N < 0:
            raise ValueError("tokptr must be nondecreasing")
        if N > max_len:
            max_len = N
    if D == 0:
        return
    if max_len == 0:
        memset(&out[0], 0, D * sizeof(double))
        return
    with nogil, parallel(num_threads=n_threads):
        z = <int32_t*> sc_thread_malloc(<size_t> R * max_len * sizeof(int32_t))
        nk = <int32_t*> sc_thread_malloc(<size_t> R * K * sizeof(int32_t))
        cum = <double*> sc_thread_malloc(K * sizeof(double))
        states = <uint64_t*> sc_thread_malloc(R * sizeof(uint64_t))
        for d in prange(D, schedule="dynamic", chunksize=1):
            if z == NULL or nk == NULL or cum == NULL or states == NULL:
                fails += 1
                continue
            N = tokptr[d + 1] - tokptr[d]
            if N == 0:
                out[d] = 0.0
            else:
                out[d] = _doc(&words[tokptr[d]], N, &phi_t[0, 0], &alpha[0], sum_alpha, K, R,
                              seed, <uint64_t> d, z, nk, cum, states)
        free(z)
        free(nk)
        free(cum)
        free(states)
    if fails:
        raise MemoryError("could not allocate the left-to-right scratch space")
