# SPDX-License-Identifier: BSD-3-Clause
"""The token sampler of stochastic EM (:class:`sparseclust.topics.StochasticEMLDA`): token
layout, seeds, word weights and sampler tables, the Rao-Blackwellized counts, the sweep
loop and the pieces of one partition of a corpus (its initial assignments, a sweep, its
Rao-Blackwellized counts). Shared by the in-process fit (:mod:`sparseclust.topics._sem`), the
Gibbs local step (:mod:`sparseclust.topics._gibbs`) and the fit on Dask collections
(:mod:`sparseclust.topics._dask_sem`), which import it; it imports none of them.
"""

import threading
import time
from collections import namedtuple

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from .._kernels import _gibbs_tables, _rao_blackwell, _sampler, _sem_tables, _tokens
from ..utils._progress import Progress
from ..utils._threads import threads_for_work

#: token layout of a count matrix: CSR structure, tokens per entry and token offsets per document
TokenLayout = namedtuple("TokenLayout", "indptr indices cnt tokptr")

#: 'auto' uses the dense path up to this many topics and the sparse (alias) path above: the
#: dense path costs O(K) per token, the sparse one O(K_d) plus the upkeep of its tables, which
#: pays once K is large against the topics a document uses, and more so as the documents
#: concentrate on fewer topics over the sweeps (evidence: ``doc/benchmarks.md``)
DENSE_MAX_K = 48

#: above DENSE_MAX_K and up to DENSE_DOC_MAX_K topics, 'auto' draws the tokens of a document
#: whose assignments hold at least this share of the K topics at the start of a sweep with the
#: dense path: the sparse path's cost per token grows with the topics the document holds,
#: which a long document spreads over most of the K in the first sweeps, while the dense
#: path's blocked draw costs O(K) whatever the document; beyond DENSE_DOC_MAX_K the O(K) draw
#: costs more than the sparse one even on long documents
DENSE_DOC_TOPIC_SHARE = 0.5
DENSE_DOC_MAX_K = 200

#: work units (tokens, or table entries) per thread below which a kernel runs on fewer threads:
#: starting a parallel region costs more than such small work (results do not depend on it)
_MIN_WORK_PER_THREAD = 50_000

_EMPTY2F = np.zeros((0, 0), np.float32)
_EMPTY2I = np.zeros((0, 0), np.int32)
_EMPTY2D = np.zeros((0, 0))
_EMPTY1 = np.zeros(0)
_EMPTY_TABLES = (np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.uint16),
                 np.zeros(0, np.float32), np.zeros(0, np.uint16), _EMPTY1,
                 np.zeros(0, np.float32), np.zeros(0, np.int32))


