# SPDX-License-Identifier: BSD-3-Clause
"""The LDA document local step (Hughes & Sudderth 2016, Sec. 5, Alg. 2, App. C-D): Python boundary.

:func:`local_step` runs the compiled per-document iterations (``sparseclust._kernels._lda_local``)
over a batch of documents and reduces the responsibilities at once to additive statistics;
:func:`infer_doc_topics` is the dense local step with given topics, used for ``transform`` and
held-out document completion.

Regimes (one compiled routine):

- **dense** (``L is None`` or ``L >= K``): every word type spreads its mass over all K topics;
  the inner loop is a dot product with the precomputed ``exp(E[log phi])`` (App. D.2).
- **L-sparse** (``L < K``): top-L responsibilities among the document's active topics
  A_d = {k : N_dk > eps}, eps = ``1e-8 * N_d``; selection at the first ``n_select_first``
  iterations and every ``select_every``-th after, reweighting of the kept topics in between
  (App. D.3).

Restart proposals (App. D.4): after convergence the ``restarts`` used topics of smallest mass
(N_dk > ``restart_min``; never the last one) are each proposed for removal: N_dk = 0, topic k is
forbidden, up to ``restart_max_iter`` iterations are run, and the proposal is kept iff the
document ELBO increases.
"""

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._kernels import _lda_local
from ..utils._threads import threads_for_work

__all__ = ["LocalResult", "TopicTables", "local_step", "infer_doc_topics", "stats_csr"]

#: relative threshold of the active set: topic k leaves document d when N_dk <= EPS_REL * N_d
EPS_REL = 1e-8
#: a topic is a restart candidate when it carries more than this many tokens
RESTART_MIN = 1e-3
#: with ``n_threads=None`` a batch gets one thread per this many nonzeros (at least one): small
#: batches run serially, where OpenMP start-up and barrier costs would dominate
_NNZ_PER_THREAD = 4096
#: documents per kernel call (bounds the (D, K) per-document buffers); fixed, so results do
#: not depend on the thread count
_CHUNK_ELEMS = 1 << 21


@dataclass
class LocalResult:
    """Statistics of one local step over a batch of documents.

    Attributes
    ----------
    topic_word_csr : scipy.sparse.csr_array (K, V)
        S_kv = sum_d sum_u c_du r_duk [v_du = v], only the (k, v) pairs the batch touched
        (explicit zeros dropped): its size follows the batch (at most min(K V_b, L nnz) pairs
        for V_b word types and nnz entries), not K V. ``topic_word_stats`` is the dense
        (K, V) array.
    elbo_local : float
        sum_d [c_Dir(alpha) - c_Dir(theta_d) - sum_u c_du sum_k r_duk log r_duk]: the ELBO
        terms of the documents that do not involve the topics (Hughes & Sudderth 2016, Eq. 46-48
        with
        theta_d = N_d + alpha).
    elbo_data : float
        sum_d sum_u c_du sum_k r_duk C_{v_du k} with the C = E[log phi] used by the step, so
        ``elbo_local + elbo_data`` is sum_d L_d under fixed topics.
    doc_topic : ndarray (D, K) or None
        N_dk (``return_doc_topic=True``); theta_d = N_d + alpha.
    sum_Elogpi : ndarray (K,)
        sum_d E[log pi_dk] = sum_d psi(theta_dk) - psi(sum_l theta_dl).
    n_restarts_tried, n_restarts_accepted : int
    n_iter_total : int
        Local iterations over all documents, restart proposals included.
    n_tokens : float
        sum_d N_d.
    """

    topic_word_csr: sp.csr_array
    elbo_local: float
    elbo_data: float
    doc_topic: np.ndarray
    sum_Elogpi: np.ndarray
    n_restarts_tried: int
    n_restarts_accepted: int
    n_iter_total: int
    n_tokens: float

    @property
    def topic_word_stats(self):
        """S as a dense (K, V) array."""
        return self.topic_word_csr.toarray()


def stats_csr(ST, cols, n_words):
    """The (K, V) CSR statistics of a block ``ST`` (V_b, K) over the word types ``cols``.

    Row k of the result holds the non-zero ``ST[:, k]`` at columns ``cols`` (ascending), so
    ``result.toarray()[:, cols] == ST.T`` and the other columns are 0.
    """
    m, K = ST.shape
    j, k = np.nonzero(ST)
    vals = ST[j, k]
    jptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(np.bincount(j, minlength=m), out=jptr[1:])
    # (j, k) pairs in row-major order of ST are the CSC form of the (K, V_b) transpose
    return stats_csr_from_columns(vals, k, jptr, cols, n_words, K)


