# SPDX-License-Identifier: BSD-3-Clause
"""Variational Gaussian mixture with L-sparse responsibilities (Hughes & Sudderth 2016, §2-4, App.
A-B)."""

import contextlib
import dataclasses
import time
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_triangular
from scipy.special import logsumexp
from sklearn.base import (
    DensityMixin,
)
from sklearn.cluster import kmeans_plusplus
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import posteriors
from .._base import SparseEstimatorBase
from .._engine import (
    StochasticState,
    SuffStats,
    VariationalModel,
    fit_engine,
    is_dask_collection,
    stochastic_step,
)
from .._input import check_output_support, reject_text
from .._moves import parse_moves
from ..utils import effective_n_threads
from ..utils._progress import Progress
from ..utils._threads import threads_for_work
from . import _gaussian
from ._dp_moves import MixtureMoves
from ._stream_rows import StreamRows, is_row_stream

__all__ = ["SparseGaussianMixture"]

_MIXTURE_MOVES = ("merge", "delete", "birth", "sort")

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

def _auto_candidates(L, K):
    """``n_candidates='auto'``: ``max(16, 4 L)`` candidates, None (dense) when not fewer than K."""
    C = max(16, 4 * int(L))
    return C if C < K else None


class _CandidateCache:
    """The cached candidate sets of one fixed batch (``X`` is the identity key).

    ``cand`` (n, C) int32: each row's C largest weights at its last refresh; with adaptive
    refresh also ``w_ref`` (n, C): those weights then, and ``gap`` (n,): the L-th largest of
    them minus the largest weight outside the candidates (>= 0)."""

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
       (:class:`_gaussian.QuadraticForm`);
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
            entry.cand = np.ascontiguousarray(c, dtype=np.int32)
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
        return _gaussian.QuadraticForm(
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
        ``(x_n - m_k)^T E[Lambda_k] (x_n - m_k)`` from :class:`_gaussian.QuadraticForm`."""
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
        ``X.dtype`` (:meth:`_gaussian.QuadraticForm.evaluate_pairs`, ``O(n C D^2)``)."""
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
            cc = cand[start : start + rows]
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
            t2 = time.perf_counter()
            if self._collect is not None:
                self._collect(start, values, indices, Xc)
            s = self.stats_from_responsibilities(values, indices, Xc)
            t3 = time.perf_counter()
            tm["weights"] += t1 - t0
            tm["responsibilities"] += t2 - t1
            tm["summary"] += t3 - t2
            total = s if total is None else total + s
        entry.rows_refreshed += n_full
        return total

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
        int32 indices of each row's C largest weights; the responsibilities are then the top-L
        among those candidates (the top-L of the full row, up to ties), so that their support
        lies inside the cached candidate set."""
        X = np.ascontiguousarray(X)
        n = X.shape[0]
        K = self.n_components
        rows = int(max(256, _LOCAL_BLOCK_FLOATS // K))
        total = None
        buf = np.empty((min(rows, n), K), dtype=X.dtype)
        if n_candidates is not None:
            cand = np.empty((n, n_candidates), dtype=np.int32)
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
            t2 = time.perf_counter()
            if self._collect is not None:
                self._collect(start, values, indices, Xc)
            s = self.stats_from_responsibilities(values, indices, Xc)
            t3 = time.perf_counter()
            tm["weights"] += t1 - t0
            tm["responsibilities"] += t2 - t1
            tm["summary"] += t3 - t2
            total = s if total is None else total + s
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

    def __init__(self, prior, n_components, L, dtype, *, moves, auto_candidates=False, **kw):
        # L = None: dense responsibilities at every K, also after births grow K
        _SparseGMMModel.__init__(self, prior, n_components,
                                 n_components if L is None else L, dtype, **kw)
        self._L_requested = L
        self._candidates_requested = self.n_candidates
        # 'auto' candidate sets: recomputed for the new K after a compaction (off when they
        # would cover every cluster)
        self._auto_candidates = bool(auto_candidates)
        self.init_moves(moves)

    def plain_model(self, K):
        """A model without moves over ``K`` components (for re-running the local step)."""
        return _SparseGMMModel(self.prior, K, self._L_at(K), self.dtype,
                               n_threads=self.n_threads)

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


#: with moves, a cluster is live when it holds at least this many expected samples
LIVE_MIN_SAMPLES = 1.0


def _live_clusters(params, stats, prior):
    """Drop the clusters holding less than ``LIVE_MIN_SAMPLES`` expected samples after a fit
    with moves (the ELBO may keep a cluster with a sliver of mass: its entropy gain outweighs
    its cost), and re-run the global step on the rest; at least the largest cluster stays."""
    N = np.asarray(stats["N"])
    live = np.flatnonzero(N >= LIVE_MIN_SAMPLES)
    if live.size == 0:
        live = np.array([int(np.argmax(N))])
    if live.size == N.size:
        return params, stats
    stats = SuffStats(**{k: np.ascontiguousarray(v[live]) for k, v in stats.items()})
    return _gaussian.global_step(stats, prior), stats


def _point_log_prob(X, params, prior, n_threads=None):
    """``log pi_hat_k + log N(x_n | m_k, E[Lambda_k]^-1)`` (n, K) in ``X.dtype``."""
    dt = X.dtype
    n, D = X.shape
    K = params.theta.shape[0]
    out = np.empty((n, K), dtype=dt)
    _gaussian.QuadraticForm(
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


class SparseGaussianMixture(DensityMixin, SparseEstimatorBase):
    r"""Variational Bayesian Gaussian mixture with L-sparse responsibilities.

    The model (Hughes & Sudderth 2016, App. A) is

    .. math::

        \pi \sim \mathrm{Dir}(\alpha_0, \dots, \alpha_0), \quad
        z_n \sim \mathrm{Cat}(\pi), \quad
        x_n \sim \mathcal N(\mu_{z_n}, \Lambda_{z_n}^{-1}),

    with a conjugate prior on :math:`(\mu_k, \Lambda_k)`: Normal-Wishart
    (``covariance_type='full'``), a Normal-Gamma per dimension (``'diag'``) or one Normal-Gamma
    for all dimensions (``'spherical'``, :math:`\Lambda_k = \lambda_k I`), or, with
    ``zero_mean=True``, :math:`\mu_k = 0` and a Wishart or Gamma prior on the precision -- the
    image-patch model of Hughes & Sudderth (2016), App. B.1. The mean-field posterior
    :math:`q(\pi) q(\mu, \Lambda) \prod_n q(z_n)` restricts each :math:`q(z_n)` to at most ``L``
    non-zero responsibilities: given the weights
    :math:`W_{nk} = E[\log \pi_k] + E[\log \mathcal N(x_n | \mu_k, \Lambda_k)]` (Eq. 5), the
    optimal L-sparse responsibilities keep the ``L`` largest weights of each row and
    exp-normalize them (Eq. 6, Alg. 1). The cost of the summary statistics (Eq. 7) then scales
    with ``L`` instead of ``K``; the remaining dense cost is computing ``W`` itself
    (``O(N K D^2)``, done with one matrix product per block of rows).

    Training maximizes the evidence lower bound (ELBO, App. A Eq. 18-24 and B Eq. 31) by
    coordinate ascent over additive sufficient statistics with one of three algorithms
    (:mod:`sparseclust._engine`): full-batch, memoized (Hughes & Sudderth 2013) or stochastic
    (Hoffman et al. 2013).

    Parameters
    ----------
    n_components : int, default=1
        Number of mixture components ``K``.
    L : int or None, default=4
        Maximum number of non-zero responsibilities per sample. ``None`` means dense (``L = K``);
        values above ``K`` are clamped to ``K``. ``L = 1`` is hard assignment, which can end
        well below the dense fit. The default is the sparsity level Hughes & Sudderth (2016)
        use for mixtures: the summary statistics then cost ``O(N L D^2)`` instead of
        ``O(N K D^2)``, and the fit stays close to the dense one (the rule behind it:
        ``doc/defaults.md``; evidence: ``doc/benchmarks.md``). Raise it when samples are
        often shared among many clusters; ``L = K`` gives scikit-learn's dense updates.
    covariance_type : {'full', 'diag', 'spherical'}, default='full'
        Full covariance matrices (Wishart prior on the precision), diagonal ones (independent
        Gamma priors on each precision entry) or spherical ones (one Gamma-distributed
        precision per component, ``Lambda_k = lambda_k I``). scikit-learn's ``'tied'`` (one
        covariance shared by all components) is not offered: its second-moment statistic is
        ``sum_n x_n x_n^T`` whatever the responsibilities, so the L-sparse posterior, which is
        what this estimator adds, saves nothing there; use
        ``sklearn.mixture.BayesianGaussianMixture(covariance_type='tied')``.
    zero_mean : bool, default=False
        If True, every component has mean zero (Hughes & Sudderth 2016, App. B.1); ``mean_prior``
        and
        ``mean_precision_prior`` are then unused and ``mean_precision_`` is ``inf``.
    weight_concentration_prior_type : str, default='dirichlet_distribution'
        ``'dirichlet_distribution'`` or ``'dirichlet_process'``: the prior on the mixture
        weights, with scikit-learn's meaning
        (``BayesianGaussianMixture``). ``'dirichlet_distribution'``: the finite
        ``pi ~ Dir(alpha0, ..., alpha0)`` with ``q(pi) = Dir(theta)``, ``theta = alpha0 + N``.
        ``'dirichlet_process'``: the stick-breaking representation of a Dirichlet process
        truncated at ``n_components`` sticks (Sethuraman 1994; Blei & Jordan 2006),
        ``u_k ~ Beta(1, gamma)``, ``pi_k = u_k prod_{j<k} (1 - u_j)`` with
        ``gamma = weight_concentration_prior``; ``q(u_k) = Beta(a_k, b_k)`` with
        ``a_k = 1 + N_k``, ``b_k = gamma + sum_{j>k} N_j`` and
        ``E[log pi_k] = E[log u_k] + sum_{j<k} E[log(1 - u_j)]`` (the stick-breaking code
        HDPTopicModel uses, :mod:`sparseclust._stickbreak`). The ELBO's allocation terms are
        then ``sum_k N_k E[log pi_k] + E[log Beta(u_k | 1, gamma) - log q(u_k)]``. Only with
        this prior do the ``moves`` act, and the number of clusters is learned.
    weight_concentration_prior : float or None, default=None
        Dirichlet concentration per component ``alpha0`` (``'dirichlet_distribution'``) or the
        stick-breaking concentration ``gamma`` (``'dirichlet_process'``). ``None`` means
        ``1 / n_components``, as in scikit-learn.
    mean_precision_prior : float or None, default=None
        ``beta0``, the precision of the prior on the means relative to the component precision.
        ``None`` means 1.
    mean_prior : array-like of shape (n_features,), default=None
        ``m0``. ``None`` means the mean of the training data.
    degrees_of_freedom_prior : float or None, default=None
        ``nu0`` (must exceed ``n_features - 1``). ``None`` means ``n_features`` (as in
        scikit-learn), except ``1.5 * n_features`` for ``covariance_type='full'`` with
        ``weight_concentration_prior_type='dirichlet_process'``.
        For ``'diag'`` the Gamma shape of each precision is ``nu0 / 2``, for ``'spherical'``
        ``n_features * nu0 / 2``. A larger ``nu0`` keeps a cluster of a few samples from
        shaping a full covariance along them (``Psi0 + sum_n r_nk x_n x_n^T``). With the
        Dirichlet-process prior and ``nu0 = n_features``, such clusters of a few outlying
        samples pay for themselves in the ELBO, so a fit from a large truncation keeps many of
        them and the learned number of clusters depends on the truncation; ``1.5 *
        n_features`` (D / 2 more prior pseudo-samples per cluster) makes it depend far less,
        at a small cost in held-out score from a small truncation. Diagonal and spherical
        covariances do not form such clusters, so they keep ``n_features``. Give
        ``n_features`` for scikit-learn's value (``doc/mixtures.md``).
    covariance_prior : array-like or float, default=None
        ``Psi0``, the prior inverse scale matrix (``'full'``, shape (n_features, n_features),
        symmetric positive definite), the vector of twice the Gamma rates (``'diag'``, shape
        (n_features,)), or a positive float (``'spherical'``, twice the Gamma rate per
        dimension). ``None`` means the sample covariance of the data (``np.cov(X.T)``, its
        diagonal ``X.var(axis=0, ddof=1)``, or the mean of that diagonal), or the uncentered
        second moment ``X.T @ X / n`` (its diagonal, its mean) when ``zero_mean=True``.
    reg_covar : float, default=1e-6
        Non-negative isotropic pseudo-scatter ``reg_covar I`` added to each sample's ``x x^T``
        and to each of the ``nu0`` prior pseudo-samples (``Psi0 + reg_covar nu0 I``), so that
        ``covariances_ >= reg_covar I`` as in scikit-learn. It enters both the global step
        (``Sxx + reg_covar N_k I``) and the weights (``-reg_covar / 2 tr E[Lambda_k]``), so the
        ELBO stays exact and its coordinate ascent monotone.
    algorithm : {'batch', 'memoized', 'stochastic'}, default='memoized'
        Learning algorithm: exact coordinate ascent over all data (``'batch'``), memoized
        variational inference over ``n_batches`` fixed batches with a global step after each
        (Hughes & Sudderth 2013; the ELBO never decreases), or stochastic variational inference
        (Hoffman et al. 2013). Memoized training takes ``n_batches`` global steps per pass, so
        it gets close to the fixed point in fewer passes than batch training, with no step size
        to tune; stochastic training suits data too large to visit repeatedly, or a stream
        (:meth:`partial_fit`). Moves and candidate sets need memoized or batch training.
    n_batches : int, default=10
        Number of fixed batches of ``'memoized'``: more batches mean more global steps per
        pass, and more cached statistics (K D^2 floats per batch for full covariances).
    n_candidates : 'auto', int or None, default='auto'
        Candidate-restricted weights for ``'memoized'`` and ``'batch'`` (off when None;
        ``'auto'``: ``C = max(16, 4 L)`` when that is fewer than K, else off). Each row ``n`` of
        each fixed batch caches a candidate set ``S_n``, the indices of the
        ``C = min(n_candidates, K)`` largest weights of the last *full* ``W_n`` computed for it
        (:func:`sparseclust.posteriors.top_l_indices`). Between refreshes only the ``n C``
        weights ``W_nk, k in S_n`` are computed (rows grouped by candidate component, one
        ``gemm``-based evaluation per component: ``O(N C D^2)`` instead of ``O(N K D^2)``), and
        the responsibilities are the top-L of ``W_n`` restricted to ``S_n``. Must be ``>= L``.
        The ELBO stays monotone under memoized training: maximizing Eq. 8 over L-sparse ``r_n``
        whose support lies in a fixed set ``S_n`` is solved by the top-L of ``W_n[S_n]`` (the
        argument of Hughes & Sudderth 2016, §3.1, applies to any fixed index set), and the row's
        previous responsibilities are feasible for that problem -- they were chosen among
        ``S_n``, or, at a refresh, are the top-L of the full row, which lies inside its top-C
        (and a refreshed row's new responsibilities, the top-L of its full row, are optimal
        over every support). So each batch visit cannot decrease the whole-data ELBO.
        Components outside ``S_n`` that become better are found only when the row is
        refreshed (see ``candidate_refresh``); ``n_candidates=None`` is the paper's algorithm.
        ``'stochastic'`` and :meth:`partial_fit` draw random minibatches, which have no cache:
        they always compute the full ``W`` and ignore this parameter.
    moves : {'all', 'none'}, str or tuple, default='all'
        Memoized moves of the Dirichlet-process mixture (Hughes & Sudderth 2013; the machinery
        HDPTopicModel uses, :mod:`sparseclust._moves`): a subset of ``('merge', 'delete',
        'birth', 'sort')``, as a tuple or a ``'+'``-joined string such as ``'merge+delete'``.
        After every pass from the second on, **merge** tries candidate pairs (each cluster's
        nearest clusters by symmetric KL divergence and most correlated ones by co-usage) in
        decreasing order of their closed-form gain, from the entropy terms
        ``sum_n (r_na + r_nb) log(r_na + r_nb)`` of every two clusters that share a sample,
        gathered during the pass; **delete** tries the smallest clusters, re-running the
        local step without the cluster on the samples that use it; **birth** (after a round
        that tried merges or deletes and accepted none) fits 3 fresh clusters to a subsample
        of the largest cluster's samples and re-runs the local step on all of its samples (up
        to 10^7 / n_features of them, or 10% of the samples if more) with the fresh clusters
        added; **sort** reorders the clusters by
        size (the stick-breaking prior favours large early sticks). Each proposal is accepted
        only if the whole-data ELBO increases, so training stays monotone, and
        ``n_components_`` becomes the number of clusters left that hold at least one expected
        sample (clusters with less, which the
        ELBO may keep for the entropy of a sliver of mass, are dropped from the fitted model;
        ``lower_bound_`` is the objective of the training truncation). The default ``'all'``
        changes nothing for the default ``'dirichlet_distribution'`` prior, where moves do
        not act (its ``K`` is the user's choice, and an empty cluster costs differently);
        with the Dirichlet process the moves are the point of choosing it: a truncation
        ``n_components`` is an upper bound and the number of clusters is learned. Moves need
        the cached batches of ``'memoized'`` or ``'batch'`` training; ``'stochastic'`` and
        :meth:`partial_fit` ignore them. With moves, ``tol`` ends training only after 4 passes
        without an accepted merge, delete or birth (a proposal rejected n times is retried after
        ``3 * 2 ** (n - 1)`` passes, at most 24, and so are births and deletes after n rounds
        of rejected ones; the bookkeeping of
        :class:`sparseclust._moves.MoveBook`, shared with HDPTopicModel).
    candidate_refresh : 'auto' or int, default='auto'
        When candidate sets are renewed. ``'auto'`` (adaptive, per row): each row keeps, from
        its last refresh, its candidate weights ``W_nc^ref`` and the gap
        ``g_n = w_(L) - max_{k not in S_n} W_nk^ref`` between its L-th largest candidate weight
        and the best component left out. On every visit the row's candidate weights are
        recomputed anyway; when they moved unevenly by the gap or more,
        ``max_c dW_nc - min_c dW_nc >= g_n`` with ``dW = W - W^ref``, the row's full weights are
        computed, its responsibilities are the top-L of the full row and its candidate set is
        renewed. If no left-out weight rose more than the most-risen candidate weight, the
        rows kept have the top-L of their full row among their candidates, so the fit follows
        the dense one; the check is a heuristic (left-out weights are not evaluated), its cost
        ``O(C)`` per row. An integer refreshes every row of a batch on its first visit and
        then every ``candidate_refresh`` visits (passes) and trusts the candidates between;
        ``1`` refreshes every pass (the full cost, same fit as ``n_candidates=None`` up to
        ties).
    batch_size : int, default=1024
        Minibatch size of ``'stochastic'``. Larger minibatches give less noisy steps; the
        cost of a pass does not depend on it much.
    kappa : float, default=0.6
        Learning-rate decay of ``'stochastic'`` and :meth:`partial_fit`,
        ``rho_t = (delta + t)^(-kappa)``; Robbins-Monro convergence needs ``kappa`` in (0.5, 1].
    delta : float, default=1.0
        Learning-rate delay (``>= 0``). A larger delay makes the first steps smaller, so the
        first minibatches do not overwrite the initialization.
    total_samples : float or None, default=None
        Size of the whole dataset the minibatch statistics are scaled to. ``None`` means the
        number of samples passed to :meth:`fit`, and in :meth:`partial_fit` the number of
        samples seen so far.
    max_iter : int, default=100
        Maximum number of passes over the data.
    tol : float, default=1e-3
        Convergence threshold on the change of the ELBO between passes per sample (nats),
        ``|L_t - L_{t-1}| / n_samples < tol`` (batch and memoized; ``0`` runs exactly
        ``max_iter`` passes). scikit-learn's mixtures use the same measure on their own lower
        bound (``GaussianMixture`` and ``BayesianGaussianMixture``, ``tol=1e-3``); here the
        ELBO is the exact objective of the algorithm (monotone for batch and memoized
        training) and it is evaluated once per pass (after all batches for memoized). The
        default is the loosest value whose fits end within 0.05% of the held-out
        log-likelihood of the same fit run to tight convergence, and within 0.1% of dense
        coordinate ascent (``doc/defaults.md``); lower it when you need the fixed point
        itself.
        ``trace_`` records the measure of every pass as ``elbo_change``.
    n_init : int, default=1
        Number of initializations; the one with the largest final ELBO is kept.
    init_params : {'kmeans++', 'random'} or array-like, default='kmeans++'
        ``'kmeans++'``: seeds from :func:`sklearn.cluster.kmeans_plusplus`, each sample assigned
        to its nearest seed (hard initial responsibilities). ``'random'``: uniform random
        responsibilities (the top ``L`` of each row, normalized). An integer array of shape
        (n_samples,) gives initial hard labels; a float array of shape (n_samples, n_components)
        gives initial responsibilities (rows are normalized).
    weights_init : array-like of shape (n_components,), default=None
        Initial mixture weights (non-negative, summing to 1), as in scikit-learn's
        ``GaussianMixture``. When any of ``weights_init``, ``means_init`` and
        ``precisions_init`` is given, the initial responsibilities are the top-L posterior
        ``r_nk`` proportional to ``w_k N(x_n | mu_k, P_k^-1)`` of the mixture they define; its
        parts that are not given are the point estimates (``N_k / n``, ``Sx_k / N_k``, inverse
        covariances) of the ``init_params`` initialization.
    means_init : array-like of shape (n_components, n_features), default=None
        Initial means (not allowed with ``zero_mean=True``). See ``weights_init``.
    precisions_init : array-like, default=None
        Initial precision matrices: shape (n_components, n_features, n_features) for
        ``'full'`` (symmetric positive definite), (n_components, n_features) for ``'diag'``,
        (n_components,) for ``'spherical'`` (positive). See ``weights_init``.
    warm_start : bool, default=False
        If True, :meth:`fit` starts from the statistics of the previous fit (``n_init`` is then 1).
        ``n_components`` must then be the one the model was fitted with (ValueError
        otherwise).
    random_state : int, RandomState instance or None, default=None
        Initialization, batch split and minibatch order.
    n_threads : int or None, default=None
        Threads for the compiled kernels and BLAS; ``None`` uses
        :func:`sparseclust.utils.effective_n_threads` defaults and leaves BLAS as configured.
    verbose : int, default=0
        0 silent; 1 one line on stderr after the first pass and every ``verbose_interval``
        passes, the format every estimator shares
        (:class:`~sparseclust.utils._progress.Progress`):
        ``[SparseGaussianMixture] pass i/max_iter  ELBO <elbo>  change <c>  K <k>  <seconds> s``;
        2 adds the time of each part of the local step and of the global step.
    verbose_interval : int, default=10
        Passes between progress lines.

    Attributes
    ----------
    weights_ : ndarray of shape (n_components,)
        Posterior mean mixture weights ``E[pi_k] = theta_k / sum(theta)``; for the Dirichlet
        process ``E[u_k] prod_{j<k} E[1 - u_j]``, renormalized over the clusters.
    means_ : ndarray of shape (n_components, n_features)
        Posterior means ``m_k`` (zeros when ``zero_mean``).
    covariances_ : ndarray
        ``E[Lambda_k]^-1`` (``W_k^-1 / nu_k`` for 'full'), scikit-learn's convention; shape
        (n_components, n_features, n_features) ('full'), (n_components, n_features) ('diag')
        or (n_components,) ('spherical').
    precisions_ : ndarray, same shape as ``covariances_``
        Posterior mean precisions ``E[Lambda_k]`` (``nu_k W_k`` for 'full').
    precisions_cholesky_ : ndarray, same shape as ``covariances_``
        Upper-triangular ``C_k`` with ``precisions_[k] = C_k C_k^T`` ('full'), or
        ``sqrt(precisions_)`` ('diag', 'spherical').
    n_components_ : int
        Number of clusters of the fitted model: ``n_components``, or for the Dirichlet process
        with moves the clusters left after merges and deletes. Every per-cluster attribute,
        :meth:`predict_proba` and :meth:`transform` cover these clusters only.
    weight_concentration_ : ndarray of shape (n_components_,) or tuple of two
        Dirichlet parameters ``theta_k = alpha0 + N_k`` of ``q(pi)``; for the Dirichlet
        process the Beta parameters ``(a, b)`` of the sticks, as in scikit-learn.
    mean_precision_ : ndarray of shape (n_components,)
        ``beta_k = beta0 + N_k`` (``inf`` when ``zero_mean``).
    degrees_of_freedom_ : ndarray of shape (n_components,)
        ``nu_k = nu0 + N_k``.
    weight_concentration_prior_, mean_precision_prior_, mean_prior_ : float or ndarray
        The priors actually used (``mean_precision_prior_`` is ``inf`` for zero-mean models).
    degrees_of_freedom_prior_, covariance_prior_ : float or ndarray
        The priors actually used.
    lower_bound_ : float
        ELBO (nats, summed over samples) of the final model.
    lower_bounds_ : list of float
        ELBO after every pass of the retained initialization.
    n_iter_ : int
        Passes over the data run by :meth:`fit` (as in scikit-learn's ``GaussianMixture``);
        0 after :meth:`partial_fit` alone, which leaves it unchanged after ``fit``.
    n_batch_iter_ : int
        Global updates of the statistics so far, as in :class:`~sparseclust.SparseLDA`: those
        of :meth:`fit` (one per pass for batch training, one per batch visit for memoized
        training (its first pass counts one), one per minibatch for stochastic training) and
        one per :meth:`partial_fit` call. Set by :meth:`partial_fit` only; ``fit`` counts its
        updates in the ``step`` of its last ``trace_`` entry.
    converged_ : bool
        Whether the last fit met ``tol`` (always False after :meth:`partial_fit` and for
        ``'stochastic'``, which runs ``max_iter`` passes unless its noisy objective meets
        ``tol``).
    trace_ : list of dict
        One entry per pass: ``pass``, ``step``, ``elapsed``, ``elbo``, ``time_local``,
        ``time_global``, the local-step breakdown ``time_weights``, ``time_responsibilities``,
        ``time_summary``, ``rho`` (stochastic) and ``heldout`` when scored. With
        ``n_candidates``, ``time_weights`` is the restricted cost on passes between refreshes.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)

    Notes
    -----
    With ``L = n_components`` and ``algorithm='batch'`` the 'full' model performs the same
    coordinate ascent as scikit-learn's ``BayesianGaussianMixture(
    weight_concentration_prior_type='dirichlet_distribution')`` (with ``reg_covar=0``; scikit-learn
    adds ``reg_covar`` in the global step only). For 'diag' the global step coincides with
    scikit-learn's, the expected log precision is the exact Gamma one (scikit-learn uses the
    Wishart formula).

    Examples
    --------
    >>> import numpy as np
    >>> from sparseclust import SparseGaussianMixture
    >>> rng = np.random.RandomState(0)
    >>> X = np.vstack([rng.randn(100, 2), rng.randn(100, 2) + 6])
    >>> gm = SparseGaussianMixture(n_components=2, L=1, random_state=0).fit(X)
    >>> np.sort(gm.means_[:, 0]).round()
    array([0., 6.])
    """

    _parameter_constraints = {
        **SparseEstimatorBase._parameter_constraints,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "L": [None, Interval(Integral, 1, None, closed="left")],
        "covariance_type": [StrOptions({"full", "diag", "spherical"})],
        "zero_mean": ["boolean"],
        "weight_concentration_prior_type": [
            StrOptions({"dirichlet_distribution", "dirichlet_process"})
        ],
        "weight_concentration_prior": [None, Interval(Real, 0.0, None, closed="neither")],
        "mean_precision_prior": [None, Interval(Real, 0.0, None, closed="neither")],
        "mean_prior": [None, "array-like"],
        "degrees_of_freedom_prior": [None, Interval(Real, 0.0, None, closed="neither")],
        "covariance_prior": [None, "array-like", Interval(Real, 0.0, None, closed="neither")],
        "reg_covar": [Interval(Real, 0.0, None, closed="left")],
        "algorithm": [StrOptions({"batch", "memoized", "stochastic"})],
        "n_batches": [Interval(Integral, 1, None, closed="left")],
        "n_candidates": [None, StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "moves": [str, tuple, list, None],
        "candidate_refresh": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "kappa": [Interval(Real, 0.0, 1.0, closed="both")],
        "delta": [Interval(Real, 0.0, None, closed="left")],
        "tol": [Interval(Real, 0.0, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "init_params": [StrOptions({"kmeans++", "random"}), "array-like"],
        "weights_init": [None, "array-like"],
        "means_init": [None, "array-like"],
        "precisions_init": [None, "array-like"],
        "warm_start": ["boolean"],
        "verbose_interval": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        n_components=1,
        *,
        L=4,
        covariance_type="full",
        zero_mean=False,
        weight_concentration_prior_type="dirichlet_distribution",
        weight_concentration_prior=None,
        mean_precision_prior=None,
        mean_prior=None,
        degrees_of_freedom_prior=None,
        covariance_prior=None,
        reg_covar=1e-6,
        algorithm="memoized",
        n_batches=10,
        n_candidates="auto",
        candidate_refresh="auto",
        moves="all",
        batch_size=1024,
        kappa=0.6,
        delta=1.0,
        total_samples=None,
        max_iter=100,
        tol=1e-3,
        n_init=1,
        init_params="kmeans++",
        weights_init=None,
        means_init=None,
        precisions_init=None,
        warm_start=False,
        random_state=None,
        n_threads=None,
        verbose=0,
        verbose_interval=10,
    ):
        self.n_components = n_components
        self.L = L
        self.covariance_type = covariance_type
        self.zero_mean = zero_mean
        self.weight_concentration_prior_type = weight_concentration_prior_type
        self.weight_concentration_prior = weight_concentration_prior
        self.mean_precision_prior = mean_precision_prior
        self.mean_prior = mean_prior
        self.degrees_of_freedom_prior = degrees_of_freedom_prior
        self.covariance_prior = covariance_prior
        self.reg_covar = reg_covar
        self.algorithm = algorithm
        self.n_batches = n_batches
        self.n_candidates = n_candidates
        self.candidate_refresh = candidate_refresh
        self.moves = moves
        self.batch_size = batch_size
        self.kappa = kappa
        self.delta = delta
        self.total_samples = total_samples
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.init_params = init_params
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.warm_start = warm_start
        self.random_state = random_state
        self.n_threads = n_threads
        self.verbose = verbose
        self.verbose_interval = verbose_interval

    # ------------------------------------------------------------------ set-up helpers
    @property
    def _n_features_out(self):
        return self.n_components_

    def _check_n_samples(self, n):
        if n < self.n_components:
            raise ValueError(
                f"Expected n_samples >= n_components but got n_components = "
                f"{self.n_components}, n_samples = {n}."
            )

    def _effective_L(self, K=None):
        K = self.n_components if K is None else K
        return K if self.L is None else min(int(self.L), K)

    def _build_prior(self, X):
        """Resolve the priors against the training data and store them as ``*_prior_``.

        ``X`` is the data, or an object with its moments (``shape``, ``dtype`` and methods
        ``mean()``, ``second()`` = X^T X / n, ``cov()`` = the (D, D) sample covariance,
        ``var()`` = the per-feature sample variance, e.g. reduced from the partitions of a
        Dask collection)."""
        n, D = X.shape
        K = self.n_components
        mo = _ArrayMoments(X) if isinstance(X, np.ndarray) else X
        alpha0 = (
            1.0 / K if self.weight_concentration_prior is None else self.weight_concentration_prior
        )
        beta0 = 1.0 if self.mean_precision_prior is None else float(self.mean_precision_prior)
        if self.zero_mean:
            m0 = np.zeros(D)
        elif self.mean_prior is None:
            m0 = mo.mean()
        else:
            m0 = np.asarray(self.mean_prior, dtype=np.float64)
            if m0.shape != (D,):
                raise ValueError(f"mean_prior must have shape ({D},), got {m0.shape}.")
            if not np.all(np.isfinite(m0)):
                raise ValueError("mean_prior must be finite.")
        if self.degrees_of_freedom_prior is None:
            nu0 = float(D)
            if (self.covariance_type == "full"
                    and self.weight_concentration_prior_type == "dirichlet_process"):
                # a learned K must not hinge on the truncation: see the docstring
                nu0 = 1.5 * D
        elif self.degrees_of_freedom_prior > D - 1.0:
            nu0 = float(self.degrees_of_freedom_prior)
        else:
            raise ValueError(
                f"degrees_of_freedom_prior must be greater than n_features - 1 = {D - 1}, "
                f"got {self.degrees_of_freedom_prior}."
            )
        full = self.covariance_type == "full"
        spherical = self.covariance_type == "spherical"
        if self.covariance_prior is None:
            if self.zero_mean:
                second = mo.second()
                psi0 = second if full else np.diag(second).copy()
            elif full:
                psi0 = np.atleast_2d(mo.cov()) if n > 1 else np.eye(D)
            else:
                psi0 = mo.var() if n > 1 else np.ones(D)
            if spherical:
                psi0 = np.asarray(psi0.mean())
            # a degenerate data set (a constant feature) must not give a singular prior
            floor = max(self.reg_covar, 1e-10)
            if full:
                if np.linalg.eigvalsh(psi0).min() <= 0:
                    psi0 = psi0 + floor * np.eye(D)
            else:
                psi0 = np.where(psi0 > 0, psi0, floor)
        elif spherical:
            psi0 = np.asarray(self.covariance_prior, dtype=np.float64)
            if psi0.ndim != 0 or not (np.isfinite(psi0) and psi0 > 0):
                raise ValueError(
                    "covariance_prior must be a positive float for covariance_type='spherical', "
                    f"got {self.covariance_prior!r}."
                )
        else:
            psi0 = np.asarray(self.covariance_prior, dtype=np.float64)
            if full:
                if psi0.shape != (D, D):
                    raise ValueError(
                        f"covariance_prior must have shape ({D}, {D}) for "
                        f"covariance_type='full', got {psi0.shape}."
                    )
                if not np.all(np.isfinite(psi0)):
                    raise ValueError("covariance_prior must be finite.")
                if not np.allclose(psi0, psi0.T) or np.linalg.eigvalsh(psi0).min() <= 0:
                    raise ValueError("covariance_prior must be symmetric positive definite.")
            else:
                if psi0.shape != (D,):
                    raise ValueError(
                        f"covariance_prior must have shape ({D},) for covariance_type='diag', "
                        f"got {psi0.shape}."
                    )
                if not (np.all(psi0 > 0) and np.all(np.isfinite(psi0))):
                    raise ValueError("covariance_prior must be positive and finite.")
        if full:
            # exactly symmetric (a no-op on a symmetric matrix), so that every path that adds
            # it to statistics (the global step, the merge proposals) builds the same matrix
            psi0 = 0.5 * (psi0 + psi0.T)
        # reg_covar is a pseudo-scatter of every sample *and* of each of the nu0 prior
        # pseudo-samples, so that covariances_ >= reg_covar I as in scikit-learn
        if self.reg_covar:
            psi0 = psi0 + self.reg_covar * nu0 * (
                np.eye(D) if full else (1.0 if spherical else np.ones(D))
            )
        self.weight_concentration_prior_ = float(alpha0)
        self.mean_precision_prior_ = np.inf if self.zero_mean else beta0
        self.mean_prior_ = m0.astype(X.dtype)
        self.degrees_of_freedom_prior_ = nu0
        self.covariance_prior_ = float(psi0) if spherical else psi0.astype(X.dtype)
        return _gaussian.GaussianPrior(
            covariance_type=self.covariance_type,
            zero_mean=bool(self.zero_mean),
            alpha0=float(alpha0),
            beta0=beta0,
            m0=m0,
            nu0=nu0,
            psi0=psi0,
            reg=float(self.reg_covar),
            weight_prior_type=self.weight_concentration_prior_type,
        )

    def _initial_stats(self, model, X, rng):
        """Whole-data statistics of the initial responsibilities (``init_params``, then
        ``weights_init`` / ``means_init`` / ``precisions_init`` when given).

        ``X`` is the data or the partitions of a Dask collection
        (:class:`sparseclust._dask._rows.DaskRows`, whose ``map_sum(fn, per_part, shared)`` sums
        ``fn(part, *shared, *per_part[i])`` over its partitions): the same block
        functions compute the statistics in both cases."""
        stats = self._initial_stats_from_init_params(model, X, rng)
        if all(v is None for v in (self.weights_init, self.means_init, self.precisions_init)):
            return stats
        return self._stats_of_point_mixture(model, X, stats)

    def _stats_of_point_mixture(self, model, X, stats):
        """Statistics of the top-L posterior ``r_nk ~ w_k N(x_n | mu_k, P_k^-1)`` of the mixture
        given by ``weights_init``, ``means_init``, ``precisions_init``; missing parts are the
        point estimates of the global step from ``stats``."""
        K, D = self.n_components, X.shape[1]
        params = model.global_step(stats)
        changes = {}
        if self.weights_init is not None:
            w = np.asarray(self.weights_init, dtype=np.float64)
            if w.shape != (K,) or not np.all(np.isfinite(w)) or np.any(w < 0):
                raise ValueError(
                    f"weights_init must be {K} finite non-negative values, got shape {w.shape}."
                )
            if abs(w.sum() - 1.0) > 1e-6:
                raise ValueError(f"weights_init must sum to 1, got {w.sum():.8g}.")
            changes.update(theta=w, rho=None, omega=None)
        if self.means_init is not None:
            if self.zero_mean:
                raise ValueError("means_init cannot be used with zero_mean=True.")
            m = np.asarray(self.means_init, dtype=np.float64)
            if m.shape != (K, D) or not np.all(np.isfinite(m)):
                raise ValueError(
                    f"means_init must be a finite array of shape ({K}, {D}), got {m.shape}."
                )
            changes["means"] = m
        if self.precisions_init is not None:
            changes["prec_chol"] = self._precision_factors(self.precisions_init, K, D)
        point = dataclasses.replace(params, **changes)
        args = (point, self._effective_L(), self.n_threads)
        if isinstance(X, np.ndarray):
            return _point_stats(X, model, *args)
        return X.map_sum(_point_stats, None, (model,) + args)

    def _precision_factors(self, precisions, K, D):
        """``precisions_cholesky_``-style factors of the given precisions (validated)."""
        P = np.asarray(precisions, dtype=np.float64)
        shape = {"full": (K, D, D), "diag": (K, D), "spherical": (K,)}[self.covariance_type]
        if P.shape != shape or not np.all(np.isfinite(P)):
            raise ValueError(
                f"precisions_init must be a finite array of shape {shape} for "
                f"covariance_type={self.covariance_type!r}, got {P.shape}."
            )
        if self.covariance_type != "full":
            if np.any(P <= 0):
                raise ValueError("precisions_init must be positive.")
            return np.sqrt(P)
        C = np.empty_like(P)
        for k in range(K):
            if not np.allclose(P[k], P[k].T):
                raise ValueError(f"precisions_init[{k}] is not symmetric.")
            try:
                # upper-triangular C with C C^T = P: C = L^-T for the Cholesky factor L of P^-1
                Lc = np.linalg.cholesky(np.linalg.inv(P[k]))
            except np.linalg.LinAlgError:
                raise ValueError(f"precisions_init[{k}] is not positive definite.") from None
            C[k] = solve_triangular(Lc, np.eye(D), lower=True).T
        return C

    def _initial_stats_from_init_params(self, model, X, rng):
        """Whole-data statistics of the initial responsibilities of ``init_params``.

        On the partitions of a Dask collection: k-means++ seeds the centers from the first
        partitions holding at least ``n_components`` rows, and every partition assigns its
        rows to the nearest center; ``'random'`` draws each partition's weights from its
        own seed (drawn from ``random_state``); labels or responsibilities are split by
        partition."""
        n = X.shape[0]
        K = self.n_components
        init = self.init_params
        local = isinstance(X, np.ndarray)
        if isinstance(init, str) and init == "kmeans++":
            centers, _ = kmeans_plusplus(X if local else X.head(K), K, random_state=rng)
            if local:
                return _nearest_stats(X, model, centers)
            return X.map_sum(_nearest_stats, None, (model, centers))
        if isinstance(init, str) and init == "random":
            L = self._effective_L()
            if local:
                return _random_stats(X, model, rng, L, self.n_threads)
            seeds = rng.randint(np.iinfo(np.int32).max, size=X.n_partitions)
            return X.map_sum(_random_stats_seeded, [(int(s),) for s in seeds],
                             (model, L, self.n_threads))
        R = np.asarray(init)
        if R.ndim == 1:
            if R.shape[0] != n:
                raise ValueError(f"init_params labels must have shape ({n},), got {R.shape}.")
            if not np.issubdtype(R.dtype, np.integer) or R.min() < 0 or R.max() >= K:
                raise ValueError(
                    f"init_params labels must be integers in [0, {K}), got {R.dtype} "
                    f"values in [{R.min()}, {R.max()}]."
                )
            fn, R = _labels_stats, R.astype(np.int32)
        else:
            if R.shape != (n, K):
                raise ValueError(
                    f"init_params responsibilities must have shape ({n}, {K}), got {R.shape}."
                )
            R = R.astype(np.float64)
            if not np.all(np.isfinite(R)) or np.any(R < 0):
                raise ValueError("init_params responsibilities must be finite and non-negative.")
            sums = R.sum(axis=1, keepdims=True)
            if np.any(sums <= 0):
                raise ValueError(
                    "every row of the init_params responsibilities needs a positive entry."
                )
            fn, R = _resp_stats, (R / sums).astype(X.dtype)
        if local:
            return fn(X, model, R)
        return X.map_sum(fn, X.split_rows(R), (model,))

    def _effective_candidates(self, K=None):
        """``min(n_candidates, K)``, or None when candidate sets are off or cannot be cached
        (stochastic minibatches are random, so every step computes the full ``W``).
        ``'auto'``: ``max(16, 4 L)`` when that is fewer than K, else None."""
        if self.n_candidates is None or self.algorithm == "stochastic":
            return None
        K = self.n_components if K is None else K
        if self.n_candidates == "auto":
            return _auto_candidates(self._effective_L(K), K)
        return min(int(self.n_candidates), K)

    def _check_candidates(self):
        if (self.n_candidates is not None and self.n_candidates != "auto"
                and self.n_candidates < self._effective_L()):
            raise ValueError(
                f"n_candidates must be >= L = {self._effective_L()} (the responsibilities are "
                f"chosen among the candidates), got n_candidates={self.n_candidates}."
            )

    def _make_model(self, prior, dtype, candidates=False, K=None, moves=()):
        """The engine model for ``K`` components (default ``n_components``; a fitted model
        passes ``n_components_``)."""
        K = self.n_components if K is None else int(K)
        kw = dict(
            n_threads=self.n_threads,
            n_candidates=self._effective_candidates(K) if candidates else None,
            refresh=self.candidate_refresh,
        )
        if moves:
            return _DPMixtureModel(prior, K, None if self.L is None else self._effective_L(K),
                                   dtype, moves=moves,
                                   auto_candidates=candidates and self.n_candidates == "auto",
                                   **kw)
        return _SparseGMMModel(prior, K, self._effective_L(K), dtype, **kw)

    def _active_moves(self):
        """The moves that act in this fit: only with the Dirichlet-process prior and the
        cached batches of memoized or batch training."""
        moves = parse_moves(self.moves, _MIXTURE_MOVES)
        if self.weight_concentration_prior_type != "dirichlet_process":
            return ()
        if self.algorithm == "stochastic":
            return ()
        return moves

    def _blas_limits(self):
        if self.n_threads is None:
            return contextlib.nullcontext()
        return _gaussian._blas_controller().limit(
            limits=effective_n_threads(self.n_threads), user_api="blas"
        )

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, callback=None):
        """Fit the mixture by maximizing the ELBO with ``algorithm``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), stream of minibatches or Dask collection
            A stream -- a re-iterable of arrays of rows that yields the same minibatches at
            every iteration, e.g. :func:`~sparseclust.datasets.stream_image_patches` --
            trains on data that need not fit in memory, with ``algorithm='memoized'``: its
            minibatches (in stream order) are the fixed batches (``n_batches`` is not used),
            every pass reads the stream again, and only each minibatch's statistics (and
            candidate sets) are kept. A first read validates the minibatches and gathers the
            prior's data moments; k-means++ seeds from the first minibatches holding
            ``n_components`` rows. The Dirichlet-process moves do not act on a stream (pass
            ``moves='none'``); for stochastic training call :meth:`partial_fit` on each
            minibatch with ``total_samples`` set.
            A ``dask.array`` chunked along the rows (or a ``dask.bag`` of 2-D row blocks;
            ``pip install sparseclust[dask]``) trains on the active ``distributed.Client``
            with every algorithm (:mod:`sparseclust._dask`, ``doc/training.md``): the
            partitions stay on the workers, the prior's data moments, the initial
            statistics and every local step are computed there and reduced, the global step
            runs here, with the Dirichlet-process moves (their side results are reduced with
            the statistics; a delete re-infers its rows on the workers that hold them).
            There, every visit computes all K weights (``n_candidates`` does not apply),
            k-means++ seeds from the first partitions holding ``n_components`` rows and
            ``'random'`` draws per partition.
        y : Ignored
        callback : callable or None, default=None
            Called after every pass as ``callback(info)``, as in :meth:`SparseLDA.fit`:
            ``info`` is the pass's trace entry (``pass``, ``elapsed``, ``elbo``,
            ``elbo_change``, ``time_local``, ``time_global``, ``n_components``, ...) plus
            ``n_passes`` (= ``max_iter``) and the current point estimates ``weights``,
            ``means`` and ``precisions_cholesky`` (float64, in the layout of the fitted
            attributes of the same names), e.g. to score held-out data after every pass.
            Returning ``True`` stops training after that pass
            (with ``n_init > 1``, the remaining initializations are not run either). Time
            spent in the callback is excluded from ``elapsed``.

        Returns
        -------
        self
        """
        if callback is None:
            return self._fit(X)

        def public(info):
            params = info["params"]
            out = {k: v for k, v in info.items() if k not in ("params", "stats")}
            out.update(weights=params.weights, means=params.means,
                       precisions_cholesky=params.prec_chol)
            return callback(out)

        return self._fit(X, callback=public)

    def _fit(self, X, X_heldout=None, callback=None):
        """``fit`` with optional held-out scoring (``score`` of ``X_heldout`` after every pass,
        recorded as ``trace_[i]['heldout']``, excluded from ``elapsed``) and a per-pass
        ``callback(info)`` (the engine's ``info``, see :func:`sparseclust._engine.fit_engine`,
        with the pass's trace entry fields added here; returning True stops training)."""
        self._validate_params()
        check_output_support(self, "SparseGaussianMixture.fit")
        warm = self.warm_start and hasattr(self, "_stats")
        if warm and self.n_components != getattr(self, "_n_components_fit", self.n_components):
            raise ValueError(
                f"warm_start=True continues the fitted model, but n_components="
                f"{self.n_components} differs from the n_components={self._n_components_fit} "
                "it was fitted with; set warm_start=False (or restore n_components) to fit "
                "again."
            )
        dist = is_dask_collection(X)
        stream = not dist and is_row_stream(X)
        if dist:
            from .._dask._rows import DaskRows

            if X_heldout is not None:
                raise TypeError("held-out scoring takes in-memory data, not a Dask collection")
            X = DaskRows(self, X, "SparseGaussianMixture.fit", reset=not warm)
        elif stream:
            X = self._stream_rows(X, warm)
        else:
            reject_text(X, "SparseGaussianMixture.fit", counts=False)
            X = validate_data(
                self,
                X,
                dtype=[np.float64, np.float32],
                ensure_min_samples=2,
                reset=not warm,
                order="C",
            )
        self._check_n_samples(X.shape[0])
        self._check_candidates()
        if X_heldout is not None:
            X_heldout = validate_data(self, X_heldout, dtype=X.dtype, reset=False, order="C")
        with self._blas_limits():
            if warm:
                prior = self._prior
            else:
                prior = self._build_prior(X.moments(self.covariance_type == "full")
                                          if dist or stream else X)
            moves = self._active_moves()
            rng = check_random_state(self.random_state)
            n_init = 1 if warm else self.n_init
            heldout_score = None
            if X_heldout is not None:

                def heldout_score(params):
                    return float(np.mean(self._score_samples_params(X_heldout, params, prior)))

            best = None
            for _ in range(n_init):
                # a fresh model per initialization: moves change its number of components
                K0 = self._stats["N"].shape[0] if warm else self.n_components
                # on a Dask collection every visit computes all K weights: candidate sets are
                # per-row state of each batch, cached in this process
                model = self._make_model(prior, X.dtype, candidates=not dist, K=K0,
                                         moves=moves)
                if warm:
                    init_stats = self._stats
                else:
                    init_stats = self._initial_stats(model, X, rng)
                    if self.algorithm == "stochastic" and self.total_samples is not None:
                        init_stats = init_stats * (float(self.total_samples) / X.shape[0])
                result = self._run_engine(model, X, init_stats, rng, heldout_score, callback)
                if best is None or result.lower_bound > best.lower_bound:
                    best = result
                if result.stopped:
                    break  # the callback stopped training: no further initializations
        stopped = callback is not None and best.n_iter < self.max_iter
        if not best.converged and not stopped and self.algorithm != "stochastic":
            change = best.trace[-1]["elbo_change"] if best.trace else float("nan")
            self._warn_not_converged(change, "sample", n_init=n_init)
        self._prior = prior
        self._n_components_fit = self.n_components
        params, stats = best.params, best.stats
        if moves:
            params, stats = _live_clusters(params, stats, prior)
        self._set_fitted(params, stats, X.dtype)
        self.lower_bounds_ = list(best.lower_bounds)
        self.lower_bound_ = float(best.lower_bound)
        self.n_iter_ = int(best.n_iter)
        # a later partial_fit counts on from this fit's updates (see n_batch_iter_)
        self.__dict__.pop("n_batch_iter_", None)
        self.converged_ = bool(best.converged)
        self.trace_ = best.trace
        if self.algorithm == "stochastic":
            self._svi_state = best.state
        else:
            # a later partial_fit continues as if the n_iter_ passes had been SVI passes of
            # batch_size minibatches, so one minibatch adjusts the fit rather than replacing it
            t0 = int(best.n_iter) * max(1, -(-X.shape[0] // self.batch_size))
            self._svi_state = StochasticState(stats=stats.copy(), t=t0, params=params)
        self._n_seen = X.shape[0]
        return self

    def _stream_rows(self, X, warm):
        """A stream of minibatches for memoized training (:class:`StreamRows`): one read
        validates them and gathers the data moments the priors need."""
        whom = "SparseGaussianMixture.fit"
        if self.algorithm != "memoized":
            raise ValueError(
                f"{whom}: a stream of minibatches needs algorithm='memoized' (got "
                f"{self.algorithm!r}); for stochastic training call partial_fit on each "
                "minibatch, with total_samples set to the stream's number of samples.")
        if self._active_moves():
            raise ValueError(
                f"{whom}: the moves of the Dirichlet-process mixture revisit the rows of "
                "chosen clusters, which a stream does not keep; pass moves='none' to fit a "
                "stream, or the data as an array.")
        moments = None
        if not warm and self.covariance_prior is None:
            moments = "zero_mean" if self.zero_mean else "centred"
        return StreamRows(self, X, whom, reset=not warm, moments=moments,
                          full=self.covariance_type == "full")

    def _run_engine(self, model, X, init_stats, rng, heldout_score, callback):
        per_pass = []
        last = [model.timer.snapshot()]
        verbose = self.verbose
        progress = (Progress("SparseGaussianMixture", self.max_iter, every=self.verbose_interval)
                    if verbose else None)

        def _cb(info):
            now = model.timer.snapshot()
            dt = {f"time_{k}": now[k] - last[0][k] for k in now}
            last[0] = now
            dt["n_components"] = int(info["params"].theta.shape[0])
            logs = getattr(model, "round_logs", None)
            if logs:
                dt.update({k: v for k, v in logs[-1].items() if k != "n_components"})
            per_pass.append(dt)
            if progress is not None:
                extra = None
                if verbose > 1:
                    # the time of each part of the local step, and of the global step
                    extra = "local: " + "  ".join(
                        f"{k[5:]} {v:.3f}s" for k, v in dt.items() if k.startswith("time_")
                    ) + f"  global {info['time_global']:.3f}s"
                progress({**info, **dt, "n_passes": self.max_iter}, extra)
            if callback is None:
                return False
            stop[0] = bool(callback({**info, **dt}))
            return stop[0]

        stop = [False]
        n = X.shape[0]
        model.reset_candidates()
        source, engine_model = (X, model) if isinstance(X, np.ndarray) else X.wrap(model)
        result = fit_engine(
            engine_model,
            source,
            init_stats,
            algorithm=self.algorithm,
            max_iter=self.max_iter,
            tol=self.tol,
            n_batches=min(self.n_batches, n),
            batch_size=self.batch_size,
            kappa=self.kappa,
            delta=self.delta,
            total_samples=self.total_samples,
            random_state=rng.randint(np.iinfo(np.int32).max),
            verbose=0,
            callback=_cb,
            # tol is in nats per sample (of the data the objective is scaled to)
            tol_scale=float(self.total_samples)
            if self.algorithm == "stochastic" and self.total_samples is not None
            else float(n),
            heldout_score=heldout_score,
        )
        for entry, dt in zip(result.trace, per_pass, strict=True):
            entry.update(dt)
        result.stopped = stop[0]
        return result

    def partial_fit(self, X, y=None):
        """One stochastic variational step on the minibatch ``X``.

        The first call (on an unfitted model) resolves the priors on ``X``, initializes the
        statistics from ``X`` with ``init_params`` (scaled to ``total_samples``) and then takes
        one step; later calls continue the same stochastic optimization (step counter ``t``,
        learning rate ``(delta + t)^(-kappa)``). After :meth:`fit` it continues from the fitted
        statistics; after a batch or memoized fit of ``n_iter_`` passes the step counter resumes
        at ``n_iter_ * ceil(n_samples / batch_size)``, the steps that many stochastic passes would
        have taken. ``total_samples=None`` scales minibatches to the number of samples seen so
        far (by ``fit`` and ``partial_fit``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        self
        """
        self._validate_params()
        _refuse_dask(X, "SparseGaussianMixture.partial_fit")
        if is_row_stream(X):
            raise TypeError(
                "SparseGaussianMixture.partial_fit takes one minibatch (an array of rows), "
                f"got a {type(X).__name__}; call it on each minibatch of the stream "
                "(for X_batch in stream: model.partial_fit(X_batch)), or fit the stream.")
        first = not hasattr(self, "_svi_state")
        reject_text(X, "SparseGaussianMixture.partial_fit", counts=False)
        X = validate_data(
            self,
            X,
            dtype=[np.float64, np.float32],
            reset=first,
            order="C",
            ensure_min_samples=2 if first else 1,
        )
        with self._blas_limits():
            if first:
                self._check_n_samples(X.shape[0])
                prior = self._build_prior(X)
                model = self._make_model(prior, X.dtype)
                rng = check_random_state(self.random_state)
                self._n_seen = 0
                total = float(X.shape[0] if self.total_samples is None else self.total_samples)
                init_stats = self._initial_stats(model, X, rng) * (total / X.shape[0])
                self._svi_state = StochasticState(stats=init_stats, t=0)
                self._prior = prior
                self._n_components_fit = self.n_components
                self.lower_bounds_ = []
                self.trace_ = []
                self._dtype = X.dtype
                self.n_iter_ = 0
                self.n_batch_iter_ = 0
            else:
                if self.n_components != self._n_components_fit:
                    raise ValueError(
                        f"n_components={self.n_components} differs from the "
                        f"n_components={self._n_components_fit} the model was fitted with; call "
                        "fit to start over."
                    )
                prior = self._prior
                if X.dtype != self._dtype:
                    X = X.astype(self._dtype)
                model = self._make_model(prior, X.dtype, K=self.n_components_)
                if not hasattr(self, "n_batch_iter_"):
                    # the first step after fit continues fit's count of global updates
                    self.n_batch_iter_ = int(self.trace_[-1]["step"]) if self.trace_ else 0
            self._n_seen += X.shape[0]
            total = float(self._n_seen if self.total_samples is None else self.total_samples)
            state = self._svi_state
            timings = {}
            t0 = time.perf_counter()
            params = stochastic_step(
                model,
                state,
                X,
                kappa=self.kappa,
                delta=self.delta,
                total_samples=total,
                timings=timings,
            )
            elapsed = time.perf_counter() - t0
            elbo = float(model.elbo(state.stats, params))
        self._set_fitted(params, state.stats, self._dtype)
        self.n_batch_iter_ += 1
        self.converged_ = False
        self._append_step(state.t, elbo, elapsed, state.rho, timings,
                          {f"time_{k}": v for k, v in model.timer.seconds.items()})
        return self

    def _set_fitted(self, params, stats, dtype):
        self._params = params
        self._stats = stats
        self._dtype = np.dtype(dtype)
        theta = params.theta
        self.n_components_ = int(theta.shape[0])
        if params.rho is None:
            self.weight_concentration_ = theta.astype(dtype)
        else:
            self.weight_concentration_ = (theta.astype(dtype), params.stick_b.astype(dtype))
        self.weights_ = params.weights.astype(dtype)
        self.mean_precision_ = params.beta.astype(dtype)
        self.degrees_of_freedom_ = params.nu.astype(dtype)
        self.means_ = params.means.astype(dtype)
        C = params.prec_chol
        if self.covariance_type == "full":
            self.covariances_ = (params.scale_inv / params.nu[:, None, None]).astype(dtype)
        elif self.covariance_type == "spherical":
            D = params.means.shape[1]
            self.covariances_ = (params.scale_inv / (D * params.nu)).astype(dtype)
        else:
            self.covariances_ = (params.scale_inv / params.nu[:, None]).astype(dtype)
        self.precisions_ = params.precisions.astype(dtype)
        self.precisions_cholesky_ = C.astype(dtype)

    # ------------------------------------------------------------------ inference
    def _validate_predict(self, X):
        check_is_fitted(self)
        _refuse_dask(X, "SparseGaussianMixture")
        reject_text(X, "SparseGaussianMixture", counts=False)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False, order="C")
        return X

    def _weights(self, X):
        model = self._make_model(self._prior, X.dtype, K=self.n_components_)
        return model.weights(X, self._params)

    def _responsibilities(self, X):
        """Top-L responsibilities (values, int32 indices), W computed in row blocks so that no
        (n, K) weight matrix is held at once."""
        n, K = X.shape[0], self.n_components_
        L = self._effective_L(K)
        values = np.empty((n, L), dtype=X.dtype)
        indices = np.empty((n, L), dtype=np.int32)
        rows = int(max(256, _LOCAL_BLOCK_FLOATS // K))
        with self._blas_limits():
            model = self._make_model(self._prior, X.dtype, K=K)
            qform = model.quadratic_form(self._params, X.dtype)
            for s0 in range(0, n, rows):
                Xb = X[s0 : s0 + rows]
                W = model.weights(Xb, self._params, qform=qform)
                nt = threads_for_work(self.n_threads, Xb.shape[0] * K, _MIN_PARALLEL_WEIGHTS,
                                      scale=False)
                v, i = posteriors.responsibilities(W, L, n_threads=nt)
                values[s0 : s0 + rows] = v
                indices[s0 : s0 + rows] = i
        return values, indices

    def predict(self, X):
        """Most probable component of each sample, ``argmax_k W_nk``.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
        """
        X = self._validate_predict(X)
        with self._blas_limits():
            W = self._weights(X)
        with np.errstate(invalid="ignore"):
            top = W.max(axis=1)
        # as predict_proba: a row whose weights overflowed has no most probable component
        posteriors._raise_bad_rows(W, int(np.count_nonzero(~np.isfinite(top))))
        return W.argmax(axis=1)

    def predict_proba(self, X):
        """Dense (n_samples, n_components) L-sparse responsibilities (rows sum to 1, at most
        ``L`` non-zeros each)."""
        X = self._validate_predict(X)
        values, indices = self._responsibilities(X)
        R = np.zeros((X.shape[0], self.n_components_), dtype=X.dtype)
        np.put_along_axis(R, indices.astype(np.intp), values, axis=1)
        return R

    def transform(self, X, sparse_output=False):
        """L-sparse responsibilities of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        sparse_output : bool, default=False
            Return a ``scipy.sparse.csr_matrix`` with at most ``L`` stored entries per row.

        Returns
        -------
        R : ndarray or CSR matrix of shape (n_samples, n_components)
        """
        if not sparse_output:
            return self.predict_proba(X)
        X = self._validate_predict(X)
        values, indices = self._responsibilities(X)
        n, Lp = values.shape
        # 64-bit offsets and indices once n * L entries pass the int32 range
        idx_dtype = np.int64 if n * Lp > np.iinfo(np.int32).max else np.int32
        return sp.csr_matrix(
            (values.ravel(), indices.ravel().astype(idx_dtype, copy=False),
             np.arange(0, n * Lp + 1, Lp, dtype=idx_dtype)),
            shape=(n, self.n_components_),
        )

    def fit_predict(self, X, y=None):
        """Fit and return ``predict(X)``."""
        return self.fit(X).predict(X)

    def _score_samples_params(self, X, params, prior):
        n = X.shape[0]
        K = params.theta.shape[0]
        rows = int(max(256, _LOCAL_BLOCK_FLOATS // K))
        out = np.empty(n, dtype=np.float64)
        for s in range(0, n, rows):
            lp = _point_log_prob(X[s : s + rows], params, prior, self.n_threads)
            out[s : s + rows] = logsumexp(lp, axis=1)
        return out

    def score_samples(self, X):
        """Log density of each sample under the posterior-mean point estimates,
        ``log sum_k pi_hat_k N(x | m_k, E[Lambda_k]^-1)`` with ``pi_hat = E[pi]``.

        Returns
        -------
        log_prob : ndarray of shape (n_samples,)
        """
        X = self._validate_predict(X)
        with self._blas_limits():
            return self._score_samples_params(X, self._params, self._prior)

    def score(self, X, y=None):
        """Mean of :meth:`score_samples`: the log-likelihood per sample of X (held out, for
        model comparison), in nats; larger is better.

        It is a log *density*, so it depends on the units of X and is positive wherever the
        density exceeds 1 (data on a small scale, or concentrated near a subspace, as
        mean-removed image patches are). Compare it between models of the same data only.
        scikit-learn's ``GaussianMixture.score`` is the same quantity for its maximum
        likelihood parameters; see ``doc/evaluating.md``.
        """
        return float(np.mean(self.score_samples(X)))

    def sample(self, n_samples=1):
        """Draw samples from the point-estimate mixture (``weights_``, ``means_``,
        ``covariances_``).

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
        y : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        if n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}.")
        rng = check_random_state(self.random_state)
        # float32 weights cast to float64 can sum to 1 + 1e-8, which multinomial refuses
        w = self.weights_.astype(np.float64)
        counts = rng.multinomial(n_samples, w / w.sum())
        D = self.means_.shape[1]
        Xs, ys = [], []
        for k, c in enumerate(counts):
            if c == 0:
                continue
            mean = self.means_[k].astype(np.float64)
            if self.covariance_type == "full":
                z = rng.standard_normal((c, D))
                # x = m + C^-T z has covariance (C C^T)^-1
                C = self._params.prec_chol[k]
                x = mean + solve_triangular(C, z.T, lower=False, trans="T").T
            else:
                x = mean + rng.standard_normal((c, D)) / self._params.prec_chol[k]
            Xs.append(x)
            ys.append(np.full(c, k))
        return np.vstack(Xs).astype(self._dtype), np.concatenate(ys)


def _refuse_dask(X, whom):
    if is_dask_collection(X):
        # only fit distributes (sparseclust._dask): anything else would silently compute the
        # whole collection into this process
        raise TypeError(f"{whom} does not take a Dask collection (fit does); compute it, or "
                        "map the method over its blocks (X.map_blocks).")


class _ArrayMoments:
    """The moments :meth:`SparseGaussianMixture._build_prior` reads, of an in-memory X."""

    def __init__(self, X):
        self.shape, self.dtype = X.shape, X.dtype
        self._X = np.asarray(X, dtype=np.float64)

    def mean(self):
        return self._X.mean(axis=0)

    def second(self):
        return self._X.T @ self._X / self.shape[0]

    def cov(self):
        return np.cov(self._X.T)

    def var(self):
        return self._X.var(axis=0, ddof=1)


# ---- initial statistics of a block of rows (the whole data in-process, one partition of a
# Dask collection in sparseclust._dask): the same functions in both places


def _labels_stats(X, model, labels):
    """Statistics of the hard assignment of row n to cluster ``labels[n]``."""
    return model.stats_from_responsibilities(
        np.ones((X.shape[0], 1), dtype=X.dtype), np.asarray(labels, np.int32)[:, None], X)


def _nearest_stats(X, model, centers):
    """Statistics of the assignment of every row to its nearest center."""
    return _labels_stats(X, model, _nearest(X, centers))


def _resp_stats(X, model, R):
    """Statistics of the given (n, K) responsibilities (rows summing to one)."""
    K = R.shape[1]
    idx = np.broadcast_to(np.arange(K, dtype=np.int32), R.shape)
    return model.stats_from_responsibilities(np.asarray(R, dtype=X.dtype),
                                             np.ascontiguousarray(idx), X)


def _random_stats(X, model, rng, L, n_threads):
    """Statistics of top-L responsibilities of uniform random weights log U, U ~ U(0, 1)^K,
    drawn from ``rng`` in blocks of rows."""
    n, K = X.shape[0], model.n_components
    rows = int(max(256, _LOCAL_BLOCK_FLOATS // K))
    total = model.empty_stats()
    for s in range(0, n, rows):
        m = min(rows, n - s)
        U = rng.uniform(size=(m, K))
        nt = threads_for_work(n_threads, m * K, _MIN_PARALLEL_WEIGHTS, scale=False)
        v, i = posteriors.responsibilities(np.log(U).astype(X.dtype), L, n_threads=nt)
        st = model.stats_from_responsibilities(v, i, X[s : s + m])
        total = st if s == 0 else total + st
    return total


def _random_stats_seeded(X, model, L, n_threads, seed):
    return _random_stats(X, model, np.random.RandomState(seed), L, n_threads)


def _point_stats(X, model, point, L, n_threads):
    """Statistics of the top-L posterior r_nk ~ w_k N(x_n | mu_k, P_k^-1) of the point
    mixture ``point``."""
    n, K = X.shape[0], model.n_components
    rows = int(max(256, _LOCAL_BLOCK_FLOATS // K))
    total = model.empty_stats()
    with np.errstate(divide="ignore"):  # a zero initial weight is log 0 = -inf
        for s0 in range(0, n, rows):
            Xb = X[s0 : s0 + rows]
            lp = _point_log_prob(Xb, point, model.prior, n_threads)
            nt = threads_for_work(n_threads, Xb.shape[0] * K, _MIN_PARALLEL_WEIGHTS, scale=False)
            v, i = posteriors.responsibilities(lp, L, n_threads=nt)
            st = model.stats_from_responsibilities(v, i, Xb)
            total = st if s0 == 0 else total + st
    return total


def _nearest(X, centers, block=4096):
    """Index of the nearest center of each row (int32): ||c||^2 - 2 x.c in float64, with
    rows and centers shifted by the centers' mean (in float32, or far from the origin, the
    expansion cancels: data 1e4 from the origin gave other labels than float64)."""
    n = X.shape[0]
    labels = np.empty(n, dtype=np.int32)
    C = centers.astype(np.float64)
    shift = C.mean(axis=0)
    C -= shift
    c2 = (C**2).sum(1)
    for s in range(0, n, block):
        d = c2 - 2.0 * ((np.asarray(X[s : s + block], dtype=np.float64) - shift) @ C.T)
        labels[s : s + block] = d.argmin(axis=1)
    return labels
