# SPDX-License-Identifier: BSD-3-Clause
"""L-sparse responsibilities and their summary statistics (public API).

The functions below validate their input and call the compiled kernels
``sparseclust._kernels._topl`` and ``_stats``; ``sparseclust._reference`` holds the plain numpy
specifications they are tested against. Summary::

    top_l_indices(W, L, *, method="auto", n_threads=None) -> int32 (N, min(L, K))
    responsibilities(W, L=None, *, n_threads=None)
        -> (values (N, L') in W's float dtype, int32 indices (N, L'))
        L None or L >= K: dense, L' = K, indices = arange(K) per row.
    dense_responsibilities(W, *, n_threads=None) -> (N, K)
    sparse_responsibilities(W, L, *, n_threads=None) -> scipy.sparse.csr_array (N, K)
    summary_statistics(values, indices, X, n_components, *, moments="full"|"diag"|"none",
                       n_threads=None)
        -> dict N (K,), Sx (K, D), Sxx (K, D, D) [moments="full"]
           or Sxx_diag (K, D) [moments="diag"], entropy (K,)
"""

import numbers

import numpy as np
import scipy.sparse as sp

from ._kernels import _stats, _topl
from .utils import effective_n_threads, single_threaded_blas

_METHODS = {"select": _topl.SELECT, "scan": _topl.SCAN}
_MOMENTS = {"none": _stats.NONE, "diag": _stats.DIAG, "full": _stats.FULL}

# Largest L that uses the single-pass scan. On random Gaussian rows (N = 36,816, one thread)
# the scan beat introselect for every L <= 16 at K = 50..3200, while introselect won at L = 64
# for K <= 800 (the scan's insertions cost O(L) each); 32 sits between the two measurements.
_SCAN_MAX_L = 32

_INT32_MAX = int(np.iinfo(np.int32).max)


def _check_W(W):
    """Cheap checks only: dtype, shape, contiguity (a copy only when needed).

    The per-row finiteness check is done by the kernels, which read every weight anyway.
    """
    if sp.issparse(W):
        raise ValueError(
            "W must be a dense 2-D array of log weights; scipy.sparse input is not supported."
        )
    W = np.asarray(W)
    if W.dtype not in (np.float32, np.float64):
        W = W.astype(np.float64)
    if W.ndim != 2 or W.shape[1] < 1:
        raise ValueError(f"W must be a 2-D array with at least one column, got shape {W.shape}.")
    if W.shape[1] > _INT32_MAX:
        # column indices are int32 (rows may be any number: row offsets are 64-bit)
        raise ValueError(f"W has {W.shape[1]} columns; at most {_INT32_MAX} are supported.")
    return np.ascontiguousarray(W)


def _raise_bad_rows(W, n_bad):
    """Error path only: locate the first bad row for the message."""
    if n_bad:
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(W.max(axis=1)) | np.isnan(W).any(axis=1)
        first = int(np.flatnonzero(bad)[0]) if bad.any() else -1
        raise ValueError(
            f"{int(n_bad)} row(s) of W have no finite weight or contain NaN/+inf "
            f"(first: row {first})."
        )


def _check_L(L, K):
    if L is None:
        return K
    if (
        isinstance(L, (bool, np.bool_))
        or not isinstance(L, (numbers.Real, np.number))
        or not np.isfinite(L)
        or int(L) != L
        or L < 1
    ):
        raise ValueError(f"L must be an integer >= 1, got {L!r}.")
    return min(int(L), K)


def _method_code(method, L, K):
    if method == "auto":
        return _topl.SCAN if L <= _SCAN_MAX_L else _topl.SELECT
    try:
        return _METHODS[method]
    except (KeyError, TypeError):
        raise ValueError(
            f"method must be 'auto', 'select' or 'scan', got {method!r}."
        ) from None


