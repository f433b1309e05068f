# SPDX-License-Identifier: BSD-3-Clause
"""Batched Mahalanobis norms for the Gaussian-mixture weights (Hughes & Sudderth 2016, Eq. 5).

The dense part of the mixture's local step: for every sample n and component k,

    out[n, k] = || x_n^T C_k - o_k ||^2,     o_k = m_k^T C_k,

which is ``(x_n - m_k)^T P_k (x_n - m_k)`` when ``P_k = C_k C_k^T`` (``C_k`` the upper-triangular
Cholesky-type factor of the expected precision, scikit-learn's ``precisions_cholesky_``). Cost O(N K D^2), the one
step of the local step whose work does not shrink with the sparsity level L.

Layout: rows are cut into blocks of ``block_rows``; blocks are processed in parallel, one per
thread. For each block and component single-threaded BLAS ``gemm`` calls (two levels of
triangular blocking, skipping the zero half of ``C_k``: 5/8 of the dense flops) write the product
``X_block C_k`` column-major into a per-thread buffer that stays in cache (no (N, K, D)
intermediate), and the squared distances to ``o_k`` are accumulated dimension by dimension over
contiguous rows (a loop the compiler vectorizes). Squaring after the product keeps the rounding
error of the form second order when the true product is small, unlike expanding the quadratic
form into ``x^T P x - 2 x^T P m + m^T P m``. The caller must limit BLAS to one thread
(threadpoolctl) around this kernel.
"""

from cython cimport floating
from cython.parallel cimport parallel, prange
from libc.stdlib cimport free
from libc.math cimport log, sqrt
from scipy.linalg.cython_blas cimport dgemm, sgemm
from scipy.linalg.cython_lapack cimport dpotrf, dtrtri

from sparseclust._kernels._parallel cimport sc_set_alloc_fail_thread, sc_thread_malloc


def _fail_thread_allocations(int thread):
    """Make the per-thread buffer allocations of OpenMP thread ``thread`` fail (-1: none,
    -2: every thread).

    For tests of the out-of-memory path only.
    """
    sc_set_alloc_fail_thread(thread)


cdef void _tri_product(
    const floating* Xb, const floating* C, floating* Y, int D, int rows, int n, int depth
) noexcept nogil:
    """Y[:, :n] = Xb[:, :n] @ C[:n, :n] for an upper-triangular C.

    Xb is row-major (rows x n, leading dimension D), C row-major (leading dimension D), Y
    column-major (rows x n, leading dimension rows). In BLAS's column-major view the row-major
    buffers are transposes, hence the transposed operands. The triangle is split in halves,
    [[C11, C12], [0, C22]], recursively ``depth`` times: Y1 = X1 C11, Y2 = X2 C22 + X1 C12,
    which skips the zero block (3/4 of the flops per level, 5/8 after two levels).
    """
    cdef char tr = b'T'
    cdef int h, n2
    cdef Py_ssize_t ld = D
    cdef float one_f = 1.0
    cdef float zero_f = 0.0
    cdef double one_d = 1.0
    cdef double zero_d = 0.0
    if depth == 0 or n < 16:
        if floating is float:
            sgemm(&tr, &tr, &rows, &n, &n, &one_f, <float*> Xb, &D, <float*> C, &D, &zero_f,
                  Y, &rows)
        else:
            dgemm(&tr, &tr, &rows, &n, &n, &one_d, <double*> Xb, &D, <double*> C, &D, &zero_d,
                  Y, &rows)
        return
    h = n // 2
    n2 = n - h
    _tri_product(Xb, C, Y, D, rows, h, depth - 1)
    _tri_product(Xb + h, C + h * ld + h, Y + <Py_ssize_t> h * rows, D, rows, n2, depth - 1)
    if floating is float:
        sgemm(&tr, &tr, &rows, &n2, &h, &one_f, <float*> Xb, &D, <float*> (C + h), &D, &one_f,
              Y + <Py_ssize_t> h * rows, &rows)
    else:
        dgemm(&tr, &tr, &rows, &n2, &h, &one_d, <double*> Xb, &D, <double*> (C + h), &D, &one_d,
              Y + <Py_ssize_t> h * rows, &rows)


