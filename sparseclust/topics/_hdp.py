# SPDX-License-Identifier: BSD-3-Clause
"""HDPTopicModel: a hierarchical Dirichlet process topic model that learns how many topics
it needs (Hughes, Kim & Sudderth 2015), with the L-sparse document local step of Hughes &
Sudderth (2016). The model, the objective and the moves are in :mod:`._hdp_model`."""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._base import merge_counters
from .._engine import (
    StochasticState,
    default_delay,
    fit_engine,
)
from .._input import check_output_support
from .._moves import parse_moves, warn_if_lower_bound
from ._base import TopicModelBase
from ._hdp_model import HDPModel, empty_stats
from ._lda_init import (
    _KMEANS_ITERS,
    _kl_kmeans,
    _kl_kmeanspp_seeds,
    init_counts_from_estimator,
)
from ._local import local_step
from ._sem import StochasticEMLDA

__all__ = ["HDPTopicModel"]

_MOVES = ("merge", "delete", "birth", "sort")
#: max_topics=None: the cap of the truncation is max(DEFAULT_CAP_FACTOR * max_components,
#: DEFAULT_CAP_MIN)
DEFAULT_CAP_FACTOR = 2
DEFAULT_CAP_MIN = 400
#: a topic is live when it holds at least this many expected tokens
LIVE_MIN_TOKENS = 1.0
#: stochastic EM sweeps of init='sem' (chosen on validation documents; see doc/defaults.md),
#: and their budget per pass of max_iter: the start never runs more than 16 * max_iter sweeps
SEM_INIT_SWEEPS = 800
SEM_SWEEPS_PER_PASS = 16
#: tol='auto' after the stochastic EM start: the passes after it refine the sampler's topics
#: towards the variational fixed point and need not run to 1e-4 (see doc/defaults.md); else
#: SparseLDA's default
SEM_START_TOL = 1e-2
DEFAULT_TOL = 1e-4


def _parse_moves(moves):
    return parse_moves(moves, _MOVES)


#: the statistics of the documents beside S (see doc/hdp.md, "Objective")
_DOC_FIELDS = ("T", "G", "A", "LS", "H", "D")

