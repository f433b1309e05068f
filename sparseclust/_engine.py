# SPDX-License-Identifier: BSD-3-Clause
"""The learning-algorithm engine shared by every model.

Every model in sparseclust is *local step + global step* (see ``doc/engine.md``):

- the **local step** maps a batch of data and the current global parameters to additive
  sufficient statistics (:class:`SuffStats`), including the ELBO terms that depend on the local
  posteriors; the posteriors themselves are discarded;
- the **global step** maps statistics to global parameters;
- ``model.elbo(stats, params)`` evaluates the whole-data objective from statistics alone.

This module drives the two under three algorithms and knows nothing model-specific:

``batch``
    exact coordinate ascent: one local step over all data, then one global step.
``memoized``
    memoized variational inference (Hughes & Sudderth 2013; Hughes & Sudderth 2016, §4): the data
    are split
    once into B fixed batches whose statistics are cached. Visiting batch b replaces its cached
    statistics in the whole-data total, ``S <- S - S_b^old + S_b^new``, followed by a global step.
    During the first pass no batch has cached statistics yet, so the pass accumulates all batches
    under the initial parameters and runs a single global step at its end: the first memoized
    pass therefore equals one batch iteration.
``stochastic``
    stochastic variational inference (Hoffman et al. 2013; Mimno, Hoffman & Blei 2012, Alg. 1): a
    minibatch's
    statistics are scaled by ``total_samples / batch size`` and blended,
    ``S_t = (1 - rho_t) S_{t-1} + rho_t * scale * S_batch`` with ``rho_t = (delta + t)^(-kappa)``,
    ``t = 1, 2, ...``. For the conjugate-exponential models here the global natural parameters are
    affine in the statistics (``lambda = prior + S``), so blending statistics *is* the natural-
    gradient step on the global parameters.
"""

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from ._kernels import _stats
from ._memo import SpilledStats
from .utils._progress import Progress

__all__ = [
    "SuffStats",
    "VariationalModel",
    "EngineResult",
    "StochasticState",
    "fit_engine",
    "stochastic_step",
    "learning_rate",
    "is_dask_collection",
]


class SuffStats:
    """An additive bundle of named sufficient statistics.

    Values are numpy arrays, scipy sparse arrays or Python floats. ``+``, ``-`` and
    multiplication by a scalar act entry-wise on every field; both operands of ``+``/``-``
    must have the same fields. A sparse field (e.g. a batch's topic-word counts, which touch
    few (topic, word) pairs) combines with a dense one into a dense array; :meth:`add_` and
    :meth:`sub_` update dense fields in place (a sparse operand is scattered into them).

    Examples
    --------
    >>> s = SuffStats(N=np.ones(3), entropy=0.5)
    >>> (s + 2.0 * s)["N"]
    array([3., 3., 3.])
    """

    __slots__ = ("_d",)

    def __init__(self, **fields):
        self._d = dict(fields)

    def __getitem__(self, key):
        return self._d[key]

    def __setitem__(self, key, value):
        self._d[key] = value

    def __contains__(self, key):
        return key in self._d

    def keys(self):
        return self._d.keys()

    def items(self):
        return self._d.items()

    def get(self, key, default=None):
        return self._d.get(key, default)

    def copy(self):
        return SuffStats(
            **{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in self._d.items()}
        )

    def densified_copy(self):
        """A copy whose sparse fields are dense arrays (an accumulator for :meth:`add_`)."""
        return SuffStats(
            **{
                k: (v.toarray() if sp.issparse(v) else v.copy() if isinstance(v, np.ndarray)
                    else v)
                for k, v in self._d.items()
            }
        )

    def add_(self, other):
        """``self += other`` field by field, in place for dense array fields; returns self.

        A dense field ``a`` and a sparse ``b`` give ``a[i, j] += b[i, j]`` at the stored
        entries of ``b`` only: the same floating-point result as ``a + b.toarray()``.
        """
        return self._inplace(other, 1.0)

    def sub_(self, other):
        """``self -= other`` field by field, in place for dense array fields; returns self."""
        return self._inplace(other, -1.0)

    def _inplace(self, other, sign):
        if self._check_same(other) is NotImplemented:
            raise TypeError(f"cannot combine SuffStats with {type(other).__name__}")
        for k, v in self._d.items():
            o = other._d[k]
            if isinstance(v, np.ndarray) and v.flags.writeable:
                if sp.issparse(o):
                    _scatter_add(v, o, sign)
                elif sign > 0:
                    v += o
                else:
                    v -= o
            else:
                self._d[k] = v + o if sign > 0 else v - o
        return self

    def _check_same(self, other):
        if not isinstance(other, SuffStats):
            return NotImplemented
        if self._d.keys() != other._d.keys():
            raise ValueError(
                f"cannot combine statistics with fields {sorted(self._d)} and {sorted(other._d)}"
            )
        return None

    def __add__(self, other):
        bad = self._check_same(other)
        if bad is NotImplemented:
            return bad
        return SuffStats(**{k: v + other._d[k] for k, v in self._d.items()})

    def __sub__(self, other):
        bad = self._check_same(other)
        if bad is NotImplemented:
            return bad
        return SuffStats(**{k: v - other._d[k] for k, v in self._d.items()})

    def __mul__(self, c):
        if not np.isscalar(c):
            return NotImplemented
        return SuffStats(**{k: v * c for k, v in self._d.items()})

    __rmul__ = __mul__

    def __getstate__(self):
        return self._d

    def __setstate__(self, state):
        self._d = state

    def __repr__(self):
        parts = []
        for k, v in self._d.items():
            parts.append(f"{k}={getattr(v, 'shape', v)}")
        return f"SuffStats({', '.join(parts)})"


