# SPDX-License-Identifier: BSD-3-Clause
"""Stochastic EM for LDA (Zaheer & Kottur, Sec. 3.3, Eq. 10, Alg. 1).

Every sweep draws one topic per token.  With ``doc_counts='frozen'`` and ``sweep_blocks=1``
(the paper's sweep)

    p(z_dn = k)  propto  (D_dk + alpha) (W_kv + beta) / (T_k + V beta)

with all counts read from the previous sweep's assignments (the read buffer).  With
``sweep_blocks`` B > 1 the read buffer is refreshed after each of B blocks of documents, so
W and T are those of the start of the token's block.  With ``doc_counts='live'`` (the
default) the word-topic counts W and totals T are still those of the read buffer, but the
document's own counts are updated token by token, and W and T follow
the token's own entry (d, v): the previous topics of the entry's tokens up to and including
this one are left out and the new topics of its earlier tokens are counted:

    p(z_dn = k)  propto  (D_dk^{-dn} + alpha) (W_kv + e_k + beta) / (T_k + e_k + V beta),

e the entry's change so far (e = -[k = z'] for its first token, z' the token's previous
topic): the collapsed Gibbs conditional with the other documents' word-topic counts one sweep
(or one block) old (close to approximate distributed LDA, Newman et al. 2009).  Either way
the documents are independent within a block.  The sampling kernel is
:mod:`sparseclust._kernels._sampler`.

The topics kept at the end (``topic_estimate='rao_blackwell'``, the default) are those of the
Rao-Blackwellized counts of the last assignments (Papanikolaou et al. 2017): every token
contributes its collapsed conditional p(z_dn = k | z_{-dn}) instead of its one sampled topic,

    R_vk = sum_{tokens dn of word v} p(z_dn = k | z_{-dn}),
    phi_kv = (R_vk + beta) / (R_k + V beta),

which removes the sampling noise of the last sweep's draws; it is computed once, at the end.
"""

import hashlib
import math
import numbers
import time

import numpy as np
from scipy.special import psi
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._base import merge_counters
from .._engine import (
    StochasticState,
    SuffStats,
    default_delay,
    fit_engine,
    is_dask_collection,
)
from .._input import check_output_support
from .._kernels import _tokens  # the token utilities of the samplers
from ..utils._threads import effective_n_threads, threads_for_work
from ._base import TopicModelBase
from ._local import TopicTables, local_step
from ._sem_online import OnlineSEMModel
from ._sem_sampler import (
    _MIN_WORK_PER_THREAD,
    DENSE_DOC_MAX_K,
    DENSE_DOC_TOPIC_SHARE,
    DENSE_MAX_K,
    _RaoBlackwell,
    _Sampler,
    _seed,
    _sub_layout,
    _z_dtype,
    run_sweeps,
    sequential_start,
    sweep_block_bounds,
    token_layout,
)

__all__ = ["StochasticEMLDA", "token_layout"]

#: local-step settings of score(): SparseLDA's defaults, so that both estimators report the
#: same per-token bound
_SCORE_MAX_ITER = 100
_SCORE_TOL = 0.05

#: the default ``max_iter``: sweeps of batch ``fit``, passes of online ``fit`` (doc/defaults.md)
BATCH_MAX_ITER = 200
ONLINE_MAX_ITER = 100

#: ``sweep_blocks='auto'``: this many blocks when the sweep's sampling work is at least
#: ``AUTO_BLOCKS_MIN_WORK`` times the size of the counts W (doc/defaults.md)
AUTO_BLOCKS = 4
AUTO_BLOCKS_MIN_WORK = 32
#: ... and while the previous sweep changed the topic of at least this share of the tokens
AUTO_BLOCKS_CHANGED = 0.5

#: Metropolis-Hastings cycles per token of ``sampler='metropolis'`` (a document proposal and a
#: word proposal each)
MH_CYCLES = 1


def _state_seed(array):
    """A 62-bit seed of the kernel's random streams derived from a fitted array: a 64-bit
    BLAKE2b hash of its dtype, shape and bytes, cut to the range of :func:`_seed`. Inference
    seeded this way is a function of the fitted model alone: it neither reads nor advances
    ``random_state``, and a pickled copy of the model gives the same results."""
    a = np.ascontiguousarray(array)
    h = hashlib.blake2b(f"{a.dtype.str}{a.shape}".encode(), digest_size=8)
    h.update(memoryview(a).cast("B"))
    return int.from_bytes(h.digest(), "little") >> 2


def _lambda_of_counts(W, beta):
    """W.T + beta as a new C-ordered (K, V) float64 array, from the (V, K) counts W."""
    lam = np.empty((W.shape[1], W.shape[0]), dtype=np.float64)
    np.add(W.T, beta, out=lam)
    return lam