def stats_csr_from_columns(vals, topics, jptr, cols, n_words, K):
    """The (K, V) CSR statistics whose column ``cols[j]`` holds ``vals`` at rows ``topics``
    in the range jptr[j]:jptr[j + 1] (distinct topics per column, in any order): the CSC
    form of the (K, len(cols)) block. The CSC-to-CSR conversion is linear and leaves sorted
    columns."""
    m = len(jptr) - 1
    T = sp.csc_array((vals, topics, jptr), shape=(K, m)).tocsr()
    ind_dtype = np.int32 if n_words <= np.iinfo(np.int32).max else np.int64
    return sp.csr_array(
        (T.data, np.asarray(cols, dtype=ind_dtype)[T.indices], T.indptr.astype(ind_dtype)),
        shape=(K, n_words),
    )


class TopicTables:
    """Topic tables the local step reads, built once per set of topics.

    Parameters
    ----------
    log_topic_word : ndarray (K, V)
        C^T: E[log phi_kv] (or the log of a point estimate), finite.

    Attributes
    ----------
    CT : ndarray (V, K), C-contiguous
        C_vk = log_topic_word[k, v]; a document's word types are contiguous rows.
    ET, rowmax : ndarray (V, K), (V,)
        ``exp(C - C.max(1))`` and ``C.max(1)``, built on first use (dense regime only).
    """

    def __init__(self, log_topic_word, *, transposed=False):
        C = np.asarray(log_topic_word, dtype=np.float64)
        if C.ndim != 2 or C.shape[0] < 1 or C.shape[1] < 1:
            shape = C.shape[::-1] if transposed else C.shape
            raise ValueError(
                f"log_topic_word must be a 2-D (n_topics, n_words) array, got shape {shape}."
            )
        if not np.all(np.isfinite(C)):
            raise ValueError("log_topic_word must be finite (no NaN, no +-inf).")
        if transposed:
            # C is already C^T (V, K); kept without a copy when C-contiguous
            self.n_words, self.n_topics = C.shape
            self.CT = np.ascontiguousarray(C)
        else:
            self.n_topics, self.n_words = C.shape
            self.CT = np.ascontiguousarray(C.T)
        self._ET = None
        self._rowmax = None

    @classmethod
    def from_transposed(cls, CT):
        """Tables from C^T (V, K) directly, e.g. E[log phi] computed in that layout (the
        tables then share its memory when it is float64 and C-contiguous)."""
        return cls(CT, transposed=True)

    def dense_tables(self):
        if self._ET is None:
            rowmax = self.CT.max(axis=1)
            self._ET = np.exp(self.CT - rowmax[:, None])
            self._rowmax = rowmax
        return self._ET, self._rowmax


def _check_alpha(alpha, K):
    a = np.asarray(alpha, dtype=np.float64)
    if a.ndim == 0:
        a = np.full(K, float(a))
    if a.shape != (K,):
        raise ValueError(f"alpha must be a scalar or have shape ({K},), got shape {a.shape}.")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError("alpha must be positive and finite.")
    return np.ascontiguousarray(a)


def _check_counts(X, V):
    if not sp.issparse(X):
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}.")
        X = sp.csr_array(X)
    X = sp.csr_array(X)  # a CSR view (copies only when the format changes)
    if X.shape[1] != V:
        raise ValueError(
            f"X has {X.shape[1]} features (word types), but the topics have {V} words."
        )
    if V > np.iinfo(np.int32).max:
        # word ids are int32 in the kernels (entry and document offsets are 64-bit)
        raise ValueError(f"{V} word types exceed the int32 range of the word ids.")
    data = X.data
    if data.dtype not in (np.float32, np.float64):
        data = data.astype(np.float64)
    if data.size and (not np.all(np.isfinite(data)) or data.min() < 0):
        raise ValueError("Counts must be finite and non-negative.")
    indptr, indices = X.indptr, X.indices
    if not X.has_canonical_format or (data.size and data.min() == 0):
        Y = sp.csr_array((data.copy(), indices.copy(), indptr.copy()), shape=X.shape)
        Y.sum_duplicates()
        Y.eliminate_zeros()
        indptr, indices, data = Y.indptr, Y.indices, Y.data
    return (
        np.ascontiguousarray(indptr, dtype=np.int64),
        np.ascontiguousarray(indices, dtype=np.int32),
        np.ascontiguousarray(data),
        X.shape[0],
    )


