# SPDX-License-Identifier: BSD-3-Clause
"""The engine models of :class:`SparseGaussianMixture`.

:class:`_SparseGMMModel` is the local step (weights, top-L responsibilities and additive
statistics over blocks of rows, with cached candidate sets), the global step and the ELBO;
:class:`_DPMixtureModel` adds the memoized moves of the Dirichlet-process mixture;
:func:`_point_log_prob` is the log-density of each component under the point estimates.
"""

import time

import numpy as np

from .. import posteriors
from .._engine import SuffStats, VariationalModel
from ..utils import effective_n_threads
from ..utils._threads import threads_for_work
from . import _gaussian, _quadratic_form
from ._dp_moves import MixtureMoves

# Bound on the number of floats of a (rows, K) weight block in the local step.
_LOCAL_BLOCK_FLOATS = 1 << 21
# Below this many weights (rows x K) a block runs the kernels on one thread: waking an OpenMP
# team costs more than the work.
_MIN_PARALLEL_WEIGHTS = 1 << 15


def _top_l_among(Wc, cand, L, n_threads):
    """Top-L responsibilities among each row's candidate clusters.

    ``Wc[n, c]`` is the weight of cluster ``cand[n, c]``; returns (values, cluster ids).
    """
    values, local = posteriors.responsibilities(Wc, L, n_threads=n_threads)
    return values, np.take_along_axis(cand, local.astype(np.intp), axis=1)


def _index_dtype(K):
    """The dtype that stores the cached candidate ids of ``K`` components: uint16 up to
    65,536 components (two bytes a candidate instead of four), int32 beyond."""
    return np.dtype(np.uint16) if K <= 1 << 16 else np.dtype(np.int32)


def _auto_candidates(L, K):
    """``n_candidates='auto'``: ``max(16, 2 L)`` candidates, None (dense) when not fewer than K."""
    C = max(16, 2 * int(L))
    return C if C < K else None


class _CandidateCache:
    """The cached candidate sets of one fixed batch (``X`` is the identity key).

    ``cand`` (n, C) of :func:`_index_dtype` (uint16 up to 65,536 components): the ids of
    each row's C largest weights at its last refresh; with adaptive refresh also ``w_ref``
    (n, C): those weights then, and ``gap`` (n,): the L-th largest of them minus the largest
    weight outside the candidates (>= 0)."""

    __slots__ = ("X", "visits", "cand", "w_ref", "gap", "rows_refreshed")

    def __init__(self, X):
        self.X = X
        self.visits = 0
        self.cand = None
        self.w_ref = None
        self.gap = None
        self.rows_refreshed = 0


class _Timer:
    """Accumulates wall-clock seconds per named sub-step of the local step."""

    __slots__ = ("seconds",)

    def __init__(self):
        self.seconds = {"weights": 0.0, "responsibilities": 0.0, "summary": 0.0}

    def snapshot(self):
        return dict(self.seconds)