def _scatter_add(dense, S, sign):
    """``dense += sign * S`` at the stored entries of the sparse 2-D ``S``, in place."""
    if dense.shape != S.shape:
        raise ValueError(f"cannot add statistics of shape {S.shape} to shape {dense.shape}")
    S = sp.csr_array(S)
    if not S.has_canonical_format:
        S = S.copy()
        S.sum_duplicates()
    if (dense.dtype == np.float64 and dense.flags.c_contiguous and S.data.dtype == np.float64
            and S.indptr.dtype == S.indices.dtype):
        _stats.csr_scatter_add(dense, S.indptr, S.indices, S.data, sign < 0)
        return
    rows = np.repeat(np.arange(S.shape[0], dtype=np.int64), np.diff(S.indptr))
    flat = dense.reshape(-1) if dense.flags.c_contiguous else None
    if flat is not None:
        pos = rows * dense.shape[1] + S.indices
        if sign > 0:
            flat[pos] += S.data
        else:
            flat[pos] -= S.data
    elif sign > 0:
        dense[rows, S.indices] += S.data
    else:
        dense[rows, S.indices] -= S.data


class VariationalModel:
    """Interface a model implements to be trained by :func:`fit_engine`.

    Subclasses implement :meth:`local_step`, :meth:`global_step` and :meth:`elbo`; the other
    methods have defaults suitable for array-like data with samples along the first axis.
    """

    def n_samples(self, X):
        """Number of samples (rows, documents) in ``X``."""
        return X.shape[0]

    def take(self, X, idx):
        """Rows ``idx`` of ``X`` (works for numpy arrays and scipy CSR)."""
        return X[idx]

    def local_step(self, X, params):  # pragma: no cover - interface
        """Pure map ``(batch, global params) -> SuffStats``."""
        raise NotImplementedError

    def global_step(self, stats):  # pragma: no cover - interface
        """Map whole-data (or SVI-blended) statistics to global parameters."""
        raise NotImplementedError

    def elbo(self, stats, params):  # pragma: no cover - interface
        """Whole-data objective for ``stats`` and ``params = global_step(stats)``."""
        raise NotImplementedError

    def initial_params(self, init_stats):
        """Parameters the first pass of batch/memoized training starts from (default
        :meth:`global_step`); they are only read by the local step."""
        return self.global_step(init_stats)

    def visit(self, X, params, batch):
        """Local step of batch number ``batch`` in batch/memoized training.

        Defaults to :meth:`local_step`; a model with moves overrides it to also gather, for
        the batch, what its moves need (e.g. merge terms of candidate pairs).
        """
        return self.local_step(X, params)

    def before_pass(self, stats, params, state):
        """Hook run before every pass of batch/memoized training (e.g. choosing the move
        candidates whose terms the pass gathers). ``stats`` is None before the first pass.
        Does nothing by default."""

    def before_step(self, X, rows):
        """Hook run by stochastic training before the local step of every minibatch of
        ``fit_engine``: ``X`` is the training data and ``rows`` the minibatch's sample
        indices in it (sorted), or both None for a minibatch of a partitioned collection (for
        per-sample state such as a sampler's chains). Not run by a bare
        :func:`stochastic_step` (e.g. ``partial_fit``), whose minibatches have no index in a
        fixed data set. Does nothing by default."""

    def after_step(self, rho, scale):
        """Hook run by :func:`stochastic_step` after every step, with its step size ``rho``
        and the minibatch's scale (statistics S <- (1 - rho) S + rho * scale * S_batch).
        Does nothing by default."""

    #: True for a model whose objective is a Monte Carlo estimate (e.g. from a sampled local
    #: step): batch/memoized training then compares window means, as stochastic training does
    noisy_objective = False

    def can_stop(self):
        """Whether batch/memoized training may stop at a pass that meets ``tol`` (a model
        with moves still at work returns False). True by default."""
        return True

    def after_pass(self, stats, params, state):
        """Hook run after every complete pass (e.g. merge/delete moves). Identity by default.

        In batch/memoized training ``state`` is a dict with ``batch_stats`` (the cached
        statistics of every batch, which a move must edit consistently with the returned
        whole-data statistics), ``batches`` (the data of every batch) and ``pass`` (1-based).
        """
        return stats, params


