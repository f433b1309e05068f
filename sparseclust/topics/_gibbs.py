# SPDX-License-Identifier: BSD-3-Clause
"""The sampled (hybrid SVI-Gibbs) local step of LDA (Mimno, Hoffman & Blei 2012, Sec. 2.2).

For every document d of a batch, with the topics fixed at q(phi) = prod_k Dir(lambda_k), the
local posterior is collapsed over the document's topic proportions and sampled: Gibbs sweeps
over the document's tokens draw

    z_dn = k  with probability  propto  (alpha_k + N_dk^{-dn}) w_{v_dn k},
    w_vk = exp(E_q[log phi_kv]) = exp(psi(lambda_kv) - psi(sum_u lambda_ku)),

(Eq. 9 of the paper), where N_dk^{-dn} counts the document's other tokens assigned to topic k.
The chain starts from the sequential draw p(z_dn = k) propto (alpha_k + sum_{m < n}
[z_dm = k]) w_{v_dn k} (the paper's initialisation), discards ``n_burnin`` sweeps and saves
``n_samples``; the statistics are the averages over the saved sweeps of the topic-word counts,

    S_kv = (1 / n_samples) sum_s sum_d sum_n [z_dn^s = k] [v_dn = v]        (Eq. 10),

returned as the (K, V) sparse per-batch statistics of the variational local step, so every
learning algorithm of the engine runs either step.

The sweeps are those of the shared token sampler (:mod:`sparseclust._kernels._sampler`, LIVE
mode): per-document counter-based random streams keyed by (seed, sweep, key), so the result is
bit-identical for any number of threads; for K above :data:`DENSE_MAX_K` a draw costs
O(topics of the document): an exact scan over the document's topics plus an alias draw from the
word part alpha_k w_vk. The word weights are built for the batch's own word types only, from
the parameters' E[log phi], scaled per word by exp(-max_k E[log phi_kv]) (a per-word constant
does not change the conditional of that word's tokens). With the lazily scaled statistics of
stochastic training (:class:`LazyParams`), the weights come from one kernel pass per word, and
while the statistics are sparse the word part is split (App. A): w_vk = s_v e_k + x_vk, with
e_k = exp(psi(tau) - psi(V tau + T_k)) the prior's share of topic k and x_vk > 0 only where
the statistics of (k, v) are positive, so its tables are one shared table over alpha_k e_k and
one per word over its topics with statistics (instead of an alias table over all K topics per
word), listed from the bit sets of the statistics, and the document part reads w_vk from the
word's list. The saved sweeps' counts are gathered word by word from the assignments. So no
(V_batch, K) array is built: a minibatch costs O(K / 64) per word type plus O(listed topics)
plus the sweeps, whose cost per token does not grow with K.

Counts are rounded to whole tokens (half up), as by the stochastic-EM estimator.

A chain can be continued (``z_init``, the ``z`` returned by an earlier call on the same
documents with ``return_z``): the sweeps then start from those assignments, with no
initialising sweep and no burn-in. Memoized training continues each batch's chain with the
log weights of the posterior mean of the other batches' topics (a collapsed sampler's
conditional; ``SparseLDA``'s ``_GibbsLDAModel``), which any ``log_weights`` can express.
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import psi

from .._kernels import _gibbs_tables, _sampler
from ..utils import effective_n_threads
from ..utils._threads import threads_for_work
from ._local import stats_csr, stats_csr_from_columns
from ._sem_sampler import (
    _EMPTY1,
    _EMPTY2D,
    _EMPTY2F,
    _EMPTY2I,
    _MIN_WORK_PER_THREAD,
    DENSE_MAX_K,
    _z_dtype,
    token_layout,
)

__all__ = ["DocumentChains", "GibbsResult", "LazyParams", "LazyTopicStats", "gibbs_local_step"]


#: tokens sampled at once: a batch's documents are swept in blocks of about this many tokens
#: (a document is never split), so that the saved sweeps' assignments and their counting,
#: about (8 + 12 n_samples) bytes a token, take memory bounded by the block, not by the
#: batch (the batch's assignments, token layout and summed counts still grow with it). The
#: draws of a document depend on its stream key only, and the blocks' counts are whole
#: numbers summed exactly, so the result does not depend on the blocks.
BLOCK_TOKENS = 1 << 20


class _BinarySums:
    """The sum of sparse integer count blocks added one at a time, as a binary counter: a
    new block is added to the pending sum of as many blocks, and so on up, so each count is
    added about log2(blocks) times (instead of once per later block, were every block added
    to one running total). Sums of integers are exact in any order."""

    def __init__(self):
        self._levels = []  # (number of blocks, their sum), fewer blocks further on

    def add(self, block):
        n = 1
        while self._levels and self._levels[-1][0] == n:
            block = self._levels.pop()[1] + block
            n *= 2
        self._levels.append((n, block))

    def total(self):
        levels, self._levels = self._levels, []
        out = levels.pop()[1]
        while levels:
            out = levels.pop()[1] + out
        return out


def _document_blocks(tokptr, max_tokens):
    """Ranges (a, b) of consecutive documents covering all of them, each holding at most
    ``max_tokens`` tokens or a single document (tokptr: the documents' token offsets)."""
    D = tokptr.size - 1
    a = 0
    while a < D:
        # the first document whose end lies beyond the block's budget closes the block
        b = int(np.searchsorted(tokptr, tokptr[a] + max_tokens, side="right")) - 1
        b = min(max(b, a + 1), D)
        yield a, b
        a = b


@dataclass
class GibbsResult:
    """Output of :func:`gibbs_local_step`.

    Attributes
    ----------
    topic_word_csr : scipy.sparse.csr_array (K, V)
        S_kv, the saved sweeps' average topic-word counts.
    elbo_local : float
        sum_d log p(z_d | alpha) at the last sweep, log p(z_d | alpha) = log Gamma(sum_k
        alpha_k) - log Gamma(N_d + sum_k alpha_k) + sum_k [log Gamma(N_dk + alpha_k) - log
        Gamma(alpha_k)]: a one-sample estimate of E_q[log p(z | alpha)].
    doc_topic : ndarray (D, K) or None
        The saved sweeps' average document-topic counts N_dk.
    n_tokens : int
    z : ndarray of uint8, uint16 or uint32 (the smallest that holds K topics) (n_tokens,) or None
        The token assignments after the last sweep, in the token order of
        :func:`~sparseclust.topics._sem.token_layout` (with ``return_z``): the chain state a
        later visit of the same documents continues from (``z_init``).
    """

    topic_word_csr: object
    elbo_local: float
    doc_topic: object
    n_tokens: int
    z: object = None


def gibbs_local_step(X, log_weights, alpha, *, n_burnin, n_samples, seed, sweep, keys=None,
                     dense=None, return_doc_topic=False, n_threads=None, z_init=None,
                     return_z=False):
    """Sampled local step over the documents of the CSR count matrix X (see the module
    docstring).

    Parameters
    ----------
    X : scipy.sparse CSR matrix or array (D, V)
        Non-negative word counts (rounded half up to whole tokens).
    log_weights : ndarray (V, K), callable, LazyParams or word-weight object
        E[log phi] in the (V, K) layout (e.g. ``TopicTables.CT``), ``cols -> (len(cols), K)``
        giving its rows for the word types ``cols``, :class:`LazyParams`, whose kernel
        gives the scaled weights exp(E[log phi]) (and the split word tables) directly, or an
        object with ``n_topics`` and ``word_weights(cols, n_threads)`` giving the weights
        (not their logarithms) of the word types ``cols``, each row scaled to maximum 1.
    alpha : float
        Symmetric document-topic prior alpha_k = alpha.
    n_burnin, n_samples : int
        Discarded and saved sweeps (after the initialising sweep).
    seed, sweep : int
        Random streams: document d draws from the stream keyed by (seed, sweep, keys[d]).
    keys : ndarray of uint64 (D,) or None
        Stream keys; None means the row indices 0..D-1.
    dense : bool or None
        Evaluate all K topics per draw (True) or the sparse path (False): the document's
        topics, then, in the rare case the draw falls in the word part alpha_k w_vk, the
        word's alias table, or a scan of its K weights where sum_k alpha_k <=
        ``SCAN_MAX_PRIOR`` (no tables to build). None means dense up to K = ``DENSE_MAX_K``.
        The paths draw from the same distribution.
    return_doc_topic : bool
        Also return the average document-topic counts.
    n_threads : int or None
        OpenMP threads; the result does not depend on it.
    z_init : ndarray of int (n_tokens,) or None
        Continue the chain from these assignments (the ``z`` of an earlier call on the same
        X): no initialising sweep and no burn-in, the ``n_samples`` sweeps are all saved.
        None starts from the sequential draw and discards ``n_burnin`` sweeps. Not modified.
    return_z : bool
        Also return the assignments after the last sweep (``GibbsResult.z``).

    Returns
    -------
    GibbsResult
    """
    if int(n_burnin) != n_burnin or n_burnin < 0:
        raise ValueError(f"n_burnin must be an integer >= 0, got {n_burnin!r}.")
    if int(n_samples) != n_samples or n_samples < 1:
        raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}.")
    D, V = X.shape
    lay = token_layout(X)
    n_tok = int(lay.tokptr[-1])
    cols = np.flatnonzero(np.bincount(lay.indices, weights=lay.cnt, minlength=V))
    nt_all = effective_n_threads(n_threads)
    w = Lw = split = None
    if isinstance(log_weights, LazyParams):
        K = log_weights.stats.shape[0]
        if dense is None:
            dense = K <= DENSE_MAX_K
        if dense:
            w = log_weights.word_weights(cols, nt_all)
        else:
            w, split = log_weights.split_tables(cols, np.full(K, float(alpha)), nt_all)
    elif hasattr(log_weights, "word_weights"):
        K = log_weights.n_topics
        w = log_weights.word_weights(cols, nt_all)
    else:
        if callable(log_weights):
            Lw = np.asarray(log_weights(cols), dtype=np.float64)
        else:
            Lw = np.asarray(log_weights, dtype=np.float64)[cols]
        K = Lw.shape[1]
    if keys is None:
        keys = np.arange(D, dtype=np.uint64)
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    doc_topic = np.zeros((D, K)) if return_doc_topic else None
    if z_init is not None:
        z_init = np.asarray(z_init)
        if z_init.shape != (n_tok,):
            raise ValueError(f"z_init has shape {z_init.shape}; X holds {n_tok} tokens.")
        if n_tok and (z_init.min() < 0 or z_init.max() >= K):
            raise ValueError(f"z_init must hold topics in [0, {K}).")
    if n_tok == 0:
        z = np.empty(0, dtype=_z_dtype(K)) if return_z else None
        return GibbsResult(stats_csr(np.zeros((0, K)), cols[:0], V), 0.0, doc_topic, 0, z)
    if split is not None:
        if not (np.all(np.isfinite(split.Qw)) and np.all(np.isfinite(split.sv))
                and np.all(split.sv >= 0) and np.isfinite(split.Qs) and split.Qs > 0):
            raise ValueError("E[log phi] must be finite.")
    elif not np.all(np.isfinite(Lw if w is None else w)):
        raise ValueError("E[log phi] must be finite.")
    # batch-local word ids; the weights of the batch's word types only
    row_of = np.full(V, -1, dtype=np.int64)
    row_of[cols] = np.arange(cols.size)
    indices = np.ascontiguousarray(row_of[lay.indices], dtype=np.int32)
    keep = lay.cnt > 0
    if not keep.all():  # entries rounded to no token: any word id of the batch will do
        indices[~keep] = 0
    if w is None and split is None:
        w = row_scaled_weights(Lw)
        del Lw
    alpha_v = np.full(K, float(alpha))
    if dense is None:
        dense = K <= DENSE_MAX_K
    if dense or split is not None:
        prob, alias, Q = _EMPTY2F, _EMPTY2I, _EMPTY1
        if w is None:
            w = np.empty((0, K), np.float32)
    elif K * float(alpha) <= SCAN_MAX_PRIOR:
        # the word part alpha w_v. holds at most one pseudo-token's weight, so it is rarely
        # drawn: a scan of the word's row then costs less than building its alias table
        prob, alias = _EMPTY2F, _EMPTY2I
        Q = float(alpha) * w.sum(axis=1, dtype=np.float64)
    else:
        prob = np.empty(w.shape, np.float32)
        alias = np.empty(w.shape, np.int32)
        Q = np.empty(cols.size)
        _sampler.build_alias(w, alpha_v, prob, alias, Q,
                             threads_for_work(nt_all, w.size, _MIN_WORK_PER_THREAD))
    acc = doc_topic if return_doc_topic else _EMPTY2D
    ll = np.empty(D)
    if z_init is None:
        z = np.empty(n_tok, dtype=_z_dtype(K))
        n_burn = 1 + int(n_burnin)
    else:
        z = np.array(z_init, dtype=_z_dtype(K))
        n_burn = 0
    n_inner = n_burn + int(n_samples)
    sums = _BinarySums()
    for a, b in _document_blocks(lay.tokptr, BLOCK_TOKENS):
        # the documents a:b, their entries e0:e1 and tokens t0:t1, with offsets from 0
        e0, e1, t0, t1 = lay.indptr[a], lay.indptr[b], lay.tokptr[a], lay.tokptr[b]
        ind, cnt = indices[e0:e1], lay.cnt[e0:e1]
        n_blk = int(t1 - t0)
        zsave = np.empty((n_blk, int(n_samples)), np.int32)
        _sampler.sample_sweep(
            lay.indptr[a:b + 1] - e0, ind, cnt, lay.tokptr[a:b + 1] - t0, z[t0:t1], keys[a:b],
            w, alpha_v, prob, alias, Q, _sampler.LIVE, bool(dense), n_inner, n_burn,
            int(seed), int(sweep), acc[a:b] if return_doc_topic else acc, _EMPTY2I, ll[a:b],
            threads_for_work(nt_all, n_blk * n_inner, _MIN_WORK_PER_THREAD),
            seq_init=z_init is None, split=split, zsave=zsave,
        )
        # the saved sweeps' word-topic counts, word by word (no (|cols|, K) table)
        jptr, topics, counts = _gibbs_tables.count_word_topics(
            ind, cnt, zsave, cols.size, K,
            threads_for_work(nt_all, n_blk * int(n_samples), _MIN_WORK_PER_THREAD))
        del zsave
        sums.add(sp.csc_array((counts, topics, jptr), shape=(K, cols.size)))
    total = sums.total()
    # averaged over the saved sweeps: S depends on the (word, topic) counts only, not on the
    # order of a word's topics
    S = stats_csr_from_columns(total.data / float(n_samples), total.indices, total.indptr,
                               cols, V, K)
    del total, sums
    if return_doc_topic:
        doc_topic /= float(n_samples)
    return GibbsResult(S, float(ll.sum()), doc_topic, n_tok, z if return_z else None)