class _SparseGMMModel(VariationalModel):
    """The local/global/ELBO triple of the L-sparse Gaussian mixture for the engine.

    Local step (Hughes & Sudderth 2016, Alg. 1 and Eq. 5-7), over row blocks of the batch:

    1. weights ``W_nk = E[log pi_k] + E[log N(x_n | mu_k, Lambda_k)]`` by BLAS
       (:class:`_quadratic_form.QuadraticForm`);
    2. top-L responsibilities ``r_n = responsibilities(W_n, L)``;
    3. additive statistics ``N_k, Sx_k, Sxx_k`` (or their diagonal) and the entropy
       ``-sum_n r_nk log r_nk`` by :func:`sparseclust.posteriors.summary_statistics`.

    Statistics are returned in float64 whatever the data dtype; the weights are computed in the
    data's dtype (float32 data -> float32 BLAS).

    With ``n_candidates = C`` (memoized/batch only), step 1 on non-refresh visits of a batch is
    restricted to each row's cached candidate set (:meth:`restricted_weights`) and step 2 picks
    the top-L among the candidates; batches are recognized by the identity of the fixed batch
    arrays the engine passes, and :meth:`reset_candidates` clears the cache before each fit.
    ``refresh='auto'`` (adaptive) refreshes a row's candidate set when its candidate weights
    moved by half the gap that kept the other components out (:meth:`_local_step_candidates`);
    an integer refreshes every batch every ``refresh`` visits and trusts the candidates between.
    """

    def __init__(
        self, prior, n_components, L, dtype, n_threads=None, n_candidates=None, refresh=5
    ):
        self.prior = prior
        self.n_components = n_components
        self.L = L
        self.dtype = np.dtype(dtype)
        self.n_threads = n_threads
        # candidate sets are used only when they are strictly fewer than K
        self.n_candidates = n_candidates
        self.refresh = refresh if refresh == "auto" else int(refresh)
        self.timer = _Timer()
        # optional per-block callback collect(start, values, indices, X_block) of the local
        # step (a model with moves gathers what its candidates need through it)
        self._collect = None
        self.reset_candidates()

    def reset_candidates(self):
        """Forget every cached candidate set (start of a new fit or initialization)."""
        # one _CandidateCache per fixed batch
        self._cand_cache = []

    def renumber_candidates(self, new_of_old):
        """Carry the cached candidate sets over a renumbering of the components (a sort, or a
        compaction after merges and deletes): ``new_of_old[k]`` is the new index of component
        k, or -1 when it is gone. A row whose candidates lost a component or now name one
        twice (a merged pair) is refreshed on its next visit; with a fixed refresh period,
        the whole batch is."""
        new_of_old = np.asarray(new_of_old, dtype=np.int64)
        for entry in self._cand_cache:
            if entry.cand is None:
                continue
            c = new_of_old[entry.cand]
            srt = np.sort(c, axis=1)
            bad = (c < 0).any(axis=1) | (srt[:, 1:] == srt[:, :-1]).any(axis=1)
            if bad.any() and entry.gap is None:
                entry.cand = None
                continue
            c[c < 0] = 0
            entry.cand = np.ascontiguousarray(c, dtype=_index_dtype(self.n_components))
            if bad.any():
                entry.gap = entry.gap.copy()
                entry.gap[bad] = -np.inf

    @property
    def moments(self):
        return "full" if self.prior.covariance_type == "full" else "diag"

    def _stat_key(self):
        return "Sxx" if self.prior.covariance_type == "full" else "Sxx_diag"

    def stats_from_responsibilities(self, values, indices, X):
        """SuffStats of the given (N, L') responsibilities (values, int32 indices)."""
        nt = threads_for_work(self.n_threads, X.shape[0] * self.n_components,
                              _MIN_PARALLEL_WEIGHTS, scale=False)
        s = posteriors.summary_statistics(
            values, indices, X, self.n_components, moments=self.moments, n_threads=nt
        )
        key = self._stat_key()
        fields = {
            "N": np.asarray(s["N"], dtype=np.float64),
            key: np.asarray(s[key], dtype=np.float64),
            "entropy": np.asarray(s["entropy"], dtype=np.float64),
        }
        if not self.prior.zero_mean:
            fields["Sx"] = np.asarray(s["Sx"], dtype=np.float64)
        return SuffStats(**fields)

    def empty_stats(self):
        K, D = self.n_components, self.prior.n_features
        fields = {"N": np.zeros(K), "entropy": np.zeros(K)}
        if self.prior.covariance_type == "full":
            fields["Sxx"] = np.zeros((K, D, D))
        else:
            fields["Sxx_diag"] = np.zeros((K, D))
        if not self.prior.zero_mean:
            fields["Sx"] = np.zeros((K, D))
        return SuffStats(**fields)

    def quadratic_form(self, params, dtype):
        return _quadratic_form.QuadraticForm(
            params.means,
            params.prec_chol,
            self.prior.covariance_type,
            self.prior.zero_mean,
            self.prior.m0,
            dtype,
            n_threads=self.n_threads,
        )

    def weights(self, X, params, out=None, qform=None):
        """Variational weights ``W`` (n, K) in ``X.dtype`` (Hughes & Sudderth 2016, Eq. 5):
        ``W_nk = const_k - E[(x_n - mu_k)^T Lambda_k (x_n - mu_k)] / 2`` with the mean part
        ``(x_n - m_k)^T E[Lambda_k] (x_n - m_k)`` from :class:`_quadratic_form.QuadraticForm`."""
        dt = X.dtype
        if out is None:
            out = np.empty((X.shape[0], self.n_components), dtype=dt)
        if qform is None:
            qform = self.quadratic_form(params, dt)
        qform.evaluate(X, out)
        out *= dt.type(-0.5)
        out += params.const.astype(dt)
        return out

    #: the key of the batch being visited when its array is new at every pass (the
    #: minibatches of a stream, :mod:`._stream_rows`); None: the array itself is the key
    _batch_key = None

    def _cache_entry(self, X):
        key = X if self._batch_key is None else self._batch_key
        for entry in self._cand_cache:
            if entry.X is key:
                return entry
        entry = _CandidateCache(key)
        self._cand_cache.append(entry)
        return entry

    def local_step(self, X, params):
        if self.n_candidates is None:
            return self._local_step_full(X, params)
        entry = self._cache_entry(X)
        visit = entry.visits
        entry.visits += 1
        adaptive = self.refresh == "auto"
        if entry.cand is None or (not adaptive and visit % self.refresh == 0):
            total, entry.cand, entry.w_ref, entry.gap = self._local_step_full(
                X, params, n_candidates=self.n_candidates
            )
            if not adaptive:
                entry.w_ref = entry.gap = None
            return total
        return self._local_step_candidates(X, params, entry)

    def restricted_weights(self, X, params, cand, qform=None):
        """Weights of the candidate pairs only, ``out[n, c] = W[n, cand[n, c]]`` (n, C), in
        ``X.dtype`` (:meth:`_quadratic_form.QuadraticForm.evaluate_pairs`, ``O(n C D^2)``)."""
        dt = X.dtype
        if qform is None:
            qform = self.quadratic_form(params, dt)
        out = np.empty(cand.shape, dtype=dt)
        qform.evaluate_pairs(X, cand, out)
        out *= dt.type(-0.5)
        out += params.const.astype(dt)[cand]
        return out

    def _local_step_candidates(self, X, params, entry):
        """Local step with ``W`` evaluated on the cached candidate sets only: the top-L
        responsibilities among each row's candidates, mapped back to component ids.

        Adaptive refresh (``entry.gap`` set): a row is refreshed -- its full weights computed,
        its responsibilities the top-L of the full row and its candidate set renewed -- when its
        candidate weights moved, since its last refresh, by at least half the gap that
        separated its L-th largest candidate weight from the largest weight outside its
        candidates: ``2 max_c |W_nc - W_nc^ref| >= gap_n``. If no weight of the row moved
        more than its candidates' did, the top-L of the full row is still among the
        candidates for the other rows."""
        X = np.ascontiguousarray(X)
        n = X.shape[0]
        cand = entry.cand
        C = cand.shape[1]
        K = self.n_components
        adaptive = entry.gap is not None
        rows = int(max(256, _LOCAL_BLOCK_FLOATS // (max(C, K // 4) if adaptive else C)))
        tm = self.timer.seconds
        total = None
        n_full = 0
        t0 = time.perf_counter()
        qform = self.quadratic_form(params, X.dtype)
        tm["weights"] += time.perf_counter() - t0
        for start in range(0, n, rows):
            Xc = X[start : start + rows]
            cc = cand[start : start + rows].astype(np.int32)
            t0 = time.perf_counter()
            Wc = self.restricted_weights(Xc, params, cc, qform=qform)
            stale = None
            if adaptive:
                dW = Wc - entry.w_ref[start : start + rows]
                spread = (dW.max(axis=1) - dW.min(axis=1)).astype(np.float64)
                stale = np.flatnonzero(~(spread < entry.gap[start : start + rows]))
            t1 = time.perf_counter()
            nt = threads_for_work(self.n_threads, Wc.shape[0] * C, _MIN_PARALLEL_WEIGHTS,
                                  scale=False)
            values, indices = _top_l_among(Wc, cc, self.L, nt)
            if stale is not None and stale.size:
                t1b = time.perf_counter()
                Wf = self.weights(np.ascontiguousarray(Xc[stale]), params, qform=qform)
                t1c = time.perf_counter()
                ntf = threads_for_work(self.n_threads, stale.size * K, _MIN_PARALLEL_WEIGHTS,
                                       scale=False)
                cs, wr, gp, v2, i2 = self._candidates_of(Wf, C, ntf)
                rows_abs = start + stale
                cand[rows_abs] = cs
                entry.w_ref[rows_abs] = wr
                entry.gap[rows_abs] = gp
                values = np.array(values)
                indices = np.array(indices)
                values[stale] = v2
                indices[stale] = i2
                n_full += stale.size
                t1 += t1c - t1b  # the full weights of the refreshed rows: weight step
            s = self._chunk_stats(start, values, indices, Xc, tm, t0, t1)
            total = s if total is None else total.add_(s)
        entry.rows_refreshed += n_full
        return total

    def _chunk_stats(self, start, values, indices, Xc, tm, t0, t1):
        """The statistics of a chunk's responsibilities (its rows handed to the moves'
        collector first); adds the chunk's seconds since ``t0`` (weights until ``t1``) to
        the timer ``tm``."""
        t2 = time.perf_counter()
        if self._collect is not None:
            self._collect(start, values, indices, Xc)
        s = self.stats_from_responsibilities(values, indices, Xc)
        t3 = time.perf_counter()
        tm["weights"] += t1 - t0
        tm["responsibilities"] += t2 - t1
        tm["summary"] += t3 - t2
        return s

    def _candidates_of(self, W, C, n_threads):
        """Candidate sets of full weight rows ``W`` (edited in place): the C largest weights'
        indices and values, the gap between the L-th largest and the largest outside, and the
        top-L responsibilities among the candidates (= the top-L of the row)."""
        cc = posteriors.top_l_indices(W, C, n_threads=n_threads)
        ci = cc.astype(np.intp)
        Wc = np.take_along_axis(W, ci, axis=1)
        values, indices = _top_l_among(Wc, cc, self.L, n_threads)
        wl = np.partition(Wc, C - self.L, axis=1)[:, C - self.L].astype(np.float64)
        np.put_along_axis(W, ci, -np.inf, axis=1)
        gap = wl - W.max(axis=1).astype(np.float64)  # +inf when the candidates are all K
        return cc, Wc, gap, values, indices

    def _local_step_full(self, X, params, n_candidates=None):
        """Local step with the dense ``W``. With ``n_candidates = C`` also returns the (n, C)
        indices (:func:`_index_dtype`) of each row's C largest weights; the responsibilities
        are then the top-L among those candidates (the top-L of the full row, up to ties), so
        that their support lies inside the cached candidate set."""
        X = np.ascontiguousarray(X)
        n = X.shape[0]
        K = self.n_components
        rows = int(max(256, _LOCAL_BLOCK_FLOATS // K))
        total = None
        buf = np.empty((min(rows, n), K), dtype=X.dtype)
        if n_candidates is not None:
            cand = np.empty((n, n_candidates), dtype=_index_dtype(K))
            w_ref = np.empty((n, n_candidates), dtype=X.dtype)
            gap = np.empty(n, dtype=np.float64)
        tm = self.timer.seconds
        t0 = time.perf_counter()
        qform = self.quadratic_form(params, X.dtype)
        tm["weights"] += time.perf_counter() - t0
        for start in range(0, n, rows):
            Xc = X[start : start + rows]
            t0 = time.perf_counter()
            W = self.weights(Xc, params, out=buf[: Xc.shape[0]], qform=qform)
            t1 = time.perf_counter()
            nt = threads_for_work(self.n_threads, W.shape[0] * K, _MIN_PARALLEL_WEIGHTS,
                                  scale=False)
            if n_candidates is None:
                values, indices = posteriors.responsibilities(W, self.L, n_threads=nt)
            else:
                sl = slice(start, start + Xc.shape[0])
                cand[sl], w_ref[sl], gap[sl], values, indices = self._candidates_of(
                    W, n_candidates, nt
                )
            s = self._chunk_stats(start, values, indices, Xc, tm, t0, t1)
            total = s if total is None else total.add_(s)
        if total is None:  # no rows (e.g. an empty partition of a Dask collection)
            total = self.empty_stats()
        if n_candidates is None:
            return total
        return total, cand, w_ref, gap

    def global_step(self, stats):
        return _gaussian.global_step(stats, self.prior,
                                     n_threads=effective_n_threads(self.n_threads))

    def elbo(self, stats, params):
        return _gaussian.elbo(stats, params, self.prior)


class _DPMixtureModel(MixtureMoves, _SparseGMMModel):
    """:class:`_SparseGMMModel` with the memoized merge / delete / sort moves of
    :class:`sparseclust.mixture._dp_moves.MixtureMoves` (Dirichlet-process prior)."""

    def __init__(self, prior, n_components, L, dtype, *, moves, auto_candidates=False,
                 candidates_requested=None, **kw):
        # L and candidates_requested: the numbers asked for, clamped to K at every K, so that
        # births that grow K past them get them back (L = None: dense at every K)
        _SparseGMMModel.__init__(self, prior, n_components,
                                 n_components if L is None else min(int(L), n_components),
                                 dtype, **kw)
        self._L_requested = L
        self._candidates_requested = (self.n_candidates if candidates_requested is None
                                      else int(candidates_requested))
        # 'auto' candidate sets: recomputed for the new K after a compaction (off when they
        # would cover every cluster)
        self._auto_candidates = bool(auto_candidates)
        self.init_moves(moves)

    def plain_model(self, K, max_L=None):
        """A model without moves over ``K`` components (for re-running the local step), with
        at most ``max_L`` responsibilities per sample when given."""
        L = self._L_at(K) if max_L is None else min(self._L_at(K), int(max_L))
        return _SparseGMMModel(self.prior, K, L, self.dtype, n_threads=self.n_threads)

    def _L_at(self, K):
        return K if self._L_requested is None else min(self._L_requested, K)

    def set_n_components(self, K, new_of_old=None):
        """Shrink to ``K`` components after a compaction (clamping L and the candidates);
        ``new_of_old`` (the compaction's index map) keeps the cached candidate sets when
        their size does not change."""
        C_before = self.n_candidates
        self.n_components = int(K)
        self.L = self._L_at(self.n_components)
        if self._auto_candidates:
            self.n_candidates = _auto_candidates(self.L, self.n_components)
        elif self._candidates_requested is not None:
            self.n_candidates = min(self._candidates_requested, self.n_components)
        if new_of_old is not None and self.n_candidates is not None \
                and self.n_candidates == C_before:
            self.renumber_candidates(new_of_old)
        else:
            self.reset_candidates()


def _point_log_prob(X, params, prior, n_threads=None):
    """``log pi_hat_k + log N(x_n | m_k, E[Lambda_k]^-1)`` (n, K) in ``X.dtype``."""
    dt = X.dtype
    n, D = X.shape
    K = params.theta.shape[0]
    out = np.empty((n, K), dtype=dt)
    _quadratic_form.QuadraticForm(
        params.means,
        params.prec_chol,
        prior.covariance_type,
        prior.zero_mean,
        prior.m0,
        dt,
        n_threads=n_threads,
    ).evaluate(X, out)
    if prior.covariance_type == "full":
        log_det_chol = np.log(np.diagonal(params.prec_chol, axis1=1, axis2=2)).sum(1)
    elif prior.covariance_type == "spherical":
        log_det_chol = D * np.log(params.prec_chol)
    else:
        log_det_chol = np.log(params.prec_chol).sum(1)
    log_w = np.log(params.weights)
    out *= dt.type(-0.5)
    out += (log_w - 0.5 * D * _gaussian.LOG_2PI + log_det_chol).astype(dt)
    return out