def _columns(indptr, indices, V):
    """Entries grouped by word type, in document order within each (a stable counting sort)."""
    order = np.argsort(indices, kind="stable").astype(np.int64)
    col_ptr = np.zeros(V + 1, dtype=np.int64)
    np.cumsum(np.bincount(indices, minlength=V), out=col_ptr[1:])
    doc = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    return col_ptr, order, np.ascontiguousarray(doc[order])


def _columns_compressed(indptr, indices, V):
    """Like :func:`_columns`, over the word types that occur only: returns ``(col_ptr,
    col_pos, col_doc, col_word)`` with ``col_word`` (V_c,) the ascending word types and
    ``col_ptr`` (V_c + 1,) their entries' ranges."""
    order = np.argsort(indices, kind="stable").astype(np.int64)
    cnt = np.bincount(indices, minlength=V)
    col_word = np.flatnonzero(cnt).astype(np.int64)
    col_ptr = np.zeros(col_word.size + 1, dtype=np.int64)
    np.cumsum(cnt[col_word], out=col_ptr[1:])
    doc = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    return col_ptr, order, np.ascontiguousarray(doc[order]), col_word


def _run(indptr, indices, data, tables, alpha, Lk, opts, ST, sum_elogpi, n_threads, doc_N,
         alpha_rem=0.0, P0=None, extra=None, doc_ids=None, row_of=None):
    """Phase 1 + phase 2 on one chunk of documents; returns the per-document outputs.

    ``extra``, if given, is called as ``extra(piece)`` for every set of documents whose
    outputs are final (the chunk minus its underflowed documents, then those documents redone
    in log space), with ``piece`` a dict of the CSR arrays, the kernel outputs, ``skip``
    (documents to ignore), ``Lk`` and ``doc_ids`` (their positions in the batch).
    """
    dense = Lk == 0
    K = tables.n_topics
    if dense:
        ET, rowmax = tables.dense_tables()
    else:
        ET, rowmax = np.empty((0, K)), np.empty(0)
    out = _lda_local.lda_local_docs(
        indptr, indices, data, tables.CT, ET, rowmax, alpha, Lk,
        opts["max_iter"], opts["tol"], opts["n_select_first"], opts["select_every"],
        opts["restarts"], opts["restart_max_iter"], RESTART_MIN, EPS_REL, n_threads,
        alpha_rem=alpha_rem, P0=P0,
    )
    uflow = out["underflow"]
    # ST has one row per word type of the batch: row_of[v] is word type v's row
    col_ptr, col_pos, col_doc, col_word = _columns_compressed(indptr, indices, tables.n_words)
    _lda_local.lda_summary(
        col_ptr, col_pos, col_doc, data, out["N"], out["expP"], out["zs"], out["r"],
        out["idx"], ET, alpha, out["psi_sum"], uflow, ST, sum_elogpi, int(dense), n_threads,
        col_word=col_word, st_row=row_of[col_word],
    )
    if extra is not None:
        if doc_ids is None:
            doc_ids = np.arange(indptr.shape[0] - 1)
        extra(dict(indptr=indptr, indices=indices, data=data, out=out, skip=uflow, Lk=Lk,
                   ET=ET, doc_ids=doc_ids))
    if dense and uflow.any():
        # exp(E[log phi]) underflowed for some word type of these documents: redo them with
        # the log-space routine over all K topics (the sparse regime with L = K)
        bad = np.flatnonzero(uflow)
        sub_ptr = np.zeros(bad.size + 1, dtype=np.int64)
        np.cumsum(indptr[bad + 1] - indptr[bad], out=sub_ptr[1:])
        take = np.concatenate([np.arange(indptr[d], indptr[d + 1]) for d in bad])
        sub = _run(sub_ptr, indices[take], data[take], tables, alpha, K, opts, ST,
                   sum_elogpi, n_threads, doc_N, alpha_rem, P0, extra,
                   None if doc_ids is None else doc_ids[bad], row_of)
        for key in ("N", "elbo", "data", "n_iter", "tried", "accepted", "psi_sum"):
            out[key][bad] = sub[key]
    return out


