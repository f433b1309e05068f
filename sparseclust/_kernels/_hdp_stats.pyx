# SPDX-License-Identifier: BSD-3-Clause
"""Document-level statistics of the hierarchical Dirichlet process topic model.

The HDP objective (Hughes, Kim & Sudderth 2015, supplement Eq. 19) needs, besides the LDA
statistics, per-topic sums over documents of functions of theta_dk = N_dk + alpha_k, and the
merge move of two topics a, b needs the same sums for theta_da + theta_db and the change of
the assignment entropy when their responsibilities are added. This module computes them from
the outputs of the LDA local step (``_lda_local.lda_local_docs``):

- ``topic_lgamma``: G_k += sum_d log Gamma(theta_dk);
- ``pair_theta``: for candidate pairs (a, b), PG += sum_d log Gamma(theta_da + theta_db) and
  PT += sum_d [psi(theta_da + theta_db) - psi(sum_l theta_dl)];
- ``pair_entropy_sparse`` / ``pair_entropy_dense``: PH += sum_{d,u} c_du [r_dua log r_dua +
  r_dub log r_dub - (r_dua + r_dub) log(r_dua + r_dub)] <= 0, the entropy change of merging.

Documents with ``skip[d] != 0`` are left out (used to restrict the sums to a subset). Every
output entry is owned by one thread (topics and pairs), or accumulated per fixed block of
documents and the blocks summed in order, so results do not depend on the number of threads.
"""

from cython.parallel cimport parallel, prange
from libc.math cimport log
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from scipy.special.cython_special cimport gammaln, psi

import numpy as np

#: documents per block of the entropy sums (fixed, so the summation order does not depend on
#: the thread count)
cdef enum:
    _BLOCK = 256


def topic_lgamma(
    const double[:, ::1] N,        # IN (D, K) N_dk
    const double[::1] alpha,       # IN (K,) alpha_k > 0
    const int32_t[::1] skip,       # IN (D,)
    double[::1] G,                 # INOUT (K,) += sum_d lgamma(N_dk + alpha_k)
    int n_threads,
):
    """``G += sum_d gammaln(N[d] + alpha)`` over the documents not skipped.

    Equivalent to ``G += scipy.special.gammaln(N[skip == 0] + alpha).sum(0)``.
    """
    cdef Py_ssize_t D = N.shape[0], d
    cdef int K = <int> N.shape[1], k
    cdef double acc, lg0
    with nogil, parallel(num_threads=n_threads):
        for k in prange(K, schedule="static"):
            lg0 = gammaln(alpha[k])
            acc = 0.0
            for d in range(D):
                if skip[d]:
                    continue
                if N[d, k] > 0.0:
                    acc = acc + gammaln(N[d, k] + alpha[k])
                else:
                    acc = acc + lg0
            G[k] += acc


def pair_theta(
    const double[:, ::1] N,        # IN (D, K)
    const double[::1] alpha,       # IN (K,)
    const double[::1] psi_sum,     # IN (D,) psi(sum_l theta_dl)
    const int32_t[::1] skip,       # IN (D,)
    const int32_t[:, ::1] pairs,   # IN (P, 2) topic pairs a != b
    double[::1] PG,                # INOUT (P,)
    double[::1] PT,                # INOUT (P,)
    int n_threads,
):
    """Merged-topic sums of the candidate pairs.

    With x_dp = N[d, a] + N[d, b] + alpha[a] + alpha[b] for pair p = (a, b):
    ``PG[p] += sum_d gammaln(x_dp)`` and ``PT[p] += sum_d psi(x_dp) - psi_sum[d]`` over the
    documents not skipped.
    """
    cdef Py_ssize_t D = N.shape[0], d
    cdef Py_ssize_t P = pairs.shape[0], p
    cdef int a, b
    cdef double x0, lg0, ps0, x, accg, acct
    with nogil, parallel(num_threads=n_threads):
        for p in prange(P, schedule="dynamic", chunksize=8):
            a = pairs[p, 0]
            b = pairs[p, 1]
            x0 = alpha[a] + alpha[b]
            lg0 = gammaln(x0)
            ps0 = psi(x0)
            accg = 0.0
            acct = 0.0
            for d in range(D):
                if skip[d]:
                    continue
                x = N[d, a] + N[d, b]
                if x > 0.0:
                    accg = accg + gammaln(x + x0)
                    acct = acct + psi(x + x0) - psi_sum[d]
                else:
                    accg = accg + lg0
                    acct = acct + ps0 - psi_sum[d]
            PG[p] += accg
            PT[p] += acct


