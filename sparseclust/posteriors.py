# SPDX-License-Identifier: BSD-3-Clause
"""L-sparse responsibilities and their summary statistics (public API).

CONTRACT (the compiled kernels in ``sparseclust._kernels`` implement it; the bodies below are
numpy placeholders until they land):

top_l_indices(W, L, *, method="auto", n_threads=None) -> int32 (N, min(L, K))
responsibilities(W, L=None, *, n_threads=None) -> (values (N, L') same float dtype as W, int32 indices (N, L'))
    L None or L >= K: dense, L' = K, indices = arange(K) per row.
dense_responsibilities(W, *, n_threads=None) -> (N, K)
sparse_responsibilities(W, L, *, n_threads=None) -> scipy.sparse.csr_array (N, K)
summary_statistics(values, indices, X, n_components, *, moments="full"|"diag"|"none", n_threads=None)
    -> dict N (K,), Sx (K, D), Sxx (K, D, D) [moments="full"] or Sxx_diag (K, D) [moments="diag"],
       entropy (K,)
"""

import numpy as np
import scipy.sparse as sp

from . import _reference


def _check_W(W):
    W = np.asarray(W)
    if W.dtype not in (np.float32, np.float64):
        W = W.astype(np.float64)
    if W.ndim != 2 or W.shape[1] < 1:
        raise ValueError(f"W must be a 2-D array with at least one column, got shape {W.shape}.")
    bad = ~np.isfinite(W.max(axis=1)) | np.isnan(W).any(axis=1)
    if bad.any():
        raise ValueError(
            f"{int(bad.sum())} row(s) of W have no finite weight or contain NaN/+inf "
            f"(first: row {int(np.flatnonzero(bad)[0])})."
        )
    return W


def _check_L(L, K):
    if L is None:
        return K
    if int(L) != L or L < 1:
        raise ValueError(f"L must be an integer >= 1, got {L!r}.")
    return min(int(L), K)


def top_l_indices(W, L, *, method="auto", n_threads=None):
    W = _check_W(W)
    return _reference.top_l_indices(W, _check_L(L, W.shape[1]))


def responsibilities(W, L=None, *, n_threads=None):
    W = _check_W(W)
    L = _check_L(L, W.shape[1])
    v, i = _reference.sparse_responsibilities(W, L)
    return v.astype(W.dtype), i


def dense_responsibilities(W, *, n_threads=None):
    W = _check_W(W)
    return _reference.dense_responsibilities(W).astype(W.dtype)


def sparse_responsibilities(W, L, *, n_threads=None):
    W = _check_W(W)
    v, i = responsibilities(W, L)
    N, Lp = v.shape
    return sp.csr_array(
        (v.ravel(), i.ravel(), np.arange(0, N * Lp + 1, Lp)), shape=W.shape
    )


def summary_statistics(values, indices, X, n_components, *, moments="full", n_threads=None):
    s = _reference.summary_statistics(values, indices, np.asarray(X), n_components)
    if moments != "full":
        s.pop("Sxx")
    if moments != "diag":
        s.pop("Sxx_diag")
    return s