def mahalanobis_sq(
    const floating[:, ::1] X,  # IN (N, D) rows (centered by the caller where useful)
    const floating[:, :, ::1] chol,  # IN (K, D, D) upper-triangular factors C_k (row-major)
    const floating[:, ::1] offsets,  # IN (K, D) o_k = m_k^T C_k (read only if use_offsets)
    floating[:, ::1] out,  # OUT (N, K)
    bint use_offsets,
    int n_threads,
    int block_rows=128,
):
    """Squared norms ``out[n, k] = ||X[n] @ chol[k] - offsets[k]||^2``.

    Parameters
    ----------
    X : (N, D) float32/float64, C-contiguous
    chol : (K, D, D), same dtype, upper triangular with zeros below the diagonal (the blocked
        product skips the lower off-diagonal blocks, and reads the rest)
    offsets : (K, D), same dtype
    out : (N, K), same dtype, written
    use_offsets : bool
        False treats the offsets as zero (zero-mean components).
    n_threads : int >= 1
    block_rows : int >= 1
        Rows per block (the per-thread buffer holds block_rows * (D + 1) values).

    Equivalent to ``np.einsum("nkd,nkd->nk", Y, Y)`` with
    ``Y = np.einsum("ni,kij->nkj", X, chol) - offsets``.
    """
    cdef Py_ssize_t N = X.shape[0]
    cdef int D = <int> X.shape[1]
    cdef Py_ssize_t K = chol.shape[0]
    cdef Py_ssize_t n_blocks
    cdef Py_ssize_t b, k, start
    cdef int i, d, rows
    cdef floating* buf
    cdef floating* acc
    cdef floating* col
    cdef floating o, v
    cdef Py_ssize_t n_fail = 0
    if N == 0 or K == 0 or D == 0:
        out[:, :] = 0
        return
    if block_rows < 1:
        block_rows = 1
    n_blocks = (N + block_rows - 1) // block_rows
    with nogil, parallel(num_threads=n_threads):
        buf = <floating*> sc_thread_malloc(
            (<Py_ssize_t> block_rows * (D + 1) + 8) * sizeof(floating))
        acc = (buf + <Py_ssize_t> block_rows * D) if buf != NULL else NULL
        for b in prange(n_blocks, schedule="static"):
            if buf == NULL:
                n_fail += 1
                continue
            start = b * block_rows
            rows = <int> min(<Py_ssize_t> block_rows, N - start)
            for k in range(K):
                _tri_product(&X[start, 0], &chol[k, 0, 0], buf, D, rows, D, 2)
                for i in range(rows):
                    acc[i] = 0
                for d in range(D):
                    col = buf + <Py_ssize_t> d * rows
                    o = offsets[k, d] if use_offsets else 0
                    for i in range(rows):
                        v = col[i] - o
                        acc[i] = acc[i] + v * v
                for i in range(rows):
                    out[start + i, k] = acc[i]
        free(buf)
    if n_fail:
        raise MemoryError("could not allocate the per-thread product buffer")


cdef inline floating _diag_form(
    const floating[:, ::1] X, const floating[:, ::1] scales, const floating[:, ::1] offsets,
    Py_ssize_t n, Py_ssize_t k, bint use_offsets,
) noexcept nogil:
    """sum_d (X[n, d] * scales[k, d] - offsets[k, d])^2 (offsets read only if use_offsets)."""
    cdef Py_ssize_t d, D = X.shape[1]
    cdef floating acc = 0, v
    if use_offsets:
        for d in range(D):
            v = X[n, d] * scales[k, d] - offsets[k, d]
            acc = acc + v * v
    else:
        for d in range(D):
            v = X[n, d] * scales[k, d]
            acc = acc + v * v
    return acc


def mahalanobis_sq_diag(
    const floating[:, ::1] X,  # IN (N, D)
    const floating[:, ::1] scales,  # IN (K, D) s_k = sqrt of the diagonal precision
    const floating[:, ::1] offsets,  # IN (K, D) o_k = m_k * s_k (read only if use_offsets)
    floating[:, ::1] out,  # OUT (N, K)
    bint use_offsets,
    int n_threads,
):
    """Diagonal forms ``out[n, k] = sum_d (X[n, d] * scales[k, d] - offsets[k, d])^2``.

    O(N K D); rows in parallel. Equivalent to
    ``((X[:, None, :] * scales - offsets) ** 2).sum(-1)``.
    """
    cdef Py_ssize_t N = X.shape[0]
    cdef Py_ssize_t K = scales.shape[0]
    cdef Py_ssize_t n, k
    with nogil:
        for n in prange(N, schedule="static", num_threads=n_threads):
            for k in range(K):
                out[n, k] = _diag_form(X, scales, offsets, n, k, use_offsets)


