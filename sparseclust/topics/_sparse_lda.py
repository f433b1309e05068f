# SPDX-License-Identifier: BSD-3-Clause
"""Latent Dirichlet allocation with the L-sparse document local step (Hughes & Sudderth 2016, Sec.
5-6).

Model (Hughes & Sudderth 2016, App. C.2): phi_k ~ Dir_V(tau) for k = 1..K; for every document
pi_d ~ Dir_K(alpha), z_dn ~ Cat(pi_d), x_dn ~ Cat(phi_{z_dn}).
Mean-field family (Eq. 40): q(phi_k) = Dir(lambda_k), q(pi_d) = Dir(theta_d), q(z_dn) = Cat(r_dn)
with at most L non-zero entries per word type (Eq. 8).

The estimator is thin: it validates input, builds an LDA model (:mod:`._lda_model`; local step =
:func:`sparseclust.topics._local.local_step`, global step lambda = tau + S) and hands it to the
shared training engine (:func:`sparseclust._engine.fit_engine`).
"""

import numbers
import os

import numpy as np
import scipy.sparse as sp
from scipy.special import psi
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import (
    check_array,
    check_is_fitted,
    check_non_negative,
)

from .._base import merge_counters
from .._engine import (
    StochasticState,
    SuffStats,
    default_delay,
    fit_engine,
)
from .._input import check_output_support
from .._memo import check_memo_dir
from ..datasets._stream import CorpusStream
from ._base import TopicModelBase
from ._gibbs import (
    LazyTopicStats,
)
from ._lda_init import _KMEANS_ITERS, _kl_kmeans, _kl_kmeanspp_seeds, init_counts_from_estimator
from ._lda_model import _GibbsLDAModel, _LDAModel, _LDAParams
from ._local import TopicTables, local_step
from ._sem import _seed

__all__ = ["SparseLDA"]

#: minibatch size of stochastic ``fit`` for ``batch_size=None``, per local step (the sampled
#: step averages the draws of more documents per step; see doc/defaults.md)
_BATCH_SIZE = {"variational": 256, "gibbs": 4096}
#: the nominal minibatch size of ``partial_fit`` for ``batch_size=None`` (either local step)
_PARTIAL_FIT_BATCH_SIZE = 256
#: saved sweeps per visit of the Gibbs local step for ``n_saved_sweeps=None``: a visit of a kept
#: chain (memoized ``fit`` with two or more batches of a matrix or a Dask collection), and a
#: restarted chain (stochastic steps, batch training, ``partial_fit``, streams); see
#: doc/defaults.md
_N_SAMPLES = {"chains": 20, "restart": 5}



#: the default ``max_iter`` of each local step, and the variational step's default ``tol``
GIBBS_MAX_ITER = 25
VARIATIONAL_MAX_ITER = 50
VARIATIONAL_TOL = 1e-4


