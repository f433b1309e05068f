# SPDX-License-Identifier: BSD-3-Clause
"""Stochastic EM for LDA (Zaheer & Kottur, Sec. 3.3): see :class:`StochasticEMLDA`."""

from collections import namedtuple

import numpy as np

__all__ = ["token_layout"]

#: token layout of a count matrix: CSR structure, tokens per entry and token offsets per document
TokenLayout = namedtuple("TokenLayout", "indptr indices cnt tokptr")


def token_layout(X):
    """Tokens of the CSR count matrix X: entry (d, v) with count c_dv holds round(c_dv) tokens
    (fractional counts are rounded half up), laid out document by document in entry order."""
    indptr = np.ascontiguousarray(X.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(X.indices, dtype=np.int32)
    cnt = np.floor(np.asarray(X.data, dtype=np.float64) + 0.5)
    if cnt.size and cnt.max() > np.iinfo(np.int32).max:
        raise ValueError("a count of X exceeds 2**31 - 1 tokens.")
    cnt = np.ascontiguousarray(cnt, dtype=np.int32)
    D = indptr.size - 1
    rows = np.repeat(np.arange(D), np.diff(indptr))
    per_doc = np.bincount(rows, weights=cnt, minlength=D).astype(np.int64)
    tokptr = np.zeros(D + 1, dtype=np.int64)
    np.cumsum(per_doc, out=tokptr[1:])
    return TokenLayout(indptr, indices, cnt, tokptr)