def row_scaled_weights(log_weights):
    """The sampler's float32 weights exp(log_weights - each row's maximum), from log word
    weights (n, K) (overwritten): a per-word constant does not change the conditional of
    that word's tokens, and every row's largest weight is 1."""
    if log_weights.size:
        log_weights -= log_weights.max(axis=1, keepdims=True)
    return np.exp(log_weights).astype(np.float32)


#: the sparse path draws the word part by a scan of the word's weights, without alias
#: tables, while the document-topic prior's total sum_k alpha_k is at most this
SCAN_MAX_PRIOR = 1.0

#: LazyTopicStats renormalises its stored values when the scale factor falls below this
RESCALE_BELOW = 1e-100

#: the sampled local step splits a word's weights into a shared and a per-word table only
#: while at most this fraction of the minibatch's (word, topic) statistics are positive
SPLIT_MAX_FILL = 0.5


def excluded_mass(topics, excluded, held, K):
    """Per topic, sum_v max(S_kv, 0) - sum_v max(S_kv - E_kv, 0) for statistics E >= 0 given
    by their entries (``topics``, ``excluded``) and S at those entries (``held``): the sum of
    min(E_kv, max(S_kv, 0)), so that the totals of max(S - E, 0) are exact where E exceeds
    S."""
    return np.bincount(topics, weights=np.minimum(excluded, np.maximum(held, 0.0)),
                       minlength=K)