def token_layout(X):
    """Tokens of the CSR count matrix X: entry (d, v) with count c_dv holds round(c_dv) tokens
    (fractional counts are rounded half up), laid out document by document in entry order."""
    indptr = np.ascontiguousarray(X.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(X.indices, dtype=np.int32)
    data = X.data
    if data.dtype not in (np.float32, np.float64):
        data = data.astype(np.float64)
    data = np.ascontiguousarray(data)
    cnt = np.empty(data.size, dtype=np.int32)
    tokptr = np.empty(indptr.size, dtype=np.int64)
    # one pass, no corpus-sized temporaries (they set the peak memory of fit)
    if not _tokens.token_counts(indptr, data, cnt, tokptr):
        raise ValueError("a count of X exceeds 2**31 - 1 tokens.")
    return TokenLayout(indptr, indices, cnt, tokptr)


def _seed(rng):
    """A 62-bit seed of the kernel's random streams drawn from a RandomState."""
    return (int(rng.randint(2**31)) << 31) | int(rng.randint(2**31))


def _z_dtype(K):
    """The smallest unsigned type that holds the topics 0..K-1 (1, 2 or 4 bytes per token)."""
    for dt in (np.uint8, np.uint16):
        if K <= np.iinfo(dt).max + 1:
            return dt
    return np.uint32


class _Sampler:
    """Word weights, sampler tables and one FROZEN sweep over a token layout.

    Two sources of word weights: counts (``set_weights_from_counts``, stochastic EM: w_vk =
    (W_vk + beta) / (T_k + V beta)) and general weights (``set_weights``, fold-in with fixed
    topics).  With counts and the sparse sampler, the sweep uses the three-part decomposition of
    :func:`_sampler.sample_sweep_counts` (per-word alias tables over the non-zero counts, one
    shared smoothing table): no (V, K) table is built.  Otherwise the (V, K) weights w are
    materialized and the sparse sampler uses per-word alias tables over all K topics
    (:func:`_sampler.build_alias`); the dense sampler evaluates every topic.
    """

    def __init__(self, V, K, alpha, dense, n_threads, live=False, exclude_own=False,
                 live_entry=False, mh_steps=0, dense_min_topics=0):
        self.V, self.K, self.dense, self.n_threads = V, K, dense, n_threads
        self.live, self.exclude_own, self.live_entry = live, exclude_own, live_entry
        self.mh_steps = mh_steps  # (the estimator and the kernel refuse it without live)
        # live exact draws of the sparse path: documents that hold at least this many topics
        # at the start of a sweep take the dense draws
        self.dense_min_topics = dense_min_topics
        self.alpha = np.full(K, alpha, dtype=np.float64)
        self.w = None
        self.prob, self.alias, self.Q = _EMPTY2F, _EMPTY2I, _EMPTY1
        self.counts = None  # (W, inv_tot, beta, tables) of the counts path

    def _weights(self):
        if self.w is None:
            self.w = np.empty((self.V, self.K), np.float32)
        return self.w

    def set_weights_from_counts(self, W, beta, word_totals=None, topic_totals=None,
                                joint=True):
        """Word weights from integer counts W (V, K) (the read buffer of the next sweep or
        block, kept by reference); returns log p(x | z, beta) (the topic part of the log
        joint), or None without ``joint`` (the dense path then skips its scan of W).

        ``word_totals`` (V,): the tokens of every word (the row sums of W), which bound the
        number of its non-zero counts; ``topic_totals`` (K,): the column sums of W; each is
        computed from W when None.
        """
        T = W.sum(axis=0, dtype=np.int64) if topic_totals is None else topic_totals
        inv_tot = 1.0 / (T + self.V * beta)
        word_ll = np.empty(self.V)
        nt = threads_for_work(self.n_threads, W.size, _MIN_WORK_PER_THREAD)
        if self.dense:
            # the dense counts path evaluates every topic from W: no tables
            self.counts = (W, inv_tot, float(beta), None, 0.0)
            if not joint:
                return None
            _sem_tables.word_loglik(W, beta, word_ll, nt)
        else:
            if word_totals is None:
                word_totals = W.sum(axis=1, dtype=np.int64)
            tables = self._word_tables(np.minimum(word_totals, self.K))
            wptr, wlen, wtop, wprob, walias, Qw, sprob, salias = tables
            Qs = _sem_tables.build_word_tables(W, inv_tot, beta, self.alpha, wptr, wlen, wtop,
                                               wprob, walias, Qw, sprob, salias, word_ll, nt)
            self.counts = (W, inv_tot, float(beta), tables, Qs)
            if not joint:
                return None
        return self._topic_log_joint(T, word_ll, beta)

    def _topic_log_joint(self, T, word_ll, beta):
        return float(self.K * gammaln(self.V * beta) - gammaln(T + self.V * beta).sum()
                     + word_ll.sum())

    def topic_log_joint(self, W, beta):
        """log p(x | z, beta) of integer counts W (V, K), the value
        :meth:`set_weights_from_counts` returns, without building weights or tables (for a
        caller that does not sample)."""
        word_ll = np.empty(self.V)
        _sem_tables.word_loglik(W, beta, word_ll,
                                threads_for_work(self.n_threads, W.size, _MIN_WORK_PER_THREAD))
        return self._topic_log_joint(W.sum(axis=0, dtype=np.int64), word_ll, beta)

    def _word_tables(self, slots):
        """Buffers of the per-word sparse tables with ``slots[v]`` entries for word v (reused
        while large enough)."""
        wptr = np.zeros(self.V + 1, np.int64)
        np.cumsum(slots, out=wptr[1:])
        n = int(wptr[-1])
        old = getattr(self, "_tables", None)
        if old is None or old[2].size < n:
            # topics and alias topics as uint16 when K <= 65535 (8 bytes per slot, not 12)
            tt = np.uint16 if self.K <= np.iinfo(np.uint16).max else np.int32
            old = (None, np.empty(self.V, np.int32), np.empty(n, tt),
                   np.empty(n, np.float32), np.empty(n, tt), np.empty(self.V),
                   np.empty(self.K, np.float32), np.empty(self.K, np.int32))
        self._tables = (wptr,) + old[1:]
        return self._tables

    def release_tables(self):
        """Drop the weights and tables (the sampler is rebuilt by the next set_weights*)."""
        self.counts = self.w = None
        self._tables = None
        self.prob, self.alias, self.Q = _EMPTY2F, _EMPTY2I, _EMPTY1

    def set_weights(self, phi_t):
        """w = phi^T given as a (V, K) array of topic-word probabilities."""
        self._weights()[:] = phi_t
        self.counts = None

    def build_tables(self):
        """Alias tables of general weights (the counts path builds its own tables in
        ``set_weights_from_counts``)."""
        if not self.dense and self.counts is None:
            if self.prob.shape != (self.V, self.K):
                self.prob = np.empty((self.V, self.K), np.float32)
                self.alias = np.empty((self.V, self.K), np.int32)
                self.Q = np.empty(self.V)
            _sampler.build_alias(self.w, self.alpha, self.prob, self.alias, self.Q,
                                 threads_for_work(self.n_threads, self.w.size,
                                                  _MIN_WORK_PER_THREAD))

    def sweep(self, lay, z, keys, seed, sweep, *, n_inner=1, n_burn=0, acc=None, Wout=None,
              ll_doc=None, seq_init=False):
        acc = _EMPTY2D if acc is None else acc
        Wout = _EMPTY2I if Wout is None else Wout
        ll_doc = _EMPTY1 if ll_doc is None else ll_doc
        nt = threads_for_work(self.n_threads, int(lay.tokptr[-1]) * n_inner, _MIN_WORK_PER_THREAD)
        if self.counts is not None:
            W, inv_tot, beta, tables, Qs = self.counts
            if tables is None:
                tables = _EMPTY_TABLES
            wptr, wlen, wtop, wprob, walias, Qw, sprob, salias = tables
            return _sampler.sample_sweep_counts(
                lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, keys, W, inv_tot, beta,
                self.alpha, wptr, wlen, wtop, wprob, walias, Qw, sprob, salias, Qs,
                n_inner, n_burn, seed, sweep, acc, Wout, ll_doc, nt, dense=self.dense,
                mode=_sampler.LIVE if self.live or seq_init else _sampler.FROZEN,
                exclude_own=self.exclude_own, live_entry=self.live_entry, seq_init=seq_init,
                mh_steps=self.mh_steps,
                dense_min_topics=self.dense_min_topics if self.live and not self.mh_steps else 0,
            )
        return _sampler.sample_sweep(
            lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, keys, self._weights(), self.alpha,
            self.prob, self.alias, self.Q, _sampler.FROZEN, self.dense, n_inner, n_burn,
            seed, sweep, acc, Wout, ll_doc, nt,
        )


class _RaoBlackwell:
    """Rao-Blackwellized word-topic counts R (V, K) float32 of assignments z (see
    :func:`_rao_blackwell.rb_doc_part`): every token contributes its collapsed conditional
    p(z_i = k | z_{-i}) instead of its sampled topic.

    Counts mode (``W``, the counts of the one z given): the conditional of stochastic EM, the
    token taken out of W and T.  Weights mode (``w`` (V, K) float32, fixed topics, as in a
    minibatch's fold-in): the sum over several z.
    """

    #: word blocks of the in-place form: one block's rows of float64 scratch at a time (an
    #: eighth of W's int32 buffer for 16 blocks; each block scans the corpus once)
    IN_PLACE_BLOCKS = 16

    def __init__(self, K, beta, alpha, n_threads, *, W=None, w=None, topic_totals=None):
        self.W = _EMPTY2I if W is None else W
        self.w = _EMPTY2F if w is None else w
        self.V = (W if W is not None else w).shape[0]
        self.K, self.beta, self.alpha, self.n_threads = K, float(beta), alpha, n_threads
        if W is not None and topic_totals is None:
            topic_totals = W.sum(axis=0, dtype=np.int64)
        self.inv = _EMPTY1 if W is None else 1.0 / (topic_totals + self.V * self.beta)
        self.A = np.empty(self.V)
        _rao_blackwell.rb_word_mass(self.W, self.w, self.inv, self.beta, alpha, self.A,
                                    threads_for_work(n_threads, self.V * K, _MIN_WORK_PER_THREAD))

    def sum(self, lay, zs, *, in_place=False):
        """R summed over the assignments in ``zs``: a new float64 array, or, with ``in_place``
        (counts mode), float32 written over the buffer of W (W is consumed; the words are
        processed in blocks, summed in float64, so the extra memory is one block's rows)."""
        if not in_place:
            return self.sum_over((lay, z) for z in zs)
        V, K = self.V, self.K
        nt = threads_for_work(self.n_threads, int(lay.tokptr[-1]), _MIN_WORK_PER_THREAD)
        dest = self.W.view(np.float32)
        n_blocks = min(self.IN_PLACE_BLOCKS, max(V, 1))
        for b in range(n_blocks):
            lo, hi = V * b // n_blocks, V * (b + 1) // n_blocks
            out = np.zeros((hi - lo, K))
            s = np.zeros(hi - lo)
            for z in zs:
                self._doc_part(lay, z, out, s, lo, nt)
            self._smooth_part(s, out, lo)
            dest[lo:hi] = out  # the rows of these words are not read again
        return dest

    def sum_over(self, pairs):
        """R summed over the (layout, assignments) ``pairs``, read one at a time (e.g. the
        partitions of one worker, each with its own layout): a new float64 array. The
        prior part is linear in the per-word sums, so it is added once, for all of them."""
        out = np.zeros((self.V, self.K))
        s = np.zeros(self.V)
        for lay, z in pairs:
            self._doc_part(lay, z, out, s, 0, threads_for_work(
                self.n_threads, int(lay.tokptr[-1]), _MIN_WORK_PER_THREAD))
        self._smooth_part(s, out, 0)
        return out

    def _doc_part(self, lay, z, out, s, lo, nt):
        _rao_blackwell.rb_doc_part(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, self.W,
                                   self.w, self.inv, self.beta, self.alpha, self.A, out, s, lo, nt)

    def _smooth_part(self, s, out, lo):
        _rao_blackwell.rb_smooth_part(self.W, self.w, self.inv, self.beta, self.alpha, s, out, lo,
                                      threads_for_work(self.n_threads, out.size,
                                                       _MIN_WORK_PER_THREAD))


#: the random stream (seed, _SEQ_SWEEP, key) of the sequential start (sweeps are 1, 2, ...;
#: 0 is the stream of the uniform assignments)
_SEQ_SWEEP = 1 << 62

#: the sequential start's first block is this fraction of the documents; each later block
#: is as large as all the blocks before it
_SEQ_FIRST = 1 / 128


def sequential_blocks(D):
    """Document boundaries of the blocks of the sequential start: [0, b_1), [b_1, b_2), ...
    with b_1 = ceil(D / 128) and b_{i+1} = min(2 b_i, D) (a function of D alone)."""
    b = [0, min(D, max(1, int(np.ceil(D * _SEQ_FIRST))))] if D > 0 else [0]
    while b[-1] < D:
        b.append(min(2 * b[-1], D))
    return b


def sweep_block_bounds(D, n_blocks):
    """Document boundaries of the blocks of a sweep (``StochasticEMLDA(sweep_blocks=B)``):
    ``[D i // B, D (i + 1) // B)`` for i < B, at most D blocks, none empty (a function of D
    and B alone, the same in-process and on Dask)."""
    B = max(1, min(int(n_blocks), D))
    return [D * i // B for i in range(B + 1)]


def _sub_layout(lay, d0, d1):
    """The token layout of documents d0..d1-1 (views of lay's arrays where possible) and the
    token range [t0, t1) of their tokens."""
    j0, j1 = int(lay.indptr[d0]), int(lay.indptr[d1])
    t0, t1 = int(lay.tokptr[d0]), int(lay.tokptr[d1])
    return TokenLayout(lay.indptr[d0:d1 + 1] - j0, lay.indices[j0:j1], lay.cnt[j0:j1],
                       lay.tokptr[d0:d1 + 1] - t0), t0, t1


def sequential_start(smp, lay, z, keys, seed, W, beta, *, sorted_words=False):
    """The sequential start of ``StochasticEMLDA(init='sequential')``: z and its word-topic
    counts W (zero on entry, (V, K) int32, written in place).

    The documents are processed in the blocks of :func:`sequential_blocks` in order. The
    first block keeps the uniform assignments z holds on entry and is counted into W. Every
    later block is drawn by one sequential pass (``sample_sweep_counts`` with ``seq_init``):
    each token given its document's earlier tokens and the counts W of all the blocks before
    it, p(z_dn = k) propto (alpha + n_dk^{<n}) (W_vk + e_k + beta) / (T_k + e_k + V beta),
    then counted into W. The documents of a block are independent (one thread each, streams
    keyed by (seed, _SEQ_SWEEP, key[d])), so z and W do not depend on the number of
    threads. Work: one sweep over the tokens plus one build of the word tables per block
    (about log2(128) + 1 = 8).
    """
    bounds = sequential_blocks(keys.size)
    nt = smp.n_threads
    V, K = W.shape
    # the row and column sums of W, kept up to date block by block (not summed from W)
    word_totals = np.zeros(V, np.int64)
    T = np.zeros(K, np.int64)
    for i in range(len(bounds) - 1):
        d0, d1 = bounds[i], bounds[i + 1]
        sub, t0, t1 = _sub_layout(lay, d0, d1)
        zb = z[t0:t1]
        if i > 0 and t1 > t0:
            smp.set_weights_from_counts(W, beta, word_totals, T)
            smp.sweep(sub, zb, keys[d0:d1], seed, _SEQ_SWEEP, seq_init=True)
        _tokens.count_words(sub.indptr, sub.indices, sub.cnt, sub.tokptr, zb, W,
                            threads_for_work(nt, t1 - t0, _MIN_WORK_PER_THREAD), T,
                            sorted_words=sorted_words)
        word_totals += np.bincount(sub.indices, weights=sub.cnt, minlength=V).astype(np.int64)
    smp.release_tables()
    return W


def run_sweeps(est, sweep, *, n_tokens, n_docs, rng, elapsed, callback, estimate):
    """The sweep loop of ``StochasticEMLDA.fit`` (in-process and on Dask): ``sweep(it)`` runs
    sweep ``it`` and returns ``(W, log joint, changed assignments)``. Records ``trace_``,
    stops when the log joint changes by less than ``tol`` per token or the callback returns
    True, and sets the fitted attributes from ``estimate(final=True)``, the word-topic counts
    of the topic estimate of the last assignments (``topic_estimate``)."""
    trace, prev, converged, W = [], None, False, None
    n_sweeps = est._passes()
    progress = Progress("StochasticEMLDA", n_sweeps) if est.verbose else None
    for it in range(1, n_sweeps + 1):
        t0 = time.perf_counter()
        W, ll, changed = sweep(it)
        dt = time.perf_counter() - t0
        elapsed += dt
        change = abs(ll - prev) / max(n_tokens, 1) if prev is not None else np.inf
        entry = {
            "sweep": it, "time": dt, "elapsed": elapsed,
            "tokens_per_s": n_tokens / dt if dt > 0 else np.inf,
            "log_joint": ll, "log_joint_change": change, "changed": int(changed),
        }
        trace.append(entry)
        prev = ll
        if progress is not None:
            progress(dict(entry, n_passes=n_sweeps),
                     f"changed {changed}  {entry['tokens_per_s']:.3g} tokens/s")
        # the callback sees every sweep, the converged one too (as the engine's callback of
        # the other estimators sees every pass)
        if callback is not None:
            stop = callback(dict(entry, n_passes=n_sweeps, word_topic_counts=W,
                                 topic_estimate=estimate, **{"pass": it}))
        else:
            stop = False
        if est.tol > 0 and change < est.tol:
            converged = True
            break
        if stop:
            break
    est._set_topics(estimate(final=True))
    est.trace_ = trace
    est.n_iter_ = len(trace)
    est.n_batch_iter_ = 0
    est._rng = rng
    est.converged_ = converged
    est.lower_bounds_ = [e["log_joint"] for e in trace]
    est.lower_bound_ = trace[-1]["log_joint"]
    est._n_samples_fit = n_docs
    est._t = None
    return est


def init_partition(part, offset, seed, K, n_threads):
    """Uniform initial assignments of one partition of a corpus (a block of rows whose first
    document is ``offset``: keys offset..offset+D-1, as in one process) and their word-topic
    counts; returns (z, (counts as sparse int64, word totals, tokens)). The partition pieces
    of a fit on a Dask collection (:mod:`sparseclust.topics._dask_sem`)."""
    D, V = part.shape
    lay = token_layout(part)
    N = int(lay.tokptr[-1])
    keys = np.arange(offset, offset + D, dtype=np.uint64)
    z = np.empty(N, dtype=_z_dtype(K))
    nt = threads_for_work(n_threads, N, _MIN_WORK_PER_THREAD)
    _tokens.random_assign(lay.tokptr, z, keys, seed, K, nt)
    totals = np.bincount(lay.indices, weights=lay.cnt, minlength=V).astype(np.int64)
    return z, (_sparse_counts(lay, z, V, K, nt), totals, N)


def _sparse_counts(lay, z, V, K, n_threads):
    """The word-topic counts (V, K) of the assignments z of a token layout, as a sparse int64
    array built word by word from the tokens: no dense V x K array to fill and convert (for a
    partition of a large vocabulary that cost more than its sweep)."""
    jptr, topics, counts = _gibbs_tables.count_word_topics(
        lay.indices, lay.cnt, z.astype(np.int32)[:, None], V, K, n_threads)
    return sp.csr_array((counts.astype(np.int64), topics, jptr), shape=(V, K))


#: the sampler of the latest whole-data counts W in this process (a Dask worker): its
#: weights and word tables are built once per round (a sweep, or a block of one) for every
#: partition the worker sweeps
_SWEEP_SAMPLER = {"key": None, "sampler": None}
_SWEEP_SAMPLER_LOCK = threading.Lock()


def _sweep_sampler(W, word_totals, sampler_args, beta):
    """The sampler of the counts W for :func:`sweep_partition`, built by the first partition
    of a round that this process runs and shared by the others (the sweep reads its tables
    and W only, so threads may share it). It keeps W and the tables until the next round's
    counts replace them or :func:`release_sweep_sampler` drops them."""
    key = (tuple(sampler_args), float(beta))
    with _SWEEP_SAMPLER_LOCK:
        smp = _SWEEP_SAMPLER["sampler"]
        # the sampler holds the counts it was built from (``counts[0]``)
        if smp is None or smp.counts[0] is not W or _SWEEP_SAMPLER["key"] != key:
            _SWEEP_SAMPLER["key"] = _SWEEP_SAMPLER["sampler"] = None
            smp = _Sampler(W.shape[0], *sampler_args)
            smp.set_weights_from_counts(W, beta, word_totals)
            _SWEEP_SAMPLER["key"], _SWEEP_SAMPLER["sampler"] = key, smp
        return smp


def release_sweep_sampler():
    """Drop this process's shared sweep sampler (run on every worker when a fit ends)."""
    with _SWEEP_SAMPLER_LOCK:
        _SWEEP_SAMPLER["key"] = _SWEEP_SAMPLER["sampler"] = None


def sweep_partition(part, z, offset, W, word_totals, sampler_args, beta, seed, sweep,
                    block=None):
    """One stochastic-EM sweep of one partition reading the whole-data counts W, over its
    documents in the whole collection's range ``block = (d0, d1)`` (None: all of them; a
    partition without any keeps its assignments): returns (new z, (new word-topic counts of
    all its documents as sparse int64, log-likelihood of the documents swept, tokens that
    changed topic))."""
    D, V = part.shape
    lay = token_layout(part)
    lo, hi = (0, D) if block is None else (min(max(block[0] - offset, 0), D),
                                           min(max(block[1] - offset, 0), D))
    z = z.copy()  # the previous assignments stay valid (Dask may recompute from them)
    ll_doc = np.zeros(hi - lo)
    changed = 0
    if hi > lo:
        smp = _sweep_sampler(W, word_totals, sampler_args, beta)
        keys = np.arange(offset + lo, offset + hi, dtype=np.uint64)
        sub, t0, t1 = _sub_layout(lay, lo, hi)
        changed = smp.sweep(sub, z[t0:t1], keys, seed, sweep, ll_doc=ll_doc)
    counts = _sparse_counts(lay, z, V, W.shape[1],
                            threads_for_work(sampler_args[3], z.size, _MIN_WORK_PER_THREAD))
    return z, (counts, float(ll_doc.sum()), int(changed))


def rao_blackwell_partitions(W, beta, alpha, n_threads, *parts_and_zs):
    """The Rao-Blackwellized word-topic counts (V, K) float64 of several partitions'
    assignments given the whole-data counts W (``StochasticEMLDA(topic_estimate=
    'rao_blackwell')``), summed into one array: ``parts_and_zs`` alternates a partition and
    its assignments (the partitions of one worker, whose layouts are built one at a time).
    The workers' arrays are summed in float64, kept as float32 as in-process."""
    pairs = ((token_layout(parts_and_zs[i]), parts_and_zs[i + 1])
             for i in range(0, len(parts_and_zs), 2))
    return _RaoBlackwell(W.shape[1], beta, alpha, n_threads, W=W).sum_over(pairs)
