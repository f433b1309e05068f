# SPDX-License-Identifier: BSD-3-Clause
"""Row and statistics helpers of the Dirichlet-process mixture's moves (:mod:`._dp_moves`).

The statistics edits (restrict to clusters, update, zero, pad, merge two clusters), the
re-inference of rows by the local step (:func:`reinfer_rows`, here or on the partitions of a
Dask collection), the fetch of rows from the batches, the fold of rows' responsibilities
after merges, the fresh clusters of a birth, and the pair entropies gathered during a pass
with their sparse sums.
"""

import copy

import numpy as np

from .._engine import SuffStats
from .._moves import cannot_pass, fetch_rows, improves
from . import _gaussian


def restrict(stats, idx):
    """The statistics of the clusters ``idx`` only (a new SuffStats)."""
    return SuffStats(**{k: np.ascontiguousarray(v[idx]) for k, v in stats.items()})


def _stats_on(model, ids, values, indices, X):
    """The rows' statistics on the sorted clusters ``ids`` alone (``indices`` all lie in
    ``ids``): ``model.stats_from_responsibilities(values, indices, X)`` restricted to
    ``ids``, the same numbers (the kernel sums each cluster over its rows in row order,
    whatever the number of clusters)."""
    local = model.plain_model(ids.size)
    return local.stats_from_responsibilities(
        values, np.searchsorted(ids, indices).astype(np.int32), X)


def _used_stats(model, values, indices, X):
    """The clusters ``ids`` the rows' responsibilities name (sorted) and the rows'
    statistics on those alone (:func:`_stats_on`)."""
    ids = np.unique(indices).astype(np.int64)
    return ids, _stats_on(model, ids, values, indices, X)


def _move_stats(stats, ids_old, before, ids_new, after):
    """``stats - before + after`` in place, where ``before`` holds the statistics of the
    clusters ``ids_old`` only and ``after`` those of ``ids_new`` (the same numbers as the
    full-width update: the other clusters' entries are zero in both)."""
    for k, v in stats.items():
        v[ids_old] = v[ids_old] - before[k]
        v[ids_new] = v[ids_new] + after[k]


def _zero(stats, j):
    for _k, v in stats.items():
        v[j] = 0.0


def _own(stats):
    """A SuffStats whose arrays may be edited in place."""
    return stats.copy()


def reinfer_rows(X, model, plain, params0, idx, K, vals_old, idx_old):
    """The delete move's re-inference of the rows X (their old responsibilities ``vals_old``
    over clusters ``idx_old``) by the local step of ``plain`` under ``params0``, defined on
    the clusters ``idx`` of the K: (the clusters ``ids`` the rows use before or after, their
    statistics before, after, new values, new indices). The statistics are those of
    ``model.stats_from_responsibilities`` restricted to ``ids`` (every other cluster's are
    zero), computed on ``ids`` alone."""
    Xt = np.ascontiguousarray(X)
    vals_old = np.ascontiguousarray(vals_old)
    idx_old = np.ascontiguousarray(idx_old)
    vals_new, loc = _rerun_local(copy.copy(plain), Xt, params0, vals_old.dtype)
    idx_new = idx[loc].astype(np.int32)
    # the re-inferred rows keep their support width (when L had to shrink)
    vals_new, idx_new = _pad_support(vals_new, idx_new, vals_old.shape[1], K)
    ids = np.union1d(idx_old, idx_new).astype(np.int64)
    before = _stats_on(model, ids, vals_old, idx_old, Xt)
    after = _stats_on(model, ids, vals_new, idx_new, Xt)
    return ids, before, after, vals_new, idx_new


def _reinfer_rows_all(X, model, plain, params0, idx, K, vals_old, idx_old):
    """:func:`reinfer_rows` with the statistics on all K clusters (zero outside the clusters
    used): (before, after, new values, new indices)."""
    ids, before, after, vals_new, idx_new = reinfer_rows(X, model, plain, params0, idx, K,
                                                         vals_old, idx_old)
    full = []
    for st in (before, after):
        f = model.empty_stats()
        for k, v in st.items():
            f[k][ids] = v
        full.append(f)
    return full[0], full[1], vals_new, idx_new


