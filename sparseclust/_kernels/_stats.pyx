# SPDX-License-Identifier: BSD-3-Clause
"""Summary statistics of L-sparse responsibilities (Hughes & Sudderth 2016, Eq. 7).

For responsibilities given as values (N, L) and column indices (N, L) and data X (N, D):

    N_k      = sum_n r_nk
    Sx_k     = sum_n r_nk x_n
    Sxx_k    = sum_n r_nk x_n x_n^T          (moments="full", Gaussian full covariance)
    Sxx_diag = sum_n r_nk x_n * x_n          (moments="diag")
    H_k      = -sum_n r_nk log r_nk          (0 log 0 = 0; the entropy term of the ELBO)

Work is O(N L D^2) for the full second moment instead of O(N K D^2) for dense responsibilities.

Layout: the non-zero entries are first grouped by cluster with a counting sort (row order is
kept inside each cluster), then clusters are processed in parallel, each by one thread.  For
the full moment each thread gathers blocks of rows sqrt(r_nk) x_n and adds their Gram matrix
with BLAS ``dsyrk`` (upper triangle, mirrored at the end).  Because a cluster's sums are always
formed by one thread in the same order, the result does not depend on the thread count
(bit-identical), and no per-thread K x D x D accumulators are needed.  The caller must limit
BLAS to one thread (threadpoolctl) around this kernel.
"""

from cython cimport floating
from cython.parallel cimport parallel, prange
from libc.math cimport isfinite, log, sqrt
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free
from scipy.linalg.cython_blas cimport dsyrk

from sparseclust._kernels._parallel cimport sc_set_alloc_fail_thread, sc_thread_malloc

import numpy as np

cdef enum:
    MOMENTS_NONE = 0
    MOMENTS_DIAG = 1
    MOMENTS_FULL = 2

# moments codes for Python callers
NONE = MOMENTS_NONE
DIAG = MOMENTS_DIAG
FULL = MOMENTS_FULL

cdef int GATHER_ROWS = 256


def _fail_thread_allocations(int thread):
    """Make the per-thread buffer allocations of OpenMP thread ``thread`` fail (-1: none,
    -2: every thread).

    For tests of the out-of-memory path only.
    """
    sc_set_alloc_fail_thread(thread)