class SparseLDA(TopicModelBase):
    """Latent Dirichlet allocation with L-sparse responsibilities (Hughes & Sudderth).

    Variational inference for LDA (Hughes & Sudderth 2016, Sec. 5, App. C): topics
    phi_k ~ Dir(tau), document proportions pi_d ~ Dir(alpha), and for each token a topic
    z ~ Cat(pi_d) and a word x ~ Cat(phi_z). The mean-field family is q(phi_k) =
    Dir(lambda_k), q(pi_d) = Dir(theta_d) and, for each word type u of document d, q(z) =
    Cat(r_du) with at most ``L`` non-zero entries. The document local step alternates

    .. math::

        r_{duk} \\propto \\exp\\big(E[\\log \\pi_{dk}] + E[\\log \\phi_{k v_{du}}]\\big)
        \\ \\text{over the top } L, \\qquad
        \\theta_{dk} = \\alpha + \\sum_u c_{du} r_{duk}

    (top-L exp-normalization, Alg. 1, over the document's active topics, Alg. 2) until
    max_k |Delta N_dk| < ``local_tol``; the global step is lambda_kv = tau + S_kv with S the
    expected topic-word counts. Trained by memoized, stochastic or batch variational
    inference through the shared engine. The default document step samples the tokens'
    topics instead (``local_step='gibbs'``, Mimno, Hoffman & Blei 2012; below); the
    variational step above is ``local_step='variational'``. See ``doc/topic_models.md``.

    Parameters
    ----------
    n_components : int, default=10
        Number of topics K.
    L : int or None, default=8
        Variational local step (``local_step='variational'``) only; the Gibbs step samples
        one topic per token. Sparsity level: maximum number of topics per word type and
        document. None or
        ``L >= n_components`` gives the dense local step. Smaller L makes a pass cheaper,
        the more so the larger K; L = 1 (a hard assignment of each word type) can lose a
        good deal of held-out quality, so keep L at 4 or more. Raise it only if the held-out
        score at your K improves with it (see ``doc/choosing.md``).
    doc_topic_prior : float or None, default=None
        alpha_k, the same for every topic; None means 0.5 / n_components (the paper's
        Dir(alpha/K) with alpha = 0.5). Smaller values let each document use fewer topics.
        Held-out scores depend on it: compare models at the same value.
    topic_word_prior : float, default=0.1
        tau: symmetric Dirichlet prior on each topic's word distribution. Smaller values
        give sparser topics; V tau (V the vocabulary size) is the prior's total weight in
        each topic, in pseudo-tokens: compare it with the tokens a topic holds.
    algorithm : {'memoized', 'stochastic', 'batch'}, default='memoized'
        Learning algorithm (see :mod:`sparseclust._engine`): 'memoized' (fixed batches whose
        statistics are replaced on each visit; no step size, the ELBO never decreases) for a
        corpus that fits in memory or is read again from disk every pass; 'stochastic'
        (random minibatches blended with step rho_t) when a pass over the corpus is too
        costly to repeat; 'batch' (one global step per pass) mostly for comparison.
    n_batches : int, default=10
        Number of fixed batches of memoized training (capped at the number of documents).
        More batches mean more global steps per pass (faster progress early) and more cached
        statistics (each batch's sparse K x V word-topic counts; see ``memo_dir``).
    memo_dir : str, path-like or None, default=None
        Where memoized (and batch) training keeps each fixed batch's statistics between its
        visits. None keeps them in memory: the sum over the batches of their (topic, word)
        pairs, 12 bytes each, which grows with the number of batches (with a
        :class:`~sparseclust.datasets.CorpusStream`, with the corpus). An existing directory
        keeps them in the files of a temporary directory created inside it and removed when
        ``fit`` ends or fails, so that only the visited batch's statistics are in memory; each
        visit then writes and reads one batch's statistics. The fit is the same either way.
        With the Gibbs local step, the chains that a fit of a matrix or a Dask collection
        keeps (1 or 2 bytes a token) stay in memory. Not used (nor checked) by stochastic
        training and :meth:`partial_fit`.
    batch_size : int or None, default=None
        Minibatch size of stochastic training. None means 256 with the variational local
        step and 4096 with the Gibbs local step, whose statistics are draws: a larger
        minibatch averages the draws of more documents per step. In :meth:`partial_fit`,
        which gets its minibatches from the caller, the size only sets the default
        ``delta`` and the step count a fit resumes at (None: 256 with either step). Raise it
        when the topics fluctuate from step to step; lower it for more, cheaper steps.
        Evidence for the defaults: ``doc/benchmarks.md``.
    kappa : float, default=0.6
        Decay of the stochastic step size rho_t = (delta + t)^(-kappa), in (0.5, 1] for the
        steps to converge (Hoffman et al. 2013); larger values forget old minibatches more
        slowly.
    delta : float or None, default=None
        Delay of the stochastic step size. None means four passes' worth of minibatches,
        delta = 4 ceil(D / batch_size) with D the documents the statistics are scaled to
        (``total_samples``, else the documents given to ``fit``; in :meth:`partial_fit`
        without either, the minibatch's size), so the first step, rho_1 = (delta +
        1)^(-kappa), is small when a minibatch is a small part of the corpus: one
        minibatch's statistics, scaled up by D / batch_size, would otherwise overwrite most
        of the initial topics (rho_1 = 0.66 for delta = 1, kappa = 0.6).
    total_samples : float or None, default=None
        Corpus size minibatch statistics are scaled to in stochastic training; None means the
        number of documents given to ``fit`` (or the minibatch size in ``partial_fit``).
    max_iter : int or None, default=None
        Maximum number of passes over the data. None means 25 with ``local_step='gibbs'``
        and 50 with ``local_step='variational'``.
    tol : float or None, default=None
        Stop after the first pass whose objective changed by less than ``tol`` nats per
        training token, ``|L_t - L_{t-1}| / N_tokens < tol`` (``converged_`` is then True;
        otherwise a ``ConvergenceWarning``, except for stochastic training). ``0`` runs
        ``max_iter`` passes, without a warning. The measure is recorded in ``trace_`` as
        ``elbo_change``; being per token, it does not depend on the corpus size. None means
        1e-4 with the variational step and 0 with the Gibbs step.

        - Variational step: 1e-4 is the loosest value whose fits end within 0.05% of the
          held-out score of the same fit run much longer (``doc/defaults.md``); lower it
          when you need the fixed point itself, raise it for a quick look.
        - Gibbs step: its objective is a Monte Carlo estimate that keeps rising as the
          chains settle, long after held-out quality has levelled off, so it cannot tell
          when to stop; the default runs the ``max_iter`` passes, a cost known in
          advance. A ``tol > 0`` compares the mean objective of the last 3 passes with the
          mean of the 3 passes before them, as stochastic training does.
        - Stochastic training's objective (evaluated on the blended statistics) is a noisy
          estimate, and two consecutive passes can agree to within ``tol`` long before it
          levels off; it compares window means of 3 passes too, so it runs at least 6
          passes (``doc/engine.md``).

        scikit-learn's ``LatentDirichletAllocation`` runs all its ``max_iter`` passes
        unless ``evaluate_every > 0``, in which case it stops on the change of its
        perplexity bound (``perp_tol``).
    local_max_iter : int, default=100
        Maximum local iterations per document of the variational step (training with
        ``local_step='variational'``; ``transform`` and ``score`` with either step; Hughes &
        Sudderth 2016, App. D: 100).
    local_tol : float, default=0.05
        Local convergence threshold on max_k |Delta N_dk|, in tokens (Hughes & Sudderth
        2016, App. D: 0.05). Smaller values make every pass slower and the memoized ELBO
        closer to monotone.
    restarts : int, default=0
        Restart proposals per document and local step (Hughes & Sudderth 2016, App. D.4; 0
        disables them): after convergence, the document's smallest used topics are each
        proposed for removal and the proposal is kept if the document's ELBO rises. Each
        accepted proposal is a greedy per-document improvement; pushing documents onto fewer
        topics early can steer training to a worse fixed point of the whole corpus, so they
        are off unless a held-out comparison on your corpus favours them.
    local_step : {'gibbs', 'variational'}, default='gibbs'
        The document step of training. 'variational': the L-sparse mean-field step above,
        whose objective is the ELBO, never decreasing in memoized training; choose it for
        L-sparse posteriors, for fractional weights (e.g. tf-idf) and when you need the
        monotone bound. 'gibbs' is the default (the evidence: ``doc/defaults.md``).
        'gibbs': the hybrid SVI-Gibbs step of Mimno, Hoffman & Blei (2012): with theta_d
        collapsed, Gibbs sweeps over each document's tokens draw z_dn = k with probability
        proportional to (alpha + N_dk^{-dn}) exp(E[log phi_k,v_dn]); the chain starts from a
        sequential draw, discards ``n_burnin`` sweeps and the statistics are the topic-word
        counts averaged over ``n_saved_sweeps`` saved sweeps (sparse: only sampled (k, v) pairs).
        In memoized training of a matrix or a Dask collection with ``n_batches >= 2`` each
        batch's chain is kept (1-2 bytes per token; on Dask by each partition's worker) and
        continued on every later visit with the collapsed
        conditional (alpha + N_dk^{-dn}) E[phi_k,v_dn] under lambda^{-b} = tau + S - S_b, the
        topics of the other batches' statistics (Griffiths & Steyvers 2004; Newman et al.
        2009 with a batch per processor). In stochastic ``fit`` of a matrix with more than
        one minibatch per pass each document's chain is kept the same way, and continued
        with the stochastic topics less the minibatch's own decayed share of them (on Dask,
        stochastic training restarts the chains every visit).
        ``L``, ``local_max_iter``, ``local_tol`` and ``restarts`` do not apply to its training
        (the last three do to ``transform`` and ``score``), and
        counts are rounded to whole tokens (see ``fit``). Its training objective (``lower_bound_``,
        ``trace_``) is a Monte Carlo estimate of E_q[log p(x, z, phi)] - E_q[log q(phi)]
        without the entropy of q(z): not a bound, and not comparable with the variational
        ELBO; ``score`` is the same held-out bound for both steps. It suits memoized
        training of a corpus held in memory, where the chains are kept. See
        ``doc/topic_models.md``.
    n_burnin : int, default=5
        Gibbs local step: burn-in sweeps, discarded after the initialising sweep.
    n_saved_sweeps : int or None, default=None
        Gibbs local step: saved sweeps averaged into the statistics (per visit of a kept
        chain, all of its sweeps). None means 20 where ``fit`` keeps the chains (memoized
        training of a matrix or a Dask collection with ``n_batches >= 2``, stochastic
        training of a matrix with ``batch_size`` below its number of documents) and 5
        elsewhere (batch training, a ``CorpusStream``, ``partial_fit``, stochastic training
        on Dask). A restarted chain needs burn-in
        and few saved sweeps: (B, S) = (5, 5) is the setting Mimno, Hoffman & Blei (2012,
        Sec. 4) found best in held-out probability. A kept chain is already burnt in, so
        each visit saves all its sweeps; more sweeps per visit cost time in proportion and
        give less noisy statistics.
    init : {'kmeans++', 'random'}, array-like of shape (n_components, n_features) or \
            estimator, default='kmeans++'
        'kmeans++': Bregman (KL) k-means++ seeding on documents (Hughes & Sudderth 2016, Sec. 6),
        then up to 20 iterations of KL k-means (hard-assignment EM for a mixture of multinomials);
        topic k starts from lambda_k = tau + (word counts of the documents in cluster k). 'random':
        lambda_kv = tau + g_kv with g_kv ~ Gamma(100, 0.01). An array gives the initial topic-word
        counts S directly, lambda = tau + S (non-negative and finite; e.g. another model's
        topic-word counts, for a warm start). An estimator (e.g. ``StochasticEMLDA(n_components,
        max_iter=1000)``) is a topic model to start from: a clone of it, with this model's
        ``doc_topic_prior`` and ``topic_word_prior`` (its own are ignored), is fitted on X inside
        ``fit`` and S = its ``components_`` - tau. Its ``n_components`` must equal this model's; a
        ``random_state`` of None becomes a seed drawn from this model's, an ``n_threads`` of None
        this model's. Stochastic EM sweeps (collapsed Gibbs with the other documents' counts one
        sweep old) can reach a better region of topics than the variational step finds from
        k-means++; the first variational pass from them scores best, later passes drift back
        towards the variational step's own fixed point, so use it when you need a variational model
        (``partial_fit``, L-sparse posteriors) with the sampler's topics. With a
        :class:`~sparseclust.datasets.CorpusStream`, ``partial_fit`` or a Dask collection it is
        fitted on the first minibatch or the first non-empty partition only.
    random_state : int, RandomState instance or None, default=None
    n_threads : int or None, default=None
        OpenMP threads of the local step; results do not depend on it.
    verbose : int, default=0
        Progress on stderr when not 0: after every pass, ``[SparseLDA] pass i/max_iter``
        with the ELBO, its change and the time (:class:`~sparseclust.utils._progress.Progress`).

    Attributes
    ----------
    components_ : ndarray (n_components, n_features)
        Variational Dirichlet parameters lambda of the topics (float64 for any input dtype).
    topic_word_distribution_ : ndarray (n_components, n_features)
        Posterior mean topics E[phi_k] = lambda_k / sum_v lambda_kv.
    exp_dirichlet_component_ : ndarray (n_components, n_features)
        exp(E[log phi]).
    doc_topic_prior_ : float
        alpha used.
    topic_word_prior_ : float
        tau used.
    n_iter_ : int
        Passes run.
    n_batch_iter_ : int
        Global updates of the topics so far: one per pass for batch training, one per batch
        visit for memoized training (its first pass counts one), one per minibatch for
        stochastic training and each :meth:`partial_fit` call.
    converged_ : bool
        Whether the last ``fit`` met ``tol`` (False after :meth:`partial_fit` alone).
    lower_bound_ : float
        Final whole-data ELBO.
    lower_bounds_ : list of float
        ELBO after every pass.
    trace_ : list of dict
        Engine trace (pass, step, elapsed, elbo, time_local, time_global, rho, ...) with the
        pass's ``restarts_tried``, ``restarts_accepted`` and ``local_iters``.
    n_restarts_tried_, n_restarts_accepted_ : int
        Restart proposals over the whole training run.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X has string feature names.

    Notes
    -----
    ``score`` is the per-token evidence lower bound computed with the dense local step, so it
    is comparable across values of L. scikit-learn's ``LatentDirichletAllocation.score`` is
    instead the total bound of X including the topics' term E[log p(phi) - log q(phi)]:
    ``sklearn_score = score * N_tokens + topic term`` with the same topics and priors, and
    ``perplexity = exp(-score)`` leaves the topic term out likewise (``doc/evaluating.md``).
    The topic term does not depend on X; leaving it out keeps scores of document sets of
    different sizes (e.g. cross-validation folds) comparable.

    References
    ----------
    M. C. Hughes and E. B. Sudderth. Fast learning of clusters and topics via sparse
    posteriors. arXiv:1609.07521, 2016.
    """

    _parameter_constraints = {
        **TopicModelBase._parameter_constraints,
        "n_components": [Interval(numbers.Integral, 1, None, closed="left")],
        "L": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "doc_topic_prior": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "algorithm": [StrOptions({"memoized", "stochastic", "batch"})],
        "n_batches": [Interval(numbers.Integral, 1, None, closed="left")],
        "memo_dir": [str, os.PathLike, None],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "delta": [Interval(numbers.Real, 0, None, closed="left"), None],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "tol": [Interval(numbers.Real, 0, None, closed="left"), None],
        "local_max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "local_tol": [Interval(numbers.Real, 0, None, closed="left")],
        "restarts": [Interval(numbers.Integral, 0, None, closed="left")],
        "local_step": [StrOptions({"variational", "gibbs"})],
        "n_burnin": [Interval(numbers.Integral, 0, None, closed="left")],
        "n_saved_sweeps": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "init": [StrOptions({"kmeans++", "random"}), "array-like", HasMethods(["fit"])],
    }

    def __init__(
        self,
        n_components=10,
        *,
        L=8,
        doc_topic_prior=None,
        topic_word_prior=0.1,
        algorithm="memoized",
        n_batches=10,
        memo_dir=None,
        batch_size=None,
        kappa=0.6,
        delta=None,
        total_samples=None,
        max_iter=None,
        tol=None,
        local_max_iter=100,
        local_tol=0.05,
        restarts=0,
        local_step="gibbs",
        n_burnin=5,
        n_saved_sweeps=None,
        init="kmeans++",
        random_state=None,
        n_threads=None,
        verbose=0,
    ):
        self.n_components = n_components
        self.L = L
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.algorithm = algorithm
        self.n_batches = n_batches
        self.memo_dir = memo_dir
        self.batch_size = batch_size
        self.kappa = kappa
        self.delta = delta
        self.total_samples = total_samples
        self.max_iter = max_iter
        self.tol = tol
        self.local_max_iter = local_max_iter
        self.local_tol = local_tol
        self.restarts = restarts
        self.local_step = local_step
        self.n_burnin = n_burnin
        self.n_saved_sweeps = n_saved_sweeps
        self.init = init
        self.random_state = random_state
        self.n_threads = n_threads
        self.verbose = verbose

    # -----------------------------------------------------------------------------------
    # helpers

    def _passes(self):
        """``max_iter``, or its default: 25 passes with the Gibbs local step, 50 with the
        variational step."""
        if self.max_iter is not None:
            return self.max_iter
        return GIBBS_MAX_ITER if self.local_step == "gibbs" else VARIATIONAL_MAX_ITER

    def _tolerance(self):
        """``tol``, or its default: 1e-4 with the variational step, 0 (every pass of
        ``max_iter``) with the Gibbs step."""
        if self.tol is not None:
            return self.tol
        return 0.0 if self.local_step == "gibbs" else VARIATIONAL_TOL

    def _whole_counts_rule(self):
        if self.local_step == "gibbs":
            return ("SparseLDA with local_step='gibbs' samples one topic per token",
                    "local_step='variational'")
        return None

    def _svi_scale(self, n_docs):
        """Factor by which the stochastic objective scales the documents given to fit."""
        if self.algorithm == "stochastic" and self.total_samples is not None:
            return float(self.total_samples) / max(n_docs, 1)
        return 1.0

    def _batch_size(self, fitting=True):
        """The minibatch size: ``batch_size``, or for None the local step's default in
        ``fit`` (:data:`_BATCH_SIZE`) and 256 in ``partial_fit`` (``fitting=False``), where
        it only sets the default delay and the step count a fit resumes at."""
        if self.batch_size is not None:
            return int(self.batch_size)
        return _BATCH_SIZE[self.local_step] if fitting else _PARTIAL_FIT_BATCH_SIZE

    def _delta(self, n_docs, fitting=True):
        """The learning-rate delay for statistics scaled to ``n_docs`` documents."""
        return default_delay(self.delta, n_docs, self._batch_size(fitting))

    def _alpha(self):
        if self.doc_topic_prior is None:
            return 0.5 / self.n_components
        return float(self.doc_topic_prior)

    def _keeps_chains(self, n_docs, stream=False, partitioned=False):
        """Whether ``fit`` keeps the Gibbs step's chains between visits: training of a
        matrix with two or more batches, memoized (batch training has one) or stochastic (a
        stream's fit keeps only its minibatches' statistics, not 1-2 bytes per token); on a
        Dask collection (``partitioned``), memoized training with two or more batches (the
        chains stay on the workers with their partitions)."""
        if stream:
            return False
        if self.algorithm == "stochastic":
            return not partitioned and self._batch_size() < n_docs
        return self.algorithm == "memoized" and min(self.n_batches, n_docs) >= 2

    def _n_samples(self, chains=False):
        """Saved sweeps per visit: ``n_saved_sweeps``, or for None :data:`_N_SAMPLES` of
        kept chains (``chains``) or of restarted ones."""
        if self.n_saved_sweeps is not None:
            return int(self.n_saved_sweeps)
        return _N_SAMPLES["chains" if chains else "restart"]

    def _model(self, chains=False):
        if self.local_step == "gibbs":
            return _GibbsLDAModel(self._alpha(), self.topic_word_prior, self.n_burnin,
                                  self._n_samples(chains), self._gibbs_seed,
                                  self.n_threads, getattr(self, "_gibbs_calls", 0),
                                  chains=chains)
        L = self.L if (self.L is not None and self.L < self.n_components) else None
        opts = dict(max_iter=self.local_max_iter, tol=self.local_tol, restarts=self.restarts)
        return _LDAModel(self._alpha(), self.topic_word_prior, L, opts, self.n_threads)

    def _init_stats(self, X, rng):
        K, V = self.n_components, X.shape[1]
        if hasattr(self.init, "fit"):
            S = init_counts_from_estimator(self.init, X, K, self._alpha(),
                                           float(self.topic_word_prior), self.n_threads, rng)
            return SuffStats(S=S, elbo_local=0.0)
        if not isinstance(self.init, str):
            S = check_array(self.init, dtype=np.float64, copy=True, input_name="init")
            if S.shape != (K, V):
                raise ValueError(
                    f"init has shape {S.shape}; expected (n_components, n_features) = "
                    f"({K}, {V})."
                )
            check_non_negative(S, "SparseLDA init")
            return SuffStats(S=np.ascontiguousarray(S), elbo_local=0.0)
        if self.init == "random":
            S = rng.gamma(100.0, 0.01, (K, V))
        else:
            X = sp.csr_array(X, dtype=np.float64)
            tau = float(self.topic_word_prior)
            seeds = _kl_kmeanspp_seeds(X, K, tau, rng, self.n_threads)
            S = _kl_kmeans(X, seeds, tau, _KMEANS_ITERS, self.n_threads)
        return SuffStats(S=np.ascontiguousarray(S, dtype=np.float64), elbo_local=0.0)

    def _set_topics(self, params, release=False):
        """Fitted attributes from ``params``; ``release=True`` drops the parameters' tables
        once read (they are then unusable), so that at most three K x V arrays coexist."""
        lam = params.lam
        self.components_ = lam
        self.exp_dirichlet_component_ = np.exp(params.Elogphi, order="C")
        if release:
            params.release()
        self.topic_word_distribution_ = lam / lam.sum(axis=1, keepdims=True)
        self.doc_topic_prior_ = self._alpha()
        self.topic_word_prior_ = float(self.topic_word_prior)

    #: fitted attributes computed from ``components_``: a saved copy may leave them out
    #: (``sparseclust._saved.slim_copy``); :meth:`__setstate__` rebuilds them
    _recomputed_on_load = ("exp_dirichlet_component_", "topic_word_distribution_")

    def __setstate__(self, state):
        super().__setstate__(state)
        if "components_" in self.__dict__ and any(
                name not in self.__dict__ for name in self._recomputed_on_load):
            self._set_topics(_LDAParams(np.asarray(self.components_, dtype=np.float64)),
                             release=True)

    def _new_gibbs_seed(self, rng):
        """The seed of the Gibbs local step's random streams (drawn from ``rng`` only for
        local_step='gibbs', so the variational step's draws are those of earlier versions)."""
        self._gibbs_calls = 0
        self._gibbs_seed = _seed(rng) if self.local_step == "gibbs" else None

    def _tables(self):
        lam = self.components_
        return TopicTables(psi(lam) - psi(lam.sum(axis=1))[:, None])

    # -----------------------------------------------------------------------------------
    # training

    def fit(self, X, y=None, *, callback=None):
        """Learn topics from the document-word count matrix X.

        Parameters
        ----------
        X : {array-like, sparse matrix}, CorpusStream or Dask collection
            Of shape (n_samples, n_features): non-negative word counts, not text (vectorize
            documents first, e.g. with ``CountVectorizer``); at least one document and one token
            (an all-zero corpus raises ValueError; empty documents among others are fine). With
            local_step='variational' fractional weights (e.g. tf-idf) are used as they are. With
            local_step='gibbs' the sampler needs whole tokens: non-integer counts are rounded half
            up with a ``NonIntegerCountsWarning``, and a ValueError is raised instead when the
            rounded tokens keep less than half of X's total weight (as for tf-idf or row-normalised
            rows). The same rules hold in :meth:`partial_fit`. A
            :class:`~sparseclust.datasets.CorpusStream` (e.g. from
            :func:`~sparseclust.datasets.stream_uci_bow`) trains on a corpus on disk: memoized
            training only, its minibatches (in file order) are the fixed batches (``n_batches`` is
            not used), the topics start from ``init`` on the first minibatch, and every pass reads
            the corpus again, caching only each minibatch's statistics. A first read validates
            every minibatch and counts the tokens. A Dask array or bag of row blocks trains on the
            workers, with either local step (user guide, "Training on streams and clusters").
        y : ignored
        callback : callable or None, default=None
            Called after every pass as ``callback(info)``; ``info`` is the pass's trace entry
            (``pass``, ``elapsed``, ``elbo``, ...) plus ``n_passes`` (= ``max_iter``) and
            ``components`` (the current K x V topic-word pseudo-counts lambda). Returning
            ``True`` stops training after that pass. Time spent in the callback is excluded
            from ``elapsed``.

        Returns
        -------
        self
        """
        self._validate_params()
        check_output_support(self, "SparseLDA.fit")
        # stochastic training caches no batch statistics: memo_dir is not used
        memo_dir = None if self.algorithm == "stochastic" else check_memo_dir(self.memo_dir)
        stream = isinstance(X, CorpusStream)
        X, init, n_docs, n_tokens, wrap, rng = self._fit_input(X, "SparseLDA.fit")
        self._new_gibbs_seed(rng)
        model = self._model(chains=self._keeps_chains(n_docs, stream, wrap is not None))
        engine_model = model if wrap is None else wrap(model)
        snapshots = []

        def _snapshot(info):
            snapshots.append(dict(model.counters))
            if callback is None:
                return False
            public = {k: v for k, v in info.items() if k not in ("params", "stats")}
            public["components"] = info["params"].lam
            return bool(callback(public))

        # the engine gets the only references to the initial statistics (K x V) and to the
        # validated data, so that it can release them once used (the statistics after the
        # first global step; the data, when it is a validated copy, once split into batches)
        init, data = [init], [X]
        del X
        result = fit_engine(
            engine_model,
            data.pop(),
            init.pop(),
            algorithm=self.algorithm,
            max_iter=self._passes(),
            tol=self._tolerance(),
            n_batches=min(self.n_batches, n_docs),
            batch_size=self._batch_size(),
            kappa=self.kappa,
            delta=self._delta(n_docs if self.total_samples is None else self.total_samples),
            total_samples=self.total_samples,
            random_state=rng.randint(np.iinfo(np.int32).max),
            verbose=self.verbose,
            name="SparseLDA",
            callback=_snapshot,
            memo_dir=memo_dir,
            # tol is in nats per training token (an empty corpus has nothing to converge); a
            # stochastic objective is scaled to total_samples documents
            tol_scale=max(n_tokens * self._svi_scale(n_docs), 1.0),
        )
        trace = merge_counters(result.trace, snapshots)
        if self.algorithm != "stochastic":
            # the documents' ELBO terms of the fitted statistics, for partial_fit's objective
            self._elbo_local_fit = float(result.stats["elbo_local"])
            # lambda from the final statistics, then release them (whole-data total and batch
            # caches) and the parameters' table before the fitted attributes are built
            params, result.params = result.params, None
            # the batch caches go first; lambda then takes the memory of the whole-data total
            result.batch_stats = None
            result.stats = None
            params.materialize(overwrite_stats=True)
            self._set_topics(params, release=True)
            del params
        else:
            self._set_topics(result.params)
        self.trace_ = trace
        self.n_iter_ = result.n_iter
        self.converged_ = bool(result.converged)
        self._n_samples_fit = n_docs
        self.lower_bounds_ = list(result.lower_bounds)
        self.lower_bound_ = result.lower_bound
        self.n_restarts_tried_ = model.counters["restarts_tried"]
        self.n_restarts_accepted_ = model.counters["restarts_accepted"]
        self.n_batch_iter_ = int(trace[-1]["step"]) if trace else 0
        self._gibbs_calls = getattr(model, "calls", 0)
        if self.algorithm == "stochastic":
            self._svi_state = result.state
        else:
            self._svi_state = None
        stopped = callback is not None and len(trace) < self._passes()
        if (not self.converged_ and not stopped and self.algorithm != "stochastic"
                and self._tolerance() > 0):
            self._warn_not_converged(trace[-1]["elbo_change"], "token")
        return self

    def partial_fit(self, X, y=None):
        """One stochastic variational step on the minibatch X (Mimno, Hoffman & Blei 2012, Alg. 1).

        The first call initializes the topics (``init``) from X; later calls blend the
        minibatch statistics, scaled by ``total_samples / n_samples``, with step
        rho_t = (delta + t)^(-kappa) (``delta=None``: 4 ceil(total_samples / batch_size),
        with 256 for ``batch_size=None`` whatever the local step).
        ``total_samples=None`` means the number of documents given
        to ``fit`` when the model was fitted by ``fit``, else the minibatch's own size.
        Calling it after ``fit`` continues from the fitted topics: after a stochastic fit the
        step counter t simply continues; after a batch or memoized fit of ``n_iter_`` passes it
        resumes at ``n_iter_ * ceil(n_documents / batch_size)``, the steps that many SVI passes
        would have taken, so one minibatch adjusts the topics rather than replacing them.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The minibatch's word counts, validated as in :meth:`fit` (whole tokens with
            ``local_step='gibbs'``); its documents are not kept.
        y : ignored

        Returns
        -------
        self
        """
        self._validate_params()
        fitted = getattr(self, "components_", None)
        X, first = self._partial_fit_input(X, "SparseLDA.partial_fit",
                                           None if fitted is None else fitted.shape[0])
        if first:
            rng = check_random_state(self.random_state)
            init = self._init_stats(X, rng)
            self._new_gibbs_seed(rng)
            self._svi_state = StochasticState(stats=init, t=0)
            self._start_partial_fit()
            self.n_restarts_tried_ = self.n_restarts_accepted_ = 0
        elif getattr(self, "_svi_state", None) is None:
            # continue from a batch/memoized fit as if it had been n_iter_ passes of SVI
            # minibatches: the step counter resumes where those passes would have left it
            S = np.maximum(self.components_ - self.topic_word_prior, 0.0)
            n_fit = self._n_samples_fit
            t0 = self.n_iter_ * max(1, -(-n_fit // self._batch_size(fitting=False)))
            local = getattr(self, "_elbo_local_fit", 0.0)
            self._svi_state = StochasticState(stats=SuffStats(S=S, elbo_local=local), t=t0)
        if self.local_step != "gibbs" and isinstance(self._svi_state.stats, LazyTopicStats):
            # continued with the variational step: back to dense statistics
            lazy = self._svi_state.stats
            self._svi_state.stats = SuffStats(S=lazy.dense(), elbo_local=lazy.elbo_local)
            self._svi_state.params = None
        if self.local_step == "gibbs" and getattr(self, "_gibbs_seed", None) is None:
            # fitted with the variational step, continued with the sampled one
            self._new_gibbs_seed(check_random_state(self.random_state))
        model = self._model()
        state = self._svi_state
        total = self._step_total(X.shape[0])
        params, elapsed, timings = self._timed_step(model, state, X, total,
                                                    self._delta(total, fitting=False))
        elbo = float(model.elbo(state.stats, params))
        self._set_topics(params)
        self._gibbs_calls = getattr(model, "calls", getattr(self, "_gibbs_calls", 0))
        self.n_batch_iter_ = getattr(self, "n_batch_iter_", 0) + 1
        self.n_restarts_tried_ += model.counters["restarts_tried"]
        self.n_restarts_accepted_ += model.counters["restarts_accepted"]
        self._record_step(X, total, elbo, elapsed, state.rho, timings, model.counters)
        return self

    # -----------------------------------------------------------------------------------
    # inference

    def transform(self, X, *, normalize=True):
        """Document-topic distributions E[pi_d] = theta_d / sum_k theta_dk, theta_d = N_d + alpha.

        The dense variational local step (L = K) with E[log phi] of the fitted topics, from a
        cold start (with ``restarts`` proposals per document), whichever ``local_step``
        trained the topics: theta_d is the variational posterior's Dirichlet parameter, a
        deterministic function of the fitted model and the document (``score`` reads the same
        step). A short Gibbs chain from a sequential start is not used here: with a small
        ``doc_topic_prior`` a document's topic posterior has several modes and such a chain
        stays near the one it starts in, so its average is a noisy summary of the document.
        Empty documents get the prior mean.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        normalize : bool, default=True
            If False, return theta (the Dirichlet parameters) instead.

        Returns
        -------
        doc_topic : ndarray (n_samples, n_components), dtype of X (float32 or float64)
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False, whom="SparseLDA.transform", sampled=False)
        res = local_step(X, self._tables(), self.doc_topic_prior_, L=None,
                         max_iter=self.local_max_iter, tol=self.local_tol,
                         restarts=self.restarts, return_doc_topic=True,
                         n_threads=self.n_threads)
        return self._doc_topic(res.doc_topic + self.doc_topic_prior_, X, normalize)

    def _elbo_per_token(self, X):
        res = local_step(X, self._tables(), self.doc_topic_prior_, L=None,
                         max_iter=self.local_max_iter, tol=self.local_tol,
                         restarts=self.restarts, n_threads=self.n_threads)
        return self._per_token_bound(res)

    def score(self, X, y=None):
        """Per-token evidence lower bound of X under the fitted topics (larger is better).

        sum_d L_d / sum_d N_d with L_d the document ELBO of App. C (topics fixed at
        q(phi) = Dir(components_), theta_d and r_d from the dense local step, so the value is
        comparable across L): a lower bound on the per-token log predictive probability of X
        under q(phi). The global topic term does not enter. 0.0 when X has no tokens.

        Every token of X is scored with nothing of its document observed beforehand, and the
        value is a bound, so it is usually lower than the held-out document-completion score
        (:func:`sparseclust.metrics.document_completion_score`), which predicts part of each
        document from the rest; ``doc/evaluating.md`` relates the scores.
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False, whom="SparseLDA.score", sampled=False)
        return float(self._elbo_per_token(X))