def _own_rows(X):
    return (np.ascontiguousarray(X),)


def _fetch_rows(batches, sel):
    """{b: the rows ``sel[b]`` of batch b, in that order, dense}
    (:func:`sparseclust._moves.fetch_rows`)."""
    return fetch_rows(batches, sel, take=lambda X, ids: np.ascontiguousarray(X[ids]),
                      pack=_own_rows, unpack=lambda got: got[0])


def _csr(v, idx, K):
    import scipy.sparse as sp

    n, Lk = v.shape
    return sp.csr_array((v.ravel(), idx.ravel(), np.arange(0, n * Lk + 1, Lk)), shape=(n, K))


def _fold_merged(values, indices, merge_map):
    """Rows' responsibilities after merges: index k becomes ``merge_map[k]`` (b -> a for a
    merge of b into a), and the entries a row then holds twice are summed into one (the
    other keeps its old index, a removed cluster, with value 0). The statistics of the
    folded rows are the rows' share of the merged statistics: N, Sx, Sxx add, and the
    entropy of the merged entry is -(r_a + r_b) log(r_a + r_b), which is what
    ``H_a + H_b + PH_ab`` holds for the row."""
    indices = np.asarray(indices)
    idx = np.asarray(merge_map)[indices].astype(np.int32)
    vals = np.array(values, copy=True)
    # rows holding one target twice or more: the first such entry keeps the target and the
    # sum, the others the merged-away indices of the group (removed, distinct in the row)
    srt = np.sort(idx, axis=1)
    for r in np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1)):
        row, orig = idx[r].copy(), indices[r]
        for t in np.unique(row):
            cols = np.flatnonzero(row == t)
            if cols.size < 2:
                continue
            keep = cols[0]
            spare = [int(o) for o in orig[cols] if o != t]
            vals[r, keep] = vals[r, cols].sum()
            idx[r, keep] = t
            for c, o in zip(cols[1:], spare, strict=False):
                vals[r, c] = 0
                idx[r, c] = o
    return vals, idx


def _row_pair_entropy(values, indices, K):
    """Pair entropies of the rows' L-sparse supports: for every two entries x = r_na,
    y = r_nb > 0 of a row, ``h(x, y) = x log x + y log y - (x + y) log(x + y)`` (< 0) keyed
    ``min(a, b) * K + max(a, b)``; returns (keys, h), one entry per such pair of a row."""
    v = np.asarray(values, dtype=np.float64)
    idx = np.asarray(indices, dtype=np.int64)
    Lk = v.shape[1]
    i, j = np.triu_indices(Lk, 1)
    x, y = v[:, i], v[:, j]
    a, b = idx[:, i], idx[:, j]
    m = (x > 0) & (y > 0) & (a != b)
    x, y, a, b = x[m], y[m], a[m], b[m]
    xy = x + y
    h = x * np.log(x) + y * np.log(y) - xy * np.log(xy)
    return np.minimum(a, b) * K + np.maximum(a, b), h


#: pair entries (rows x L(L - 1)/2) per chunk of :func:`_block_pair_entropy`
PAIR_CHUNK = 1 << 16