def summary_statistics(
    const floating[:, ::1] values,  # IN (N, L) responsibilities
    const int32_t[:, ::1] indices,  # IN (N, L) cluster of each value
    const floating[:, ::1] X,  # IN (N, D)
    int n_components,
    int moments,
    int n_threads,
):
    """Sufficient statistics of sparse responsibilities (Eq. 7), accumulated in float64.

    Parameters
    ----------
    values : (N, L) float32/float64, finite, >= 0
    indices : (N, L) int32 in [0, n_components), distinct within a row
    X : (N, D), same dtype as values
    n_components : K
    moments : 0 (none), 1 (diag), 2 (full)
    n_threads : int >= 1

    Returns
    -------
    Nk : (K,) float64
    Sx : (K, D) float64
    S2 : (K, D, D) float64 if moments == 2, (K, D) if moments == 1, (K, 0) otherwise
    entropy : (K,) float64
    n_bad_index : int, entries with an index outside [0, K)
    n_bad_value : int, entries with a negative or non-finite value

    Equivalent to, with ``R = np.zeros((N, K)); np.put_along_axis(R, indices, values, 1)``:
    ``R.sum(0), R.T @ X, np.einsum("nk,nd,ne->kde", R, X, X), R.T @ X**2,
    -(R * np.log(np.where(R > 0, R, 1))).sum(0)``.
    """
    cdef Py_ssize_t N = values.shape[0], L = values.shape[1], D = X.shape[1]
    cdef Py_ssize_t K = n_components
    cdef Py_ssize_t n, l, k, j, d, e, b, nb, start, stop, pos, i
    cdef Py_ssize_t n_bad_index = 0, n_bad_value = 0, n_fail = 0
    cdef double r, sr, xd
    cdef int32_t c

    Nk_arr = np.zeros(K, dtype=np.float64)
    Sx_arr = np.zeros((K, D), dtype=np.float64)
    ent_arr = np.zeros(K, dtype=np.float64)
    if moments == MOMENTS_FULL:
        S2_arr = np.zeros((K, D, D), dtype=np.float64)
    elif moments == MOMENTS_DIAG:
        S2_arr = np.zeros((K, D), dtype=np.float64)
    else:
        S2_arr = np.zeros((K, 0), dtype=np.float64)
    cdef double[::1] Nk = Nk_arr  # OUT
    cdef double[:, ::1] Sx = Sx_arr  # OUT
    cdef double[::1] ent = ent_arr  # OUT
    cdef double[:, ::1] S2d  # OUT (diag)
    cdef double[:, :, ::1] S2f  # OUT (full)
    cdef double* S2ptr = NULL
    if moments == MOMENTS_FULL:
        S2f = S2_arr
        if K > 0 and D > 0:
            S2ptr = &S2f[0, 0, 0]
    elif moments == MOMENTS_DIAG:
        S2d = S2_arr

    # --- group the non-zero entries by cluster (counting sort; row order kept) ------------
    offsets_arr = np.zeros(K + 1, dtype=np.int64)
    cdef int64_t[::1] offsets = offsets_arr
    with nogil:
        for n in range(N):
            for l in range(L):
                c = indices[n, l]
                r = values[n, l]
                if c < 0 or c >= K:
                    n_bad_index += 1
                elif not (r >= 0 and isfinite(r)):
                    n_bad_value += 1
                elif r > 0:
                    offsets[c + 1] += 1
    if n_bad_index or n_bad_value:
        return Nk_arr, Sx_arr, S2_arr, ent_arr, n_bad_index, n_bad_value
    for k in range(K):
        offsets[k + 1] += offsets[k]
    entries_arr = np.empty(offsets[K], dtype=np.int64)
    cursor_arr = offsets_arr[:K].copy()
    cdef int64_t[::1] entries = entries_arr  # flat position n * L + l
    cdef int64_t[::1] cursor = cursor_arr
    with nogil:
        for n in range(N):
            for l in range(L):
                if values[n, l] > 0:
                    c = indices[n, l]
                    entries[cursor[c]] = n * L + l
                    cursor[c] += 1
    if N == 0 or K == 0:
        return Nk_arr, Sx_arr, S2_arr, ent_arr, 0, 0

    # --- per-cluster sums, clusters in parallel ----------------------------------------------
    cdef double* A  # gathered rows sqrt(r) x_n, (GATHER_ROWS, D) C order
    cdef double* Ck  # S2ptr + k * D * D
    cdef char uplo = b"L"  # lower in BLAS (column-major) = upper triangle of a C-order matrix
    cdef char trans = b"N"
    cdef int di = <int> D, ki, lda = <int> D
    cdef double one = 1.0
    cdef double sN, sH
    with nogil, parallel(num_threads=n_threads):
        A = NULL
        if moments == MOMENTS_FULL:
            A = <double*> sc_thread_malloc(GATHER_ROWS * D * sizeof(double) + 8)
        for k in prange(K, schedule="dynamic"):
            if moments == MOMENTS_FULL and A == NULL:
                n_fail += 1
                continue
            sN = 0.0
            sH = 0.0
            start = offsets[k]
            stop = offsets[k + 1]
            nb = 0
            for i in range(start, stop):
                pos = entries[i]
                n = pos // L
                l = pos - n * L
                r = values[n, l]
                sN = sN + r
                sH = sH - r * log(r)
                for d in range(D):
                    Sx[k, d] += r * X[n, d]
                if moments == MOMENTS_DIAG:
                    for d in range(D):
                        xd = X[n, d]
                        S2d[k, d] += r * xd * xd
                elif moments == MOMENTS_FULL:
                    sr = sqrt(r)
                    for d in range(D):
                        A[nb * D + d] = sr * X[n, d]
                    nb = nb + 1
                    if nb == GATHER_ROWS or i == stop - 1:
                        ki = <int> nb
                        Ck = S2ptr + k * D * D
                        dsyrk(&uplo, &trans, &di, &ki, &one, A, &lda, &one, Ck, &di)
                        nb = 0
            Nk[k] = sN
            ent[k] = sH
            if moments == MOMENTS_FULL:
                Ck = S2ptr + k * D * D
                for d in range(D):
                    for e in range(d + 1, D):
                        Ck[e * D + d] = Ck[d * D + e]
        free(A)
    if n_fail:
        raise MemoryError("could not allocate the per-thread gather buffer")
    return Nk_arr, Sx_arr, S2_arr, ent_arr, 0, 0