class LazyTopicStats:
    """Stochastic-step topic-word statistics with lazy scaling (Mimno, Hoffman & Blei 2012,
    App. A).

    The stochastic step S_t = (1 - rho_t) S_{t-1} + rho_t c B_t (c = total / batch size, B_t
    the minibatch's sparse statistics) is kept as S_t = pi_t U_t with pi_t = (1 - rho_t)
    pi_{t-1}: only the scale changes for every (k, v),

        U_t = U_{t-1} + (rho_t c / pi_t) B_t,

    so a step writes the (k, v) entries the minibatch sampled, plus O(K) for the topic totals
    T_k = sum_v S_kv (updated by the same recurrence) and the scalar terms. When pi_t falls
    below :data:`RESCALE_BELOW`, U is multiplied by pi_t and pi_t reset to 1 (O(K V), rare:
    pi_t decays like exp(-sum_t rho_t)); a step with rho_t = 1 forgets U entirely.

    U is stored word-major, ``UT`` = U^T of shape (V, K), so that the local step's read of a
    minibatch's word types (:meth:`columns_t`) copies contiguous rows: from a (K, V) array the
    same read gathers K strided entries per word, which at K = 1000 cost more than sampling
    the minibatch. ``bits`` (V, ceil(K / 64)) holds the bit set of the positive entries of
    every row of UT (kept by :meth:`step`, which only adds to U: a bit is cleared only when
    a step forgets U), so the split word tables list a word's topics with statistics in
    O(K / 64) instead of a pass over its row.

    Read as a :class:`SuffStats` (``stats["S"]`` gives S dense, ``stats["elbo_local"]`` the
    blended local terms) by the objective, which the engine evaluates once per pass.
    """

    def __init__(self, S, elbo_local):
        S = S.toarray() if sp.issparse(S) else np.asarray(S, dtype=np.float64)
        # always a copy: for K = 1 or V = 1, S.T is already contiguous, and step() writes
        # into UT
        self.UT = np.array(S.T, dtype=np.float64, order="C", copy=True)
        V, K = self.UT.shape
        self.bits = np.zeros((V, (K + 63) // 64), np.uint64)
        _gibbs_tables.positive_bits(self.UT, self.bits, 1)
        self.pi = 1.0
        self.totals = self.UT.sum(axis=0)
        self.elbo_local = float(elbo_local)
        self.n_rescaled = 0

    @property
    def shape(self):
        V, K = self.UT.shape
        return K, V

    def step(self, B, elbo_local, rho, scale):
        """S <- (1 - rho) S + rho * scale * B, elbo_local likewise."""
        B = sp.csr_array(B)
        if not B.has_canonical_format:
            B = B.copy()
            B.sum_duplicates()
        keep = 1.0 - rho
        c = rho * scale
        if keep <= 0.0:
            self.UT.fill(0.0)
            self.bits.fill(0)
            self.pi = 1.0
        else:
            self.pi *= keep
            if self.pi < RESCALE_BELOW:
                self.UT *= self.pi
                self.pi = 1.0
                self.n_rescaled += 1
        rows = np.repeat(np.arange(B.shape[0], dtype=np.int64), np.diff(B.indptr))
        flat = self.UT.reshape(-1)
        # (k, v) of B is U^T[v, k]; a CSR array has no duplicate (k, v) pairs here
        flat[B.indices.astype(np.int64) * B.shape[0] + rows] += (c / self.pi) * B.data
        pos = B.data > 0
        _gibbs_tables.set_bits(self.bits, rows[pos].astype(np.int32),
                               B.indices[pos].astype(np.int32))
        self.totals *= max(keep, 0.0)
        self.totals += c * np.bincount(rows, weights=B.data, minlength=B.shape[0])
        self.elbo_local = max(keep, 0.0) * self.elbo_local + c * float(elbo_local)

    def rows(self, a, b):
        """S for topics a..b-1 (a new C-contiguous array)."""
        out = np.empty((b - a, self.UT.shape[0]))
        np.multiply(self.UT[:, a:b].T, self.pi, out=out)
        return out

    def columns_t(self, cols):
        """S[:, cols]^T (a new (len(cols), K) array)."""
        out = self.UT[cols]
        out *= self.pi
        return out

    def dense(self):
        return self.rows(0, self.UT.shape[1])

    # the SuffStats interface the objective and the estimator read
    def __getitem__(self, key):
        if key == "S":
            return self.dense()
        if key == "elbo_local":
            return self.elbo_local
        raise KeyError(key)

    def __contains__(self, key):
        return key in ("S", "elbo_local")

    def keys(self):
        return ("S", "elbo_local")


class LazyParams:
    """Topic parameters lambda = tau + S of :class:`LazyTopicStats`, evaluated where read.

    The sampled local step reads E[log phi] of a minibatch's word types only,
    ``log_weights(cols)`` = psi(tau + S_{:, cols}) - psi(V tau + T) (O(K |cols|)); the dense
    ``lam`` and ``Elogphi`` (K, V) are built on first use (the objective at the end of a pass
    and the fitted attributes).
    """

    #: the weights are the log posterior mean of the topics instead of E[log phi]
    mean = False
    #: (K, V) CSR statistics subtracted from S where the weights are read (see excluding)
    excluded = None

    def __init__(self, stats, tau):
        self.stats = stats
        self.tau = float(tau)
        K, V = stats.shape
        self._norm = psi(V * self.tau + np.maximum(stats.totals, 0.0))
        self._El = None

    def excluding(self, exclude):
        """The weights of lambda^{-b} = tau + max(S - S_b, 0) with S_b the (K, V) statistics
        ``exclude`` (sparse, >= 0), as the log posterior mean log(lambda^{-b}_kv) -
        log(sum_u lambda^{-b}_ku): a read-only view for
        :func:`gibbs_local_step`, whose word types must include those of ``exclude``. The
        statistics and the fitted parameters are unchanged."""
        view = object.__new__(type(self))
        view.stats, view.tau, view._El = self.stats, self.tau, None
        ex = sp.csr_array(exclude, dtype=np.float64)
        ex.sum_duplicates()
        K, V = self.stats.shape
        if ex.shape != (K, V):
            raise ValueError(f"the excluded statistics have shape {ex.shape}; expected {(K, V)}")
        if ex.nnz and not (np.all(np.isfinite(ex.data)) and ex.data.min() >= 0.0):
            raise ValueError("the excluded statistics must be finite and >= 0")
        view.excluded = ex
        view.mean = True
        coo = ex.tocoo()
        removed = excluded_mass(coo.row, coo.data, self.stats.UT[coo.col, coo.row]
                                * self.stats.pi, K)
        tot = np.maximum(np.maximum(self.stats.totals, 0.0) - removed, 0.0)
        view._norm = np.log(V * self.tau + tot)
        return view

    def _excluded_cols(self, cols):
        """The excluded statistics of the word types ``cols`` (sorted) as word lists:
        ``(ptr, topics, values)`` with word i's at ptr[i]:ptr[i + 1]."""
        ET = self.excluded.T.tocsr()[cols]
        ET.sort_indices()
        return (np.ascontiguousarray(ET.indptr, dtype=np.int64),
                np.ascontiguousarray(ET.indices, dtype=np.int32),
                np.ascontiguousarray(ET.data, dtype=np.float64))

    def log_weights(self, cols):
        S = self.stats.columns_t(cols)
        if self.excluded is not None:
            S -= self.excluded[:, cols].toarray().T
            np.maximum(S, 0.0, out=S)
        f = np.log if self.mean else psi
        # psi only where S > 0: elsewhere lambda = tau (most entries, the statistics being
        # sampled counts)
        nz = S > 0
        out = np.full(S.shape, f(self.tau))
        out[nz] = f(S[nz] + self.tau)
        out -= self._norm[None, :]
        return out

    def word_weights(self, cols, n_threads=1):
        """exp(E[log phi]) of the word types ``cols`` as float32 (len(cols), K), every row
        scaled by exp(-its maximum exponent): the weights :func:`gibbs_local_step` samples
        with, from ``log_weights(cols)`` in one pass over each word's row of the statistics
        (:func:`~sparseclust._kernels._gibbs_tables.variational_word_weights`; for a view of
        :meth:`excluding`, from :meth:`log_weights`)."""
        cols = np.ascontiguousarray(cols, dtype=np.int64)
        K = self.stats.shape[0]
        if self.excluded is not None or self.mean:
            return row_scaled_weights(self.log_weights(cols))
        w = np.empty((cols.size, K), np.float32)
        _gibbs_tables.variational_word_weights(self.stats.UT, cols, float(self.stats.pi), self.tau,
                                               self._norm, w,
                                               threads_for_work(n_threads, cols.size * K,
                                                           _MIN_WORK_PER_THREAD))
        return w

    def split_tables(self, cols, alpha_v, n_threads=1):
        """The split word tables of the sampler's sparse path for the word types ``cols``:
        w_vk = s_v e0_k + x_vk with e0_k proportional to exp(psi(tau) - psi(V tau + T_k)),
        s_v a per-word scale and x_vk > 0 only where the statistics are positive, so the
        word part alpha_k
        w_vk is drawn from one shared table over alpha_k e0_k and a table per word over its
        topics with statistics, and the document part reads w_vk from the word's list
        (Mimno, Hoffman & Blei 2012, App. A: the prior's share of every topic plus a sparse
        part). Built from the bit sets of the statistics (``stats.bits``) in O(K / 64 +
        listed topics) per word (:func:`~sparseclust._kernels._gibbs_tables.split_word_tables`).

        Returns ``(None, split)`` for :func:`~sparseclust._kernels._sampler.sample_sweep`,
        or ``(w, None)`` with the dense weights of :meth:`word_weights` when more than
        :data:`SPLIT_MAX_FILL` of the (word, topic) entries have statistics (e.g. after
        ``init='random'``): the word tables would then cover nearly every topic, and the
        full alias tables of w (same distribution) cost less."""
        cols = np.ascontiguousarray(cols, dtype=np.int64)
        K = self.stats.shape[0]
        nnz = np.empty(cols.size, np.int32)
        _gibbs_tables.bit_counts(self.stats.bits, cols, nnz)
        if nnz.sum() > SPLIT_MAX_FILL * cols.size * K:
            return self.word_weights(cols, n_threads), None
        ex = {} if self.excluded is None else dict(
            zip(("ex_ptr", "ex_top", "ex_val"), self._excluded_cols(cols), strict=True))
        split = _gibbs_tables.split_word_tables(
            self.stats.UT, self.stats.bits, cols, float(self.stats.pi), self.tau, self._norm,
            np.ascontiguousarray(alpha_v, dtype=np.float64), nnz,
            threads_for_work(n_threads, int(nnz.sum()) + cols.size * K // 64,
                             _MIN_WORK_PER_THREAD),
            mean=self.mean,
            **ex)
        return None, split

    @property
    def shape(self):
        return self.stats.shape

    def lam_rows(self, a, b):
        lam = np.maximum(self.stats.rows(a, b), 0.0)
        lam += self.tau
        return lam

    @property
    def lam(self):
        return self.lam_rows(0, self.stats.shape[0])

    @property
    def Elogphi(self):
        if self._El is None:
            lam = self.lam
            self._El = psi(lam) - psi(lam.sum(axis=1))[:, None]
        return self._El

    def release(self):
        self._El = None


class DocumentChains:
    """The sampled local step's chains of every document of a training matrix, for
    stochastic training, with each document's share of the stochastic statistics.

    ``z`` holds every token's topic after the document's last visit (token order of
    :func:`~sparseclust.topics._sem.token_layout` of the training matrix, 1-2 bytes per
    token). The step S_t = (1 - rho_t) S_{t-1} + rho_t c B_t adds a minibatch's statistics
    with weight rho_t c and shrinks every earlier one by (1 - rho_t), so document d's visits
    weigh a_d = sum over its visits s of rho_s c prod_{s < r <= t} (1 - rho_r) in S_t. They
    are kept lazily as a_d = pi A_d (pi the product of the (1 - rho_r), renormalised below
    :data:`RESCALE_BELOW`), so a step updates the minibatch's documents only, and
    :meth:`own_statistics` estimates the documents' share of S_t by their current
    assignments, sum_d a_d n_d (n_d the word-topic counts of the document's last sweep; the
    step added the average over the saved sweeps).
    """

    def __init__(self, X):
        lay = token_layout(X)
        self.tokptr = lay.tokptr
        self.z = None
        self.seen = np.zeros(X.shape[0], dtype=bool)
        self.A = np.zeros(X.shape[0])
        self.pi = 1.0

    @property
    def n_documents(self):
        return self.seen.size

    def positions(self, rows):
        """Positions in ``z`` of the tokens of the documents ``rows``, in their order."""
        starts = self.tokptr[rows]
        lens = self.tokptr[rows + 1] - starts
        before = np.cumsum(lens) - lens
        return np.arange(int(lens.sum()), dtype=np.int64) + np.repeat(starts - before, lens)

    def continues(self, rows):
        """Whether a visit of ``rows`` continues their chains: all were visited before, and
        they are not all the documents (whose shares would leave only the initial
        statistics)."""
        return (self.z is not None and rows.size < self.n_documents
                and bool(self.seen[rows].all()))

    def store(self, rows, pos, z):
        if self.z is None:
            self.z = np.zeros(int(self.tokptr[-1]), dtype=z.dtype)
        self.z[pos] = z
        self.seen[rows] = True

    def own_statistics(self, X, rows, z, shape):
        """sum_d a_d n_d over the documents ``rows`` (the minibatch X, assignments ``z``):
        their share of the stochastic statistics, (K, V) CSR."""
        lay = token_layout(X)
        words = np.repeat(lay.indices, lay.cnt)
        weight = np.repeat(self.pi * self.A[rows], np.diff(lay.tokptr))
        E = sp.coo_array((weight, (z.astype(np.int64), words)), shape=shape).tocsr()
        E.sum_duplicates()
        return E

    def step(self, rows, rho, scale):
        """Account for the stochastic step that added the documents ``rows`` (None: other
        documents) with step size ``rho`` and scale ``scale``."""
        if rho >= 1.0:
            self.A.fill(0.0)
            self.pi = 1.0
        else:
            self.pi *= 1.0 - rho
            if self.pi < RESCALE_BELOW:
                self.A *= self.pi
                self.pi = 1.0
        if rows is not None:
            self.A[rows] += rho * scale / self.pi