def top_l_indices(W, L, *, method="auto", n_threads=None):
    """Column indices of the L largest weights of each row (SelectTopL, Hughes & Sudderth 2016,
    Sec. 3.2).

    Parameters
    ----------
    W : array-like of shape (N, K)
        Log-weights W_nk = E[log pi_k] + E[log p(x_n | phi_k)].
    L : int >= 1
        Sparsity level; clamped to K (L = K returns every index).
    method : {"auto", "select", "scan"}
        "select": introselect (``std::nth_element``), O(K) per row; "scan": one pass keeping
        a sorted buffer of the L best so far, fastest for small L; "auto" picks by L.
    n_threads : int or None
        OpenMP threads over rows, see :func:`sparseclust.utils.effective_n_threads`.

    Returns
    -------
    indices : ndarray of shape (N, min(L, K)), int32
        Ascending within each row. Ties are broken toward the smaller column index (the first
        L of a stable descending sort).

    Raises
    ------
    ValueError
        If a row contains NaN or +inf or has no finite weight.
    """
    W = _check_W(W)
    K = W.shape[1]
    L = _check_L(L, K)
    code = _method_code(method, L, K)
    _, idx, n_bad = _topl.top_l(W, L, code, False, effective_n_threads(n_threads))
    _raise_bad_rows(W, n_bad)
    return idx


def _responsibilities(W, L, method, n_threads):
    W = _check_W(W)
    K = W.shape[1]
    L = _check_L(L, K)
    nt = effective_n_threads(n_threads)
    if L >= K:
        R, n_bad = _topl.dense_responsibilities(W, nt)
        _raise_bad_rows(W, n_bad)
        idx = np.broadcast_to(np.arange(K, dtype=np.int32), R.shape).copy()
        return R, idx
    v, idx, n_bad = _topl.top_l(W, L, _method_code(method, L, K), True, nt)
    _raise_bad_rows(W, n_bad)
    return v, idx


def responsibilities(W, L=None, *, n_threads=None):
    """L-sparse responsibilities (TopLRespFromWeights, Hughes & Sudderth 2016, Alg. 1).

    r_n = exp(W_n[i_n] - max W_n[i_n]) / sum(...) over the top-L indices i_n of row n, the
    optimal L-sparse solution of Eq. (8) (Sec. 3.1). A weight of -inf gets responsibility 0.

    Parameters
    ----------
    W : array-like of shape (N, K)
    L : int >= 1 or None
        None or L >= K gives the dense responsibilities (L' = K, indices 0..K-1 per row).
    n_threads : int or None

    Returns
    -------
    values : ndarray of shape (N, L'), W's float dtype
        Non-negative, each row sums to 1.
    indices : ndarray of shape (N, L'), int32, ascending within each row.

    Raises
    ------
    ValueError
        If a row contains NaN or +inf or has no finite weight.
    """
    return _responsibilities(W, L, "auto", n_threads)


def dense_responsibilities(W, *, n_threads=None):
    """Dense responsibilities (DenseRespFromWeights, Hughes & Sudderth 2016, Alg. 1): row-wise
    softmax.

    Equivalent to ``exp(W - logsumexp(W, axis=1, keepdims=True))``, computed stably
    (row maximum subtracted). Returns an (N, K) array in W's float dtype.
    """
    W = _check_W(W)
    R, n_bad = _topl.dense_responsibilities(W, effective_n_threads(n_threads))
    _raise_bad_rows(W, n_bad)
    return R


def sparse_responsibilities(W, L, *, n_threads=None):
    """L-sparse responsibilities as a canonical ``scipy.sparse.csr_array`` of shape (N, K).

    At most L stored entries per row (exactly min(L, K); entries whose weight is -inf are
    stored as explicit zeros), column indices sorted, rows summing to 1.
    """
    W = _check_W(W)
    v, i = _responsibilities(W, L, "auto", n_threads)
    N, Lp = v.shape
    indptr = np.arange(0, N * Lp + 1, Lp, dtype=np.int64 if N * Lp >= 2**31 else np.int32)
    return sp.csr_array((v.ravel(), i.ravel(), indptr), shape=W.shape)