def local_step(
    X_csr,
    Elogphi,
    alpha,
    *,
    L=None,
    max_iter=100,
    tol=0.05,
    n_select_first=5,
    select_every=10,
    restarts=4,
    restart_max_iter=5,
    return_doc_topic=False,
    n_threads=None,
    force_sparse=False,
    alpha_rem=0.0,
    init_weights=None,
    extra=None,
):
    """Local step of LDA over a batch of documents, reduced to statistics (Hughes & Sudderth 2016,
    Alg. 2).

    For each document d (word types v_du, counts c_du), from uniform document weights,
    alternate r_du = TopL-exp-normalize(E[log pi_d] + E[log phi_{:, v_du}]) and
    theta_d = N_d + alpha with N_dk = sum_u c_du r_duk and E[log pi_dk] = psi(theta_dk) -
    psi(sum_l theta_dl) (Eq. 10) until ``max_k |Delta N_dk| < tol`` or ``max_iter``
    iterations; then try restart proposals.

    Parameters
    ----------
    X_csr : sparse matrix or array (D, V)
        Non-negative word counts (float counts allowed; float32 or float64).
    Elogphi : ndarray (K, V) or TopicTables
        E_q[log phi_kv] (or the log of point-estimate topics).
    alpha : float or ndarray (K,)
        Document-topic Dirichlet parameters alpha_k > 0.
    L : int or None
        Sparsity level; None or L >= K is the dense local step.
    max_iter : int
        Maximum local iterations per document (cold start included).
    tol : float
        Convergence threshold on max_k |Delta N_dk|.
    n_select_first, select_every : int
        L-sparse only: top-L selection at iterations 0..n_select_first-1 and every
        ``select_every``-th after (0: never after); otherwise kept topics are reweighted.
    restarts : int
        Restart proposals per document (0 disables them).
    restart_max_iter : int
        Local iterations run for each proposal.
    return_doc_topic : bool
        Also return N (D, K).
    n_threads : int or None
        OpenMP threads (:func:`sparseclust.utils.effective_n_threads`); with None, small
        batches (fewer than 4096 nonzeros per thread) use fewer threads. Results are
        bit-identical for any thread count.
    force_sparse : bool
        Run the L-sparse routine (log-space weights, active set, selection schedule) even when
        ``L`` is None or >= K, with L = K. For tests and benchmarks; the dense regime computes
        the same fixed point faster.
    alpha_rem : float
        A Dirichlet entry K + 1 that no token takes (the remainder mass alpha E[beta_{K+1}] of
        a truncated HDP): theta_{d,K+1} = alpha_rem, so sum_k theta_dk and c_Dir include it.
    init_weights : ndarray (K,) or None
        Cold-start E[log pi_d] (the same for every document), e.g. log E[beta_k] for the HDP
        (Hughes, Kim & Sudderth 2015, supplement Sec. E); None means uniform weights.
    extra : callable or None
        Called with each processed piece of documents (see ``_run``), to gather further
        statistics from the kernel outputs (the HDP's).

    Returns
    -------
    LocalResult
    """
    tables = Elogphi if isinstance(Elogphi, TopicTables) else TopicTables(Elogphi)
    K, V = tables.n_topics, tables.n_words
    alpha = _check_alpha(alpha, K)
    indptr, indices, data, D = _check_counts(X_csr, V)
    for name, val, low in (
        ("max_iter", max_iter, 1),
        ("n_select_first", n_select_first, 0),
        ("select_every", select_every, 0),
        ("restarts", restarts, 0),
        ("restart_max_iter", restart_max_iter, 1),
    ):
        if int(val) != val or val < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {val!r}.")
    if not tol >= 0:
        raise ValueError(f"tol must be >= 0, got {tol!r}.")
    if L is not None and (int(L) != L or L < 1):
        raise ValueError(f"L must be None or an integer >= 1, got {L!r}.")
    dense = (L is None or L >= K) and not force_sparse
    Lk = 0 if dense else (K if L is None else min(int(L), K))
    alpha_rem = float(alpha_rem)
    if not (np.isfinite(alpha_rem) and alpha_rem >= 0):
        raise ValueError(f"alpha_rem must be finite and >= 0, got {alpha_rem!r}.")
    P0 = None
    if init_weights is not None:
        P0 = np.ascontiguousarray(init_weights, dtype=np.float64)
        if P0.shape != (K,) or not np.all(np.isfinite(P0)):
            raise ValueError(f"init_weights must be a finite array of shape ({K},).")
    return _local_step_impl(
        indptr, indices, data, D, tables, alpha, Lk,
        dict(max_iter=int(max_iter), tol=float(tol), n_select_first=int(n_select_first),
             select_every=int(select_every), restarts=int(restarts),
             restart_max_iter=int(restart_max_iter)),
        return_doc_topic,
        threads_for_work(n_threads, indices.size, _NNZ_PER_THREAD, cap_explicit=False),
        alpha_rem=alpha_rem, P0=P0, extra=extra,
    )


