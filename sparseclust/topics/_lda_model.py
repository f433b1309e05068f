# SPDX-License-Identifier: BSD-3-Clause
"""LDA as models of the training engine (:func:`sparseclust._engine.fit_engine`): the topic
parameters (:class:`_LDAParams`, and :class:`_CountParams` for the sampled local step), the
variational model (:class:`_LDAModel`: the L-sparse local step, the global step, the ELBO)
and the model of the hybrid SVI-Gibbs local step (:class:`_GibbsLDAModel`) with its chains.
:class:`~sparseclust.topics.SparseLDA` builds one of them per fit."""

import copy

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln, psi

from .._engine import (
    SuffStats,
    VariationalModel,
)
from .._kernels import _gibbs_tables
from ..utils._threads import map_blocks, threads_for_work
from ._gibbs import (
    DocumentChains,
    LazyParams,
    LazyTopicStats,
    excluded_mass,
    gibbs_local_step,
    row_scaled_weights,
)
from ._local import TopicTables, local_step
from ._sem_sampler import _MIN_WORK_PER_THREAD

__all__ = ["_CountParams", "_GibbsLDAModel", "_LDAModel", "_LDAParams"]


#: rows of a K x V array handled at once where a whole-array temporary would cost K x V
_ROW_BLOCK_ELEMS = 1 << 20


