# SPDX-License-Identifier: BSD-3-Clause
"""Evaluation of topic models: held-out document completion, UMass coherence, top words.

Both scores take the topics as a point estimate ``phi_hat`` (K, V) whose rows are
probability vectors over the vocabulary, so any topic model can be scored the same way:
a fitted :class:`sparseclust.SparseLDA`, scikit-learn's ``LatentDirichletAllocation``
(its ``components_`` are Dirichlet parameters lambda; their normalized rows are the
posterior mean ``E_q[phi_k]``), or a (K, V) matrix from any other library.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_array, check_random_state
from sklearn.utils.validation import check_non_negative

__all__ = [
    "document_completion_score",
    "split_document_types",
    "top_words",
    "umass_coherence",
]

#: Topic-word probabilities below this value are raised to it (and rows renormalized)
#: before scoring, so that log phi_hat is finite.
PROB_FLOOR = 1e-12

# held-out nonzeros processed per block when gathering sum_k pi_dk phi_kv
_GATHER_BLOCK = 1 << 14


# ---------------------------------------------------------------------------------------
# input helpers


def _is_estimator(obj):
    return hasattr(obj, "fit") and hasattr(obj, "get_params")


def _topic_word_and_prior(model_or_topic_word):
    """Row-normalized (K, V) float64 topic-word matrix, and the model's alpha (or None).

    A fitted model gives ``topic_word_distribution_`` if it has one, else the normalized
    rows of ``components_``; anything else is read as a (K, V) array of nonnegative
    topic-word weights.
    """
    obj = model_or_topic_word
    alpha = None
    if hasattr(obj, "topic_word_distribution_"):
        phi = obj.topic_word_distribution_
    elif hasattr(obj, "components_"):
        phi = obj.components_
    elif _is_estimator(obj):
        raise NotFittedError(
            f"This {type(obj).__name__} instance is not fitted yet: it has neither "
            "'topic_word_distribution_' nor 'components_'."
        )
    else:
        phi = obj
    if _is_estimator(obj):
        alpha = getattr(obj, "doc_topic_prior_", None)
        if alpha is None:
            alpha = getattr(obj, "doc_topic_prior", None)
    if sp.issparse(phi):
        phi = phi.toarray()
    phi = check_array(phi, dtype=np.float64, ensure_2d=True, input_name="topic_word")
    if np.any(phi < 0):
        raise ValueError("topic_word must be nonnegative; found negative entries.")
    sums = phi.sum(axis=1)
    if np.any(sums <= 0):
        bad = np.flatnonzero(sums <= 0)
        raise ValueError(
            f"topic_word rows must have a positive sum; rows {bad[:10].tolist()} sum to 0."
        )
    return phi / sums[:, None], alpha


def _smoothed(phi):
    """Raise entries below :data:`PROB_FLOOR` to it and renormalize the rows."""
    if phi.min() >= PROB_FLOOR:
        return phi
    phi = np.maximum(phi, PROB_FLOOR)
    return phi / phi.sum(axis=1, keepdims=True)


def _check_counts(X, n_features, name="X"):
    """Validated CSR float64 copy of a count matrix with summed duplicates, no explicit zeros."""
    X = check_array(X, accept_sparse="csr", dtype=np.float64, input_name=name)
    check_non_negative(X, name)
    X = sp.csr_array(X, dtype=np.float64, copy=True)
    X.sum_duplicates()
    X.eliminate_zeros()
    X.sort_indices()
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features (vocabulary size) but the topics have "
            f"{n_features} words."
        )
    return X


def _check_alpha(alpha, n_topics):
    if isinstance(alpha, numbers.Real) and not isinstance(alpha, bool):
        alpha = float(alpha)
        if not np.isfinite(alpha) or alpha <= 0:
            raise ValueError(f"doc_topic_prior must be a positive finite number, got {alpha!r}.")
        return alpha
    arr = np.asarray(alpha, dtype=np.float64)
    if arr.shape != (n_topics,):
        raise ValueError(
            f"doc_topic_prior must be a positive number or an array of shape ({n_topics},), "
            f"got shape {arr.shape}."
        )
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError("doc_topic_prior must have positive finite entries.")
    return arr


# ---------------------------------------------------------------------------------------
# document completion (Hughes & Sudderth 2016, App. E)


def split_document_types(X, heldout_fraction=0.2, random_state=None):
    """Split each document's word *types* at random into an observed and a held-out part.

    For document d with n_d distinct word types (nonzero entries of row d), exactly
    ``h_d = min(max(floor(heldout_fraction * n_d + 0.5), 1), n_d - 1)`` types chosen
    uniformly at random are held out -- with all of their tokens -- and the other
    ``n_d - h_d`` are observed. Documents with fewer than 2 types cannot be split and are
    dropped from both parts.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_documents, n_words)
        Word counts (nonnegative).
    heldout_fraction : float in (0, 1), default=0.2
        Fraction of each document's word types to hold out (Hughes & Sudderth 2016, App. E: 0.2).
    random_state : int, RandomState instance or None
        Seed of the split. The split depends only on ``X``'s sparsity pattern, the
        fraction and the seed, so every model scored with the same seed sees the same split.

    Returns
    -------
    X_observed, X_heldout : scipy.sparse.csr_array of shape (n_kept, n_words)
        Disjoint in their nonzero pattern; ``X_observed + X_heldout`` equals the kept rows of X.
    kept : ndarray of shape (n_kept,)
        Indices (rows of X) of the documents kept.
    """
    X = _check_counts(X, None)
    frac = _check_fraction(heldout_fraction, "heldout_fraction")
    rng = check_random_state(random_state)

    n_types = np.diff(X.indptr)
    kept = np.flatnonzero(n_types >= 2)
    Xk = X[kept]
    n_types = np.diff(Xk.indptr)
    n_held = np.clip(np.floor(frac * n_types + 0.5).astype(np.int64), 1, n_types - 1)

    # random rank of every nonzero within its row: sort by (row, random key)
    rows = np.repeat(np.arange(Xk.shape[0]), n_types)
    keys = rng.random_sample(Xk.nnz)
    order = np.lexsort((keys, rows))
    rank = np.empty(Xk.nnz, dtype=np.int64)
    rank[order] = np.arange(Xk.nnz) - np.repeat(Xk.indptr[:-1], n_types)
    held = rank < np.repeat(n_held, n_types)

    def part(mask):
        data = np.where(mask, Xk.data, 0.0)
        out = sp.csr_array((data, Xk.indices.copy(), Xk.indptr.copy()), shape=Xk.shape)
        out.eliminate_zeros()
        return out

    return part(~held), part(held), kept


def _check_fraction(value, name):
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not 0 < value < 1:
        raise ValueError(f"{name} must be a number strictly between 0 and 1, got {value!r}.")
    return float(value)


def document_completion_score(
    model_or_topic_word,
    X,
    heldout_fraction=0.2,
    random_state=None,
    doc_topic_prior=None,
    n_threads=None,
    *,
    max_iter=100,
    tol=0.05,
    return_details=False,
):
    r"""Held-out document-completion log-likelihood per token (Hughes & Sudderth 2016, App. E).

    Each test document's word types are split at random, ``1 - heldout_fraction`` observed
    (x_d^A) and ``heldout_fraction`` held out (x_d^B), see :func:`split_document_types`
    (documents with fewer than 2 distinct words are skipped). With the topics fixed at the
    point estimate phi_hat, the dense LDA local step (Hughes & Sudderth 2016, Alg. 2 with L = K)
    is run
    on x_d^A alone, giving document-topic counts N_dk, the variational posterior
    q(pi_d) = Dir(theta_d) with theta_dk = N_dk + alpha, and its mean
    pi_hat_dk = theta_dk / sum_l theta_dl. The score is

    .. math::

        \frac{\sum_d \sum_{v \in B_d} c_{dv} \log \sum_k \hat\pi_{dk} \hat\phi_{kv}}
             {\sum_d \sum_{v \in B_d} c_{dv}},

    the mean log-probability of a held-out token (natural log; larger is better).

    Parameters
    ----------
    model_or_topic_word : fitted estimator or array-like of shape (n_topics, n_words)
        A fitted model with ``topic_word_distribution_`` (e.g. :class:`~sparseclust.SparseLDA`)
        or ``components_`` (whose rows are normalized, e.g. scikit-learn's LDA), or a matrix
        of nonnegative topic-word weights; rows are normalized to sum to one. Entries below
        :data:`PROB_FLOOR` (1e-12) are raised to it and the rows renormalized, so that
        log phi_hat is finite; this only matters for topics with exact zeros.
    X : {array-like, sparse matrix} of shape (n_documents, n_words)
        Word counts of the test documents, same vocabulary as the topics.
    heldout_fraction : float in (0, 1), default=0.2
        Fraction of each document's word types held out.
    random_state : int, RandomState instance or None
        Seed of the split; pass the same value to compare models on the same split.
    doc_topic_prior : float or array-like of shape (n_topics,), default=None
        alpha of the local step. If None: the model's ``doc_topic_prior_`` or
        ``doc_topic_prior`` when a model is given and it is set, else 0.5 / n_topics.
        When comparing models from different libraries, pass the same value to all.
    n_threads : int or None
        Threads of the local step (see :func:`sparseclust.utils.effective_n_threads`).
    max_iter, tol : int, float, keyword-only
        Local-step limits: at most ``max_iter`` iterations, stop when
        max_k |Delta N_dk| < ``tol`` (Hughes & Sudderth 2016, §5 defaults 100 and 0.05).
    return_details : bool, keyword-only, default=False
        Also return a dict with the per-document sums, token counts and kept rows.

    Returns
    -------
    score : float
        Mean held-out log-likelihood per token.
    details : dict, only if ``return_details``
        ``"doc_loglik"`` (n_kept,) sum of held-out token log-probabilities per document,
        ``"doc_tokens"`` (n_kept,) held-out tokens per document, ``"kept"`` row indices of X,
        ``"doc_topic"`` (n_kept, n_topics) pi_hat.
    """
    from sparseclust.topics._local import infer_doc_topics

    phi, model_alpha = _topic_word_and_prior(model_or_topic_word)
    n_topics, n_words = phi.shape
    X = _check_counts(X, n_words)
    if doc_topic_prior is None:
        doc_topic_prior = model_alpha if model_alpha is not None else 0.5 / n_topics
    alpha = _check_alpha(doc_topic_prior, n_topics)
    if not isinstance(max_iter, numbers.Integral) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}.")
    if not isinstance(tol, numbers.Real) or not tol >= 0:
        raise ValueError(f"tol must be a nonnegative number, got {tol!r}.")

    X_obs, X_held, kept = split_document_types(X, heldout_fraction, random_state)
    if X_held.nnz == 0:
        raise ValueError(
            "No document of X has at least 2 distinct words; nothing can be held out."
        )
    phi = _smoothed(phi)
    log_phi = np.log(phi)
    N = infer_doc_topics(
        X_obs,
        log_phi,
        alpha,
        L=n_topics,
        max_iter=int(max_iter),
        tol=float(tol),
        n_threads=n_threads,
    )
    theta = np.asarray(N, dtype=np.float64) + alpha
    pi = theta / theta.sum(axis=1, keepdims=True)

    doc_loglik = _heldout_loglik(pi, phi, X_held)
    doc_tokens = np.asarray(X_held.sum(axis=1)).ravel()
    score = float(doc_loglik.sum() / doc_tokens.sum())
    if return_details:
        return score, {
            "doc_loglik": doc_loglik,
            "doc_tokens": doc_tokens,
            "kept": kept,
            "doc_topic": pi,
        }
    return score


def _heldout_loglik(pi, phi, X_held):
    """Per-document sum_v c_dv log sum_k pi_dk phi_kv over the nonzeros of X_held."""
    phi_t = np.ascontiguousarray(phi.T)  # (V, K)
    rows = np.repeat(np.arange(X_held.shape[0]), np.diff(X_held.indptr))
    cols = X_held.indices
    logp = np.empty(X_held.nnz)
    for start in range(0, X_held.nnz, _GATHER_BLOCK):
        sl = slice(start, start + _GATHER_BLOCK)
        p = np.einsum("nk,nk->n", pi[rows[sl]], phi_t[cols[sl]])
        logp[sl] = np.log(p)
    return np.bincount(rows, weights=X_held.data * logp, minlength=X_held.shape[0])


# ---------------------------------------------------------------------------------------
# coherence (Mimno, Hoffman & Blei 2012, Eq. 13) and top words


def _top_word_indices(phi, n):
    """(K, n) indices of each row's n largest entries, descending (stable ties)."""
    return np.argsort(-phi, axis=1, kind="stable")[:, :n]


def umass_coherence(topic_word, X_reference, top_n=10, *, epsilon=1.0):
    r"""UMass topic coherence of each topic's top words (Mimno, Hoffman & Blei 2012, Eq. 13; Mimno
    et al. 2011).

    With v_1, ..., v_M (M = ``top_n``) a topic's most probable words in decreasing order,

    .. math::

        C_k = \sum_{m=2}^{M} \sum_{l=1}^{m-1}
              \log \frac{D(v_m, v_l) + \epsilon}{D(v_l)},

    where D(v) is the number of reference documents containing v and D(v, w) the number
    containing both (co-occurrence is binary: counts above one do not matter).
    Values closer to zero mean more coherent topics; the mean over topics is the usual
    single-number summary.

    A word that occurs in no reference document (possible when the reference corpus is
    not the training corpus) has D(v) = 0; its denominator is taken as 1, so each pair
    it heads contributes log(epsilon) -- 0 with the default epsilon = 1 -- rather than
    a NaN or an infinity.

    Parameters
    ----------
    topic_word : fitted estimator or array-like of shape (n_topics, n_words)
        Topics (see :func:`document_completion_score`); only the ranking of each row matters.
    X_reference : {array-like, sparse matrix} of shape (n_documents, n_words)
        Reference document-term counts (e.g. the training documents).
    top_n : int, default=10
        Number of top words M per topic (2 <= M <= n_words).
    epsilon : float, keyword-only, default=1.0
        Smoothing constant of the numerator (> 0).

    Returns
    -------
    coherence : ndarray of shape (n_topics,)
    """
    phi, _ = _topic_word_and_prior(topic_word)
    n_topics, n_words = phi.shape
    X = _check_counts(X_reference, n_words, name="X_reference")
    if (
        not isinstance(top_n, numbers.Integral)
        or isinstance(top_n, bool)
        or not 2 <= top_n <= n_words
    ):
        raise ValueError(f"top_n must be an integer in [2, {n_words}], got {top_n!r}.")
    if not isinstance(epsilon, numbers.Real) or not epsilon > 0:
        raise ValueError(f"epsilon must be a positive number, got {epsilon!r}.")

    top = _top_word_indices(phi, int(top_n))
    # binary occurrence, columns = words; D(v, w) = (B^T B)_vw and D(v) = (B^T B)_vv
    B = X.tocsc()
    B.data[:] = 1.0
    m_idx, l_idx = np.tril_indices(int(top_n), k=-1)  # all pairs l < m
    coherence = np.empty(n_topics)
    for k in range(n_topics):
        Bk = B[:, top[k]]
        co = (Bk.T @ Bk).toarray()
        df = np.maximum(np.diag(co), 1.0)
        coherence[k] = np.log((co[m_idx, l_idx] + epsilon) / df[l_idx]).sum()
    return coherence


def top_words(model_or_topic_word, feature_names, n=10):
    """Each topic's ``n`` most probable words, most probable first.

    Parameters
    ----------
    model_or_topic_word : fitted estimator or array-like of shape (n_topics, n_words)
    feature_names : sequence of str of length n_words
        The vocabulary (e.g. ``CountVectorizer.get_feature_names_out()``).
    n : int, default=10
        Words per topic (capped at n_words).

    Returns
    -------
    words : list of n_topics lists of str
    """
    phi, _ = _topic_word_and_prior(model_or_topic_word)
    names = np.asarray(feature_names, dtype=object)
    if names.ndim != 1 or names.shape[0] != phi.shape[1]:
        raise ValueError(
            f"feature_names has {names.size} entries but the topics have {phi.shape[1]} words."
        )
    if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}.")
    top = _top_word_indices(phi, min(int(n), phi.shape[1]))
    return [[str(names[j]) for j in row] for row in top]