class HDPTopicModel(TopicModelBase):
    r"""Hierarchical Dirichlet process topic model with memoized merge, delete and birth moves.

    A topic model that learns its number of topics (Teh et al. 2006). Top-level topic
    weights come from a stick-breaking process, u_k ~ Beta(1, gamma),
    beta_k = u_k \prod_{l<k} (1 - u_l); each document draws pi_d ~ Dir(alpha beta) and each
    token a topic z ~ Cat(pi_d) and a word x ~ Cat(phi_z), phi_k ~ Dir(tau). Inference follows
    Hughes, Kim & Sudderth (2015): a truncation at ``max_components`` topics plus a remainder,
    q(u_k) = Beta(rho_k omega_k, (1 - rho_k) omega_k) fitted by L-BFGS-B on their surrogate
    bound for E[log Gamma terms of Dir(alpha beta)], the LDA document local step with
    alpha_k = alpha E[beta_k] (here L-sparse, Hughes & Sudderth 2016, started from
    E[log pi_dk] = log E[beta_k]), and memoized training with moves that are accepted only
    when the whole-data objective increases:

    - **merge** two topics that co-occur in documents (the terms the merged model needs are
      gathered during the pass, so no extra pass is made);
    - **delete** a topic used by few documents: those documents are re-inferred without it;
    - **birth** new topics for the documents of a large topic: a few fresh topics are fitted
      to those documents alone, the documents are re-inferred with them, and the proposal is
      kept only if the whole-data objective rises (the other documents keep their
      assignments and receive the new topics' prior mass, in closed form);
    - **sort** the topics by size when that raises the objective.

    Births run only after a round of merges and deletes that accepted none, so a round either
    shrinks or grows the model. The number of live topics (``n_components_``) is the result,
    not an input.

    Parameters
    ----------
    max_components : int, default=200
        Truncation K that training starts from. Merges and deletes remove topics; births
        add topics, up to ``max_topics``, where the data support them (with
        ``moves='all'``). Births grow a small truncation only part of the way, or not at all,
        so the number kept depends on the start: give at least the largest K you would
        consider for a SparseLDA of the same corpus. A fit whose merge or delete moves ran
        and which ends with at least ``max_components`` live topics warns
        (:class:`~sparseclust.TruncationWarning`): the number it learned is then a lower
        bound. A larger truncation costs time roughly in proportion until the moves have
        removed topics; lower it for a small corpus or a tight time budget.
        Evidence: the benchmarks page (``doc/benchmarks.md``).
    L : int or None, default=8
        Sparsity level of the document local step (topics per word type). None or
        ``L >= max_components`` gives the dense local step; delete moves need L < K.
    alpha : float, default=0.5
        Document-level concentration: pi_d ~ Dir(alpha beta). Matches a SparseLDA with
        ``doc_topic_prior = alpha / K`` in total prior mass.
    gamma : float, default=1.0
        Top-level concentration of the stick-breaking prior u_k ~ Beta(1, gamma).
    topic_word_prior : float, default=0.1
        tau: symmetric Dirichlet prior of the topics.
    algorithm : {'memoized', 'stochastic', 'batch'}, default='memoized'
        Learning algorithm (:mod:`sparseclust._engine`). Moves run in memoized and batch
        training only.
    moves : {'all', 'none'}, str or tuple, default='all'
        Moves of memoized/batch training: any of 'merge', 'delete', 'birth', 'sort' (a
        tuple, or a string joined by '+', e.g. 'merge+sort'). A **birth** re-infers the
        documents that use a large topic most with fresh topics fit to them (a short
        variational LDA fit on those documents) and is accepted, like the others, only when
        the whole-data objective increases; births let the number of topics grow past
        ``max_components``, up to ``max_topics``.
    max_topics : int or None, default=None
        With births: the most topics the truncation may hold (live or not), an upper bound
        on memory (the topics are a ``max_topics`` x n_features array, a few copies of it
        during a pass); ``max_components`` is then the size training starts from. None
        means ``max(2 * max_components, 400)``. Must be at least ``max_components``.
    n_batches : int, default=10
        Fixed batches of memoized training.
    batch_size : int, default=256
        Minibatch size of stochastic training.
    kappa : float, default=0.6
        Decay of the stochastic step size rho_t = (delta + t)^(-kappa).
    delta : float or None, default=None
        Delay of the stochastic step size. None means four passes' worth of minibatches,
        delta = 4 ceil(D / batch_size) with D the documents the statistics are scaled to
        (``total_samples``, else the documents given to ``fit``; in :meth:`partial_fit`
        without either, the minibatch's size), as in :class:`SparseLDA`. The first steps are then
        small, so one minibatch, scaled up by D / batch_size, does not overwrite the initial
        topics; a small delta (e.g. 1) makes the first steps close to 1.
    total_samples : float or None, default=None
        Corpus size minibatch statistics are scaled to (stochastic training, partial_fit).
    max_iter : int, default=50
        Passes over the data.
    tol : float or 'auto', default='auto'
        Stop at the first pass whose local and global steps changed the objective by less
        than ``tol`` nats per training token (the unit of :class:`SparseLDA`'s ``tol``; the
        jump of the moves accepted at the end of a pass is not counted) and which accepted
        no merge or delete. The trace's ``progress`` is this change. Stochastic training
        compares window means of the objective instead. 0 runs ``max_iter`` passes.
        'auto' is 1e-2 for memoized and batch training from stochastic EM sweeps (``init``
        'auto' on counts, 'sem', or a :class:`StochasticEMLDA`), else 1e-4. The sweeps
        already place the topics well; the variational passes after them move the topics
        towards the variational fixed point, which does not predict held-out words better,
        so the fit stops once the moves are done and the objective moves little. Give 1e-4
        (or less) to run the variational passes to convergence.
    local_max_iter, local_tol : int, float, default=100, 0.05
        Local step limits (iterations; max_k |Delta N_dk|).
    restarts : int, default=0
        Restart proposals per document in the local step.
    init : {'auto', 'sem', 'kmeans++', 'random'} or estimator, default='auto'
        Initial topics; the topics start sorted by size, with E[beta] proportional to their
        sizes.

        - 'sem': the Rao-Blackwellized topic-word counts of min(800, 16 ``max_iter``) sweeps
          of :class:`StochasticEMLDA` from uniform assignments (``init='random'``, one block
          per sweep: the start the 800 sweeps were chosen with) with ``max_components``
          topics, document prior alpha / ``max_components`` and this model's topic-word
          prior (seeded from ``random_state``, same threads). Collapsed Gibbs-style sweeps
          spread the tokens over many distinct topics at a cost of a fraction of a
          variational pass each, so the merge and delete moves start from topics worth
          keeping instead of removing topics while they still move. The start's budget
          follows ``max_iter`` (16 sweeps, each a fraction of a pass's cost, per allowed
          pass), so a short fit gets a short start. The sweeps read X's counts rounded to
          integers; to choose their number, pass an estimator (below).
        - 'kmeans++', 'random': as in :class:`SparseLDA`.
        - 'auto': 'sem' for memoized and batch training on integer counts, else 'kmeans++'
          (fractional weights such as tf-idf would be rounded by the sweeps; stochastic
          training and :meth:`partial_fit` start from one minibatch, too little for the
          sweeps).
        - an estimator (e.g. ``StochasticEMLDA(max_components, max_iter=500)``, to choose the
          sweeps): fitted on X inside ``fit`` with ``max_components`` topics, document prior
          alpha / ``max_components`` and this model's topic-word prior; its topic-word counts
          start the topics.

        On a Dask collection, a CorpusStream and in :meth:`partial_fit` the initialization
        reads the first (non-empty) partition or minibatch.
    random_state : int, RandomState instance or None, default=None
    n_threads : int or None, default=None
        OpenMP threads of the local step; results do not depend on it.
    verbose : int, default=0
        When positive, a line on stderr after each pass (the line format that
        :class:`~sparseclust.utils._progress.Progress` gives every estimator).

    Attributes
    ----------
    n_components_ : int
        Number of live topics: topics holding at least one expected token.
    components_ : ndarray (n_components_, n_features)
        Dirichlet parameters lambda of the live topics, largest first.
    topic_word_distribution_ : ndarray (n_components_, n_features)
        Posterior-mean topics E[phi_k], same order.
    exp_dirichlet_component_ : ndarray (n_components_, n_features)
        exp(E[log phi_k]).
    topic_weights_ : ndarray (n_components_,)
        E[beta_k] of the live topics (the mean top-level weights; the rest of the unit mass
        belongs to dead topics and to the remainder of the truncation).
    doc_topic_prior_ : ndarray (n_components_,)
        alpha E[beta_k]: the document-level Dirichlet prior of the live topics.
    topic_word_prior_ : float
        tau used.
    rho_, omega_ : ndarray (n_topics_model_,)
        Stick parameters of every topic of the fitted truncation, in the model's (stick)
        order.
    n_topics_model_ : int
        Topics left in the truncation after the moves (live or not).
    n_iter_ : int
    n_batch_iter_ : int
        Stochastic steps taken (stochastic training and partial_fit).
    converged_ : bool
    tol_ : float
        The ``tol`` the last ``fit`` stopped by ('auto' resolved).
    lower_bound_ : float
    lower_bounds_ : list of float
    trace_ : list of dict
        Per pass: pass, elapsed, elbo, ``progress`` (the stopping rule's change, see ``tol``),
        time_local/global/moves, ``n_topics`` (topics in the
        truncation), ``n_live``, ``merges_tried/accepted``, ``deletes_tried/accepted``,
        ``sorted``, and the local step's counters: ``local_iters`` (document iterations of
        the pass's local step, as in :attr:`SparseLDA.trace_`), ``restarts_tried/accepted``
        and ``delete_local_iters`` (iterations re-inferring the documents of delete
        proposals, part of ``time_moves``). Every :meth:`partial_fit` step appends an entry
        (``pass`` None, ``step``, elapsed, elbo, ``elbo_change``, ``rho``, time_local/global,
        n_topics, n_live) and its bound to ``lower_bounds_``.
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    Notes
    -----
    ``score`` is the per-token evidence lower bound with the dense local step and the prior
    fixed at alpha E[beta] (on the same scale as :meth:`SparseLDA.score`).

    References
    ----------
    M. C. Hughes, D. I. Kim and E. B. Sudderth (2015). Reliable and scalable variational
    inference for the hierarchical Dirichlet process. AISTATS.
    M. C. Hughes and E. B. Sudderth (2016). Fast learning of clusters and topics via sparse
    posteriors. arXiv:1609.07521.
    Y. W. Teh, M. I. Jordan, M. J. Beal and D. M. Blei (2006). Hierarchical Dirichlet
    processes. JASA.
    """

    _parameter_constraints = {
        **TopicModelBase._parameter_constraints,
        "max_components": [Interval(numbers.Integral, 1, None, closed="left")],
        "L": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "alpha": [Interval(numbers.Real, 0, None, closed="neither")],
        "gamma": [Interval(numbers.Real, 0, None, closed="neither")],
        "algorithm": [StrOptions({"memoized", "stochastic", "batch"})],
        "moves": [str, tuple, list, None],
        "max_topics": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "n_batches": [Interval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "delta": [Interval(numbers.Real, 0, None, closed="left"), None],
        "tol": [Interval(numbers.Real, 0, None, closed="left"), StrOptions({"auto"})],
        "local_max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "local_tol": [Interval(numbers.Real, 0, None, closed="left")],
        "restarts": [Interval(numbers.Integral, 0, None, closed="left")],
        "init": [StrOptions({"auto", "sem", "kmeans++", "random"}), HasMethods(["fit"])],
    }

    def __init__(
        self,
        max_components=200,
        *,
        L=8,
        alpha=0.5,
        gamma=1.0,
        topic_word_prior=0.1,
        algorithm="memoized",
        moves="all",
        max_topics=None,
        n_batches=10,
        batch_size=256,
        kappa=0.6,
        delta=None,
        total_samples=None,
        max_iter=50,
        tol="auto",
        local_max_iter=100,
        local_tol=0.05,
        restarts=0,
        init="auto",
        random_state=None,
        n_threads=None,
        verbose=0,
    ):
        self.max_components = max_components
        self.L = L
        self.alpha = alpha
        self.gamma = gamma
        self.topic_word_prior = topic_word_prior
        self.algorithm = algorithm
        self.moves = moves
        self.max_topics = max_topics
        self.n_batches = n_batches
        self.batch_size = batch_size
        self.kappa = kappa
        self.delta = delta
        self.total_samples = total_samples
        self.max_iter = max_iter
        self.tol = tol
        self.local_max_iter = local_max_iter
        self.local_tol = local_tol
        self.restarts = restarts
        self.init = init
        self.random_state = random_state
        self.n_threads = n_threads
        self.verbose = verbose

    # -----------------------------------------------------------------------------------
    # helpers

    def _dask_options(self):
        from ._dask_lda import _ship_hdp

        return {"ship": _ship_hdp}

    def _topic_cap(self):
        """The cap of the truncation under births (``max_topics``, resolved)."""
        if self.max_topics is None:
            return max(DEFAULT_CAP_FACTOR * self.max_components, DEFAULT_CAP_MIN)
        if self.max_topics < self.max_components:
            raise ValueError(f"max_topics={self.max_topics} must be at least "
                             f"max_components={self.max_components}.")
        return int(self.max_topics)

    def _model(self, K):
        opts = dict(max_iter=self.local_max_iter, tol=self.local_tol, restarts=self.restarts)
        moves = _parse_moves(self.moves) if self.algorithm != "stochastic" else ()
        # births grow K past L: the model then keeps L and runs the L-sparse routine
        births = "birth" in moves
        L = self.L if (self.L is not None and (self.L < K or births)) else None
        return HDPModel(self.alpha, self.gamma, self.topic_word_prior, L, opts,
                        self.n_threads, moves, max_topics=self._topic_cap())

    def _init_stats(self, X, rng, minibatch=False):
        K, V = self.max_components, X.shape[1]
        init = self.init
        if init == "auto":
            data = X.data if sp.issparse(X) else np.asarray(X)
            counts = np.array_equal(data, np.rint(data))
            memoized = self.algorithm != "stochastic" and not minibatch
            init = "sem" if counts and memoized else "kmeans++"
        if init == "sem":
            init = StochasticEMLDA(
                K, max_iter=min(SEM_INIT_SWEEPS, SEM_SWEEPS_PER_PASS * self.max_iter),
                init="random", sweep_blocks=1)
        # a sampler's start: tol='auto' then stops once the moves are done (see ``tol``)
        self._sampler_start = isinstance(init, StochasticEMLDA)
        if hasattr(init, "fit"):
            S = init_counts_from_estimator(init, X, K, self.alpha / K,
                                           float(self.topic_word_prior), self.n_threads, rng,
                                           whom="HDPTopicModel")
        elif init == "random":
            S = rng.gamma(100.0, 0.01, (K, V))
        else:
            X = sp.csr_array(X, dtype=np.float64)
            tau = float(self.topic_word_prior)
            seeds = _kl_kmeanspp_seeds(X, min(K, X.shape[0]), tau, rng, self.n_threads)
            S = _kl_kmeans(X, seeds, tau, _KMEANS_ITERS, self.n_threads)
            if S.shape[0] < K:  # fewer documents than topics: the rest start empty
                S = np.vstack([S, np.zeros((K - S.shape[0], V))])
        S = S[np.argsort(-S.sum(axis=1), kind="stable")]
        st = empty_stats(K, V)
        st["S"] = np.ascontiguousarray(S, dtype=np.float64)
        return st

    def _set_fitted(self, params):
        """Public attributes from the model's parameters: live topics, largest first."""
        self._params = params
        lam = params.lam
        sizes = lam.sum(axis=1) - self.topic_word_prior * lam.shape[1]
        live = np.flatnonzero(sizes >= LIVE_MIN_TOKENS)
        if live.size == 0:
            live = np.array([int(np.argmax(sizes))])
        order = live[np.argsort(-sizes[live], kind="stable")]
        self._live = order
        self.n_components_ = int(order.size)
        self.n_topics_model_ = int(lam.shape[0])
        self.components_ = lam[order]
        self.topic_word_distribution_ = self.components_ / self.components_.sum(
            axis=1, keepdims=True)
        self.exp_dirichlet_component_ = np.exp(params.Elogphi[order])
        self.topic_weights_ = params.Ebeta[order]
        self.doc_topic_prior_ = params.alpha_vec[order]
        self.topic_word_prior_ = float(self.topic_word_prior)
        self.rho_ = params.rho.copy()
        self.omega_ = params.omega.copy()

    # -----------------------------------------------------------------------------------
    # training

    def fit(self, X, y=None, *, callback=None):
        """Learn the topics, and how many there are, from document-word counts X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or CorpusStream
            Non-negative word counts or fractional weights (the local step is variational;
            ``init='auto'`` starts fractional weights from k-means++), not text (vectorize
            documents first, e.g. with ``CountVectorizer``), with at least one document and
            one token (an all-zero corpus raises ValueError, in :meth:`partial_fit` too;
            empty documents among others are fine), or a corpus on disk as a
            :class:`~sparseclust.datasets.CorpusStream`: memoized training only, as in
            :meth:`SparseLDA.fit` (its minibatches are the fixed batches, read again every
            pass; a delete move re-reads the minibatches of the documents it re-infers).
            A Dask collection (``dask.array`` of CSR or dense row chunks, or a ``dask.bag``
            of 2-D blocks; ``pip install sparseclust[dask]``) trains on the active
            ``distributed.Client`` with every algorithm (:mod:`sparseclust._dask`, ``doc/
            training.md``): the partitions stay on the workers, the local step and the side
            results of the moves (merge terms, co-usage, the rows of the documents that use a
            delete candidate) are computed there and reduced, the global step and the moves
            run here, and a delete re-runs the local step of its documents on the workers
            that hold them. ``init`` is applied to the first non-empty partition; memoized
            batches are consecutive groups of partitions.
        y : ignored
        callback : callable or None, default=None
            Called after every pass with the pass's trace entry plus ``n_passes`` and
            ``components`` (lambda of the model's topics); returning True stops training.

        Returns
        -------
        self
        """
        self._validate_params()
        _parse_moves(self.moves)
        check_output_support(self, "HDPTopicModel.fit")
        X, init, n_docs, n_tokens, wrap, rng = self._fit_input(X, "HDPTopicModel.fit")
        model = self._model(self.max_components)
        engine_model = model if wrap is None else wrap(model)
        snaps = []

        def _cb(info):
            params = info["params"]
            lam = params.lam
            sizes = lam.sum(axis=1) - self.topic_word_prior * lam.shape[1]
            log = model.round_logs[-1] if model.round_logs else {}
            snaps.append(dict(n_topics=int(lam.shape[0]),
                              n_live=int(np.count_nonzero(sizes >= LIVE_MIN_TOKENS)),
                              counters=dict(model.counters), **log))
            if callback is None:
                return False
            public = {k: v for k, v in info.items() if k not in ("params", "stats")}
            public.update({k: v for k, v in snaps[-1].items() if k != "counters"})
            public["components"] = lam
            return bool(callback(public))

        # the engine gets the only reference to the initial statistics (released after the
        # first global step)
        init = [init]
        result = fit_engine(
            engine_model, X, init.pop(), algorithm=self.algorithm, max_iter=self.max_iter,
            tol=0.0, n_batches=min(self.n_batches, n_docs),
            batch_size=self.batch_size, kappa=self.kappa,
            delta=default_delay(self.delta, n_docs if self.total_samples is None
                                else self.total_samples, self.batch_size),
            total_samples=self.total_samples,
            random_state=rng.randint(np.iinfo(np.int32).max), verbose=self.verbose,
            name="HDPTopicModel",
            callback=self._stopper(_cb, snaps, model, max(n_tokens, 1.0)),
            tol_scale=max(n_tokens, 1.0),
        )
        counters = [snap.pop("counters") for snap in snaps]
        trace = merge_counters(result.trace, counters, snaps)
        self.trace_ = trace
        self.lower_bounds_ = list(result.lower_bounds)
        self.lower_bound_ = result.lower_bound
        self.n_iter_ = result.n_iter
        self.converged_ = bool(self._converged)
        self.tol_ = self._tol
        self._n_samples_fit = n_docs
        self._set_fitted(result.params)
        if self.algorithm == "stochastic":
            self._svi_state = result.state
            self.n_batch_iter_ = result.state.t
            self._doc_stats = None
        else:
            self._svi_state = None
            self.n_batch_iter_ = 0
            # the whole-data document statistics of the final parameters, so that
            # partial_fit continues from the fitted model (see _fitted_stats)
            self._doc_stats = {f: np.array(result.stats[f], dtype=np.float64)
                               for f in _DOC_FIELDS}
        if not self.converged_ and not self._user_stopped and self._tol > 0:
            self._warn_not_converged(trace[-1]["progress"], "token", tol=self._tol)
        if not self._user_stopped:
            warn_if_lower_bound("HDPTopicModel", trace, self.max_components,
                                self.n_components_, "max_components", "topics")
        return self

    def _resolved_tol(self):
        """``tol``, with 'auto' resolved (after ``_init_stats``): SEM_START_TOL for memoized
        or batch training from stochastic EM sweeps, DEFAULT_TOL otherwise."""
        if not isinstance(self.tol, str):
            return float(self.tol)
        sampler = getattr(self, "_sampler_start", False) and self.algorithm != "stochastic"
        return SEM_START_TOL if sampler else DEFAULT_TOL

    def _stopper(self, cb, snaps, model, tol_scale):
        """Callback that also applies the stopping rule (see ``tol``).

        The progress of pass t is that of its local and global steps alone,
        |L_t^pre - L_{t-1}| / tol_scale, with L_t^pre the objective before the pass's moves
        and L_{t-1} the objective at the end of the previous pass (after its moves): the jump
        of an accepted merge or delete is not progress towards a fixed point. Training stops
        at the first pass whose progress is below ``tol`` and which accepted no merge or
        delete: while moves are still accepted the number of topics is still being learned,
        however small the steps' progress (a rule that also stopped after two passes in a row
        below ``tol``, whatever the moves, left far too many topics on a planted corpus). A
        sort never blocks stopping. With births, an accepted birth counts as a move, and
        training does not stop while births are still to be tried
        (:meth:`HDPModel.birth_pending`: until two rounds of births in a row were all
        rejected, or the cap ``max_topics`` leaves no room).
        Stochastic training uses the engine's windowed change instead.
        """
        self._converged = False
        self._user_stopped = False
        self._tol = tol = self._resolved_tol()
        state = {"prev": None}

        def _inner(info):
            stop = cb(info)
            self._user_stopped = bool(stop)
            pre = model.pre_move_elbo
            model.pre_move_elbo = None
            if pre is None or self.algorithm == "stochastic":
                change = info.get("elbo_change", np.inf)
            elif state["prev"] is None:
                change = np.inf
            else:
                change = abs(pre - state["prev"]) / tol_scale
            state["prev"] = info["elbo"]
            snaps[-1]["progress"] = float(change)
            s = snaps[-1]
            moved = (s.get("merges_accepted", 0) or s.get("deletes_accepted", 0)
                     or s.get("births_accepted", 0) or model.birth_pending())
            below = bool(np.isfinite(change) and change < tol)
            if tol > 0 and below and not moved:
                self._converged = True
                return True
            return stop

        return _inner

    def partial_fit(self, X, y=None):
        """One stochastic variational step on the minibatch X (no moves).

        The first call initializes the truncation (``max_components`` topics, ``init``) from
        X; later calls blend the minibatch's statistics with rho_t = (delta + t)^(-kappa), the
        stick parameters then maximizing the surrogate objective of the blended statistics.
        After ``fit`` it continues from the fitted model (all topics of its truncation).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The minibatch's word counts or fractional weights, validated as in :meth:`fit`.
        y : ignored

        Returns
        -------
        self
        """
        self._validate_params()
        _parse_moves(self.moves)
        first = not hasattr(self, "components_")
        X = self._check_X(X, reset=first, whom="HDPTopicModel.partial_fit", fitting=True)
        if first:
            rng = check_random_state(self.random_state)
            self._svi_state = StochasticState(stats=self._init_stats(X, rng, minibatch=True), t=0)
            self._start_partial_fit()
            model = self._model(self.max_components)
        else:
            params = self._params
            model = self._model(params.K)
            model.rho, model.omega = params.rho, params.omega
            if getattr(self, "_svi_state", None) is None:
                n_fit = self._n_samples_fit
                t0 = self.n_iter_ * max(1, -(-n_fit // self.batch_size))
                self._svi_state = StochasticState(stats=self._fitted_stats, t=t0)
            self._svi_state.params = None
        model.moves = ()
        model.sparse_rows = False
        state = self._svi_state
        total = self._step_total(X.shape[0])
        params, elapsed, timings = self._timed_step(
            model, state, X, total, default_delay(self.delta, total, self.batch_size))
        # the step's objective (of the blended statistics), recorded as SparseLDA.partial_fit
        # and SparseGaussianMixture.partial_fit do: trace_ and lower_bounds_ grow by one
        # entry per step, after fit's passes or earlier steps
        elbo = float(model.elbo(state.stats, params))
        self._set_fitted(params)
        self.n_batch_iter_ = state.t
        self._record_step(X, total, elbo, elapsed, state.rho, timings,
                          {"n_topics": int(params.K), "n_live": int(self.n_components_)})
        return self

    @property
    def _fitted_stats(self):
        """Statistics reproducing the fitted parameters (for partial_fit after fit): S from
        lambda, and the document statistics (T, G, A, LS, H, D) of the training data as the
        last pass left them, so the first stochastic step blends with statistics of the
        whole training set and the sticks start from the fitted optimum."""
        p = self._params
        st = empty_stats(p.K, p.lam.shape[1])
        st["S"] = np.maximum(p.lam - self.topic_word_prior, 0.0)
        doc = getattr(self, "_doc_stats", None)
        if doc is not None and doc["T"].shape == (p.K + 1,):
            for f in _DOC_FIELDS:
                st[f] = doc[f].copy() if doc[f].ndim else float(doc[f])
        return st

    # -----------------------------------------------------------------------------------
    # inference

    def _doc_topic_all(self, X):
        p = self._params
        res = local_step(X, p.tables, p.alpha_vec, L=None, max_iter=self.local_max_iter,
                         tol=self.local_tol, restarts=self.restarts, return_doc_topic=True,
                         n_threads=self.n_threads, alpha_rem=p.alpha_rem, init_weights=p.P0)
        return res

    def transform(self, X, *, normalize=True):
        """Document-topic distributions over the live topics.

        The dense local step with the fitted topics and prior alpha E[beta] gives
        theta_dk = N_dk + alpha E[beta_k]; the live topics' entries (in the order of
        ``components_``) are returned, divided by their sum, so rows sum to 1.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        normalize : bool, default=True
            If False, return theta of the live topics (the Dirichlet parameters).

        Returns
        -------
        doc_topic : ndarray (n_samples, n_components_), dtype of X
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False, whom="HDPTopicModel.transform")
        res = self._doc_topic_all(X)
        return self._doc_topic(res.doc_topic[:, self._live] + self.doc_topic_prior_, X,
                               normalize)

    def score(self, X, y=None):
        """Per-token evidence lower bound of X under the fitted model (larger is better).

        sum_d L_d / sum_d N_d with L_d the document ELBO under q(phi) = Dir(lambda) and the
        document prior Dir(alpha E[beta]) over the model's topics and the remainder (the
        dense local step), comparable with :meth:`SparseLDA.score`. 0.0 when X has no tokens.
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False, whom="HDPTopicModel.score", sampled=False)
        return self._per_token_bound(self._doc_topic_all(X))

