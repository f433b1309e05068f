# SPDX-License-Identifier: BSD-3-Clause
"""Training of :class:`SparseGaussianMixture`.

:class:`_FittingMixin` holds the estimator's methods that build the engine model of a fit,
run :func:`sparseclust._engine.fit_engine` on in-memory data, a stream of minibatches or the
partitions of a Dask collection (with held-out scoring, the per-pass callback and the
verbose progress), and set the fitted attributes from the result.
"""

import contextlib

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import validate_data

from .._engine import StochasticState, SuffStats, default_delay, fit_engine, is_dask_collection
from .._input import check_output_support, reject_text
from .._moves import parse_moves, warn_if_lower_bound
from ..utils import effective_n_threads
from ..utils._progress import Progress
from ..utils._threads import _blas_controller
from . import _gaussian
from ._gmm_model import _auto_candidates, _DPMixtureModel, _SparseGMMModel
from ._stream_rows import StreamRows, is_row_stream

_MIXTURE_MOVES = ("merge", "delete", "birth", "sort")

#: with moves, a cluster is live when it holds at least this many expected samples
LIVE_MIN_SAMPLES = 1.0

#: with the Dirichlet-process prior and birth moves, a fit seeded by ``init_params`` starts
#: from at most one cluster per START_PRIOR_MULTIPLE * nu0 samples (``_start_size``)
START_PRIOR_MULTIPLE = 4


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


class _FittingMixin:
    """The methods of :class:`SparseGaussianMixture` that fit it: the engine model, the
    engine's run and the fitted attributes."""

    def _check_n_samples(self, n):
        if n < self.n_components:
            raise ValueError(
                f"Expected n_samples >= n_components but got n_components = "
                f"{self.n_components}, n_samples = {n}."
            )

    def _effective_L(self, K=None):
        K = self.n_components if K is None else K
        return K if self.L is None else min(int(self.L), K)

    def _effective_candidates(self, K=None):
        """``min(n_candidates, K)``, or None when candidate sets are off or cannot be cached
        (stochastic minibatches are random, so every step computes the full ``W``).
        ``'auto'``: ``max(16, 2 L)`` when that is fewer than K, else None."""
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
            # the requested L and candidates, unclamped: births that grow K get them back
            wanted = (int(self.n_candidates) if candidates and self.n_candidates is not None
                      and self.n_candidates != "auto" else None)
            return _DPMixtureModel(prior, K, None if self.L is None else int(self.L),
                                   dtype, moves=moves,
                                   auto_candidates=candidates and self.n_candidates == "auto",
                                   candidates_requested=wanted, **kw)
        return _SparseGMMModel(prior, K, self._effective_L(K), dtype, **kw)

    def _start_size(self, n, prior, moves):
        """The number of clusters a fit from scratch starts from: ``n_components``, except
        with the Dirichlet-process prior, birth moves and a start seeded by ``init_params``
        ('kmeans++' or 'random'; no ``*_init`` array), where it is at most
        ``max(1, n // (START_PRIOR_MULTIPLE * nu0))``: every starting cluster then holds on
        average at least four times the nu0 pseudo-samples of its covariance prior, so its
        data shape it more than the prior does. A smaller start does not bound the number
        learned: births add clusters where the data support them, and the weight prior keeps
        the truncation's concentration (``1 / n_components`` by default)."""
        K = self.n_components
        if "birth" not in moves or not isinstance(self.init_params, str) or any(
                v is not None for v in (self.weights_init, self.means_init,
                                        self.precisions_init)):
            return K
        return int(min(K, max(1, n // (START_PRIOR_MULTIPLE * prior.nu0))))

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
        return _blas_controller().limit(
            limits=effective_n_threads(self.n_threads), user_api="blas"
        )

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
                K0 = (self._stats["N"].shape[0] if warm
                      else self._start_size(X.shape[0], prior, moves))
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
        if moves and not warm and not stopped:
            # against the truncation the user gave; a start the data capped is named, with
            # the way to a larger one (a larger n_components does not change it)
            capped = K0 < self.n_components
            warn_if_lower_bound(
                "SparseGaussianMixture", best.trace, self.n_components, self.n_components_,
                "n_components", "clusters", stacklevel=4,
                used=K0 if capped else None,
                cap=(f"at most one cluster per {START_PRIOR_MULTIPLE} * nu0 = "
                     f"{START_PRIOR_MULTIPLE * prior.nu0:g} samples"),
                advice=("Give init_params (labels) or means_init to start from more clusters."
                        if capped else None))
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
            delta=default_delay(self.delta, n if self.total_samples is None
                                else self.total_samples, self.batch_size),
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