def _row_blocks(K, V):
    step = max(1, _ROW_BLOCK_ELEMS // max(V, 1))
    return [(a, min(K, a + step)) for a in range(0, K, step)]


def _except_tau(f, lam, tau):
    """``f(lam)`` elementwise for a scalar function f of float64 (psi, gammaln), evaluating f
    only where lambda differs from the prior tau when that is at most half of the entries,
    and f(tau) once for the rest: where the statistics are zero, lambda = 0 + tau is tau
    exactly, and f of the same input gives the same bits. The parameters of sampled
    statistics are tau on most entries. ``tau`` None: f on every entry."""
    if tau is None:
        return f(lam)
    m = lam != tau
    n = int(np.count_nonzero(m))
    if 2 * n > lam.size:
        return f(lam)
    out = np.empty(lam.shape)
    out[...] = f(np.array([tau], dtype=np.float64))[0]
    out[m] = f(lam[m])
    return out


class _LDAParams:
    """Global parameters: lambda (K, V), E[log phi] (K, V) and the local step's tables.

    E[log phi_kv] = psi(lambda_kv) - psi(sum_w lambda_kw) is computed once, straight into the
    (V, K) layout the local step reads; ``Elogphi`` is a (K, V) view of that table. Built
    from the statistics (:meth:`from_stats`), the parameters do not store lambda = tau +
    max(S, 0) either: it is recomputed from S (by blocks of topics where it is only read),
    so they hold a single K x V array. ``S`` must then not change while they are in use
    (the engine builds new parameters after every change of the statistics). The blocks of
    topics run on ``n_threads`` threads (:func:`~sparseclust.utils._threads.map_blocks`: the
    same bits as one thread).
    """

    _n_threads = 1

    def __init__(self, lam):
        self._lam = lam
        self._S = self._tau = None
        K, V = lam.shape
        CT = np.empty((V, K))
        psi(lam.T, out=CT)
        CT -= psi(lam.sum(axis=1))[None, :]
        self._set_table(CT)

    @classmethod
    def from_stats(cls, S, tau, n_threads=1):
        """Parameters of lambda = tau + max(S, 0) without a K x V temporary."""
        self = cls.__new__(cls)
        self._lam = None
        self._S, self._tau = S, float(tau)
        self._n_threads = n_threads
        self._set_table(self._table_by_rows(*S.shape))
        return self

    def _table_by_rows(self, K, V):
        """The (V, K) table of E[log phi], from lambda by blocks of topics."""
        CT = np.empty((V, K))

        def block(ab):
            a, b = ab
            lam = self.lam_rows(a, b)
            CT[:, a:b] = _except_tau(psi, lam, self._tau).T
            CT[:, a:b] -= psi(lam.sum(axis=1))[None, :]

        map_blocks(block, _row_blocks(K, V), self._n_threads)
        return CT

    def _set_table(self, CT):
        self.tables = TopicTables.from_transposed(CT)
        self.Elogphi = self.tables.CT.T

    def lam_rows(self, a, b, out=None):
        """lambda of topics a..b-1: a new array, or written into ``out`` (b - a, V)."""
        if self._lam is not None:
            if out is None:
                return self._lam[a:b].copy()
            out[...] = self._lam[a:b]
            return out
        if self._S is None:
            raise RuntimeError("these parameters keep only the E[log phi] table")
        S = self._S[a:b]
        if sp.issparse(S):
            S = S.toarray()
        # lambda = tau + max(S, 0): memoized subtraction can leave -1e-13 where S is 0
        lam = np.maximum(S, 0.0, out=out)
        lam += self._tau
        return lam

    def materialize(self, overwrite_stats=False):
        """Store lambda and drop the reference to the statistics it is computed from.

        ``overwrite_stats=True`` computes lambda = tau + max(S, 0) in the memory of S (dense,
        float64, C-contiguous), so no second K x V array is allocated; the statistics must not
        be used afterwards.
        """
        if self._lam is not None:
            return
        S = self._S
        if (overwrite_stats and isinstance(S, np.ndarray) and S.dtype == np.float64
                and S.flags.c_contiguous and S.flags.writeable):
            np.maximum(S, 0.0, out=S)
            S += self._tau
            self._lam = S
        else:
            self._lam = self.lam
        self._S = None

    @property
    def shape(self):
        """(K, V)."""
        V, K = self.tables.CT.shape
        return (K, V)

    def log_weights(self, cols):
        """E[log phi] of the word types ``cols``, (len(cols), K)."""
        return self.tables.CT[cols]

    def release(self):
        """Drop the E[log phi] table (the parameters can no longer be used by a local step)."""
        self.tables = self.Elogphi = None

    @property
    def lam(self):
        """lambda (K, V): a new array when computed from the statistics, by blocks of topics
        on ``n_threads`` threads (the bits of :meth:`lam_rows`)."""
        if self._lam is not None:
            return self._lam
        if self._S is None:
            raise RuntimeError("these parameters keep only the E[log phi] table")
        K, V = self._S.shape
        lam = np.empty((K, V))
        map_blocks(lambda ab: self.lam_rows(*ab, out=lam[ab[0]:ab[1]]), _row_blocks(K, V),
                   self._n_threads)
        return lam


class _CountParams(_LDAParams):
    """lambda = tau + max(S, 0) of the statistics S, for the Gibbs local step.

    The sampler reads only the columns of a batch's word types (:meth:`log_weights`), so no
    K x V table is built per global step; the E[log phi] table (``tables``, ``Elogphi``: the
    objective and the fitted attributes) is built on first use. The statistics S are kept
    (one K x V array, the size of the table they replace) and must not change while the
    parameters are in use.
    """

    #: sum_v lambda_kv of a stored lambda, for :meth:`log_weights` (computed once); kept apart
    #: from :meth:`lam_sums`, the same totals summed from the statistics, so each keeps its bits
    _lam_total = None

    @classmethod
    def from_stats(cls, S, tau, n_threads=1):
        self = cls.__new__(cls)
        self._lam = None
        self._S, self._tau = S, float(tau)
        self._n_threads = n_threads
        self._tables = None
        self._lamsum = None
        return self

    def _set_table(self, CT):
        self._tables = TopicTables.from_transposed(CT)

    @property
    def tables(self):
        if self._tables is None:
            self._set_table(self._table_by_rows(*self.shape))
        return self._tables

    @property
    def Elogphi(self):
        return self.tables.CT.T

    @property
    def shape(self):
        return (self._lam if self._lam is not None else self._S).shape

    def release(self):
        self._tables = None

    def lam_sums(self):
        """sum_v lambda_kv = sum_v max(S_kv, 0) + V tau, (K,), computed once, by blocks of
        topics (no K x V temporary)."""
        if self._lamsum is None:
            K, V = self.shape
            # set once complete: a caller on another thread never reads a partial array
            if self._lam is not None:
                self._lamsum = self._lam.sum(axis=1)
            else:
                lamsum = np.empty(K)

                def block(ab):
                    a, b = ab
                    rows = self._S[a:b]
                    rows = rows.toarray() if sp.issparse(rows) else rows
                    lamsum[a:b] = np.maximum(rows, 0.0).sum(axis=1) + V * self._tau

                map_blocks(block, _row_blocks(K, V), self._n_threads)
                self._lamsum = lamsum
        return self._lamsum

    def log_weights(self, cols, exclude=None, mean=False):
        """Log word weights of the word types ``cols``, (len(cols), K), of
        lambda^{-b} = tau + max(S - S_b, 0), S_b the (K, V) statistics ``exclude`` (None: none
        excluded; their entries must lie in ``cols``): E[log phi_kv] = psi(lambda_kv) -
        psi(sum_u lambda_ku), or with ``mean`` the log posterior mean
        log E[phi_kv] = log lambda_kv - log sum_u lambda_ku."""
        cols = np.asarray(cols, dtype=np.int64)
        K, V = self.shape
        if self._lam is not None:
            Sc = self._lam[:, cols] - self._tau
            if self._lam_total is None:
                self._lam_total = self._lam.sum(axis=1)  # once for every call
            lamsum = self._lam_total
        else:
            Sc = self._S[:, cols]  # a new array (fancy indexing)
            Sc = Sc.toarray() if sp.issparse(Sc) else np.asarray(Sc, dtype=np.float64)
            lamsum = self.lam_sums()
        if exclude is not None:
            ex = sp.coo_array(exclude)
            ex.sum_duplicates()
            pos = np.searchsorted(cols, ex.col)
            pos[pos == cols.size] = 0
            if not np.array_equal(cols[pos], ex.col):
                raise ValueError("the excluded statistics lie outside the word types")
            removed = excluded_mass(ex.row, ex.data, Sc[ex.row, pos], K)
            Sc[ex.row, pos] -= ex.data
            lamsum = np.maximum(lamsum - removed, V * self._tau)
        np.maximum(Sc, 0.0, out=Sc)
        Sc += self._tau
        lam = Sc
        if mean:
            out = np.log(lam.T)
            out -= np.log(lamsum)[None, :]
            return out
        out = _except_tau(psi, lam, self._tau).T
        out -= psi(lamsum)[None, :]
        return out


class _MeanWeights:
    """The word weights of a continued chain: the posterior mean of the topics without the
    statistics ``exclude``, lambda^{-b} = tau + max(S - S_b, 0), for
    :func:`~sparseclust.topics._gibbs.gibbs_local_step` (:meth:`word_weights`), built in one
    pass over each of a batch's word rows
    (:func:`~sparseclust._kernels._gibbs_tables.mean_word_weights`) where the parameters keep
    dense statistics, else from :meth:`_CountParams.log_weights`."""

    def __init__(self, params, exclude):
        self.params, self.exclude = params, exclude

    @property
    def n_topics(self):
        return self.params.shape[0]

    def word_weights(self, cols, n_threads=1):
        """float32 (len(cols), K) weights lambda^{-b}_kv / sum_u lambda^{-b}_ku of the word
        types ``cols`` (ascending), each row divided by its maximum."""
        cols = np.ascontiguousarray(cols, dtype=np.int64)
        p = self.params
        S = p._S
        if not (p._lam is None and isinstance(S, np.ndarray) and S.dtype == np.float64
                and S.flags.c_contiguous):
            return row_scaled_weights(p.log_weights(cols, exclude=self.exclude, mean=True))
        K, V = S.shape
        ex = sp.csc_array(self.exclude)
        ex.sum_duplicates()
        ptr = ex.indptr.astype(np.int64)
        ecol = np.repeat(np.arange(V), np.diff(ptr))
        inside = np.zeros(V, dtype=bool)
        inside[cols] = True
        if not inside[ecol].all():
            raise ValueError("the excluded statistics lie outside the word types")
        topics = np.ascontiguousarray(ex.indices, dtype=np.int32)
        vals = np.ascontiguousarray(ex.data, dtype=np.float64)
        removed = excluded_mass(topics, vals, S[topics, ecol], K)
        lamsum = np.maximum(p.lam_sums() - removed, V * p._tau)
        w = np.empty((cols.size, K), np.float32)
        _gibbs_tables.mean_word_weights(
            S, cols, ptr, topics, vals, p._tau, lamsum, w,
            threads_for_work(n_threads, cols.size * K, _MIN_WORK_PER_THREAD))
        return w


class _ScaledLogWeights:
    """The sampler's weights of a first visit: exp(E[log phi] - each word's maximum) as
    float32 (:func:`~sparseclust.topics._gibbs.row_scaled_weights`) of the batch's word
    types, from ``params.log_weights``. They are computed by blocks of word types that stay
    in cache, on ``n_threads`` Python threads (numpy and scipy.special release the GIL):
    every word's row is computed as from the whole array, so the bits do not depend on the
    blocks or the threads."""

    #: float64 entries (word types x topics) of one block
    BLOCK_ELEMS = 1 << 16

    def __init__(self, params):
        self.params = params

    @property
    def n_topics(self):
        return self.params.shape[0]

    def word_weights(self, cols, n_threads=1):
        cols = np.ascontiguousarray(cols, dtype=np.int64)
        K = self.n_topics
        w = np.empty((cols.size, K), np.float32)
        step = max(1, self.BLOCK_ELEMS // max(K, 1))

        def block(a):
            b = min(cols.size, a + step)
            w[a:b] = row_scaled_weights(self.params.log_weights(cols[a:b]))

        # the first block on this thread: what the parameters compute once for every call
        # (their lambda totals) is then in place before the threads read it
        starts = range(0, cols.size, step)
        if len(starts):
            block(starts[0])
        map_blocks(block, starts[1:], n_threads)
        return w


class _WeightTable:
    """The word weights of :class:`_MeanWeights` or :class:`_ScaledLogWeights` for every word
    type, (V, K) float32, for the partitions of a visit on Dask (each samples with the rows
    of its own word types)."""

    def __init__(self, table):
        self.table = table

    @property
    def n_topics(self):
        return self.table.shape[1]

    def word_weights(self, cols, n_threads=1):
        return self.table[np.asarray(cols, dtype=np.int64)]


class _LDAModel(VariationalModel):
    """LDA as local step + global step over additive statistics.

    Statistics (``SuffStats``): ``S`` (K, V) topic-word counts sum_d sum_u c_du r_duk at v_du,
    and ``elbo_local``, the documents' ELBO terms that do not involve the topics
    (c_Dir(alpha) - c_Dir(theta_d) - sum c r log r, Hughes & Sudderth 2016, Eq. 46-48).
    """

    def __init__(self, alpha, tau, L, local_opts, n_threads):
        self.alpha = alpha
        self.tau = float(tau)
        self.L = L
        self.local_opts = local_opts
        self.n_threads = n_threads
        # a batch's S is a (K, V) CSR array of the (k, v) pairs it touched (its size follows
        # the batch)
        self.counters = {"restarts_tried": 0, "restarts_accepted": 0, "local_iters": 0}

    def local_step(self, X, params):
        res = local_step(X, params.tables, self.alpha, L=self.L, n_threads=self.n_threads,
                         **self.local_opts)
        self.counters["restarts_tried"] += res.n_restarts_tried
        self.counters["restarts_accepted"] += res.n_restarts_accepted
        self.counters["local_iters"] += res.n_iter_total
        return SuffStats(S=res.topic_word_csr, elbo_local=res.elbo_local)

    def global_step(self, stats):
        # lambda = tau + max(S, 0), E[log phi] built by blocks of topics from S
        return _LDAParams.from_stats(stats["S"], self.tau, self.n_threads)

    def initial_params(self, init_stats):
        # the first pass only reads the table: do not keep the initial statistics alive
        params = self.global_step(init_stats)
        params._S = None
        return params

    def elbo(self, stats, params):
        """Whole-data ELBO (Hughes & Sudderth 2016, App. C):

        sum_d local terms + sum_kv S_kv E[log phi_kv]
        + sum_k [c_Dir(tau 1_V) - c_Dir(lambda_k) + sum_v (tau - lambda_kv) E[log phi_kv]]

        with c_Dir(a) = log Gamma(sum a) - sum log Gamma(a) (Eq. 49). When the parameters are
        those of these statistics, lambda = tau + max(S, 0), the two linear terms add up to
        sum_kv min(S_kv, 0) E[log phi_kv], and where S_kv < 0 (memoized subtraction leaves
        -1e-13 where a count is 0) lambda_kv = tau: the sum is
        sum_k [psi(tau) - psi(sum_v lambda_kv)] sum_v min(S_kv, 0), with no E[log phi] table.
        """
        K, V = params.shape
        tau = self.tau
        S = stats["S"]
        own = getattr(params, "_lam", None) is None and getattr(params, "_S", None) is S
        cdir_prior = gammaln(V * tau) - V * gammaln(tau)
        # by blocks of topics (no K x V temporaries), on the model's threads; the blocks' sums
        # are added in block order, as one thread adds them
        lg = np.empty(K)
        lsum = np.empty(K)
        neg = np.empty(K)

        def block(ab):
            a, b = ab
            Sa = S[a:b].toarray() if sp.issparse(S) else S[a:b]
            lam = params.lam_rows(a, b)
            lsum[a:b] = lam.sum(axis=1)
            lg[a:b] = _except_tau(gammaln, lam, tau).sum(axis=1)
            if own:
                neg[a:b] = np.minimum(Sa, 0.0).sum(axis=1)
                return 0.0, 0.0
            El = params.Elogphi[a:b]
            data = float(np.sum(Sa * El))
            lam *= -1.0
            lam += tau
            return data, float(np.sum(lam * El))

        data = glob_lin = 0.0
        for d, g in map_blocks(block, _row_blocks(K, V), self.n_threads):
            data += d
            glob_lin += g
        if own:  # data stays 0: both linear terms are in glob_lin
            glob_lin = float(np.dot(neg, psi(tau) - psi(lsum)))
        cdir_post = gammaln(lsum) - lg
        glob = K * cdir_prior - float(cdir_post.sum()) + glob_lin
        return float(stats["elbo_local"]) + data + glob


class _GibbsLDAModel(_LDAModel):
    """LDA with the sampled local step (Mimno, Hoffman & Blei 2012): the same global step and
    objective bookkeeping as :class:`_LDAModel`, statistics from :func:`gibbs_local_step`.

    ``elbo_local`` is sum_d log p(z_d | alpha) at the last sweep, so ``elbo`` is a Monte Carlo
    estimate of E_q[log p(x, z | alpha, phi)] + E_q[log p(phi) - log q(phi)] without the
    entropy of q(z) (the sampled q(z_d) has no closed form): it tracks training, but is not a
    lower bound and is not comparable with the variational step's ELBO.

    Local step number i (counted by ``calls``, starting at ``first_call``) draws from the
    streams keyed by (seed, i, document index in the batch).

    Stochastic steps keep the statistics as :class:`LazyTopicStats` (the sparse, lazily
    scaled update of Mimno, Hoffman & Blei 2012, App. A) and the local step reads E[log phi]
    of the minibatch's word types only (:class:`LazyParams`).

    With ``chains`` (on in a memoized :class:`SparseLDA` fit of a matrix or a Dask collection,
    see ``SparseLDA._keeps_chains``; on Dask through :meth:`state_job` / :meth:`state_part`,
    each partition's chain on its worker), training with two or more fixed batches keeps
    every batch's
    token assignments
    (``chains[b]``, 1 or 2 bytes per token) between visits: a revisit continues the batch's
    chain, its ``n_saved_sweeps`` sweeps all saved (burn-in on the first visit only), and samples
    with the topics of the other batches' statistics, lambda^{-b} = tau + max(S - S_b, 0)
    (the batch's own previous statistics excluded, as a collapsed sampler excludes the token
    it draws; with them included a continued chain reinforces its own assignments). These
    visits sample with the posterior mean of the topics instead of exp(E[log phi]):

        p(z_dn = k)  propto  (alpha_k + N_dk^{-dn}) lambda^{-b}_kv / sum_u lambda^{-b}_ku,

    the collapsed Gibbs conditional (Griffiths & Steyvers 2004) with the other batches'
    word-topic counts of their latest visit, each the average of its saved sweeps: a pass is
    one blocked sweep of the approximate distributed sampler of Newman et al. (2009), with a
    batch as the block. The posterior mean is the predictive probability of a word under
    q(phi_k) = Dir(lambda^{-b}_k); exp(E[log phi]) = exp(psi(lambda)) / exp(psi(sum lambda)),
    about (lambda - 1/2) / (sum lambda - 1/2), acts as a topic-word prior smaller by 1/2
    (Asuncion et al. 2009), which at tau = 0.1 suppresses a word in every topic where it
    has no count. A batch's first visit starts its chain from the sequential draw under
    exp(E[log phi]) of all statistics (the initial ones may hold the batch's own documents:
    k-means' do).

    In stochastic training of a matrix with ``chains`` (``fit_engine`` names every
    minibatch's rows through :meth:`before_step`), every *document* keeps its chain
    (:class:`~sparseclust.topics._gibbs.DocumentChains`): the minibatches are redrawn every
    pass, and a document's visit continues its chain with the topics of the stochastic
    statistics without the minibatch's own share, lambda^{-b} = tau + max(S_t - sum_{d in b}
    a_d n_d, 0), where a_d is the weight the step blend left on document d's earlier visits
    and n_d its word-topic counts at its last sweep (the posterior mean, as above). A
    document's first visit starts from the sequential draw under
    exp(E[log phi]) of all statistics, as above.

    Without ``chains``, and for a single batch, a minibatch that holds every document, or
    steps that name no rows (``partial_fit``), every visit starts afresh from the sequential
    draw under exp(E[log phi]) of all statistics (Mimno, Hoffman & Blei 2012).
    """

    #: the objective is a Monte Carlo estimate: memoized training's stopping rule compares
    #: means over windows of passes (a single pass-to-pass change can be small by chance)
    noisy_objective = True

    def __init__(self, alpha, tau, n_burnin, n_samples, seed, n_threads, first_call=0,
                 chains=True):
        super().__init__(alpha, tau, None, {}, n_threads)
        self.keep_chains = bool(chains)
        self.n_burnin = int(n_burnin)
        self.n_saved = int(n_samples)
        self.seed = int(seed)
        self.calls = int(first_call)
        self.chains = {}
        self.n_fixed = 0
        self._memo = None
        self._rows = self._stepped = self._doc_chains = None

    def local_step(self, X, params):
        rows, self._rows = self._rows, None
        if rows is None or not self.keep_chains:
            return self._sample(X, params, None)
        return self._sample_documents(X, params, rows)

    def before_step(self, X, rows):
        if rows is not None and self.keep_chains and self._doc_chains is None:
            self._doc_chains = DocumentChains(X)
        self._rows = rows

    def after_step(self, rho, scale):
        if self._doc_chains is not None:
            self._doc_chains.step(self._stepped, rho, scale)
        self._stepped = None

    def _sample_documents(self, X, params, rows):
        """Stochastic local step of the documents ``rows`` of the training data, continuing
        their chains (see the class docstring)."""
        ch = self._doc_chains
        pos = ch.positions(rows)
        z0 = ch.z[pos] if ch.continues(rows) else None
        own = None if z0 is None else ch.own_statistics(X, rows, z0, params.shape)
        res, stats = self._run(X, self._weights(params, own), z0, True)
        ch.store(rows, pos, res.z)
        self._stepped = rows
        return stats

    def _weights(self, params, own):
        """The sampler's word weights: for a revisit, the posterior mean of lambda^{-b} =
        tau + max(S - own, 0); for a first visit (``own`` None),
        E[log phi] of all statistics, which may hold the batch's own documents (the k-means
        initialisation does)."""
        if own is None:
            # lazily scaled parameters give the sampler's weights directly (a kernel pass)
            return params if isinstance(params, LazyParams) else _ScaledLogWeights(params)
        if isinstance(params, LazyParams):
            return params.excluding(own)

        return _MeanWeights(params, own)

    def _run(self, X, log_weights, z0, return_z, first=0):
        """One call of the sampled local step (local step number ``calls``), continuing the
        chain ``z0`` (None: a new one); returns its result and its statistics. ``first`` is
        the place in the batch of X's first document (the streams' document keys)."""
        keys = None if first == 0 else np.arange(first, first + X.shape[0], dtype=np.uint64)
        res = gibbs_local_step(X, log_weights, self.alpha, n_burnin=self.n_burnin,
                               n_samples=self.n_saved, seed=self.seed, sweep=self.calls,
                               n_threads=self.n_threads, z_init=z0, return_z=return_z,
                               keys=keys)
        self.calls += 1
        n_sweeps = self.n_saved + (0 if z0 is not None else 1 + self.n_burnin)
        self.counters["local_iters"] += n_sweeps * X.shape[0]
        return res, SuffStats(S=res.topic_word_csr, elbo_local=res.elbo_local)

    def before_pass(self, stats, params, state):
        # chains and batch exclusion need more than one fixed batch (see visit)
        self.n_fixed = len(state["batch_stats"])
        # a continued chain excludes its batch's previous statistics: the engine's cache of
        # them (only then referenced here, so that a fit without chains frees the cache when
        # training ends)
        self._memo = state["batch_stats"] if self.keep_chains else None

    def _previous(self, batch):
        """The statistics S of fixed batch ``batch`` at its latest visit, as the engine
        caches them (in memory or in files, ``memo_dir``); None before its first visit."""
        memo = self._memo
        if memo is None or batch >= len(memo):
            return None
        stats = memo[batch]
        return None if stats is None else stats["S"]

    def visit(self, X, params, batch):
        if not self.keep_chains or self.n_fixed < 2:
            return self._sample(X, params, None)
        return self._sample(X, params, batch)

    def _sample(self, X, params, batch):
        z0 = None if batch is None else self.chains.get(batch)
        old = None if batch is None else self._previous(batch)
        res, stats = self._run(X, self._weights(params, old), z0, batch is not None)
        if batch is not None:
            self.chains[batch] = res.z
        return stats

    # -- on a Dask collection (sparseclust._dask._core._DistributedModel): the chains of a
    # fixed batch stay on the workers, one per partition

    def _chained(self, batch):
        return batch is not None and self.keep_chains and self.n_fixed >= 2

    def state_job(self, params, batch):
        """What the tasks of a visit of fixed batch ``batch`` (None: a stochastic step) run:
        a copy of this model that draws from this local step's streams, and the word
        weights of :meth:`_weights` (a (V, K) table of E[log phi] or of the weights of a
        continued chain, or the lazily scaled parameters without their cached E[log phi]).
        Advances the count of local steps."""
        task = copy.copy(self)
        task.chains, task._memo, task._doc_chains = {}, None, None
        self.calls += 1
        if isinstance(params, LazyParams):
            weights = copy.copy(params)
            weights._El = None
        else:
            old = self._previous(batch) if self._chained(batch) else None
            weights = self._weights(params, old)
            every = np.arange(params.shape[1])
            if isinstance(weights, (_MeanWeights, _ScaledLogWeights)):
                weights = _WeightTable(weights.word_weights(every, self.n_threads))
        return task, (weights, self._chained(batch))

    def state_part(self, X, data, z0, first):
        """A partition's share of a visit (on a worker): its new chain (None when chains are
        not kept) and statistics; ``first`` is its first document's place in the batch."""
        weights, chained = data
        res, stats = self._run(X, weights, z0 if chained else None, chained, first=first)
        return res.z, stats

    def stochastic_update(self, state, batch_stats, rho, scale):
        # the engine's blend S <- (1 - rho) S + rho * scale * B, kept lazily scaled
        if not isinstance(state.stats, LazyTopicStats):
            state.stats = LazyTopicStats(state.stats["S"], state.stats["elbo_local"])
        state.stats.step(batch_stats["S"], batch_stats["elbo_local"], rho, scale)
        return LazyParams(state.stats, self.tau)

    def global_step(self, stats):
        if isinstance(stats, LazyTopicStats):
            return LazyParams(stats, self.tau)
        return _CountParams.from_stats(stats["S"], self.tau, self.n_threads)

    def initial_params(self, init_stats):
        # the statistics are kept instead of the E[log phi] table they would give (the same
        # size): the sampler reads the columns of a batch's word types from them
        return _CountParams.from_stats(init_stats["S"], self.tau, self.n_threads)
