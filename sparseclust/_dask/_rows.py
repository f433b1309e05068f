# SPDX-License-Identifier: BSD-3-Clause
"""SparseGaussianMixture on a Dask collection of dense rows: the partitions validated on the
workers as ``fit`` validates an array, the pooled data moments of the prior, sums of
per-partition statistics (the initial responsibilities) and the engine's source and model."""

import copy

import numpy as np
import scipy.sparse as sp

from ._core import DaskSource, _bag_item, _DistributedModel, _Runner, _set_n_features, _sum, _tree

__all__ = ["DaskRows"]


def _check_rows(block, template, whom, n_features, dtype):
    """Validate one partition of dense rows as ``SparseGaussianMixture.fit`` validates an
    in-memory array (same errors); returns a C-contiguous array of ``dtype``."""
    from sklearn.utils.validation import validate_data

    if isinstance(block, (list, tuple)):  # a bag partition: 2-D blocks or 1-D rows
        items = [_bag_item(b, whom, n_features) for b in block]
        if not items:
            block = np.zeros((0, n_features), dtype=dtype)
        elif any(sp.issparse(b) for b in items):  # refused below, as in process
            block = sp.vstack([sp.csr_array(b) for b in items], format="csr")
        else:
            block = np.vstack(items)
    if getattr(block, "ndim", 2) != 2 or block.shape[1] != n_features:
        raise ValueError(
            f"{whom}: a partition has shape {getattr(block, 'shape', None)}; every partition "
            f"must have the {n_features} columns of the first."
        )
    if block.shape[0] == 0:
        return np.zeros((0, n_features), dtype=dtype)
    return validate_data(copy.copy(template), block, dtype=dtype, reset=True, order="C",
                         ensure_min_samples=1)


def _moments_part(part, full):
    """(n, mean, scatter about the mean) of one partition: the (D, D) scatter when ``full``,
    else its diagonal."""
    X = np.asarray(part, dtype=np.float64)
    n = X.shape[0]
    D = X.shape[1]
    if n == 0:
        return 0, np.zeros(D), np.zeros((D, D) if full else D)
    mean = X.mean(axis=0)
    Xc = X - mean
    return n, mean, (Xc.T @ Xc if full else np.einsum("ij,ij->j", Xc, Xc))


def _sum_moments(*items):
    """Pooled (n, mean, scatter) of several parts (Chan, Golub & LeVeque 1979)."""
    n, mean, M2 = items[0]
    mean, M2 = mean.copy(), M2.copy()
    for nb, mb, M2b in items[1:]:
        if nb == 0:
            continue
        tot = n + nb
        delta = mb - mean
        mean = mean + delta * (nb / tot)
        M2 = M2 + M2b + (np.outer(delta, delta) if M2.ndim == 2 else delta * delta) * (
            n * nb / tot)
        n = tot
    return n, mean, M2


class _PooledMoments:
    """The data moments ``SparseGaussianMixture._build_prior`` reads, from the pooled
    (n, mean, scatter) of the partitions."""

    def __init__(self, n, D, dtype, mean, M2):
        self.shape, self.dtype = (int(n), int(D)), dtype
        self._mean, self._M2 = mean, M2

    def mean(self):
        return self._mean

    def second(self):
        n = self.shape[0]
        if self._M2.ndim == 2:
            return self._M2 / n + np.outer(self._mean, self._mean)
        return np.diag(self._M2 / n + self._mean ** 2)

    def cov(self):
        return self._M2 / (self.shape[0] - 1)

    def var(self):
        return (np.diag(self._M2) if self._M2.ndim == 2 else self._M2) / (self.shape[0] - 1)


def _ship_same(params):
    return params


def _collection_dtype(X):
    """The float dtype the partitions are validated to: the collection's when it is float32
    or float64 (as ``validate_data(dtype=[np.float64, np.float32])`` keeps it), else float64."""
    import dask.array as da

    if isinstance(X, da.Array):
        dt = np.dtype(X.dtype)
    else:
        import dask

        first = dask.compute(X.take(1, npartitions=-1, compute=False))[0]
        dt = np.asarray(first[0]).dtype if first else np.dtype(np.float64)
    return dt if dt in (np.float32, np.float64) else np.dtype(np.float64)


class DaskRows:
    """The partitions of a Dask collection of dense rows, validated on the workers, for
    ``SparseGaussianMixture.fit``: its shape and dtype, the pooled data moments of the prior
    (:meth:`moments`), sums of per-partition statistics (:meth:`map_sum`, the initial
    responsibilities) and the engine's source and model (:meth:`wrap`)."""

    def __init__(self, est, X, whom, reset=True):
        dtype = _collection_dtype(X)
        self.runner = runner = _Runner(X, type(est)(), whom, check=_check_rows,
                                       check_args=(dtype,))
        n, D = int(runner.rows.sum()), runner.n_features
        if n < 2:
            raise ValueError(f"Found array with {n} sample(s) (shape=({n}, {D})) while a "
                             f"minimum of 2 is required by {type(est).__name__}.")
        if reset:
            _set_n_features(est, D)
        elif D != est.n_features_in_:
            raise ValueError(f"X has {D} features, but {type(est).__name__} is expecting "
                             f"{est.n_features_in_} features as input.")
        self.shape = (n, D)
        self.dtype = dtype
        self.n_partitions = len(runner.rows)
        self.offsets = np.concatenate([[0], np.cumsum(runner.rows)]).astype(np.int64)

    def moments(self, full):
        """The pooled moments (:class:`_PooledMoments`) of all rows."""
        import dask

        r = self.runner
        leaves = [dask.delayed(_moments_part, pure=False)(p, bool(full)) for p in r.parts]
        n, mean, M2 = r.compute(_tree(leaves, _sum_moments))[0]
        return _PooledMoments(n, self.shape[1], self.dtype, mean, M2)

    def split_rows(self, A):
        """Per-partition argument tuples holding the partition's rows of ``A``."""
        return [(A[self.offsets[i]:self.offsets[i + 1]],) for i in range(self.n_partitions)]

    def head(self, n_rows):
        """The rows of the first partitions, up to the first that brings at least
        ``n_rows`` rows (here, on the client)."""
        got, total = [], 0
        for i in range(self.n_partitions):
            if self.runner.rows[i]:
                got.append(self.runner.value(self.runner.parts[i]))
                total += got[-1].shape[0]
                if total >= n_rows:
                    break
        return np.vstack(got)

    def map_sum(self, fn, per_part, shared):
        """``sum_i fn(part_i, *shared, *per_part[i])`` over the partitions, by a tree of
        tasks (``shared`` broadcast once)."""
        import dask

        r = self.runner
        job = r.broadcast(tuple(shared))
        idx = [i for i in range(self.n_partitions) if r.rows[i]]
        leaves = [dask.delayed(_apply_part, pure=False)(
            r.parts[i], fn, job, () if per_part is None else per_part[i]) for i in idx]
        return r.compute(_tree(leaves, _sum))[0]

    def wrap(self, model):
        """(source, model) for the engine: the partitions as batches, the local step on the
        workers."""
        return DaskSource(self.runner), _DistributedModel(model, self.runner, _ship_same)


def _apply_part(part, fn, shared, own):
    return fn(part, *shared, *own)
