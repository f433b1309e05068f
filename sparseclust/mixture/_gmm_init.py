# SPDX-License-Identifier: BSD-3-Clause
"""Priors and initial statistics of :class:`SparseGaussianMixture`.

:class:`_InitMixin` holds the estimator's methods that resolve the priors against the data
(the ``*_prior_`` attributes) and compute the whole-data statistics of the initial
responsibilities (``init_params``, then ``weights_init`` / ``means_init`` /
``precisions_init``). The block functions below compute those statistics on a block of rows:
the whole data in-process, or one partition of a Dask collection.
"""

import dataclasses

import numpy as np
from scipy.linalg import solve_triangular
from sklearn.cluster import kmeans_plusplus

from .. import posteriors
from ..utils._threads import threads_for_work
from . import _gaussian
from ._gmm_model import _LOCAL_BLOCK_FLOATS, _MIN_PARALLEL_WEIGHTS, _point_log_prob


class _InitMixin:
    """The methods of :class:`SparseGaussianMixture` that build its prior and the statistics
    of its initial responsibilities."""

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
        partitions holding at least as many rows as the start has clusters (``model``'s),
        and every partition assigns its rows to the nearest center; ``'random'`` draws each
        partition's weights from its own seed (drawn from ``random_state``); labels or
        responsibilities are split by partition."""
        n = X.shape[0]
        K = model.n_components  # n_components, or the smaller start of ``_start_size``
        init = self.init_params
        local = isinstance(X, np.ndarray)
        if isinstance(init, str) and init == "kmeans++":
            centers, _ = kmeans_plusplus(X if local else X.head(K), K, random_state=rng)
            if local:
                return _nearest_stats(X, model, centers)
            return X.map_sum(_nearest_stats, None, (model, centers))
        if isinstance(init, str) and init == "random":
            L = self._effective_L(K)
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
