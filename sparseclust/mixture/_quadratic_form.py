# SPDX-License-Identifier: BSD-3-Clause
"""The Mahalanobis forms of the local step of :class:`SparseGaussianMixture`.

:class:`QuadraticForm` evaluates ``(x_n - m_k)^T E[Lambda_k] (x_n - m_k)`` for every row and
component, or for each row's candidate components only, with the compiled kernels of
:mod:`sparseclust._kernels._gmm_weights`: the dense ``O(N K D^2)`` part of the weights.
"""

import numpy as np

from .._kernels import _gmm_weights
from ..utils._threads import single_threaded_blas, threads_for_work


class QuadraticForm:
    """Batched Mahalanobis forms ``q[n, k] = (x_n - m_k)^T E[Lambda_k] (x_n - m_k)``.

    The dense part of the local step (Hughes & Sudderth 2016, Eq. 5: the ``O(N K D^2)`` weights),
    computed by
    the compiled kernel :mod:`sparseclust._kernels._gmm_weights` as
    ``||x'_n^T C_k - m'_k^T C_k||^2`` with ``E[Lambda_k] = C_k C_k^T`` and ``x' = x - c``,
    ``m' = m - c`` for a fixed center ``c`` (the prior mean; no centering for the zero-mean model,
    whose components are not shift invariant). Per block of rows and component the kernel runs
    small BLAS products (triangular blocking skips the zero half of ``C_k``) that stay in cache;
    the squares are taken after the product, so the form is accurate in float32 even for nearly
    singular covariances (an expanded
    ``x^T P x - 2 x^T P m + m^T P m`` would cancel catastrophically there). 'diag' uses the
    ``O(N K D)`` kernel with ``C_k = diag(sqrt(E[lambda_k]))``, 'spherical' the same kernel with
    ``C_k = sqrt(E[lambda_k]) I``. Computation in ``dtype``.

    Equivalent to ``np.einsum("nki,kij,nkj->nk", d, P, d)`` with ``d = X[:, None] - means``.
    """

    def __init__(
        self, means, prec_chol, covariance_type, zero_mean, center, dtype, n_threads=None
    ):
        dtype = np.dtype(dtype)
        self.full = covariance_type == "full"
        self.zero_mean = bool(zero_mean)
        self.dtype = dtype
        self.n_threads = n_threads
        C = np.asarray(prec_chol, dtype=np.float64)
        if covariance_type == "spherical":
            # lambda_k I: the diagonal form with the same scale in every dimension
            D = np.asarray(means).shape[1]
            C = np.repeat(C[:, None], D, axis=1)
        self.factors = np.ascontiguousarray(C, dtype=dtype)
        if self.zero_mean:
            self.center = None
            self.offsets = np.zeros(C.shape[:1] + C.shape[-1:], dtype=dtype)
        else:
            self.center = np.asarray(center, dtype=dtype)
            mc = np.asarray(means, dtype=np.float64) - np.asarray(center, dtype=np.float64)
            off = np.einsum("ki,kij->kj", mc, C) if self.full else mc * C
            self.offsets = np.ascontiguousarray(off, dtype=dtype)

    def evaluate(self, X, out):
        """Write ``q`` for the rows of ``X`` (n, D) into ``out`` (n, K); returns ``out``."""
        n = X.shape[0]
        K = out.shape[1]
        if n == 0:
            return out
        Xc = np.ascontiguousarray(X if self.center is None else X - self.center, dtype=self.dtype)
        nt = threads_for_work(self.n_threads, n * K, 1 << 15, scale=False)
        use_off = not self.zero_mean
        if self.full:
            with single_threaded_blas():
                _gmm_weights.mahalanobis_sq(Xc, self.factors, self.offsets, out, use_off, nt)
        else:
            _gmm_weights.mahalanobis_sq_diag(Xc, self.factors, self.offsets, out, use_off, nt)
        return out

    def evaluate_pairs(self, X, cand, out, block_rows=128):
        """Write ``q[n, k]`` for the candidate pairs only: ``out[n, c] = q[n, cand[n, c]]``.

        ``cand`` is an (n, C) int32 array of component indices, ``out`` (n, C) in ``dtype``.
        For 'full' the ``n C`` pairs are grouped by component (a counting sort of the flattened
        ``cand``), each component's rows are gathered and multiplied by ``C_k`` with the same
        triangular-blocked ``gemm`` as :meth:`evaluate`, and the squared norms are scattered
        back, so the cost is ``O(n C D^2)`` instead of ``O(n K D^2)``. Returns ``out``.

        Equivalent to ``np.take_along_axis(q_full, cand, axis=1)`` with ``q_full`` from
        :meth:`evaluate`.
        """
        n, C = cand.shape
        if n == 0 or C == 0:
            return out
        K = self.factors.shape[0]
        Xc = np.ascontiguousarray(X if self.center is None else X - self.center, dtype=self.dtype)
        cand = np.ascontiguousarray(cand, dtype=np.int32)
        nt = threads_for_work(self.n_threads, n * C, 1 << 15, scale=False)
        use_off = not self.zero_mean
        if not self.full:
            _gmm_weights.mahalanobis_sq_diag_pairs(
                Xc, self.factors, self.offsets, cand, out, use_off, nt
            )
            return out
        M = n * C
        order = np.empty(M, dtype=np.int64)
        starts = np.empty(K + 1, dtype=np.int64)
        _gmm_weights.group_by_component(cand.reshape(-1), order, starts)
        # work items: each component's group cut into pieces of at most block_rows pairs
        counts = np.diff(starts)
        n_items = (counts + block_rows - 1) // block_rows
        item_comp = np.repeat(np.arange(K, dtype=np.int64), n_items)
        first_item = np.cumsum(n_items) - n_items
        piece = np.arange(item_comp.shape[0], dtype=np.int64) - first_item[item_comp]
        item_start = starts[item_comp] + piece * block_rows
        item_stop = np.minimum(item_start + block_rows, starts[item_comp + 1])
        flat = out.reshape(-1)
        with single_threaded_blas():
            _gmm_weights.mahalanobis_sq_grouped(
                Xc,
                self.factors,
                self.offsets,
                order,
                item_comp,
                item_start,
                item_stop,
                flat,
                C,
                use_off,
                nt,
                block_rows,
            )
        return out