def _block_pair_entropy(values, indices, K):
    """:func:`_row_pair_entropy` of a block of rows summed per pair key (sorted unique keys,
    sums), computed over chunks of at most about :data:`PAIR_CHUNK` pair entries: with dense
    responsibilities (``L=None``) a row has K(K - 1)/2 pairs, and holding every row's pairs
    until the end of the pass took memory in proportion to rows x K^2 (about 7 GB for 5,000
    rows at K = 200); summed per block it is at most K(K - 1)/2 entries per block."""
    n, Lk = values.shape
    step = max(1, PAIR_CHUNK // max(1, Lk * (Lk - 1) // 2))
    keys, hs = [], []
    for s in range(0, n, step):
        k, h = _row_pair_entropy(values[s:s + step], indices[s:s + step], K)
        k, h = _sum_pairs([k], [h])
        keys.append(k)
        hs.append(h)
    return _sum_pairs(keys, hs)


def _sum_pairs(keys, values):
    """The sparse sum of lists of (keys, values): (sorted unique keys, summed values)."""
    if not len(keys):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    k = np.concatenate(keys)
    v = np.concatenate(values)
    uk, inv = np.unique(k, return_inverse=True)
    return uk, np.bincount(inv.ravel(), weights=v, minlength=uk.size)


def _pair_lookup(pairs, keys):
    """The values of the sparse pair sum ``pairs = (sorted keys, values)`` at ``keys`` (0
    where absent)."""
    pk, pv = pairs
    keys = np.asarray(keys, dtype=np.int64)
    if pk.size == 0:
        return np.zeros(keys.shape)
    pos = np.minimum(np.searchsorted(pk, keys), pk.size - 1)
    return np.where(pk[pos] == keys, pv[pos], 0.0)


def _pad(stats, n_new):
    """``stats`` with ``n_new`` empty clusters appended (a new SuffStats)."""
    return SuffStats(**{k: np.concatenate([v, np.zeros((n_new,) + v.shape[1:], dtype=v.dtype)])
                        for k, v in stats.items()})


def _pad_support(vals, idx, width, K):
    """Rows re-inferred with a narrower support than ``width`` (fewer clusters than L) padded
    with zero responsibilities on other clusters (of ``range(K)``), which change no
    statistic."""
    if vals.shape[1] >= width:
        return vals, idx
    pad = width - vals.shape[1]
    vals = np.hstack([vals, np.zeros((vals.shape[0], pad), dtype=vals.dtype)])
    extra = np.empty((idx.shape[0], pad), dtype=np.int32)
    for r in range(idx.shape[0]):
        extra[r] = np.setdiff1d(np.arange(K), idx[r])[:pad]
    return vals, np.hstack([idx, extra])


def _rerun_local(plain, Xt, params, dtype):
    """The local step of ``plain`` on ``Xt``: (values, indices in ``plain``'s clusters)."""
    got = []

    def keep(start, values, indices, Xc):
        got.append((start, np.array(values), np.array(indices)))

    plain._collect = keep
    try:
        plain.local_step(Xt, params)
    finally:
        plain._collect = None
    got.sort(key=lambda t: t[0])
    return (np.vstack([t[1] for t in got]).astype(dtype),
            np.vstack([t[2] for t in got]).astype(np.int64))


def _axial_labels(Z, J, rng):
    """Rows of unit norm ``Z`` grouped by the axis they lie along (z and -z alike): k-means++
    seeding (Arthur & Vassilvitskii 2007) under the distance ``1 - (z . c)^2`` (half the
    squared distance between z z^T and c c^T), each row then to its nearest seed."""
    n = Z.shape[0]
    seeds = [int(rng.randint(n))]
    dmin = 1.0 - (Z @ Z[seeds[0]]) ** 2
    for _ in range(J - 1):
        p = np.maximum(dmin, 0.0)
        total = p.sum()
        if not total > 0.0:
            break
        seeds.append(int(rng.choice(n, p=p / total)))
        dmin = np.minimum(dmin, 1.0 - (Z @ Z[seeds[-1]]) ** 2)
    return ((Z @ Z[seeds].T) ** 2).argmax(1).astype(np.int32)


#: the fit of a birth's fresh clusters has converged when an iteration raises its ELBO by
#: less than this many nats per row (the estimator's default ``tol``)
FRESH_TOL = 1e-3


def _fresh_clusters(model, X, J, rng, n_iter, screen=True):
    """Statistics of ``J`` clusters fit to the rows ``X`` by a plain mixture; None when fewer
    than two clusters keep mass, or (``screen``) when they do not explain the rows better
    than one cluster does.

    Two starts, the better kept: k-means++ seeds (Arthur & Vassilvitskii 2007) on the rows,
    each row to its nearest seed; and the rows grouped by the axis along which they lie from
    the rows' mean (:func:`_axial_labels`). The first start separates groups by where they
    lie; the second by the direction in which they spread, which the first misses when the
    groups share a centre and differ in covariance (e.g. image patches with the mean
    removed, whose Euclidean seeds split by contrast, which one Gaussian already explains).

    Each start runs iterations of the local and global steps of the plain mixture on ``X``,
    at most ``n_iter``. It is valued at its start and after each iteration by the ELBO of
    the rows ``X`` alone at the optimal global parameters of its statistics, its clusters
    ordered by size (the order the stick-breaking prior favours),

        L_J(X) = alloc(N_(1) >= ... >= N_(J)) + sum_j H_j + sum_j C_j,

    with ``alloc`` the allocation terms of the weight prior, ``H_j`` the entropy terms and
    ``C_j`` the data terms (:func:`_gaussian.optimal_value`). A start stops once an
    iteration gains less than :data:`FRESH_TOL` nats per row. The start of the larger value
    is kept.

    The screen compares that value with one cluster holding every row,
    ``L_1(X) = alloc(n) + C(X)``: a start is dropped as soon as its last gain, repeated in
    each iteration left, would not lift it past ``L_1(X)``
    (:func:`sparseclust._moves.cannot_pass`), and the kept start must end above it. Both
    are cuts of cost, not equivalences: a birth that fails them is rejected before the
    re-inference of its target, though the re-inference and the refinement rounds could
    still have turned it into a whole-data gain, and a start whose gains would grow again
    after the cut could have passed. The caller screens only a target whose rows are all in
    ``X`` (a subsample carries the fresh clusters' cost on fewer rows than the whole-data
    test).
    """
    from sklearn.cluster import kmeans_plusplus

    Xd = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    centers, _ = kmeans_plusplus(Xd, J, random_state=rng)
    d2 = (Xd ** 2).sum(1)[:, None] - 2.0 * Xd @ centers.T + (centers ** 2).sum(1)[None]
    Z = Xd - Xd.mean(axis=0)
    norms = np.linalg.norm(Z, axis=1, keepdims=True)
    Z = Z / np.where(norms > 0, norms, 1.0)
    plain = model.plain_model(J)
    prior = model.prior

    def value(stats):
        comp = _gaussian.optimal_component_terms(stats, prior)
        return _gaussian.optimal_value(np.sort(stats["N"])[::-1], stats["entropy"], comp,
                                       prior)

    single = None
    if screen:
        single = value(model.plain_model(1).stats_from_responsibilities(
            np.ones((n, 1), dtype=X.dtype), np.zeros((n, 1), dtype=np.int32), X))
    best = None
    for labels in (d2.argmin(1).astype(np.int32), _axial_labels(Z, J, rng)):
        stats = plain.stats_from_responsibilities(
            np.ones((n, 1), dtype=X.dtype), labels[:, None], X)
        values = [value(stats)]
        for it in range(n_iter):
            stats = plain.local_step(X, plain.global_step(stats))
            values.append(value(stats))
            if values[-1] - values[-2] < FRESH_TOL * n or (
                    screen and cannot_pass(values, n_iter - it - 1, single)):
                break
        if screen and not improves(values[-1], single):
            continue
        if np.count_nonzero(stats["N"] >= 1.0) < 2:
            continue
        if best is None or values[-1] > best[0]:
            best = (values[-1], stats)
    return None if best is None else best[1]


def _merge_into(st, a, b, ph):
    """Merge cluster b into a in statistics (in place): N, Sx, Sxx add; the entropy of the
    merged cluster is H_a + H_b + ph."""
    for k, v in st.items():
        if k == "entropy":
            v[a] = v[a] + v[b] + ph
        else:
            v[a] = v[a] + v[b]
        v[b] = 0.0
