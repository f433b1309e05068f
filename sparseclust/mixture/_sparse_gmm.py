# SPDX-License-Identifier: BSD-3-Clause
"""Variational Gaussian mixture with L-sparse responsibilities (Hughes & Sudderth 2016, §2-4, App.
A-B).

The estimator's engine models are in :mod:`._gmm_model`, its priors and initial statistics in
:mod:`._gmm_init` and its training in :mod:`._gmm_fit`."""

import time
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_triangular
from scipy.special import logsumexp
from sklearn.base import (
    DensityMixin,
)
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import posteriors
from .._base import SparseEstimatorBase
from .._engine import StochasticState, default_delay, is_dask_collection, stochastic_step
from .._input import reject_text
from ..utils._threads import threads_for_work
from ._gmm_fit import _FittingMixin
from ._gmm_init import _InitMixin
from ._gmm_model import _LOCAL_BLOCK_FLOATS, _MIN_PARALLEL_WEIGHTS, _point_log_prob
from ._stream_rows import is_row_stream

__all__ = ["SparseGaussianMixture"]


class SparseGaussianMixture(_InitMixin, _FittingMixin, DensityMixin, SparseEstimatorBase):
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
        Number of mixture components ``K``; with ``'dirichlet_process'`` the truncation. With
        that prior and birth moves, a fit seeded by ``init_params`` (no ``*_init`` array)
        starts from ``min(n_components, max(1, n_samples // (4 nu0)))`` clusters, ``nu0``
        the ``degrees_of_freedom_prior_``: at least four times its pseudo-samples per
        starting cluster, so that the data shape each cluster more than the prior does.
        Births grow the start where the data support more clusters, and the weight prior
        keeps the concentration ``1 / n_components`` by default.
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
        this prior do the ``moves`` act, and the number of clusters is learned. A fit whose
        merge or delete moves ran and which ends with at least as many clusters as it
        started from warns (:class:`~sparseclust.TruncationWarning`): births grow a small
        start only part of the way, so the number learned is then a lower bound.
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
        ``'auto'``: ``C = max(16, 2 L)`` when that is fewer than K, else off). Each row ``n`` of
        each fixed batch caches a candidate set ``S_n``, the indices of the
        ``C = min(n_candidates, K)`` largest weights of the last *full* ``W_n`` computed for it
        (:func:`sparseclust.posteriors.top_l_indices`). Between refreshes only the ``n C``
        weights ``W_nk, k in S_n`` are computed (rows grouped by candidate component, one
        ``gemm``-based evaluation per component: ``O(N C D^2)`` instead of ``O(N K D^2)``), and
        the responsibilities are the top-L of ``W_n`` restricted to ``S_n``. Must be ``>= L``.
        The cache holds, per sample, C component ids (two bytes each up to 65,536
        components), C weights in the data's dtype and one float64: ``6 C + 8`` bytes for
        float32 data.
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
        local step without the cluster on the samples that use it; **birth** (in the first
        round, at the clusters its merges left untouched, then after a round that tried
        merges or deletes and accepted none; up to max(4, K / 4) of the largest clusters per
        round) targets the samples in which a cluster holds at least 1% of the
        responsibility, fits 3 fresh clusters to a subsample of them (up to 20 iterations,
        fewer once an iteration gains less than 1e-3 nats per sample; when that is all of
        them, a start of that fit whose ELBO on them is lower than one cluster's, or cannot
        reach it in the iterations left at its last gain, is dropped, and the proposal
        before the next step when neither start is left), re-runs the local step on all of
        them (up to 10^7 / n_features, or 10% of the samples if more) with the fresh
        clusters added, and refines the proposal by 3 rounds of the global step of its
        statistics and the local step of those samples (Hughes & Sudderth 2013); **sort**
        reorders the clusters by size (the stick-breaking prior favours large early
        sticks). Each proposal is
        accepted only if the whole-data ELBO increases, so training stays monotone, and
        ``n_components_`` becomes the number of clusters left that hold at least one expected
        sample (clusters with less, which the
        ELBO may keep for the entropy of a sliver of mass, are dropped from the fitted model;
        ``lower_bound_`` is the objective of the training truncation). The default ``'all'``
        changes nothing for the default ``'dirichlet_distribution'`` prior, where moves do
        not act (its ``K`` is the user's choice, and an empty cluster costs differently);
        with the Dirichlet process the moves are the point of choosing it: the number of
        clusters is learned from the start ``n_components`` (see there). Moves need
        the cached batches of ``'memoized'`` or ``'batch'`` training; ``'stochastic'`` and
        :meth:`partial_fit` ignore them. With moves, ``tol`` ends training only after 4 move
        rounds without an accepted merge, delete or birth, so not before the eleventh pass
        (a proposal rejected n times is retried after
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
    kappa : float in (0, 1], default=0.6
        Learning-rate decay of ``'stochastic'`` and :meth:`partial_fit`,
        ``rho_t = min(1, (delta + t)^(-kappa))``; Robbins-Monro convergence needs ``kappa``
        in (0.5, 1].
    delta : float >= 0 or None, default=1.0
        Learning-rate delay. A larger delay makes the first steps smaller, so the first
        minibatches do not overwrite the initialization. None means four passes' worth of
        minibatches, ``4 ceil(n_total / batch_size)``, the topic models' default.
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
        "kappa": [Interval(Real, 0.0, 1.0, closed="right")],
        "delta": [Interval(Real, 0.0, None, closed="left"), None],
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
            k-means++ seeds from the first partitions holding as many rows as the start has
            clusters and ``'random'`` draws per partition.
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
                delta=default_delay(self.delta, total, self.batch_size),
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
