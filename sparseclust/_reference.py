# SPDX-License-Identifier: BSD-3-Clause
"""Plain numpy references for every compiled kernel.

These are the specifications the Cython kernels are tested against: slow, obvious, and
independent of the compiled code. They are not used by the estimators.
"""

import numpy as np


def top_l_indices(W, L):
    """Indices of the L largest entries of each row, ascending column order.

    Ties are broken toward the smaller column index (a stable descending sort).
    Equivalent to ``np.sort(np.argsort(-W, axis=1, kind="stable")[:, :L], axis=1)``.
    """
    W = np.asarray(W)
    L = min(int(L), W.shape[1])
    order = np.argsort(-W, axis=1, kind="stable")[:, :L]
    return np.sort(order, axis=1).astype(np.int32)


def dense_responsibilities(W):
    """Row-wise softmax: ``exp(W - logsumexp(W, axis=1))``."""
    W = np.asarray(W, dtype=float)
    m = W.max(axis=1, keepdims=True)
    e = np.exp(W - m)
    return e / e.sum(axis=1, keepdims=True)


def sparse_responsibilities(W, L):
    """Top-L exp-normalize (Hughes & Sudderth 2016, Alg. 1): values (N, L) and int32 indices (N,
    L)."""
    W = np.asarray(W, dtype=float)
    idx = top_l_indices(W, L)
    w = np.take_along_axis(W, idx, axis=1)
    return dense_responsibilities(w), idx


def summary_statistics(values, indices, X, n_components):
    """Statistics of L-sparse responsibilities by densifying them (Hughes & Sudderth 2016, Eq. 7).

    Returns a dict with ``N`` (K,), ``Sx`` (K, D), ``Sxx`` (K, D, D), ``Sxx_diag`` (K, D)
    and ``entropy`` (K,) = -sum_n r_nk log r_nk.
    """
    N, L = values.shape
    R = np.zeros((N, n_components))
    np.put_along_axis(R, np.asarray(indices, dtype=np.intp), values, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(R > 0, R * np.log(R), 0.0).sum(axis=0)
    return {
        "N": R.sum(axis=0),
        "Sx": R.T @ X,
        "Sxx": np.einsum("nk,nd,ne->kde", R, X, X),
        "Sxx_diag": R.T @ (X * X),
        "entropy": ent,
    }
