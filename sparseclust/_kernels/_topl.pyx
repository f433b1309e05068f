# SPDX-License-Identifier: BSD-3-Clause
"""Top-L selection and responsibilities from weights (Hughes & Sudderth 2016, Alg. 1, Sec. 3.2).

Kernels assume a valid, C-contiguous (N, K) weight matrix and a clamped 1 <= L <= K; the
public wrappers in :mod:`sparseclust.posteriors` validate. Rows that contain NaN or +inf, or
have no finite weight, are not raised on here: each kernel returns how many it met (their
outputs are zero-filled) and the wrapper raises.
"""

from cython cimport floating
from cython.parallel cimport parallel, prange
from libc.stdint cimport int32_t
from libc.stdlib cimport free

from sparseclust._kernels._parallel cimport sc_set_alloc_fail_thread, sc_thread_malloc

import numpy as np

cdef extern from "topl.h" namespace "sparseclust" nogil:
    size_t topl_work_bytes(int K, int L)
    int row_max_checked[T](const T* w, int K, T* out_max)
    int top_l_row[T](const T* w, int K, int L, int method, void* work, int32_t* idx, T* val,
                     T* row_max)
    int top_l_resp_row[T](const T* w, int K, int L, int method, void* work, int32_t* idx,
                          T* val)
    int dense_resp_row[T](const T* w, int K, T* out)
    int topl_vector_extensions()

# method codes shared with topl.h (TopLMethod)
SELECT = 0
SCAN = 1  # single pass; the kernel picks INSERT or BUFFER by L and K
INSERT = 2
BUFFER = 3
BUFFER_PORTABLE = 4  # BUFFER with the portable block test (compared with BUFFER in the tests)

#: whether the buffer scan's block test uses GCC/Clang vector extensions (else portable code)
VECTOR_EXTENSIONS = bool(topl_vector_extensions())


def _fail_thread_allocations(int thread):
    """Make the per-thread buffer allocations of OpenMP thread ``thread`` fail (-1: none,
    -2: every thread).

    For tests of the out-of-memory path only.
    """
    sc_set_alloc_fail_thread(thread)


def top_l(
    const floating[:, ::1] W,  # IN (N, K)
    int L,
    int method,
    bint normalize,
    int n_threads,
):
    """Top-L indices of each row, with either their weights or their responsibilities.

    Parameters
    ----------
    W : (N, K) float32/float64, C-contiguous
    L : int, 1 <= L <= K
    method : 0 SELECT (introselect, ``std::nth_element``), 1 SCAN (single pass, variant
        chosen by L and K), 2 INSERT (single pass, sorted size-L buffer with insertions),
        3 BUFFER (single pass, threshold and a size-4L candidate buffer compacted with
        ``std::nth_element``), 4 BUFFER with the portable block test
    normalize : if true, values are the top-L responsibilities exp(W_sel - max) / sum,
        else the selected weights themselves
    n_threads : int >= 1

    Returns
    -------
    values : (N, L) W.dtype
    indices : (N, L) int32, ascending within each row
    n_bad : int, rows with NaN/+inf or no finite weight (their outputs are zeros)

    Equivalent to ``idx = np.sort(np.argsort(-W, axis=1, kind="stable")[:, :L], axis=1);
    w = np.take_along_axis(W, idx, 1); values = np.exp(w - w.max(1, keepdims=True))``
    normalized to unit row sums (``normalize``) or ``w``.
    """
    cdef Py_ssize_t N = W.shape[0], n
    cdef int K = <int> W.shape[1]
    dtype = np.float32 if floating is float else np.float64
    values_arr = np.zeros((N, L), dtype=dtype)
    indices_arr = np.zeros((N, L), dtype=np.int32)
    cdef floating[:, ::1] values = values_arr  # OUT
    cdef int32_t[:, ::1] indices = indices_arr  # OUT
    cdef size_t nbytes = topl_work_bytes(K, L)
    cdef void* work
    cdef floating m
    cdef Py_ssize_t n_bad = 0, n_fail = 0
    if N == 0:
        return values_arr, indices_arr, 0
    with nogil, parallel(num_threads=n_threads):
        work = sc_thread_malloc(nbytes)
        for n in prange(N, schedule="static"):
            m = 0  # assigned in the loop body: thread-private
            if work == NULL:
                n_fail += 1
            elif normalize:
                n_bad += top_l_resp_row(&W[n, 0], K, L, method, work, &indices[n, 0],
                                        &values[n, 0])
            else:
                n_bad += top_l_row(&W[n, 0], K, L, method, work, &indices[n, 0],
                                   &values[n, 0], &m)
        free(work)
    if n_fail:
        raise MemoryError("could not allocate the per-thread top-L work buffer")
    return values_arr, indices_arr, n_bad


def dense_responsibilities(
    const floating[:, ::1] W,  # IN (N, K)
    int n_threads,
):
    """Dense responsibilities: stable row-wise softmax.

    Returns ``(R, n_bad)`` with R (N, K) in W.dtype (zero rows where W's row is bad).

    Equivalent to ``np.exp(W - W.max(1, keepdims=True))`` divided by its row sums.
    """
    cdef Py_ssize_t N = W.shape[0], n
    cdef int K = <int> W.shape[1]
    dtype = np.float32 if floating is float else np.float64
    out_arr = np.empty((N, K), dtype=dtype)
    cdef floating[:, ::1] out = out_arr  # OUT
    cdef Py_ssize_t n_bad = 0
    if N == 0:
        return out_arr, 0
    with nogil, parallel(num_threads=n_threads):
        for n in prange(N, schedule="static"):
            n_bad += dense_resp_row(&W[n, 0], K, &out[n, 0])
    return out_arr, n_bad


def row_max(
    const floating[:, ::1] W,  # IN (N, K)
    int n_threads,
):
    """Row maxima and the bad-row count: the one-pass memory floor of the local step.

    Returns ``(m, n_bad)`` with m (N,) in W.dtype.

    Equivalent to ``W.max(axis=1)`` (rows with NaN/+inf or all -inf are counted in n_bad).
    """
    cdef Py_ssize_t N = W.shape[0], n
    cdef int K = <int> W.shape[1]
    dtype = np.float32 if floating is float else np.float64
    out_arr = np.empty(N, dtype=dtype)
    cdef floating[::1] out = out_arr  # OUT
    cdef Py_ssize_t n_bad = 0
    if N == 0:
        return out_arr, 0
    with nogil, parallel(num_threads=n_threads):
        for n in prange(N, schedule="static"):
            n_bad += row_max_checked(&W[n, 0], K, &out[n])
    return out_arr, n_bad