class StochasticEMLDA(TopicModelBase):
    """Latent Dirichlet allocation by parallel stochastic EM (Zaheer & Kottur).

    Model: phi_k ~ Dir_V(beta), pi_d ~ Dir_K(alpha), z_dn ~ Cat(pi_d), x_dn ~ Cat(phi_{z_dn}).
    Each sweep (an E-step, S-step and M-step in one, Zaheer & Kottur Sec. 3.3, Eq. 10) draws a
    new topic for every token.  ``doc_counts='frozen'`` with ``sweep_blocks=1`` is the
    paper's sweep:

        p(z_dn = k)  propto  (D_dk + alpha) (W_kv + beta) / (T_k + V beta),

    where D_dk, W_kv, T_k are the document-topic, word-topic and topic counts of the
    *previous* sweep's assignments (the read buffer, frozen during the sweep; see
    ``sweep_blocks`` for a buffer refreshed within it), the token's
    own topic included.  ``doc_counts='live'`` (default) keeps W and T frozen but updates the
    document's counts token by token, and lets W and T follow the token's own entry (d, v),
    the tokens of word v in document d:

        p(z_dn = k)  propto  (D_dk^{-dn} + alpha) (W_kv + e_k + beta) / (T_k + e_k + V beta),

    D^{-dn} the counts of the document's other tokens (new topics before dn, previous ones
    after it) and e the entry's change so far, its earlier tokens' new topics counted and the
    previous topics of its tokens up to dn left out (e = -[k = z'] for the entry's first
    token, z' its previous topic).  The document's counts and the counts of its own word are
    those of collapsed Gibbs sampling, the other documents' word-topic counts are those of the
    start of the sweep (close to approximate distributed LDA, Newman et al. 2009, with one
    document per processor, except that the document's new topics enter the other words'
    counts only at the end of the sweep), or with ``sweep_blocks`` B > 1 those of the start
    of the token's block of D / B documents.  Because a token sees its own document's current
    topics, the live sweep mixes faster per sweep than the frozen one, for a little more work
    per token (``doc/sem.md``).  In both forms a
    document is processed by one thread and reads nothing another document writes, so the
    documents of a sweep run in parallel (OpenMP) without locks and the result does not
    depend on the number of threads.  The new word-topic counts are those of the new
    assignments, counted once the sweep is done.  Sampling cost per token does not grow with
    K (``sampler='alias'``): with w_kv = (W_kv + beta) / (T_k + V beta), the conditional is
    the sum of a document part D_dk w_kv, computed exactly over the topics present in the
    document, a word part alpha W_kv / (T_k + V beta), drawn from a Walker/Vose alias table
    over the word's non-zero counts, and a smoothing part alpha beta / (T_k + V beta), drawn
    from one alias table over the K topics; the tables are built once per block of
    documents in O(nnz(W)) work beyond one scan of the read buffer.  For small K every topic
    is evaluated (``sampler='dense'``).  The initial assignments are uniform, or drawn by one
    sequential pass over blocks of documents (``init``).  The tokens of X are its counts
    rounded to the nearest integer.

    The topics kept after the last sweep (``topic_estimate='rao_blackwell'``) are the
    estimator of Papanikolaou et al. (2017): the word-topic counts with every token's sampled
    topic replaced by its collapsed conditional given the other tokens' topics,

        R_kv = sum_{tokens dn of word v} p(z_dn = k | z_{-dn}),

    where p(z_dn = k | z_{-dn}) is proportional to (D_dk^{-dn} + alpha) (W_kv^{-dn} + beta) /
    (T_k^{-dn} + V beta), the token taken out of all three counts: the posterior mean of the
    counts given the other assignments.  It has the sampling noise
    of the last sweep's draws integrated out and is computed once, at the end of ``fit``,
    in place of the counts (no second K x V array), at the cost of about one sweep.

    Parameters
    ----------
    n_components : int, default=10
        Number of topics K.
    doc_topic_prior : float or None, default=None
        alpha; None means 0.5 / n_components (the rule of :class:`SparseLDA`).
    topic_word_prior : float, default=0.1
        beta: symmetric Dirichlet prior on each topic's word distribution.
    max_iter : int or None, default=None
        Sweeps of ``fit`` (passes of minibatch steps with ``algorithm='online'``). None means
        200 sweeps with ``algorithm='batch'`` and 100 passes with ``algorithm='online'``,
        whose every pass runs ``n_fold_in`` sweeps over each minibatch.
    tol : float, default=0.0
        Stop after the first sweep whose log joint likelihood log p(x, z | alpha, beta)
        changed by less than ``tol`` nats per token (``converged_`` is then True). ``0`` runs
        ``max_iter`` sweeps. The log joint of a sampler fluctuates by about 1/sqrt(N) per token
        over N tokens, so ``tol`` below that never triggers. With ``algorithm='online'`` the
        change is that of the online objective (see ``lower_bound_``) between the means of
        windows of three passes, per token of the corpus the steps are scaled to.
    sampler : {'auto', 'alias', 'dense', 'metropolis'}, default='auto'
        Per-token sampler of the training sweeps: 'alias' (alias tables + document part, cost
        independent of K, growing with the topics the document uses), 'dense' (all K topics,
        summed in blocks of 16), 'auto' = 'dense' for ``n_components <= 48``; up to 200 topics
        'dense' for a document whose assignments hold at least half the topics at the start of
        a sweep (with ``doc_counts='live'``) and 'alias' for the others; else 'alias'
        (``doc/sem.md``). All draw exactly from the same distribution. 'metropolis' (Yuan et
        al. 2015) replaces the draw by a Metropolis-Hastings cycle from the token's previous
        topic s: the topic of a uniformly drawn other token of the document (or, with
        probability K alpha / (N_d - 1 + K alpha), a uniform topic) is proposed and accepted
        with probability min(1, w_k / w_s), then a topic from the word's tables, q(k) propto
        (W_kv + beta) / (T_k + V beta), accepted with probability min(1, (D_dk + alpha) w_k
        q(s) / ((D_ds + alpha) w_s q(k))), w being the word weight of the live conditional
        below (e included). Both steps leave that conditional invariant, so the chain targets
        it, but a sweep moves the assignments less than exact draws do. A token costs O(1)
        whatever the number of topics its document holds: use it on long documents and many
        topics, with more sweeps. It needs ``doc_counts='live'``; fold-in (:meth:`transform`,
        later minibatches) draws with 'alias'.
    doc_counts : {'live', 'frozen'}, default='live'
        Counts a token reads in ``fit`` (and in the first minibatch of :meth:`partial_fit`):
        'live' = its document's counts updated token by token, and the word-topic counts W
        and totals T of the previous sweep corrected by its entry's change e (see above; with
        the alias sampler the draw is from the previous sweep's conditional plus a part over
        the topics with e_k > 0, and a draw of a topic with e_k < 0 is kept with probability
        [(W_kv + e_k + beta) / (T_k + e_k + V beta)] / [(W_kv + beta) / (T_k + V beta)], else
        redrawn: exact rejection sampling); 'frozen' = every count from the previous sweep,
        the token's own topic included (with ``sweep_blocks=1``, Zaheer & Kottur's fully
        double-buffered sweep).
        Fold-in (:meth:`transform`, later minibatches) is not affected.
    init : {'random', 'sequential'}, default='random'
        The assignments the first sweep of ``fit`` (``algorithm='batch'``) starts from.
        'random': uniform over the K topics. 'sequential': the documents are taken in
        blocks, the first ceil(D / 128) documents, then blocks that double in size (each
        as large as all the blocks before it); the first block is uniform, and every token
        of a later block is drawn once, in document order, given its document's earlier
        tokens and the word-topic counts of the blocks before it,

            p(z_dn = k)  propto  (sum_{m < n} [z_dm = k] + alpha) (W_kv + e_k + beta)
                                 / (T_k + e_k + V beta),

        e_k the earlier tokens of the same word in the document drawn to k (with
        ``doc_counts='frozen'``, e = 0). The documents of a block are independent, so the
        start does not depend on ``n_threads``. It costs about one sweep and the first
        sweeps start from documents concentrated on few topics (faster per token with the
        alias sampler, and with a higher held-out likelihood early on) instead of documents
        spread over min(N_d, K) topics. Use it for short budgets of sweeps, above all on
        long documents and at large K. It is not the default: over a full 100-sweep fit it
        can end in a different mode, below the uniform start's held-out score. A fit on a
        Dask collection starts uniformly.
    sweep_blocks : int or 'auto', default='auto'
        Blocks of consecutive documents a sweep of ``fit`` (``algorithm='batch'``) is taken
        in: documents [D i // B, D (i + 1) // B) for i < B (at most D blocks). The draws of
        a block read the word-topic counts W and totals T of the assignments as they are when
        the block starts: after each block but the last, its tokens' counts move to their new
        topics and the word tables are rebuilt. 1: W and T one sweep old for every document
        (the paper's sweep with ``doc_counts='frozen'``). More blocks bring a sweep closer to
        collapsed Gibbs sampling, whose counts are never stale, and raise the held-out score
        reached in a given number of sweeps; each block after the first costs a rebuild of
        the tables, which scans the V x K counts (with the dense sampler only the totals are
        refreshed), and the count moves of the block before it. 'auto': 4 blocks in every
        sweep that follows a sweep which changed the topics of at least half the tokens (the
        first sweep counts as one; in practice the first sweeps, while the topics form, where
        a refresh gains most and the draws cost most), else 1; and 1 throughout when a
        sweep's sampling work, N min(K, N / D) for N tokens in D documents (a draw reads up
        to the topics its document holds), is less than 32 times the V K counts a refresh
        scans (short documents at large K), or with ``sampler='metropolis'``, whose proposals
        mixed worse between refreshed tables (doc/defaults.md). The documents of a block
        still run in parallel and the result does not depend on the number of threads. On a
        Dask collection each block is one round of the partitions, with the counts summed
        over them, and 'auto' means 1. ``partial_fit``, online ``fit`` and :meth:`transform`
        (fold-in with fixed topics) do not use it.
    topic_estimate : {'rao_blackwell', 'sample'}, default='rao_blackwell'
        The word-topic counts the fitted topics are made of: 'rao_blackwell' = every token's
        collapsed conditional given the others' topics, summed (see above; float32, one extra
        pass over the tokens at the end of ``fit``, written over the counts); 'sample' = the
        counts of the last sweep's assignments (int32).  In :meth:`partial_fit` (and online
        ``fit``) each minibatch's counts, averaged over its saved sweeps, are replaced the
        same way: the conditionals (D_dk^{-dn} + alpha) w_kv with the minibatch's fixed
        topics w, averaged over the saved sweeps' assignments.
    algorithm : {'batch', 'online'}, default='batch'
        'batch': ``fit`` runs ``max_iter`` stochastic-EM sweeps over all documents.
        'online': ``fit`` runs at most ``max_iter`` passes of the minibatch steps of
        :meth:`partial_fit` over X, from new topics, with the minibatches of every pass in a
        new random order and the corpus size ``total_samples`` (None: the number of
        documents of X); it stops early when the objective (see ``lower_bound_``) changes by
        less than ``tol`` per token between the means of windows of passes, as the other
        estimators' stochastic training does.
    n_fold_in : int, default=20
        Sweeps of the fold-in of :meth:`transform` and of each minibatch of
        :meth:`partial_fit`; the first ``n_fold_in // 2`` are burn-in, the others are
        averaged.
    kappa : float in (0, 1], default=0.6
        Step size rho_t = min(1, (delta + t)^(-kappa)) of step t = 1, 2, ... of
        :meth:`partial_fit` and online ``fit`` (the rule of every estimator's stochastic
        training).
    delta : float >= 0 or None, default=1.0
        The step size's delay; None means four passes' worth of minibatches,
        4 ceil(n_total / batch_size), the topic models' default. Here the first minibatch
        starts the topics from its own counts, so the default delay is short: the next
        steps must be able to move them.
    batch_size : int, default=256
        :meth:`partial_fit` (and online ``fit``) processes X in minibatches of this many
        documents.
    total_samples : float or None, default=None
        Corpus size the minibatch counts of :meth:`partial_fit` are scaled to; None means the
        number of documents given to ``fit`` when the model was fitted by ``fit``, else the
        number of documents of the ``partial_fit`` call.
    n_threads : int or None, default=None
        OpenMP threads (documents in parallel); results do not depend on it.
    random_state : int, RandomState instance or None, default=None
    verbose : int, default=0
        0 silent; otherwise one line on stderr after every sweep (every pass of
        ``algorithm='online'``), the format every estimator shares
        (:class:`~sparseclust.utils._progress.Progress`):
        ``[StochasticEMLDA] sweep i/max_iter  <objective>  change <c>  ... <seconds> s``.

    Attributes
    ----------
    components_ : ndarray (n_components, n_features), float64
        W_kv + beta: the Dirichlet parameters of the posterior of phi_k given the final
        sweep's assignments, with W the Rao-Blackwellized counts R of ``topic_estimate``
        (or the counts of the one sample with ``topic_estimate='sample'``).
    topic_word_distribution_ : ndarray (n_components, n_features), float64
        The posterior mean (W_kv + beta) / (T_k + V beta) of the topics, W as in
        ``components_`` (the MAP estimate would be (W_kv + beta - 1) / (T_k + V (beta - 1)),
        undefined for beta < 1).

        Computed from ``components_`` on every access (a new array each time). The fitted
        model keeps the word-topic counts W (float32 Rao-Blackwellized counts or int32
        sampled counts after ``fit``; float64 after :meth:`partial_fit`, whose M-step blends
        them), which :meth:`partial_fit` continues from, and ``components_`` = W^T + beta.
    doc_topic_prior_, topic_word_prior_ : float
        alpha and beta used.
    n_iter_ : int
        Sweeps run by ``fit`` (passes with ``algorithm='online'``).
    n_batch_iter_ : int
        The step counter t of the step size of the online steps (:meth:`partial_fit` and
        online ``fit``); after a batch ``fit``, :meth:`partial_fit` resumes it at the steps
        that many passes of minibatches would have taken.
    converged_ : bool
    lower_bound_ : float
        The training objective at the end: after a batch ``fit``, log p(x, z | alpha, beta)
        of the final assignments (collapsed over pi and phi; see Notes); after online
        training, the topic-word part of that log joint for the blended counts W~,
        sum_k [log Gamma(V beta) - log Gamma(T~_k + V beta) + sum_v (log Gamma(W~_vk +
        beta) - log Gamma(beta))].
    lower_bounds_ : list of float
        The objective after every sweep (batch ``fit``), pass (online ``fit``) and
        :meth:`partial_fit` step.
    trace_ : list of dict
        Per sweep: ``sweep``, ``time`` (seconds of the sweep: weights, alias tables,
        sampling), ``elapsed``, ``tokens_per_s``, ``log_joint``, ``log_joint_change`` (nats
        per token), ``changed`` (tokens whose topic changed). Online ``fit``: per pass, the
        entries of the other estimators' stochastic training (``pass``, ``step``, ``elbo``
        (the objective), ``elbo_change``, ``rho``, ``time_local``, ``time_global``,
        ``elapsed``) and ``tokens``. :meth:`partial_fit` appends one entry per minibatch
        step, as the other estimators' ``partial_fit`` does, with ``tokens_per_s``.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when X has string feature names.

    Notes
    -----
    ``score`` is exactly :meth:`SparseLDA.score` for topics q(phi_k) = Dir(components_): the
    per-token evidence lower bound of the dense variational local step, so one
    ``GridSearchCV`` can compare both estimators.

    Log joint (collapsed): log p(x, z) = sum_d [log Gamma(K alpha) - log Gamma(N_d + K alpha)
    + sum_k (log Gamma(D_dk + alpha) - log Gamma(alpha))] + sum_k [log Gamma(V beta)
    - log Gamma(T_k + V beta) + sum_v (log Gamma(W_kv + beta) - log Gamma(beta))].

    References
    ----------
    M. Zaheer and S. Kottur. Stochastic Expectation Maximization for Latent Variable Models.
    Carnegie Mellon University.

    Y. Papanikolaou, J. R. Foulds, T. N. Rubin and G. Tsoumakas (2017). Dense Distributions
    from Sparse Samples: Improved Gibbs Sampling Parameter Estimators for LDA. Journal of
    Machine Learning Research 18, 1-58.
    """

    _parameter_constraints = {
        **TopicModelBase._parameter_constraints,
        "n_components": [Interval(numbers.Integral, 1, None, closed="left")],
        "doc_topic_prior": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "sampler": [StrOptions({"auto", "alias", "dense", "metropolis"})],
        "doc_counts": [StrOptions({"live", "frozen"})],
        "init": [StrOptions({"random", "sequential"})],
        "sweep_blocks": [StrOptions({"auto"}), Interval(numbers.Integral, 1, None,
                                                         closed="left")],
        "topic_estimate": [StrOptions({"rao_blackwell", "sample"})],
        "algorithm": [StrOptions({"batch", "online"})],
        "n_fold_in": [Interval(numbers.Integral, 1, None, closed="left")],
        "delta": [Interval(numbers.Real, 0, None, closed="left"), None],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        n_components=10,
        *,
        doc_topic_prior=None,
        topic_word_prior=0.1,
        max_iter=None,
        tol=0.0,
        sampler="auto",
        doc_counts="live",
        init="random",
        sweep_blocks="auto",
        topic_estimate="rao_blackwell",
        algorithm="batch",
        n_fold_in=20,
        kappa=0.6,
        delta=1.0,
        batch_size=256,
        total_samples=None,
        n_threads=None,
        random_state=None,
        verbose=0,
    ):
        self.n_components = n_components
        self.doc_topic_prior = doc_topic_prior
        self.topic_word_prior = topic_word_prior
        self.max_iter = max_iter
        self.tol = tol
        self.sampler = sampler
        self.doc_counts = doc_counts
        self.init = init
        self.sweep_blocks = sweep_blocks
        self.topic_estimate = topic_estimate
        self.algorithm = algorithm
        self.n_fold_in = n_fold_in
        self.kappa = kappa
        self.delta = delta
        self.batch_size = batch_size
        self.total_samples = total_samples
        self.n_threads = n_threads
        self.random_state = random_state
        self.verbose = verbose

    # -----------------------------------------------------------------------------------
    # helpers

    def _passes(self):
        """``max_iter``, or its default: 200 sweeps of batch ``fit``, 100 passes of online
        ``fit``."""
        if self.max_iter is not None:
            return self.max_iter
        return BATCH_MAX_ITER if self.algorithm == "batch" else ONLINE_MAX_ITER

    def _whole_counts_rule(self):
        return ("StochasticEMLDA samples one topic per token",
                "SparseLDA with local_step='variational'")

    def _alpha(self):
        if self.doc_topic_prior is None:
            return 0.5 / self.n_components
        return float(self.doc_topic_prior)

    def _dense(self):
        if self.sampler == "auto":
            return self.n_components <= DENSE_MAX_K
        return self.sampler == "dense"

    def _sampler_args(self, n_threads):
        """Arguments of :class:`_Sampler` after V: K, alpha, dense, threads, live document
        counts, the token's own topic out of W and T, W and T following the token's entry
        (all three with ``doc_counts='live'``), Metropolis-Hastings cycles per token, and the
        number of topics from which a document's live exact draws are dense ('auto', 0:
        none)."""
        live = self.doc_counts == "live"
        mh = MH_CYCLES if self.sampler == "metropolis" else 0
        if mh and not live:
            raise ValueError("sampler='metropolis' needs doc_counts='live' (its proposals "
                             "read the document's current topics).")
        dense = self._dense()
        many_topics = 0
        if self.sampler == "auto" and not dense and self.n_components <= DENSE_DOC_MAX_K:
            many_topics = math.ceil(DENSE_DOC_TOPIC_SHARE * self.n_components)
        return (self.n_components, self._alpha(), dense, n_threads, live, live, live, mh,
                many_topics)

    def _sweep_blocks(self, n_tokens, n_docs, n_words, dask=False):
        """``sweep_blocks``, or the rule of 'auto': ``AUTO_BLOCKS`` when the sampling work of
        a sweep, N min(K, N / D) (a draw reads up to the topics its document holds: at most K,
        and at most its length), is at least ``AUTO_BLOCKS_MIN_WORK`` times the V K counts
        that every refresh of the tables scans, else 1; 1 on a Dask collection and with the
        Metropolis-Hastings sampler."""
        if self.sweep_blocks != "auto":
            return int(self.sweep_blocks)
        if dask or self.sampler == "metropolis" or n_docs == 0 or n_words == 0:
            return 1
        K = self.n_components
        work = n_tokens * min(K, n_tokens / n_docs)
        return AUTO_BLOCKS if work >= AUTO_BLOCKS_MIN_WORK * n_words * K else 1

    def _new_sampler(self, V):
        return _Sampler(V, *self._sampler_args(effective_n_threads(self.n_threads)))

    def _set_topics(self, Wt):
        """The fitted topics from the word-topic counts Wt (V, K) (int32 from ``fit``, float64
        blended from :meth:`partial_fit`): ``components_`` = Wt.T + beta, a plain array
        attribute (what inference reads, so an assignment to it or to its entries is kept),
        and Wt by reference, the counts :meth:`partial_fit` continues from."""
        self._word_topic = Wt
        self.doc_topic_prior_ = self._alpha()
        self.topic_word_prior_ = float(self.topic_word_prior)
        self.components_ = _lambda_of_counts(Wt, self.topic_word_prior_)

    def _fitted_counts(self, name):
        W = self.__dict__.get("_word_topic")
        if W is None:
            raise AttributeError(
                f"'{type(self).__name__}' object has no attribute '{name}' (not fitted yet)"
            )
        return W

    @property
    def topic_word_distribution_(self):
        """(W_kv + beta) / (T_k + V beta), shape (n_components, n_features), float64: the
        posterior mean of the topics (computed on access from ``components_``, rows
        normalized)."""
        if "components_" not in self.__dict__:
            self._fitted_counts("topic_word_distribution_")  # raises AttributeError
        lam = np.array(self.components_, dtype=np.float64)
        lam /= lam.sum(axis=1, keepdims=True)
        return lam

    # -----------------------------------------------------------------------------------
    # training

    def fit(self, X, y=None, *, callback=None):
        """Run ``max_iter`` stochastic-EM sweeps over the documents of X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Non-negative word counts, not text (vectorize documents first, e.g. with
            ``CountVectorizer``), with at least one document and one token (an all-zero
            corpus raises ValueError; empty documents among others are fine). The sampler
            draws one topic per token, so it needs whole-number counts: non-integer counts
            are rounded half up to whole tokens with a ``NonIntegerCountsWarning``, and a
            ValueError is raised instead when the rounded tokens keep less than half of X's
            total weight (as for tf-idf or row-normalised rows; use :class:`SparseLDA` with
            local_step='variational' for those). The same rules hold in :meth:`partial_fit`;
            :meth:`transform` rounds with the warning.
        y : ignored
        callback : callable or None, default=None
            Called after every sweep as ``callback(info)``: the sweep's trace entry plus ``pass``
            (= ``sweep``, the name the other estimators' callbacks use), ``n_passes``
            (``max_iter``, its default resolved), ``word_topic_counts``, the current counts W as a
            (n_features, n_components) int32 array that the next sweep overwrites (copy it to keep
            it), and ``topic_estimate``, a function of no arguments that returns the (n_features,
            n_components) counts ``fit`` would keep if it stopped now (the Rao-Blackwellized counts
            as a new float32 array, about one sweep of work; W itself with
            ``topic_estimate='sample'``; valid only during ``fit``); the topics are their transpose
            plus beta, row-normalized. With ``algorithm='online'`` it is called after every pass
            over X instead, with the pass's trace entry (its ``tokens`` included) plus ``n_passes``
            and ``components`` (the current topics). Returning ``True`` stops training. Time spent
            in the callback is excluded from ``elapsed``.

        Returns
        -------
        self
        """
        self._validate_params()
        check_output_support(self, "StochasticEMLDA.fit")
        if is_dask_collection(X):
            if self.algorithm != "batch":
                raise ValueError("StochasticEMLDA fits a Dask collection with "
                                 f"algorithm='batch' only, got {self.algorithm!r}.")
            from ._dask_sem import fit_sem

            return fit_sem(self, X, callback)
        X = self._check_X(X, reset=True, whom="StochasticEMLDA.fit", fitting=True)
        if self.algorithm == "online":
            return self._fit_online(X, callback)
        rng = check_random_state(self.random_state)
        seed = _seed(rng)
        D, V = X.shape
        K = self.n_components
        beta = float(self.topic_word_prior)
        lay = token_layout(X)
        del X  # the validated copy of the input (if one was made) is not needed any more
        N = int(lay.tokptr[-1])
        smp = self._new_sampler(V)
        nt = smp.n_threads
        keys = np.arange(D, dtype=np.uint64)
        t_start = time.perf_counter()
        z = np.empty(N, dtype=_z_dtype(K))
        _tokens.random_assign(lay.tokptr, z, keys, seed, K,
                               threads_for_work(nt, N, _MIN_WORK_PER_THREAD))
        W = np.zeros((V, K), np.int32)
        # (a validated CSR matrix has sorted word ids: the count then finds a thread's words
        # in every document by binary search)
        sorted_words = _tokens.rows_sorted(lay.indptr, lay.indices)
        if self.init == "sequential":
            sequential_start(smp, lay, z, keys, seed, W, beta, sorted_words=sorted_words)
        else:
            _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W,
                                threads_for_work(nt, N, _MIN_WORK_PER_THREAD),
                                sorted_words=sorted_words)
        # tokens per word: the row sums of the initial counts (no float64 temporary)
        word_totals = W.sum(axis=1, dtype=np.int64)
        smp.set_weights_from_counts(W, beta, word_totals)
        ll_doc = np.zeros(D)
        T_last = [None]  # the topic totals of the last counts (summed from W when None)
        bounds = sweep_block_bounds(D, self._sweep_blocks(N, D, V))
        # every block but the last: its layout, token range, keys and log-likelihood slots
        blocks = [(*_sub_layout(lay, d0, d1), keys[d0:d1], ll_doc[d0:d1])
                  for d0, d1 in zip(bounds[:-2], bounds[1:-1], strict=True)]
        last = ((*_sub_layout(lay, bounds[-2], D), keys[bounds[-2]:], ll_doc[bounds[-2]:])
                if blocks else None)
        # 'auto' refreshes only while the previous sweep moved at least AUTO_BLOCKS_CHANGED
        # of the tokens (the first sweep counts as moving all of them)
        early = self.sweep_blocks == "auto"
        moved = [N]

        def sweep(it):
            # W is the read buffer, frozen during a block of documents; after each block but
            # the last, the block's tokens move their counts in W and T to their new topics
            # and the tables are rebuilt for the next block; after the last, the counts of
            # the new assignments z are counted into the same array (the paper's write
            # buffer holds exactly these counts, so it is not kept)
            if blocks and not (early and moved[0] < AUTO_BLOCKS_CHANGED * N):
                changed = 0
                T_cur = (T_last[0].copy() if T_last[0] is not None
                         else W.sum(axis=0, dtype=np.int64))
                for sub, t0, t1, kb, llb in blocks:
                    zb = z[t0:t1]
                    z_old = zb.copy()
                    changed += smp.sweep(sub, zb, kb, seed, it, ll_doc=llb)
                    _tokens.move_counts(sub.indptr, sub.indices, sub.cnt, sub.tokptr, z_old,
                                        zb, W, T_cur)
                    smp.set_weights_from_counts(W, beta, word_totals, T_cur, joint=False)
                sub, t0, t1, kb, llb = last
                changed += smp.sweep(sub, z[t0:t1], kb, seed, it, ll_doc=llb)
            else:
                changed = smp.sweep(lay, z, keys, seed, it, ll_doc=ll_doc)
            moved[0] = changed
            T = np.zeros(K, np.int64)
            _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W,
                                 threads_for_work(nt, N, _MIN_WORK_PER_THREAD), T, zero=True,
                                 sorted_words=sorted_words)
            T_last[0] = T
            ll = smp.set_weights_from_counts(W, beta, word_totals, T) + float(ll_doc.sum())
            return W, ll, changed

        done = []

        def estimate(final=False):
            if done:
                raise RuntimeError("topic_estimate can only be called during fit (from the "
                                   "callback); after fit use components_")
            if self.topic_estimate == "sample":
                if final:
                    done.append(True)
                return W
            rb = _RaoBlackwell(K, beta, smp.alpha, nt, W=W, topic_totals=T_last[0])
            if not final:
                return rb.sum(lay, [z]).astype(np.float32)
            # the sweeps are done: no tables, and R replaces W in its own buffer
            done.append(True)
            smp.release_tables()
            return rb.sum(lay, [z], in_place=True)

        return run_sweeps(self, sweep, n_tokens=N, n_docs=D, rng=rng,
                          elapsed=time.perf_counter() - t_start, callback=callback,
                          estimate=estimate)

    def partial_fit(self, X, y=None):
        """Online stochastic EM on X, in minibatches of ``batch_size`` documents.

        For the minibatch B of step t: ``n_fold_in`` S-step sweeps over B with the topics
        fixed at w_vk = (W~_vk + beta) / (T~_k + V beta), the word-topic counts W_B of the
        last ``n_fold_in - n_fold_in // 2`` sweeps averaged, then the blended M-step

            W~ <- (1 - rho_t) W~ + rho_t (n_total / |B|) W_B,
            rho_t = min(1, (delta + t)^-kappa)

        (the online/incremental form of stochastic EM that Zaheer & Kottur App. E derive from
        its equivalence with stochastic gradient steps; Mimno, Hoffman & Blei 2012 use the
        same blend with a Gibbs local step).  The first minibatch of a model that was never
        fitted starts the topics: ``n_fold_in`` stochastic-EM sweeps over it from uniform
        assignments, W~ = (n_total / |B|) W_B (step t = 1).  After :meth:`fit`, W~ starts
        from the fitted counts and t resumes at ``n_iter_ * ceil(n_fit / batch_size)``, the
        steps that many passes of minibatches would have taken (the steps and their sizes
        are those of the training engine, :func:`~sparseclust._engine.stochastic_step`).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The documents' word counts, rounded to whole tokens as in :meth:`fit`; they are
            split into minibatches of ``batch_size`` documents, in order.
        y : ignored

        Returns
        -------
        self
        """
        self._validate_params()
        fitted = getattr(self, "_word_topic", None)
        X, first = self._partial_fit_input(X, "StochasticEMLDA.partial_fit",
                                           None if fitted is None else fitted.shape[1])
        D, V = X.shape
        # the first step after a batch fit changes the objective (the batch sweeps' log joint,
        # then the blended counts' topic-word part): no change is measured across
        new_objective = False
        if first:
            self._rng = check_random_state(self.random_state)
            self._start_partial_fit()
            self._t = 0
        elif getattr(self, "_t", None) is None:
            # continue from a batch fit as if its sweeps had been passes of minibatch steps
            n_fit = self._n_samples_fit or D
            self._t = self.n_iter_ * max(1, -(-n_fit // self.batch_size))
            self.n_batch_iter_ = self._t
            new_objective = True
        if not hasattr(self, "_rng"):  # a saved model keeps no random state
            self._rng = check_random_state(self.random_state)
        state = self._online_state()
        model = self._online_model(V, state.t)
        total = float(self._step_total(D))
        for start in range(0, D, self.batch_size):
            B = X[start:start + self.batch_size]
            before = model.counters["tokens"]
            params, elapsed, timings = self._timed_step(
                model, state, B, total, default_delay(self.delta, total, self.batch_size))
            self.n_batch_iter_ = state.t
            n_tok = model.counters["tokens"] - before
            speed = self.n_fold_in * n_tok / elapsed if elapsed > 0 else np.inf
            elbo = model.elbo(state.stats, params)
            if new_objective:
                self._append_step(state.t, elbo, elapsed, state.rho, timings,
                                  {"tokens_per_s": speed}, elbo_change=np.inf)
                new_objective = False
            else:
                self._record_step(B, total, elbo, elapsed, state.rho, timings,
                                  {"tokens_per_s": speed})
        self._end_online(state)
        return self

    def _online_state(self):
        """The stochastic state of the online steps: the fitted counts W~ (float64) and the
        step counter, or no counts before the first step."""
        W = self.__dict__.get("_word_topic")
        stats = None if W is None else SuffStats(W=np.array(W, dtype=np.float64))
        return StochasticState(stats=stats, t=self._t)

    def _online_model(self, V, step):
        return OnlineSEMModel(self._new_sampler(V), self.topic_word_prior, self._rng, step,
                              n_fold_in=self.n_fold_in,
                              rao_blackwell=self.topic_estimate == "rao_blackwell")

    def _end_online(self, state):
        self._t = state.t
        self._set_topics(state.stats["W"])

    def _fit_online(self, X, callback):
        """``algorithm='online'``: ``max_iter`` passes of the engine's stochastic training
        over X from new topics (see :class:`~sparseclust.topics._sem_online.OnlineSEMModel`)."""
        self._rng = check_random_state(self.random_state)
        self._start_partial_fit()
        self._t = 0
        self.__dict__.pop("_word_topic", None)
        D, V = X.shape
        total = float(self.total_samples) if self.total_samples is not None else float(D)
        state = self._online_state()
        model = self._online_model(V, 0)
        beta = float(self.topic_word_prior)
        snapshots = []

        def _pass_done(info):
            snapshots.append(dict(model.counters))
            if callback is None:
                return False
            public = {k: v for k, v in info.items() if k not in ("params", "stats")}
            public["components"] = _lambda_of_counts(info["stats"]["W"], beta)
            return bool(callback(public))

        n_tokens = float(np.floor(X.data.astype(np.float64) + 0.5).sum())
        result = fit_engine(
            model, X, None, algorithm="stochastic", max_iter=self._passes(), tol=self.tol,
            batch_size=self.batch_size, kappa=self.kappa,
            delta=default_delay(self.delta, total, self.batch_size),
            total_samples=total, random_state=self._rng.randint(np.iinfo(np.int32).max),
            verbose=self.verbose, name="StochasticEMLDA", callback=_pass_done, state=state,
            tol_scale=max(n_tokens * total / D, 1.0),
        )
        self.trace_ = merge_counters(result.trace, snapshots)
        self.n_iter_ = result.n_iter
        self.converged_ = bool(result.converged)
        self.lower_bounds_ = list(result.lower_bounds)
        self.lower_bound_ = result.lower_bound
        self.n_batch_iter_ = state.t
        self._n_samples_fit = D
        self._end_online(state)
        return self

    # -----------------------------------------------------------------------------------
    # inference

    def _fold_in_seed(self):
        # from the fitted topics, not random_state: transform is deterministic for a fitted
        # model whatever random_state is, and leaves a RandomState instance untouched
        return _state_seed(self.components_)

    def transform(self, X):
        """Document-topic distributions by fold-in with the topics fixed.

        ``n_fold_in`` stochastic-EM sweeps over the documents of X with the word weights
        fixed at ``topic_word_distribution_`` and the document counts D_dk of each sweep read
        from the previous one, from uniform assignments; the result averages
        (D_dk + alpha) / (N_d + K alpha) over the last ``n_fold_in - n_fold_in // 2`` sweeps.
        A document's random stream is keyed by its content and by a hash of the fitted
        ``components_``, so the result of a document does not depend on the other rows of X
        and is deterministic for a fitted model: repeated calls agree whatever
        ``random_state`` is (None included), and ``random_state`` is neither read nor
        advanced.
        Empty documents get the prior mean 1 / K.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        doc_topic : ndarray (n_samples, n_components), dtype of X (float32 or float64)
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False, whom="StochasticEMLDA.transform")
        D, V = X.shape
        K = self._word_topic.shape[1]
        seed = self._fold_in_seed()
        smp = _Sampler(V, K, self.doc_topic_prior_, self._dense_fitted(K),
                       effective_n_threads(self.n_threads))
        smp.set_weights(self.topic_word_distribution_.T)
        smp.build_tables()
        lay = token_layout(X)
        keys = _tokens.content_keys(lay.indptr, lay.indices, lay.cnt)
        z = np.empty(int(lay.tokptr[-1]), dtype=_z_dtype(K))
        _tokens.random_assign(lay.tokptr, z, keys, seed, K,
                               threads_for_work(smp.n_threads, z.size, _MIN_WORK_PER_THREAD))
        acc = np.zeros((D, K))
        n_burn = self.n_fold_in // 2
        smp.sweep(lay, z, keys, seed, 1, n_inner=self.n_fold_in, n_burn=n_burn, acc=acc)
        return self._doc_topic(acc / (self.n_fold_in - n_burn) + self.doc_topic_prior_, X)

    def _dense_fitted(self, K):
        if self.sampler == "auto":
            return K <= DENSE_MAX_K
        return self.sampler == "dense"

    def score(self, X, y=None):
        """Per-token evidence lower bound of X under the fitted topics (larger is better).

        The bound of :meth:`SparseLDA.score` with q(phi_k) = Dir(components_): sum_d L_d /
        sum_d N_d, L_d the document ELBO of the dense variational local step (100 iterations
        at most, tolerance 0.05 on the document counts, as SparseLDA's defaults). 0.0 when X
        has no tokens.
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False, whom="StochasticEMLDA.score", sampled=False)
        lam = self.components_
        tables = TopicTables(psi(lam) - psi(lam.sum(axis=1))[:, None])
        res = local_step(X, tables, self.doc_topic_prior_, L=None, max_iter=_SCORE_MAX_ITER,
                         tol=_SCORE_TOL, restarts=0, n_threads=self.n_threads)
        return self._per_token_bound(res)

    @property
    def _n_features_out(self):
        return self._fitted_counts("components_").shape[1]