def summary_statistics(values, indices, X, n_components, *, moments="full", n_threads=None):
    """Sufficient statistics of sparse responsibilities (Hughes & Sudderth 2016, Eq. 7).

    With r_nk the responsibilities (``values[n, l]`` at column ``indices[n, l]``):
    N_k = sum_n r_nk, Sx_k = sum_n r_nk x_n, Sxx_k = sum_n r_nk x_n x_n^T,
    Sxx_diag_k = sum_n r_nk x_n**2, entropy_k = -sum_n r_nk log r_nk (0 log 0 = 0).
    Cost O(N L D^2) for the full second moment (O(N K D^2) when dense).

    Parameters
    ----------
    values : array-like of shape (N, L), finite, >= 0
    indices : array-like of shape (N, L), integers in [0, n_components), distinct per row
    X : array-like of shape (N, D)
    n_components : int, K
    moments : {"full", "diag", "none"}
        Which second moment to return: ``Sxx`` (K, D, D), ``Sxx_diag`` (K, D), or neither.
    n_threads : int or None
        Threads over clusters; the result is bit-identical for every thread count.

    Returns
    -------
    stats : dict
        ``N`` (K,), ``Sx`` (K, D), ``Sxx`` or ``Sxx_diag`` (per ``moments``), ``entropy`` (K,),
        all float64 whatever the input dtype (accumulated in double precision).
    """
    if moments not in _MOMENTS:
        raise ValueError(f"moments must be 'full', 'diag' or 'none', got {moments!r}.")
    if isinstance(n_components, (bool, np.bool_)) or int(n_components) != n_components \
            or n_components < 1:
        raise ValueError(f"n_components must be an integer >= 1, got {n_components!r}.")
    K = int(n_components)
    if K > _INT32_MAX:
        raise ValueError(f"n_components={K} exceeds the int32 range of the cluster indices.")
    if sp.issparse(X) or sp.issparse(values):
        raise ValueError("values and X must be dense arrays; scipy.sparse input is not supported.")
    values = np.asarray(values)
    X = np.asarray(X)
    dtype = np.float32 if (values.dtype == np.float32 and X.dtype == np.float32) else np.float64
    values = np.ascontiguousarray(values, dtype=dtype)
    X = np.ascontiguousarray(X, dtype=dtype)
    indices = np.asarray(indices)
    if values.ndim != 2 or indices.shape != values.shape:
        raise ValueError(
            f"values and indices must be 2-D arrays of the same shape, got {values.shape} "
            f"and {indices.shape}."
        )
    if X.ndim != 2 or X.shape[0] != values.shape[0]:
        raise ValueError(
            f"X must be a 2-D array with {values.shape[0]} rows, got shape {X.shape}."
        )
    if not np.issubdtype(indices.dtype, np.integer):
        raise ValueError(f"indices must be integers, got dtype {indices.dtype}.")
    if not np.isfinite(X).all():
        raise ValueError("X contains NaN or infinity.")
    if indices.dtype != np.int32 and indices.size and (indices.min() < 0 or indices.max() >= K):
        # checked before the int32 cast could wrap them; int32 input is checked by the kernel
        raise ValueError(f"indices must lie in [0, {K}).")
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    if values.shape[1] > 1:
        srt = np.sort(indices, axis=1)
        if (srt[:, 1:] == srt[:, :-1]).any():
            raise ValueError("indices must be distinct within each row.")
    with single_threaded_blas():
        Nk, Sx, S2, ent, n_bad_index, n_bad_value = _stats.summary_statistics(
            values, indices, X, K, _MOMENTS[moments], effective_n_threads(n_threads)
        )
    if n_bad_index:
        raise ValueError(f"{n_bad_index} index(es) outside [0, {K}).")
    if n_bad_value:
        raise ValueError(f"{n_bad_value} responsibility value(s) are negative or not finite.")
    out = {"N": Nk, "Sx": Sx}
    if moments == "full":
        out["Sxx"] = S2
    elif moments == "diag":
        out["Sxx_diag"] = S2
    out["entropy"] = ent
    return out