def mahalanobis_sq_grouped(
    const floating[:, ::1] X,  # IN (N, D) rows (centered by the caller where useful)
    const floating[:, :, ::1] chol,  # IN (K, D, D) upper-triangular factors C_k (row-major)
    const floating[:, ::1] offsets,  # IN (K, D) o_k = m_k^T C_k (read only if use_offsets)
    const long long[::1] order,  # IN (M,) flat pair ids n * C + c, grouped by component
    const long long[::1] item_comp,  # IN (B,) component k of each work item
    const long long[::1] item_start,  # IN (B,) first position in ``order`` of each item
    const long long[::1] item_stop,  # IN (B,) one past the last position (<= block_rows rows)
    floating[::1] out,  # OUT (N * C,) flat pair values
    int n_cols,  # C, the number of pairs per row
    bint use_offsets,
    int n_threads,
    int block_rows=128,
):
    """Squared norms for selected (row, component) pairs, grouped by component.

    Pair ``p = order[j]`` is row ``p // n_cols`` and, for the work item ``b`` with
    ``item_start[b] <= j < item_stop[b]``, component ``item_comp[b]``. Each item gathers its rows
    into a per-thread contiguous block and runs the same triangular-blocked ``gemm`` and
    post-product squares as :func:`mahalanobis_sq`, so the values agree with it to rounding.
    Items hold at most ``block_rows`` pairs each and run in parallel (dynamic schedule: the
    groups have unequal sizes).

    Equivalent to ``out[p] = ||X[p // n_cols] @ chol[k] - offsets[k]||^2`` for every pair ``p``
    of an item with component ``k``.
    """
    cdef Py_ssize_t B = item_comp.shape[0]
    cdef int D = <int> X.shape[1]
    cdef Py_ssize_t b, j, k, row, s0
    cdef int i, d, rows
    cdef floating* xg
    cdef floating* buf
    cdef floating* acc
    cdef floating* col
    cdef floating o, v
    cdef Py_ssize_t n_fail = 0
    if B == 0:
        return
    if D == 0:
        out[:] = 0
        return
    if block_rows < 1:
        block_rows = 1
    with nogil, parallel(num_threads=n_threads):
        xg = <floating*> sc_thread_malloc(
            (<Py_ssize_t> block_rows * (2 * D + 1) + 8) * sizeof(floating))
        buf = (xg + <Py_ssize_t> block_rows * D) if xg != NULL else NULL
        acc = (buf + <Py_ssize_t> block_rows * D) if xg != NULL else NULL
        for b in prange(B, schedule="dynamic"):
            if xg == NULL:
                n_fail += 1
                continue
            k = item_comp[b]
            s0 = item_start[b]
            rows = <int> (item_stop[b] - s0)
            for i in range(rows):
                row = order[s0 + i] // n_cols
                for d in range(D):
                    xg[<Py_ssize_t> i * D + d] = X[row, d]
            _tri_product(xg, &chol[k, 0, 0], buf, D, rows, D, 2)
            for i in range(rows):
                acc[i] = 0
            for d in range(D):
                col = buf + <Py_ssize_t> d * rows
                o = offsets[k, d] if use_offsets else 0
                for i in range(rows):
                    v = col[i] - o
                    acc[i] = acc[i] + v * v
            for i in range(rows):
                out[order[s0 + i]] = acc[i]
        free(xg)
    if n_fail:
        raise MemoryError("could not allocate the per-thread gather buffer")


def mahalanobis_sq_diag_pairs(
    const floating[:, ::1] X,  # IN (N, D)
    const floating[:, ::1] scales,  # IN (K, D) s_k = sqrt of the diagonal precision
    const floating[:, ::1] offsets,  # IN (K, D) o_k = m_k * s_k (read only if use_offsets)
    const int[:, ::1] cand,  # IN (N, C) component of each pair
    floating[:, ::1] out,  # OUT (N, C)
    bint use_offsets,
    int n_threads,
):
    """Diagonal forms for selected pairs, ``out[n, c] = sum_d (X[n, d] * scales[k, d] -
    offsets[k, d])^2`` with ``k = cand[n, c]``; O(N C D), rows in parallel.

    Equivalent to ``((X[:, None, :] * scales[cand] - offsets[cand]) ** 2).sum(-1)``.
    """
    cdef Py_ssize_t N = X.shape[0]
    cdef Py_ssize_t C = cand.shape[1]
    cdef Py_ssize_t n, c
    with nogil:
        for n in prange(N, schedule="static", num_threads=n_threads):
            for c in range(C):
                out[n, c] = _diag_form(X, scales, offsets, n, cand[n, c], use_offsets)


