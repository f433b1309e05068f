# SPDX-License-Identifier: BSD-3-Clause
"""Dense rows read minibatch by minibatch, for ``SparseGaussianMixture.fit``.

A re-iterable stream of minibatches (e.g. :class:`sparseclust.datasets.PatchStream`) is
wrapped in :class:`StreamRows`, which offers ``SparseGaussianMixture`` the same pieces as the
partitions of a Dask collection (:class:`sparseclust._dask.DaskRows`): the shape and dtype,
the data moments of the priors, sums of per-minibatch statistics (the initial
responsibilities) and the engine's source, whose minibatches are the fixed batches of
memoized training. A first read validates every minibatch and accumulates the moments;
every later read validates again (cheaply) and never keeps the data.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import validate_data

from .._input import reject_text

__all__ = ["StreamRows", "is_row_stream"]


def is_row_stream(X):
    """Whether ``X`` is a stream of minibatches: an iterable without a ``shape`` that is not
    a list, tuple, string or mapping (those are array-likes or errors for ``fit``)."""
    return (not hasattr(X, "shape") and hasattr(X, "__iter__")
            and not isinstance(X, (list, tuple, str, bytes, dict)))


class _Moments:
    """The moments ``SparseGaussianMixture._build_prior`` reads, accumulated over minibatches:
    ``sum x`` and ``sum x x^T`` (its diagonal when not ``full``) in float64, and for the
    centred moments the pooled scatter about the mean (Chan, Golub & LeVeque 1979), which
    does not cancel for data far from the origin. One minibatch gives the same figures as
    the whole array (``X.T @ X / n``, ``X.mean(axis=0)``)."""

    def __init__(self, D, full, kind):
        self.full = bool(full)
        self.centred = kind == "centred"
        self.second_moment = kind == "zero_mean"
        self.shape, self.dtype = None, None  # set by StreamRows after the read
        self.n = 0
        self.s1 = np.zeros(D)
        self.s2 = None
        self.M2 = None

    def add(self, X):
        X = np.asarray(X, dtype=np.float64)
        nb = X.shape[0]
        if self.centred:
            mb = X.sum(axis=0) / nb
            Xc = X - mb
            M2b = Xc.T @ Xc if self.full else np.einsum("ij,ij->j", Xc, Xc)
            if self.M2 is None:
                self.M2 = M2b
            else:
                mean = self.s1 / self.n
                delta = mb - mean
                tot = self.n + nb
                self.M2 = self.M2 + M2b + (
                    np.outer(delta, delta) if self.full else delta * delta) * (self.n * nb / tot)
        elif self.second_moment:
            s2 = X.T @ X if self.full else np.einsum("ij,ij->j", X, X)
            self.s2 = s2 if self.s2 is None else self.s2 + s2
        self.s1 = self.s1 + X.sum(axis=0) if self.n else X.sum(axis=0)
        self.n += nb

    # the interface of _build_prior
    def mean(self):
        return self.s1 / self.n

    def second(self):
        return self.s2 / self.n if self.full else np.diag(self.s2 / self.n)

    def cov(self):
        return self.M2 / (self.n - 1)

    def var(self):
        return (np.diag(self.M2) if self.full else self.M2) / (self.n - 1)


class StreamRows:
    """The minibatches of a re-iterable stream of dense rows, validated, for
    ``SparseGaussianMixture.fit``.

    Parameters
    ----------
    est : SparseGaussianMixture
        Sets ``n_features_in_`` (``reset=True``) or checks the minibatches against it.
    stream : iterable of array-like of shape (n_i, n_features)
        Re-iterable: every iteration must yield the same minibatches.
    whom : str
        Named in error messages.
    reset : bool
    moments : {None, 'zero_mean', 'centred'}
        The second moments the priors need besides the mean: ``sum x x^T`` (zero-mean
        model), the centred scatter, or none (``covariance_prior`` given).
    full : bool
        Full (D, D) second moments, else their diagonal.
    """

    def __init__(self, est, stream, whom, *, reset=True, moments=None, full=True):
        it = iter(stream)
        if it is stream:
            raise TypeError(
                f"{whom} reads a stream once per pass: it must be re-iterable (iterating it "
                "again starts again, as a PatchStream or CorpusStream does), not a one-pass "
                "iterator or generator; call partial_fit on each minibatch instead.")
        self.stream = stream
        self.whom = whom
        self._est = est
        rows, first_dtype, mo = [], None, None
        for Xb in it:
            Xb = self._check(Xb, reset=reset and first_dtype is None, dtype=first_dtype)
            if first_dtype is None:
                first_dtype = Xb.dtype
                mo = _Moments(Xb.shape[1], full, moments)
            rows.append(Xb.shape[0])
            mo.add(Xb)
        n = int(sum(rows))
        if first_dtype is None or n == 0:
            raise ValueError(f"{whom}: cannot fit on an empty dataset: the stream has no rows.")
        if n < 2:
            raise ValueError(f"Found array with {n} sample(s) (shape=({n}, "
                             f"{est.n_features_in_})) while a minimum of 2 is required by "
                             f"{type(est).__name__}.")
        self.shape = (n, int(est.n_features_in_))
        self.dtype = first_dtype
        self.n_partitions = len(rows)
        self.rows = np.asarray(rows, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.rows)]).astype(np.int64)
        mo.shape, mo.dtype = self.shape, self.dtype
        self._moments = mo

    def _check(self, Xb, reset, dtype):
        """A minibatch as ``fit`` validates an array (the first sets the dtype, float32 or
        float64, and ``n_features_in_``; the others are converted to that dtype)."""
        if sp.issparse(Xb):
            raise TypeError(f"{self.whom}: the minibatches of a stream must be dense arrays "
                            f"of feature vectors, got a sparse {type(Xb).__name__} (a corpus "
                            "stream is for the topic models)")
        reject_text(Xb, self.whom, counts=False)
        return validate_data(self._est, Xb, dtype=[np.float64, np.float32] if dtype is None
                             else dtype, reset=reset, order="C", ensure_min_samples=1)

    def batches(self):
        """The validated minibatches, read again (a mismatch with the first read raises)."""
        i = 0
        for Xb in self.stream:
            Xb = self._check(Xb, reset=False, dtype=self.dtype)
            if i >= self.n_partitions or Xb.shape[0] != self.rows[i]:
                raise ValueError(
                    f"{self.whom}: the stream yielded other minibatches than in its first "
                    f"read (minibatch {i}: {Xb.shape[0]} rows); a stream must yield the same "
                    "minibatches at every iteration")
            yield Xb
            i += 1
        if i != self.n_partitions:
            raise ValueError(f"{self.whom}: the stream yielded {i} minibatches, "
                             f"{self.n_partitions} in its first read")

    def moments(self, full):
        """The moments the priors read (accumulated during the first read)."""
        return self._moments

    def split_rows(self, A):
        """Per-minibatch argument tuples holding the minibatch's rows of ``A``."""
        return [(A[self.offsets[i]:self.offsets[i + 1]],) for i in range(self.n_partitions)]

    def head(self, n_rows):
        """The rows of the first minibatches, up to the first that brings at least
        ``n_rows`` rows."""
        got, total = [], 0
        for Xb in self.batches():
            got.append(Xb)
            total += Xb.shape[0]
            if total >= n_rows:
                break
        return got[0] if len(got) == 1 else np.vstack(got)

    def map_sum(self, fn, per_part, shared):
        """``sum_i fn(minibatch_i, *shared, *per_part[i])`` over the minibatches, in order."""
        total = None
        for i, Xb in enumerate(self.batches()):
            s = fn(Xb, *shared, *(() if per_part is None else per_part[i]))
            total = s if total is None else total + s
        return total

    def wrap(self, model):
        """(source, model) for the engine: the minibatches as the fixed batches of memoized
        training, and the model with its candidate sets kept per batch number (a batch's
        data are new arrays at every pass)."""
        return _Source(self), _PerBatchModel(model)


class _Source:
    """The validated minibatches as an engine stream (re-iterable, without a shape)."""

    def __init__(self, rows):
        self._rows = rows

    def __iter__(self):
        return self._rows.batches()


class _PerBatchModel:
    """The engine's view of a model whose per-batch caches (candidate sets) are keyed by the
    batch's number instead of the identity of its array: the engine's ``visit(X, params, b)``
    hands the model a persistent key for batch ``b``; everything else is the model's own."""

    def __init__(self, model):
        self._model = model
        self._keys = []

    def __getattr__(self, name):
        return getattr(self._model, name)

    def visit(self, X, params, batch):
        while len(self._keys) <= batch:
            self._keys.append(object())
        m = self._model
        m._batch_key = self._keys[batch]
        try:
            return m.visit(X, params, batch)
        finally:
            m._batch_key = None