def _local_step_impl(indptr, indices, data, D, tables, alpha, Lk, opts, return_doc_topic,
                     n_threads, alpha_rem=0.0, P0=None, extra=None):
    K, V = tables.n_topics, tables.n_words
    # the statistics block covers the batch's own word types only (V_b rows, not V)
    cols = np.flatnonzero(np.bincount(indices, minlength=V))
    row_of = np.full(V, -1, dtype=np.int64)
    row_of[cols] = np.arange(cols.size)
    ST = np.zeros((cols.size, K))
    sum_elogpi = np.zeros(K)
    doc_N = np.zeros((D, K)) if return_doc_topic else None
    elbo = data_term = 0.0
    tried = accepted = n_iter = 0
    chunk = max(64, _CHUNK_ELEMS // max(K, 1))
    for start in range(0, D, chunk):
        stop = min(D, start + chunk)
        a, b = indptr[start], indptr[stop]
        sub_ptr = indptr[start : stop + 1] - a
        out = _run(sub_ptr, indices[a:b], data[a:b], tables, alpha, Lk, opts, ST,
                   sum_elogpi, n_threads, doc_N, alpha_rem, P0, extra,
                   np.arange(start, stop), row_of)
        elbo += float(np.sum(out["elbo"]))
        data_term += float(np.sum(out["data"]))
        tried += int(out["tried"].sum())
        accepted += int(out["accepted"].sum())
        n_iter += int(out["n_iter"].sum())
        if doc_N is not None:
            doc_N[start:stop] = out["N"]
    S = stats_csr(ST, cols, V)
    del ST
    return LocalResult(
        topic_word_csr=S,
        elbo_local=elbo,
        elbo_data=data_term,
        doc_topic=doc_N,
        sum_Elogpi=sum_elogpi,
        n_restarts_tried=tried,
        n_restarts_accepted=accepted,
        n_iter_total=n_iter,
        n_tokens=float(np.sum(data, dtype=np.float64)),
    )


def infer_doc_topics(
    X_csr,
    log_topic_word,
    alpha,
    *,
    L=None,
    max_iter=100,
    tol=0.05,
    restarts=0,
    n_threads=None,
):
    """Document-topic counts N (D, K) under fixed topics (the dense local step by default).

    Runs :func:`local_step` with the given ``log_topic_word`` (the log of point-estimate
    topics log phi_hat, or E_q[log phi]) and returns N_dk; the posterior over document-topic
    frequencies is Dir(theta_d) with theta_d = N_d + alpha, and E[pi_d] = theta_d / sum theta_d.
    Empty documents get N_d = 0.

    Parameters
    ----------
    X_csr : sparse matrix or array (D, V)
    log_topic_word : ndarray (K, V) or TopicTables
    alpha : float or ndarray (K,)
    L : int or None
        None (default) or >= K: dense responsibilities (Hughes & Sudderth 2016, App. E uses the
        dense step).
    max_iter, tol : local-step stopping rule.
    restarts : int
        Restart proposals per document (default 0: plain coordinate ascent).
    n_threads : int or None

    Returns
    -------
    doc_topic : ndarray (D, K), float64
    """
    res = local_step(
        X_csr, log_topic_word, alpha, L=L, max_iter=max_iter, tol=tol, restarts=restarts,
        return_doc_topic=True, n_threads=n_threads,
    )
    return res.doc_topic


class NonIntegerCountsWarning(UserWarning):
    """X given to a sampled step (one topic per token) holds non-integer counts, which it
    rounds to whole tokens (half up)."""


def check_counts(estimator, X, *, reset, whom, fitting=False):
    """Validate a document-word count matrix for a topic-model estimator: not text (a
    ValueError that says to vectorize first), scikit-learn's ``validate_data`` (sets or
    checks ``n_features_in_`` / ``feature_names_in_``), at least one document, float32 or
    float64, non-negative; returned as CSR with duplicate (document, word) entries summed on a
    copy, so results never depend on how the caller's CSR matrix is stored.

    ``fitting=True`` (``fit`` and ``partial_fit`` on a matrix) also refuses a matrix without
    tokens (:func:`require_tokens`). Empty documents among non-empty ones are valid."""
    from sklearn.utils.validation import check_non_negative, validate_data

    from .._engine import is_dask_collection
    from .._input import reject_text

    reject_text(X, whom)

    if is_dask_collection(X):
        # only the fit methods distribute (sparseclust._dask): anything else would silently
        # compute the whole collection into this process
        raise TypeError(
            f"{whom} does not take a Dask collection (the fit methods of SparseLDA, "
            "HDPTopicModel and StochasticEMLDA do); compute it, or map the method over its "
            "blocks (X.map_blocks)."
        )
    from ..datasets import CorpusStream

    if isinstance(X, CorpusStream):
        raise TypeError(
            f"{whom} takes a document-word matrix, not a CorpusStream (fit trains on one with "
            "memoized training); iterate the stream and pass each minibatch."
        )
    X = validate_data(
        estimator, X, reset=reset, accept_sparse="csr", dtype=[np.float64, np.float32],
        ensure_min_samples=0,
    )
    if X.shape[0] == 0:
        raise ValueError(
            f"{whom}: the corpus has no documents (X has shape {X.shape}); "
            + ("there is nothing to fit." if fitting else "pass at least one document.")
        )
    check_non_negative(X, whom)
    if not sp.issparse(X):
        X = sp.csr_array(X)
    elif not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    if fitting:
        require_tokens(whom, X.data.sum(dtype=np.float64))
    return X


def require_tokens(whom, n_tokens):
    """Refuse to fit a corpus without tokens (every count 0): a fit would return the prior,
    with ``score`` 0.0 and ``perplexity`` 1, and learn nothing."""
    if not n_tokens > 0:
        raise ValueError(
            f"{whom}: the corpus has no tokens (every count is 0); there is nothing to fit."
        )


def check_whole_counts(X, whom, *, why, instead, fitting):
    """The rule for a step that samples one topic per token (StochasticEMLDA, the Gibbs
    local step of SparseLDA) on the validated CSR matrix X: whole-number counts pass
    unchanged. Non-integer counts are rounded half up to whole tokens, as the samplers
    always did (``floor(c + 0.5)``; scikit-learn's estimator checks train every estimator on
    uniform fractional data, so they cannot be refused outright), with a
    :class:`NonIntegerCountsWarning`, and when ``fitting``, a ValueError instead if the
    rounded tokens keep less than half of X's total weight (in particular none at all):
    the fate of tf-idf or row-normalised weights, nearly all below 0.5, which would
    otherwise fit the prior or a handful of tokens. ``why`` says why the estimator needs
    whole tokens, ``instead`` what accepts fractional weights."""
    data = X.data
    frac = data != np.floor(data)
    if not frac.any():
        return
    i = int(np.argmax(frac))
    row = int(np.searchsorted(X.indptr, i, side="right")) - 1
    total = float(data.sum(dtype=np.float64))
    kept = float(np.floor(data.astype(np.float64) + 0.5).sum())
    head = (f"{whom}: {why} and needs whole-number counts; got non-integer values "
            f"(e.g. {data[i]:.4g} at row {row}, column {int(X.indices[i])})")
    advice = (" Pass raw counts (e.g. sklearn.feature_extraction.text.CountVectorizer), "
              f"or use {instead}, which accepts fractional weights.")
    if fitting and not kept >= 0.5 * total:
        raise ValueError(
            f"{head}. Rounded half up to whole tokens they keep {kept:.6g} of the total "
            f"weight {total:.6g} (less than half), so the fit would lose most of X." + advice
        )
    warnings.warn(
        f"{head}; they are rounded half up to whole tokens (total weight {total:.6g} -> "
        f"{kept:.6g} tokens)." + advice,
        NonIntegerCountsWarning,
        stacklevel=4,
    )