def group_by_component(
    const int[::1] comp,  # IN (M,) component of each flat pair, in [0, K)
    long long[::1] order,  # OUT (M,) pair ids grouped by component, stable within a group
    long long[::1] starts,  # OUT (K + 1,) group k is order[starts[k]:starts[k + 1]]
):
    """Counting sort of the pair ids ``0..M-1`` by component, O(M + K).

    Equivalent to ``order = np.argsort(comp, kind="stable")`` and
    ``starts = np.r_[0, np.cumsum(np.bincount(comp, minlength=K))]``.
    """
    cdef Py_ssize_t M = comp.shape[0]
    cdef Py_ssize_t K = starts.shape[0] - 1
    cdef Py_ssize_t j, k
    with nogil:
        for k in range(K + 1):
            starts[k] = 0
        for j in range(M):
            starts[comp[j] + 1] += 1
        for k in range(K):
            starts[k + 1] += starts[k]
        # fill using starts[k] as a moving cursor, then shift back
        for j in range(M):
            k = comp[j]
            order[starts[k]] = j
            starts[k] += 1
        for k in range(K, 0, -1):
            starts[k] = starts[k - 1]
        starts[0] = 0


def scale_factors(
    double[:, :, ::1] scale_inv,  # IN/OUT (K, D, D) posterior scale matrices Psi_k (row-major)
    double[:, :, ::1] out,  # OUT (K, D, D) C_k = sqrt(nu_k) L_k^-T, or L_k^T (not invert)
    const double[::1] nu,  # IN (K,) degrees of freedom (read only if invert)
    double[::1] logdet,  # OUT (K,) log |Psi_k|
    double[::1] tr_prec,  # OUT (K,) tr(C_k C_k^T) (written only if invert)
    int[::1] status,  # OUT (K,) 0, 1 (not positive definite) or 2 (singular factor)
    bint symmetrize,
    bint invert,
    int n_threads,
):
    """The Wishart posterior's factors for every component, in parallel over components:
    ``Psi_k`` symmetrized in place (``(Psi + Psi^T) / 2``, when ``symmetrize``), its Cholesky
    factor ``Psi_k = L_k L_k^T`` (LAPACK ``potrf``), ``log |Psi_k| = 2 sum_i log L_ii`` and,
    when ``invert``, the upper-triangular ``C_k = sqrt(nu_k) L_k^-T`` (``trtri``), so that
    ``C_k C_k^T = nu_k Psi_k^-1 = E[Lambda_k]``, and ``tr(C_k C_k^T)``.

    ``status[k]`` is 0, 1 when ``Psi_k`` is not positive definite or 2 when its factor is
    singular (then ``out[k]`` is undefined). Without ``invert`` ``out`` holds the Cholesky factor's
    transpose (upper-triangular). The caller must limit BLAS to one thread around this kernel.

    Equivalent to ``L = np.linalg.cholesky(Psi)``, ``C = sqrt(nu) inv(L).T``.
    """
    cdef Py_ssize_t K = scale_inv.shape[0]
    cdef int D = <int> scale_inv.shape[1]
    cdef Py_ssize_t k, i, j
    cdef int info
    cdef char lo = b'L'
    cdef char nd = b'N'
    cdef double* a
    cdef double* m
    cdef double v, acc, sc
    if K == 0 or D == 0:
        logdet[:] = 0
        if invert:
            tr_prec[:] = 0
        return
    with nogil:
        for k in prange(K, schedule="static", num_threads=n_threads):
            # assigned in the loop body, so each thread has its own LAPACK ``info`` (a
            # variable only passed by address would be shared between the threads)
            info = 0
            status[k] = 0
            a = &scale_inv[k, 0, 0]
            m = &out[k, 0, 0]
            if symmetrize:
                for i in range(D):
                    for j in range(i):
                        v = 0.5 * (a[i * D + j] + a[j * D + i])
                        a[i * D + j] = v
                        a[j * D + i] = v
            for i in range(D * D):
                m[i] = a[i]
            # the row-major buffer is the column-major transpose (the same, symmetric) matrix:
            # potrf('L') leaves L in the column-major lower triangle = the row-major upper one
            dpotrf(&lo, &D, m, &D, &info)
            if info != 0:
                status[k] = 1
                continue
            acc = 0
            for i in range(D):
                acc = acc + log(m[i * D + i])
            logdet[k] = 2.0 * acc
            # the other triangle still holds Psi: zero the row-major strict lower part
            for i in range(D):
                for j in range(i):
                    m[i * D + j] = 0
            if not invert:
                continue
            dtrtri(&lo, &nd, &D, m, &D, &info)
            if info != 0:
                status[k] = 2
                continue
            # column-major L^-1 is the row-major L^-T: scale it
            sc = sqrt(nu[k])
            acc = 0
            for i in range(D * D):
                m[i] = m[i] * sc
                acc = acc + m[i] * m[i]
            tr_prec[k] = acc


