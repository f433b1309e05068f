# SPDX-License-Identifier: BSD-3-Clause
"""Evaluation of topic models: held-out document completion, left-to-right held-out
likelihood, UMass and NPMI coherence, top words.

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
    "left_to_right_score",
    "npmi_coherence",
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


class DocumentCompletionScorer:
    """Document completion as a scikit-learn scorer, for choosing the number of topics.

    ``scoring=DocumentCompletionScorer()`` in :class:`~sklearn.model_selection.GridSearchCV`
    (or ``cross_val_score``) scores each held-out fold by :func:`document_completion_score`:
    the fitted topics predict the held-out words of every document from its other words.
    Use it, not the estimators' ``score``, to compare numbers of topics: ``score`` is an
    evidence lower bound per token, whose gap to the log-likelihood depends on the number of
    topics, so it can rank numbers of topics otherwise than held-out words do (the learned-K
    table of the benchmarks page shows both; Wallach, Murray, Salakhutdinov & Mimno 2009
    compare estimators of held-out likelihood).

    Parameters
    ----------
    heldout_fraction : float in (0, 1), default=0.2
        Fraction of each document's word types held out.
    random_state : int, default=0
        Seed of the split of word types, an integer: every candidate of a search is then
        scored on the same split of the same fold (the split depends only on the fold's
        documents, the fraction and the seed).
    doc_topic_prior : float, array-like or None, default=None
        alpha of the local step; None takes each model's own (as
        :func:`document_completion_score`). Models whose document priors have the same total
        (SparseLDA's default 0.5 / K, HDPTopicModel's alpha E[beta]) compare across K.
    n_threads : int or None, default=None
        Threads of the local step.

    Notes
    -----
    A :class:`~sklearn.pipeline.Pipeline` (for example ``CountVectorizer`` then
    ``SparseLDA``) is scored on its last step, with the fold passed through the other steps'
    ``transform`` ('passthrough' steps skipped, nested pipelines unwrapped), so a search can
    run on raw text. Anything else than a topic model at the end is a ``TypeError``.

    Raises
    ------
    ValueError
        At construction, for a ``heldout_fraction`` outside (0, 1) or a ``random_state``
        that is not an integer.
    """

    def __init__(self, heldout_fraction=0.2, random_state=0, doc_topic_prior=None,
                 n_threads=None):
        # checked here, not when scoring: a search turns a scorer's error into NaN scores
        _check_fraction(heldout_fraction, "heldout_fraction")
        if isinstance(random_state, bool) or not isinstance(random_state, numbers.Integral):
            raise ValueError(
                "DocumentCompletionScorer needs an integer random_state, so that every "
                f"candidate of a search is scored on the same split; got {random_state!r}.")
        self.heldout_fraction = heldout_fraction
        self.random_state = random_state
        self.doc_topic_prior = doc_topic_prior
        self.n_threads = n_threads

    def __call__(self, estimator, X, y=None):
        """The held-out log-likelihood per token of the fold X (larger is better)."""
        model = estimator
        # a Pipeline (nested or not): the fold through every step but the last, whose topics
        # score it
        while hasattr(model, "steps"):
            steps = [step for _, step in model.steps]
            for step in steps[:-1]:
                if step is not None and not (isinstance(step, str) and step == "passthrough"):
                    X = step.transform(X)
            model = steps[-1]
        if not (hasattr(model, "topic_word_distribution_") or hasattr(model, "components_")):
            raise TypeError(
                "DocumentCompletionScorer scores a fitted topic model (with "
                "topic_word_distribution_ or components_), or a Pipeline that ends in one; "
                f"got {type(model).__name__}.")
        return document_completion_score(
            model, X, self.heldout_fraction, self.random_state, self.doc_topic_prior,
            self.n_threads)

    def __repr__(self):
        return (f"DocumentCompletionScorer(heldout_fraction={self.heldout_fraction!r}, "
                f"random_state={self.random_state!r}, "
                f"doc_topic_prior={self.doc_topic_prior!r}, n_threads={self.n_threads!r})")


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


# ---------------------------------------------------------------------------------------
# left-to-right held-out likelihood (Wallach, Murray, Salakhutdinov & Mimno 2009, Alg. 3)


def left_to_right_score(
    model_or_topic_word,
    X,
    *,
    doc_topic_prior=None,
    n_particles=10,
    random_state=None,
    n_threads=None,
    return_std=False,
    return_details=False,
):
    r"""Held-out log-likelihood per token by the left-to-right estimator (Wallach, Murray,
    Salakhutdinov & Mimno 2009, Alg. 3).

    With the topics fixed at the point estimate phi_hat and the document's topic proportions
    integrated out under a Dirichlet(alpha) prior, the probability of a document's tokens
    w_1, ..., w_N factorizes as p(w) = prod_n p(w_n | w_{<n}). Each of R particles keeps
    assignments z_{<n}; at position n every particle resamples z_1, ..., z_{n-1} once, in
    order, from p(z_m = k | z_{-m}, w) ∝ (alpha_k + N_k^{-m}) phi_hat_{k w_m}, contributes

    .. math::

        p_n^{(r)} = \sum_k \hat\phi_{k w_n}
                    \frac{\alpha_k + N_k^{(r)}}{n - 1 + \sum_l \alpha_l},

    then draws z_n ∝ (alpha_k + N_k) phi_hat_{k w_n}. The estimate is
    log p(w_d) ≈ sum_n log((1/R) sum_r p_n^(r)), and the score

    .. math::

        \frac{\sum_d \log \hat p(w_d)}{\sum_d N_d}

    is the mean log-probability of a test token (nats, larger is better). Unlike document
    completion, no part of a document is observed: every token is predicted from the ones
    before it.

    Token order: the bag of words of row d is expanded in increasing word-id order, all
    tokens of a word consecutive (p(w) does not depend on the order; the estimator's
    variance does, slightly). Cost O(R N_d^2 K / 2) per document: long documents dominate.

    The estimator is consistent only up to a small bias: after z_n is drawn a particle's
    z_{<=n} follow p(z_{<n} | w_{<n}) p(z_n | z_{<n}, w_{<=n}), not the posterior
    p(z_{<=n} | w_{<=n}), and one sweep per position does not fully correct this, so as R
    grows the estimate tends to a value slightly off log p(w) (on the 4-5-token documents of
    the tests, by less than 0.015 nats per token, of either sign). Single-token documents
    are exact.

    Parameters
    ----------
    model_or_topic_word : fitted estimator or array-like of shape (n_topics, n_words)
        Topics, as in :func:`document_completion_score` (rows normalized, entries below
        :data:`PROB_FLOOR` raised to it).
    X : {array-like, sparse matrix} of shape (n_documents, n_words)
        Integer word counts of the test documents. Empty rows are allowed (they contribute
        no tokens).
    doc_topic_prior : float or array-like of shape (n_topics,), default=None
        alpha (symmetric or per topic). If None: the model's ``doc_topic_prior_`` (or
        ``doc_topic_prior``) when a model is given, else 0.5 / n_topics.
    n_particles : int, default=10
        Number of particles R (>= 1).
    random_state : int, RandomState instance or None
        Seed of the particles' random streams; the result is deterministic given it.
    n_threads : int or None
        Threads, parallel over documents (see :func:`sparseclust.utils.effective_n_threads`).
        Particle r of document d draws from its own stream keyed by (seed, r, d), so the
        result does not depend on the thread count.
    return_std : bool, default=False
        Also return the standard error of the score across documents (ratio estimator:
        sqrt(D / (D - 1) sum_d (L_d - score N_d)^2) / sum_d N_d with L_d the document's
        estimate); NaN with fewer than two nonempty documents.
    return_details : bool, default=False
        Also return a dict with ``"doc_loglik"`` (n_documents,) the estimates log p_hat(w_d)
        and ``"doc_tokens"`` (n_documents,) the token counts N_d.

    Returns
    -------
    score : float
    std : float, only if ``return_std``
    details : dict, only if ``return_details``
    """
    from sparseclust._kernels._left_to_right import left_to_right_docs
    from sparseclust.utils import effective_n_threads

    phi, model_alpha = _topic_word_and_prior(model_or_topic_word)
    n_topics, n_words = phi.shape
    X = _check_counts(X, n_words)
    if np.any(X.data != np.round(X.data)) or (X.nnz and X.data.max() > np.iinfo(np.int32).max):
        raise ValueError("X must hold integer word counts for the left-to-right estimator.")
    if doc_topic_prior is None:
        doc_topic_prior = model_alpha if model_alpha is not None else 0.5 / n_topics
    alpha = _check_alpha(doc_topic_prior, n_topics)
    alpha = np.ascontiguousarray(np.broadcast_to(np.asarray(alpha, dtype=np.float64), n_topics))
    if (
        not isinstance(n_particles, numbers.Integral)
        or isinstance(n_particles, bool)
        or n_particles < 1
    ):
        raise ValueError(f"n_particles must be a positive integer, got {n_particles!r}.")
    rng = check_random_state(random_state)
    seed = int(rng.randint(np.iinfo(np.int64).max, dtype=np.int64))

    counts = X.data.astype(np.int64)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    doc_tokens = np.bincount(rows, weights=counts, minlength=X.shape[0]).astype(np.int64)
    n_tokens = int(doc_tokens.sum())
    if n_tokens == 0:
        raise ValueError("X has no tokens: there is nothing to score.")
    tokptr = np.zeros(X.shape[0] + 1, dtype=np.int64)
    np.cumsum(doc_tokens, out=tokptr[1:])
    words = np.repeat(X.indices.astype(np.int32), counts)
    phi_t = np.ascontiguousarray(_smoothed(phi).T)
    doc_loglik = np.empty(X.shape[0])
    left_to_right_docs(
        tokptr,
        words,
        phi_t,
        alpha,
        int(n_particles),
        np.uint64(seed),
        doc_loglik,
        effective_n_threads(n_threads),
    )
    score = float(doc_loglik.sum() / n_tokens)
    out = [score]
    if return_std:
        nonempty = doc_tokens > 0
        n_docs = int(nonempty.sum())
        if n_docs < 2:
            std = float("nan")
        else:
            resid = doc_loglik[nonempty] - score * doc_tokens[nonempty]
            std = float(np.sqrt(n_docs / (n_docs - 1) * np.sum(resid**2)) / n_tokens)
        out.append(std)
    if return_details:
        out.append({"doc_loglik": doc_loglik, "doc_tokens": doc_tokens.astype(np.float64)})
    return out[0] if len(out) == 1 else tuple(out)


# ---------------------------------------------------------------------------------------
# NPMI coherence (Bouma 2009; Lau, Newman & Baldwin 2014)


def _occurrence_matrix(X_reference, n_words, window):
    """Binary (n_contexts, n_words) CSR matrix: which words occur in each context.

    Contexts are the reference documents (``window=None``) or, for token sequences, every
    window of ``window`` consecutive tokens (one window for a shorter document).
    """
    if sp.issparse(X_reference) or (
        isinstance(X_reference, np.ndarray) and X_reference.ndim == 2
    ):
        if window is not None:
            raise ValueError(
                "A sliding window needs the reference documents as token sequences (a list "
                "of lists of word ids); a document-term matrix only supports window=None."
            )
        B = _check_counts(X_reference, n_words, name="X_reference")
        B.data[:] = 1.0
        return B
    if isinstance(X_reference, (str, bytes)) or not hasattr(X_reference, "__len__"):
        raise ValueError(
            "X_reference must be a document-term matrix or a list of token-id sequences."
        )
    if window is not None and (
        not isinstance(window, numbers.Integral) or isinstance(window, bool) or window < 1
    ):
        raise ValueError(f"window must be a positive integer or None, got {window!r}.")
    rows, cols = [], []
    n_ctx = 0
    for i, doc in enumerate(X_reference):
        toks = np.asarray(doc)
        if toks.size == 0:
            toks = toks.astype(np.int64).ravel()
        if toks.ndim != 1 or not (
            np.issubdtype(toks.dtype, np.integer) or toks.size == 0
        ):
            raise ValueError(
                f"X_reference[{i}] must be a one-dimensional sequence of integer word ids."
            )
        toks = toks.astype(np.int64)
        if toks.size and (toks.min() < 0 or toks.max() >= n_words):
            raise ValueError(
                f"X_reference[{i}] has word ids outside [0, {n_words}) (the topics' vocabulary)."
            )
        n = toks.size
        if window is not None and n == 0:
            continue  # no window fits in an empty document
        if window is None or n <= window:
            rows.append(np.full(n, n_ctx, dtype=np.int64))
            cols.append(toks)
            n_ctx += 1
            continue
        n_win = n - window + 1
        # token p lies in windows max(0, p - window + 1) .. min(p, n_win - 1)
        pos = np.arange(n)
        first = np.maximum(pos - window + 1, 0)
        last = np.minimum(pos, n_win - 1)
        reps = last - first + 1
        starts = np.repeat(first - np.cumsum(reps) + reps, reps) + np.arange(reps.sum())
        rows.append(n_ctx + starts)
        cols.append(np.repeat(toks, reps))
        n_ctx += n_win
    if n_ctx == 0:
        raise ValueError("X_reference has no documents.")
    r = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    B = sp.csr_array((np.ones(r.size), (r, c)), shape=(n_ctx, n_words))
    B.sum_duplicates()
    B.data[:] = 1.0
    return B


def npmi_coherence(topic_word_or_model, X_reference, *, top_n=10, window=None):
    r"""NPMI coherence of each topic's top words (Lau, Newman & Baldwin 2014; normalized PMI of
    Bouma 2009).

    With v_1, ..., v_M (M = ``top_n``) a topic's most probable words,

    .. math::

        C_k = \binom{M}{2}^{-1} \sum_{i < j}
              \frac{\log \frac{p(v_i, v_j)}{p(v_i)\, p(v_j)}}{-\log p(v_i, v_j)},

    where p(v) is the fraction of contexts containing v and p(v, w) the fraction containing
    both. NPMI lies in [-1, 1]: 1 for words that only occur together, 0 for independent
    words, -1 for words that never co-occur. Larger is more coherent; the mean over topics is
    the usual single-number summary.

    Contexts: with ``window=None`` the reference documents (document co-occurrence); with
    ``window = s`` every run of s consecutive tokens of every reference document (a sliding
    window moved one token at a time; a document of at most s tokens is one context, an
    empty one none).
    Occurrence is binary: counts within a context do not matter.

    Conventions (no smoothing): a pair that never co-occurs, including a pair with a word
    absent from the reference, has NPMI = -1 (the limit as p(v_i, v_j) -> 0); a pair with
    p(v_i, v_j) = 1 (both words in every context, so p(v_i) = p(v_j) = 1) has NPMI = 1 (the
    limit of the formula along p(v_i) = p(v_j) = p(v_i, v_j) -> 1).

    Parameters
    ----------
    topic_word_or_model : fitted estimator or array-like of shape (n_topics, n_words)
        Topics (see :func:`document_completion_score`); only the ranking of each row matters
        (ties broken toward the smaller word index).
    X_reference : sparse matrix or array of shape (n_documents, n_words), or list of sequences
        The reference corpus: a document-term count matrix (only with ``window=None``: word
        order is lost in it), or a list of token-id sequences (each a list or 1-d integer
        array of word ids in ``[0, n_words)``, in reading order).
    top_n : int, keyword-only, default=10
        Number of top words M per topic (2 <= M <= n_words).
    window : int or None, keyword-only, default=None
        Sliding-window size in tokens, or None for document co-occurrence.

    Returns
    -------
    coherence : ndarray of shape (n_topics,)
    """
    phi, _ = _topic_word_and_prior(topic_word_or_model)
    n_topics, n_words = phi.shape
    if (
        not isinstance(top_n, numbers.Integral)
        or isinstance(top_n, bool)
        or not 2 <= top_n <= n_words
    ):
        raise ValueError(f"top_n must be an integer in [2, {n_words}], got {top_n!r}.")
    if window is not None and (
        not isinstance(window, numbers.Integral) or isinstance(window, bool) or window < 1
    ):
        raise ValueError(f"window must be a positive integer or None, got {window!r}.")
    B = _occurrence_matrix(X_reference, n_words, window)
    n_ctx = B.shape[0]
    if n_ctx == 0:
        raise ValueError("X_reference has no documents.")
    B = B.tocsc()
    top = _top_word_indices(phi, int(top_n))
    i_idx, j_idx = np.triu_indices(int(top_n), k=1)
    coherence = np.empty(n_topics)
    for k in range(n_topics):
        Bk = B[:, top[k]]
        co = (Bk.T @ Bk).toarray() / n_ctx
        p = np.diag(co)
        pij = co[i_idx, j_idx]
        npmi = np.full(pij.shape, -1.0)
        one = pij >= 1.0
        npmi[one] = 1.0
        mid = (pij > 0) & ~one
        pm = pij[mid]
        npmi[mid] = np.log(pm / (p[i_idx[mid]] * p[j_idx[mid]])) / -np.log(pm)
        coherence[k] = npmi.mean()
    return coherence