def learning_rate(t, kappa, delta):
    """SVI step size ``rho_t = (delta + t)^(-kappa)`` (Mimno, Hoffman & Blei 2012, Sec. 2), ``t >=
    1``.

    With ``kappa`` in (0.5, 1] and ``delta >= 0`` the Robbins-Monro conditions
    ``sum rho_t = inf``, ``sum rho_t^2 < inf`` hold. The first step may be 1 (``delta = 0``),
    in which case the initial statistics are forgotten entirely.
    """
    return min(1.0, float(delta + t) ** (-float(kappa)))


#: delta=None (the estimators' default): the delay is this many passes' worth of minibatches
DELAY_PASSES = 4.0


def default_delay(delta, n_docs, batch_size):
    """The learning-rate delay of :func:`learning_rate`: ``delta``, or for ``delta=None``
    :data:`DELAY_PASSES` passes' worth of minibatches, ``4 ceil(n_docs / batch_size)``, with
    ``n_docs`` the documents the minibatch statistics are scaled to.

    With delta = 1 the first minibatch, scaled up by n_docs / batch_size, replaces two thirds
    of the initial topics (rho_1 = 2^-0.6 = 0.66 at kappa = 0.6), and the topics do not
    recover from those early large steps within a few passes; a delay of a few passes of
    minibatches keeps the first steps small.
    """
    if delta is None:
        return DELAY_PASSES * max(1, -(-int(np.ceil(n_docs)) // int(batch_size)))
    return float(delta)


@dataclass
class StochasticState:
    """What stochastic training carries between steps (``partial_fit`` keeps one)."""

    stats: SuffStats
    t: int = 0
    rho: float = None
    params: object = None  # global_step(stats), cached to avoid recomputing it every step


@dataclass
class EngineResult:
    """Output of :func:`fit_engine`."""

    params: object
    stats: SuffStats
    lower_bounds: list
    n_iter: int
    converged: bool
    trace: list
    state: object = None
    batch_stats: list = field(default=None, repr=False)

    @property
    def lower_bound(self):
        return self.lower_bounds[-1] if self.lower_bounds else -np.inf


def _scale(stats, c):
    return stats if c == 1.0 else stats * c


def stochastic_step(model, state, X_batch, *, kappa, delta, total_samples, timings=None):
    """One SVI step on ``X_batch``; updates ``state`` in place and returns the new params.

    The minibatch statistics are scaled by ``total_samples / n_batch`` (an unbiased estimate
    of whole-data statistics) and blended into ``state.stats`` with ``rho_t``.
    ``state.t`` counts the steps taken and ``state.rho`` holds the last step size. A model
    with a ``stochastic_update(state, batch_stats, rho, scale)`` method applies the blend
    itself (updating ``state.stats``) and returns the new parameters.
    ``timings``, if a dict, accumulates seconds under ``"local"`` and ``"global"``.
    """
    n = model.n_samples(X_batch)
    if n == 0:
        raise ValueError("stochastic_step needs a non-empty minibatch.")
    ta = time.perf_counter()
    params = state.params if state.params is not None else model.global_step(state.stats)
    tb = time.perf_counter()
    batch_stats = model.local_step(X_batch, params)
    tc = time.perf_counter()
    state.t += 1
    rho = state.rho = learning_rate(state.t, kappa, delta)
    update = getattr(model, "stochastic_update", None)
    if update is not None:
        # the model applies the same blend in its own representation (e.g. sparse, lazily
        # scaled) and returns the new parameters (and sets ``state.rho`` to the step it
        # took when that differs, e.g. a first step that starts the statistics)
        params = state.params = update(state, batch_stats, rho, float(total_samples) / n)
    else:
        state.stats = (1.0 - rho) * state.stats + rho * _scale(batch_stats,
                                                               float(total_samples) / n)
        params = state.params = model.global_step(state.stats)
    model.after_step(rho, float(total_samples) / n)
    if timings is not None:
        timings["local"] = timings.get("local", 0.0) + (tc - tb)
        timings["global"] = timings.get("global", 0.0) + (tb - ta) + (time.perf_counter() - tc)
    return params


def _is_stream(X):
    """A corpus read minibatch by minibatch (an iterable without a shape), e.g.
    :class:`sparseclust.datasets.CorpusStream`."""
    return not hasattr(X, "shape") and hasattr(X, "__iter__") and not isinstance(
        X, (list, tuple))


class _StreamBatches:
    """The minibatches of a re-iterable stream as the fixed batches of memoized training:
    iterating reads them again; ``batches[b]`` reads up to minibatch b (for moves that
    revisit a batch). Only the statistics of a batch are kept, never its data."""

    def __init__(self, stream):
        self.stream = stream
        self.n = None

    def __iter__(self):
        n = 0
        for Xb in self.stream:
            if self.n is not None and n >= self.n:
                raise ValueError(f"the corpus stream yielded more than the {self.n} "
                                 "minibatches of its first pass")
            yield Xb
            n += 1
        if self.n is None:
            self.n = n
        elif n != self.n:
            raise ValueError(f"the corpus stream yielded {n} minibatches, {self.n} in its "
                             "first pass")

    def __len__(self):
        if self.n is None:
            raise TypeError("the number of minibatches is known after the first pass")
        return self.n

    def __getitem__(self, b):
        for i, Xb in enumerate(self.stream):
            if i == b:
                return Xb
        raise IndexError(f"minibatch {b} out of range")


def is_dask_collection(X):
    """Whether X is a Dask array or bag (checked without importing Dask; fitting one runs
    through :mod:`sparseclust._dask`)."""
    mod = type(X).__module__ or ""
    return mod.split(".")[0] == "dask" and hasattr(X, "__dask_graph__")


def _is_partitioned(X):
    """A data source that defines its own batches (e.g. the partitions of a Dask collection,
    :mod:`sparseclust._dask`): it has ``n_samples``, ``fixed_batches(algorithm, n_batches)``
    (the batches of batch/memoized training) and ``minibatches(rng, batch_size)`` (the
    minibatches of one stochastic pass); the model's local step accepts its batches."""
    return hasattr(X, "fixed_batches") and hasattr(X, "minibatches")


def _split_batches(n, n_batches, rng):
    if n_batches > n:
        raise ValueError(f"n_batches={n_batches} exceeds the number of samples {n}.")
    perm = rng.permutation(n)
    return [np.sort(b) for b in np.array_split(perm, n_batches)]


def _rel_change(new, old):
    if not np.isfinite(old):
        return np.inf
    return abs(new - old) / max(abs(new), abs(old), 1e-300)


#: passes per window of the stochastic convergence test (see :func:`_windowed_change`)
STOCHASTIC_WINDOW = 3


def _windowed_change(elbos, window, tol_scale):
    """Convergence measure of stochastic training: the change between the mean objective of
    the last ``window`` passes and the mean of the ``window`` passes before them,

        |mean(L_{t-w+1..t}) - mean(L_{t-2w+1..t-w})| / tol_scale

    (relative to the larger mean's magnitude when ``tol_scale`` is None); ``inf`` until
    ``2 * window`` passes have been run. A stochastic objective estimate moves by a random
    amount from pass to pass, and two consecutive passes can agree closely while the model is
    still far from converged; a window averages that noise out and sees the trend instead."""
    w = int(window)
    if len(elbos) < 2 * w:
        return np.inf
    return _elbo_change(float(np.mean(elbos[-w:])), float(np.mean(elbos[-2 * w : -w])),
                        tol_scale)


def _elbo_change(new, old, tol_scale):
    """The convergence measure: ``|new - old| / tol_scale`` (e.g. nats per sample or token),
    or the relative change ``|new - old| / max(|new|, |old|)`` when ``tol_scale`` is None."""
    if tol_scale is None:
        return _rel_change(new, old)
    if not np.isfinite(old):
        return np.inf
    return abs(new - old) / float(tol_scale)


def fit_engine(
    model, X, init_stats, *, algorithm="memoized", max_iter=100, tol=1e-6, n_batches=10,
    batch_size=256, kappa=0.6, delta=1.0, total_samples=None, random_state=None, verbose=0,
    callback=None, heldout_score=None, state=None, tol_scale=None, window=STOCHASTIC_WINDOW,
    name="sparseclust", memo_dir=None,
):
    """Train ``model`` on ``X`` from ``init_stats`` with the chosen learning algorithm.

    Parameters
    ----------
    model : VariationalModel
    X : array-like, sparse matrix or re-iterable stream of minibatches
        Training data, samples along the first axis. A stream (an iterable without a
        ``shape``, e.g. :class:`sparseclust.datasets.CorpusStream`) is read again at every
        pass and its minibatches are the fixed batches of memoized training (``n_batches``
        and ``random_state`` are then not used); only their statistics are cached (in
        memory, or in files with ``memo_dir``). Memoized training only. A partitioned
        source (``fixed_batches`` / ``minibatches`` methods, e.g. the partitions of a Dask
        collection in :mod:`sparseclust._dask`) supplies the batches of every algorithm, and
        ``model`` must accept them in its local step.
    init_stats : SuffStats
        Whole-data statistics the first global step starts from (e.g. from initial
        responsibilities); for ``memoized``/``batch`` they only define the initial parameters.
    algorithm : {'batch', 'memoized', 'stochastic'}
    max_iter : int
        Number of passes over the data.
    tol : float
        Stop when the change of the ELBO between passes falls below ``tol``: ``|L_t - L_{t-1}|
        / tol_scale`` when ``tol_scale`` is given (e.g. the number of samples or tokens, so that
        ``tol`` is in nats per sample or token), else the relative change ``|L_t - L_{t-1}| /
        |L_t|``. ``tol = 0`` runs ``max_iter`` passes. The measure is recorded in the trace as
        ``elbo_change``. Stochastic training evaluates its objective on the blended
        statistics, a noisy estimate, and compares window means instead of single passes:
        the change is that between the mean objective of the last ``window`` passes and that
        of the ``window`` passes before them, so it runs at least ``2 * window`` passes. So
        does batch/memoized training of a model with ``noisy_objective``.
    n_batches : int
        Number of fixed batches for ``memoized``.
    batch_size : int
        Minibatch size for ``stochastic``.
    kappa, delta : float
        Learning-rate decay and delay, ``rho_t = (delta + t)^(-kappa)``.
    total_samples : int or None
        Size of the (possibly conceptual) whole dataset the minibatch statistics are scaled to;
        defaults to the number of samples in ``X``.
    random_state : int, RandomState or None
        Batch split and minibatch order.
    verbose : int
        0 silent; otherwise one line per pass on stderr, written by
        :class:`~sparseclust.utils._progress.Progress`.
    callback : callable or None
        ``callback(info)`` after every pass, ``info`` a dict with the pass number, elapsed time,
        ELBO, params and stats; returning ``True`` stops training.
    heldout_score : callable or None
        ``heldout_score(params) -> float`` recorded in the trace after every pass; its cost is
        excluded from ``elapsed``.
    state : StochasticState or None
        Continue stochastic training from this state (its ``t`` and blended statistics).
    tol_scale : float or None
        Divisor of the ELBO change in the convergence test (see ``tol``).
    window : int
        Passes per window of the stochastic convergence test (see ``tol``).
    name : str
        The name the ``verbose`` lines start with (the estimator's class name).
    memo_dir : str or None
        Batch and memoized training: None keeps every fixed batch's statistics in memory; a
        directory keeps them in the files of a temporary directory inside it
        (:class:`~sparseclust._memo.SpilledStats`), removed when training ends or fails; the
        result's ``batch_stats`` is then None. A model whose moves edit the cached
        statistics in place (``edits_batch_stats``: the mixtures, the HDP) refuses it.

    Returns
    -------
    EngineResult
    """
    if algorithm not in ("batch", "memoized", "stochastic"):
        raise ValueError(f"unknown algorithm {algorithm!r}")
    if memo_dir is not None and getattr(model, "edits_batch_stats", False):
        raise ValueError(f"{type(model).__name__} edits the cached batch statistics in "
                         "place: memo_dir must be None")
    if int(window) < 1:
        raise ValueError(f"window must be at least 1, got {window!r}")
    rng = check_random_state(random_state)
    n, stream, partitioned = _source(model, X, algorithm)
    trace = _Trace(max_iter, Progress(name, max_iter) if verbose else None, callback,
                   heldout_score)
    stop_rule = dict(max_iter=max_iter, tol=tol, tol_scale=tol_scale, window=window)
    if algorithm == "stochastic":
        if state is None:
            state = StochasticState(stats=init_stats.copy(), t=0)
        init_stats = None  # only the copy is updated
        total = float(n if total_samples is None else total_samples)
        minibatches = _Minibatches(model, X, n, batch_size, rng, partitioned)
        return _fit_stochastic(model, minibatches, state, trace, total=total, kappa=kappa,
                               delta=delta, **stop_rule)
    batches = _fixed_batches(model, X, algorithm, n, n_batches, rng, stream, partitioned)
    # the batches hold the data from here on: this frame's reference to X goes (with it the
    # whole matrix when the caller passed its only reference, e.g. a validated copy)
    X = None
    memo = None if memo_dir is None else SpilledStats(memo_dir, 0 if stream else len(batches))
    try:
        run = _FixedBatchRun(model, batches, model.initial_params(init_stats), stream, memo)
        # the initial statistics only define the first parameters: release them (the caller
        # may pass them without keeping a reference; with large K they are K x V dense)
        init_stats = None
        result = _fit_fixed_batches(run, trace, full_sweeps=algorithm == "batch", **stop_rule)
    finally:
        if memo is not None:
            memo.close()
    if memo is not None:
        result.batch_stats = None
    return result


def _source(model, X, algorithm):
    """``(n, stream, partitioned)`` of the training data: its number of samples (None for a
    stream, whose size is known after a pass) and which kind of source it is."""
    partitioned = _is_partitioned(X)
    if not partitioned and _is_stream(X):
        if algorithm != "memoized":
            raise ValueError(f"a stream of minibatches needs algorithm='memoized', got "
                             f"{algorithm!r}")
        return None, True, False
    n = int(X.n_samples) if partitioned else model.n_samples(X)
    if n == 0:
        raise ValueError("cannot fit on an empty dataset.")
    return n, False, partitioned


class _Trace:
    """The record of a fit, one entry a pass: the objective, the elapsed training time (the
    held-out score, the printed line and the callback are not counted), and the user's
    ``heldout_score``, the ``verbose`` display (a :class:`Progress` or None) and ``callback``
    (see :func:`fit_engine`)."""

    def __init__(self, max_iter, progress, callback, heldout_score):
        self.max_iter, self.progress = max_iter, progress
        self.callback, self.heldout_score = callback, heldout_score
        self.entries, self.lower_bounds = [], []
        self.elapsed, self.t0 = 0.0, time.perf_counter()

    def record(self, entry, params, stats):
        """Complete and keep the pass's ``entry``; returns whether the callback asks to
        stop."""
        self.elapsed += time.perf_counter() - self.t0
        entry["elapsed"] = self.elapsed
        if self.heldout_score is not None:
            entry["heldout"] = float(self.heldout_score(params))
        self.entries.append(entry)
        stop = False
        if self.progress is not None:
            self.progress(dict(entry, n_passes=self.max_iter))
        if self.callback is not None:
            info = dict(entry)
            info.update(params=params, stats=stats, n_passes=self.max_iter)
            stop = bool(self.callback(info))
        self.t0 = time.perf_counter()
        return stop


class _Minibatches:
    """The minibatches of one stochastic pass, in a new random order every pass: the
    partitions' own (``X.minibatches``) or ``batch_size`` rows of a permutation, each row
    sorted; the model is told of each before its step (``before_step``)."""

    def __init__(self, model, X, n, batch_size, rng, partitioned):
        self.model, self.X, self.n = model, X, n
        self.batch_size, self.rng, self.partitioned = batch_size, rng, partitioned

    def __iter__(self):
        if self.partitioned:
            for X_mb in self.X.minibatches(self.rng, self.batch_size):
                self.model.before_step(None, None)
                yield X_mb
            return
        perm = self.rng.permutation(self.n)
        bs = self.batch_size
        for s in range(max(1, math.ceil(self.n / bs))):
            idx = np.sort(perm[s * bs : (s + 1) * bs])
            if idx.size:
                X_mb = self.model.take(self.X, idx)
                self.model.before_step(self.X, idx)
                yield X_mb


def _fit_stochastic(model, minibatches, state, trace, *, total, kappa, delta, max_iter, tol,
                    tol_scale, window):
    """Stochastic training: an SVI step per minibatch (:func:`stochastic_step`), the moves
    and the objective of the blended statistics after each pass, which is noisy: convergence
    compares the means of windows of passes (:func:`_windowed_change`)."""
    converged = False
    n_iter = 0
    for it in range(max_iter):
        timings = {}
        for X_mb in minibatches:
            params = stochastic_step(model, state, X_mb, kappa=kappa, delta=delta,
                                     total_samples=total, timings=timings)
        state.stats, params = model.after_pass(state.stats, params, state)
        state.params = params
        elbo = float(model.elbo(state.stats, params))
        trace.lower_bounds.append(elbo)
        n_iter = it + 1
        entry = {
            "pass": n_iter,
            "step": state.t,
            "elbo": elbo,
            "rho": state.rho,
            "time_local": timings.get("local", 0.0),
            "time_global": timings.get("global", 0.0),
        }
        change = _windowed_change(trace.lower_bounds, window, tol_scale)
        entry["elbo_change"] = change
        stop = trace.record(entry, params, state.stats)
        if tol > 0 and change < tol:
            converged = True
        if converged or stop:
            break
    return EngineResult(params=params, stats=state.stats, lower_bounds=trace.lower_bounds,
                        n_iter=n_iter, converged=converged, trace=trace.entries, state=state)


def _fixed_batches(model, X, algorithm, n, n_batches, rng, stream, partitioned):
    """The fixed batches of batch and memoized training: a stream's minibatches, the
    partitions' batches, the whole data (batch) or ``n_batches`` random splits of the rows."""
    if stream:
        return _StreamBatches(X)
    if partitioned:
        return X.fixed_batches(algorithm, int(n_batches))
    if algorithm == "batch":
        batches = [np.arange(n)]
    else:
        batches = _split_batches(n, int(n_batches), rng)
    return [X if len(batches) == 1 else model.take(X, b) for b in batches]


class _FixedBatchRun:
    """What batch and memoized training carry between passes: the parameters, the
    whole-data statistics (None before the first pass), each batch's cached statistics, the
    number of global steps (the initial one from the initial statistics not counted) and the
    seconds of the current pass's local and global steps. The batches' statistics are a
    list, or ``memo`` (:class:`~sparseclust._memo.SpilledStats`) when given."""

    def __init__(self, model, batches, params, stream, memo=None):
        self.model, self.batches, self.params = model, batches, params
        self.total = None
        if memo is not None:
            self.batch_stats = memo
        else:
            self.batch_stats = [] if stream else [None] * len(batches)
        self.n_global = 0
        self.t_local = self.t_global = 0.0

    def _global_step(self):
        t0 = time.perf_counter()
        self.params = None  # the old parameters go before the new ones are built
        self.params = self.model.global_step(self.total)
        self.n_global += 1
        self.t_global += time.perf_counter() - t0

    def _visit(self, b, Xb):
        t0 = time.perf_counter()
        s_b = self.model.visit(Xb, self.params, b)
        self.t_local += time.perf_counter() - t0
        return s_b

    def full_sweep(self):
        """Every batch visited under fixed parameters, then one global step on their sum (a
        dense accumulator, the whole-data total; a batch's statistics may be sparse)."""
        acc = None
        for b, Xb in enumerate(self.batches):
            s_b = self._visit(b, Xb)
            if b == len(self.batch_stats):  # first pass over a stream
                self.batch_stats.append(s_b)
            else:
                self.batch_stats[b] = s_b
            if acc is None:
                acc = s_b.densified_copy()
            else:
                acc.add_(s_b)
        if acc is None:  # a stream without minibatches
            raise ValueError("cannot fit on an empty dataset.")
        self.total = acc
        self._global_step()

    def memoized_sweep(self):
        """A global step after every batch, on the whole-data statistics with the batch's
        cached statistics replaced by its new ones."""
        for b, Xb in enumerate(self.batches):
            s_b = self._visit(b, Xb)
            # S <- (S - S_b^old) + S_b^new, in place: the same arithmetic, no dense copies
            self.total.sub_(self.batch_stats[b]).add_(s_b)
            self.batch_stats[b] = s_b
            self._global_step()


def _fit_fixed_batches(run, trace, *, full_sweeps, max_iter, tol, tol_scale, window):
    """Batch training (``full_sweeps``: every pass a full sweep) or memoized training (a full
    sweep in the first pass, then a global step after every batch), the moves after each
    pass, until the objective changes by less than ``tol`` and the model can stop."""
    model = run.model
    converged = False
    n_iter = 0
    prev = -np.inf
    for it in range(max_iter):
        run.t_local = run.t_global = 0.0
        model.before_pass(run.total, run.params, {"batch_stats": run.batch_stats,
                                                  "pass": it + 1})
        if run.total is None or full_sweeps:
            run.full_sweep()
        else:
            run.memoized_sweep()
        tm = time.perf_counter()
        run.total, run.params = model.after_pass(
            run.total, run.params,
            {"batch_stats": run.batch_stats, "batches": run.batches, "pass": it + 1})
        t_moves = time.perf_counter() - tm
        elbo = float(model.elbo(run.total, run.params))
        trace.lower_bounds.append(elbo)
        n_iter = it + 1
        if getattr(model, "noisy_objective", False):
            change = _windowed_change(trace.lower_bounds, window, tol_scale)
        else:
            change = _elbo_change(elbo, prev, tol_scale)
        entry = {"pass": n_iter, "step": run.n_global, "elbo": elbo, "elbo_change": change,
                 "time_local": run.t_local, "time_global": run.t_global, "time_moves": t_moves}
        stop = trace.record(entry, run.params, run.total)
        if change < tol and model.can_stop():
            converged = True
        prev = elbo
        if converged or stop:
            break
    return EngineResult(params=run.params, stats=run.total, lower_bounds=trace.lower_bounds,
                        n_iter=n_iter, converged=converged, trace=trace.entries,
                        batch_stats=run.batch_stats)