def pooled_logdet(
    const double[:, :, ::1] Sxx,  # IN (K, D, D) second moments of the components
    const double[:, ::1] psi0,  # IN (D, D) prior scale matrix (exactly symmetric)
    const long long[::1] pa,  # IN (P,) first component of each pair
    const long long[::1] pb,  # IN (P,) second component of each pair
    const double[::1] diag_add,  # IN (P,) added to the diagonal of pair p's matrix (reg N)
    bint add_diag,
    double[::1] logdet,  # OUT (P,) log |Psi_0 + Sxx_a + Sxx_b (+ diag_add I)|
    int[::1] status,  # OUT (P,) 0, or 1 when the matrix is not positive definite
    int n_threads,
):
    """``log |(Sxx_a + Sxx_b) + Psi_0|`` (plus ``diag_add[p]`` on the diagonal when
    ``add_diag``) for every pair p = (pa[p], pb[p]): the pooled scale matrix of a merge is
    built in a per-thread buffer, in the order of operations of the numpy expression, and
    factored there (LAPACK ``potrf``) while it is in cache, so each value equals
    ``scale_factors`` on the matrix built by numpy. The caller must limit BLAS to one
    thread around this kernel."""
    cdef Py_ssize_t P = pa.shape[0]
    cdef int D = <int> psi0.shape[0]
    cdef Py_ssize_t DD = <Py_ssize_t> D * D
    cdef Py_ssize_t p, i
    cdef int info, n_fail = 0
    cdef char lo = b'L'
    cdef double* m
    cdef const double* sa
    cdef const double* sb
    cdef const double* s0
    cdef double acc
    cdef Py_ssize_t K = Sxx.shape[0]
    if (Sxx.shape[1] != D or Sxx.shape[2] != D or psi0.shape[1] != D or pb.shape[0] != P
            or diag_add.shape[0] != P or logdet.shape[0] != P or status.shape[0] != P):
        raise ValueError("pooled_logdet: inconsistent shapes.")
    if P == 0:
        return
    if D == 0:
        logdet[:] = 0
        status[:] = 0
        return
    for p in range(P):
        if pa[p] < 0 or pa[p] >= K or pb[p] < 0 or pb[p] >= K:
            raise IndexError("pooled_logdet: a pair index is out of range.")
    s0 = &psi0[0, 0]
    with nogil, parallel(num_threads=n_threads):
        m = <double*> sc_thread_malloc((DD + 8) * sizeof(double))
        for p in prange(P, schedule="static"):
            info = 0  # per thread (see scale_factors)
            if m == NULL:
                n_fail += 1
                continue
            status[p] = 0
            sa = &Sxx[pa[p], 0, 0]
            sb = &Sxx[pb[p], 0, 0]
            for i in range(DD):
                m[i] = (sa[i] + sb[i]) + s0[i]
            if add_diag:
                for i in range(D):
                    m[i * D + i] = m[i * D + i] + diag_add[p]
            dpotrf(&lo, &D, m, &D, &info)
            if info != 0:
                status[p] = 1
                continue
            acc = 0
            for i in range(D):
                acc = acc + log(m[i * D + i])
            logdet[p] = 2.0 * acc
        free(m)
    if n_fail:
        raise MemoryError("pooled_logdet: a per-thread buffer could not be allocated.")