cdef inline double _merge_h(double ra, double rb) noexcept nogil:
    """ra log ra + rb log rb - (ra + rb) log(ra + rb) (0 log 0 = 0), <= 0."""
    cdef double s = ra + rb, out = 0.0
    if ra > 0.0:
        out += ra * log(ra / s)
    if rb > 0.0:
        out += rb * log(rb / s)
    return out


def pair_entropy_sparse(
    const int64_t[::1] indptr,     # IN (D + 1,)
    const double[::1] data,        # IN (nnz,) counts
    const double[:, ::1] r,        # IN (nnz, Lk) kept responsibilities
    const int32_t[:, ::1] idx,     # IN (nnz, Lk) kept topics, -1 past the kept ones
    const int32_t[::1] skip,       # IN (D,)
    const int32_t[::1] pair_of,    # IN (K * K,) pair index of (a, b) and (b, a), -1 if none
    int K,
    double[::1] PH,                # INOUT (P,)
    int n_threads,
):
    """Entropy change of merging each candidate pair, L-sparse responsibilities.

    ``PH[p] += sum_{d, u} c_du h(r_dua, r_dub)`` with h(x, y) = x log x + y log y
    - (x + y) log(x + y), over the word types u whose kept topics contain both a and b (for the
    others merging changes no term).
    """
    cdef Py_ssize_t D = indptr.shape[0] - 1, P = PH.shape[0]
    cdef Py_ssize_t n_blocks = (D + _BLOCK - 1) // _BLOCK, blk, d, q, i
    cdef int Lk = <int> r.shape[1], s, t, a, b, p
    part = np.zeros((max(n_blocks, 1), max(P, 1)))
    cdef double[:, ::1] part_v = part
    if D == 0 or P == 0 or Lk < 2:
        return
    with nogil, parallel(num_threads=n_threads):
        for blk in prange(n_blocks, schedule="dynamic"):
            for d in range(blk * _BLOCK, min(D, (blk + 1) * _BLOCK)):
                if skip[d]:
                    continue
                for q in range(indptr[d], indptr[d + 1]):
                    for s in range(Lk):
                        a = idx[q, s]
                        if a < 0:
                            break
                        for t in range(s + 1, Lk):
                            b = idx[q, t]
                            if b < 0:
                                break
                            p = pair_of[<Py_ssize_t> a * K + b]
                            if p >= 0:
                                part_v[blk, p] += data[q] * _merge_h(r[q, s], r[q, t])
    for blk in range(n_blocks):
        for i in range(P):
            PH[i] += part_v[blk, i]


def pair_entropy_dense(
    const int64_t[::1] indptr,     # IN (D + 1,)
    const int32_t[::1] indices,    # IN (nnz,) word types
    const double[::1] data,        # IN (nnz,) counts
    const double[:, ::1] expP,     # IN (D, K) exp(P_d - max P_d)
    const double[::1] zs,          # IN (nnz,) <expP_d, ET[v]>
    const double[:, ::1] ET,       # IN (V, K) exp(C - rowmax)
    const int32_t[::1] skip,       # IN (D,)
    const int32_t[:, ::1] pairs,   # IN (P, 2)
    double[::1] PH,                # INOUT (P,)
    int n_threads,
):
    """Entropy change of merging each candidate pair, dense responsibilities
    r_duk = expP[d, k] ET[v_du, k] / zs[du]. Cost O(nnz P)."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, P = pairs.shape[0]
    cdef Py_ssize_t n_blocks = (D + _BLOCK - 1) // _BLOCK, blk, d, q, i, v
    cdef int a, b
    cdef double ra, rb
    part = np.zeros((max(n_blocks, 1), max(P, 1)))
    cdef double[:, ::1] part_v = part
    if D == 0 or P == 0:
        return
    with nogil, parallel(num_threads=n_threads):
        for blk in prange(n_blocks, schedule="dynamic"):
            for d in range(blk * _BLOCK, min(D, (blk + 1) * _BLOCK)):
                if skip[d]:
                    continue
                for q in range(indptr[d], indptr[d + 1]):
                    v = indices[q]
                    for i in range(P):
                        a = pairs[i, 0]
                        b = pairs[i, 1]
                        ra = expP[d, a] * ET[v, a] / zs[q]
                        rb = expP[d, b] * ET[v, b] / zs[q]
                        part_v[blk, i] += data[q] * _merge_h(ra, rb)
    for blk in range(n_blocks):
        for i in range(P):
            PH[i] += part_v[blk, i]