ctypedef fused csr_index_t:
    int32_t
    int64_t


cdef _check_csr(Py_ssize_t n_rows, Py_ssize_t n_ptr, Py_ssize_t n_indices, Py_ssize_t n_data,
                int64_t last):
    """The CSR arrays (indptr, indices, data) of ``n_rows`` rows, ``indptr[n_rows]`` = last,
    fit each other."""
    if n_ptr != n_rows + 1 or n_indices != n_data or last > n_data:
        raise ValueError("the CSR arrays do not match the dense array")


def csr_scatter_add(
    double[:, ::1] dense,  # IN/OUT (n_rows, n_cols)
    const csr_index_t[::1] indptr,  # IN (n_rows + 1,)
    const csr_index_t[::1] indices,  # IN (nnz,) column of each entry, no duplicates in a row
    const double[::1] data,  # IN (nnz,)
    bint subtract,
):
    """``dense += S`` (``dense -= S`` with ``subtract``) at the stored entries of the CSR
    array S = (data, indices, indptr) with canonical rows (no duplicate columns), in place:
    one addition per stored entry, the floating-point result of ``dense + S.toarray()``."""
    cdef Py_ssize_t n_rows = dense.shape[0], n_cols = dense.shape[1], r
    cdef int64_t j
    _check_csr(n_rows, indptr.shape[0], indices.shape[0], data.shape[0],
               indptr[n_rows] if indptr.shape[0] == n_rows + 1 else 0)
    with nogil:
        for r in range(n_rows):
            for j in range(indptr[r], indptr[r + 1]):
                if indices[j] < 0 or indices[j] >= n_cols:
                    with gil:
                        raise ValueError("a column index lies outside the dense array")
                if subtract:
                    dense[r, indices[j]] -= data[j]
                else:
                    dense[r, indices[j]] += data[j]


def csr_add_counts(
    int32_t[:, ::1] dense,  # IN/OUT (n_rows, n_cols)
    const csr_index_t[::1] indptr,  # IN (n_rows + 1,)
    const csr_index_t[::1] indices,  # IN (nnz,) column of each entry
    const int64_t[::1] data,  # IN (nnz,)
):
    """``dense += S`` for integer counts: the CSR array S = (data, indices, indptr) (duplicate
    columns in a row add up) into the int32 array ``dense``, in place. Raises OverflowError,
    leaving ``dense`` partly updated, when an entry leaves the int32 range."""
    cdef Py_ssize_t n_rows = dense.shape[0], n_cols = dense.shape[1], r
    cdef int64_t j, v
    _check_csr(n_rows, indptr.shape[0], indices.shape[0], data.shape[0],
               indptr[n_rows] if indptr.shape[0] == n_rows + 1 else 0)
    with nogil:
        for r in range(n_rows):
            for j in range(indptr[r], indptr[r + 1]):
                if indices[j] < 0 or indices[j] >= n_cols:
                    with gil:
                        raise ValueError("a column index lies outside the dense array")
                v = dense[r, indices[j]] + data[j]
                if v > 2147483647 or v < -2147483648:
                    with gil:
                        raise OverflowError("a count leaves the int32 range")
                dense[r, indices[j]] = <int32_t>v
