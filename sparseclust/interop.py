# SPDX-License-Identifier: BSD-3-Clause
"""Fitted topic models in the formats of other tools.

Works with any fitted topic model that has ``components_`` (topic-word weights, one row per
topic) and ``transform`` (document-topic proportions): :class:`~sparseclust.SparseLDA`,
:class:`~sparseclust.HDPTopicModel`, scikit-learn's ``LatentDirichletAllocation``.

- :func:`pyldavis_data` -- the arguments of ``pyLDAvis.prepare`` (row-normalised topic-term
  and document-topic matrices, document lengths, vocabulary, term frequencies), dead topics
  dropped; :func:`pyldavis_prepare` calls pyLDAvis with them;
- :func:`show_topics` -- gensim's ``show_topics(formatted=False)`` structure,
  ``[(topic_id, [(word, probability), ...]), ...]``;
- :func:`gensim_topics` -- the top words of each topic as lists of tokens, the ``topics=``
  argument of gensim's ``CoherenceModel``;
- :func:`topic_summary` -- a pandas table of the topics: top words, size, share, UMass
  coherence;
- :func:`document_topics` -- each document's main topics, like gensim's
  ``get_document_topics``;
- :func:`topic_sizes` -- the expected number of tokens of each topic, which decides which
  topics are dead.

The topic-word distributions are the posterior means E[phi_k] = lambda_k / sum_v lambda_kv,
the rows of ``components_`` normalised (``components_`` holds the Dirichlet parameters lambda
in all three estimators named above).
"""

import numbers

import numpy as np
import scipy.sparse as sp

__all__ = [
    "document_topics",
    "gensim_topics",
    "pyldavis_data",
    "pyldavis_prepare",
    "show_topics",
    "topic_sizes",
    "topic_summary",
]


# --------------------------------------------------------------------------------------
# helpers


def _components(model):
    comp = getattr(model, "components_", None)
    if comp is None or not hasattr(model, "transform"):
        raise TypeError(
            f"{type(model).__name__} is not a fitted topic model: it needs components_ "
            "(call fit first) and a transform method."
        )
    comp = np.asarray(comp, dtype=np.float64)
    if comp.ndim != 2 or not np.all(np.isfinite(comp)) or np.any(comp < 0):
        raise ValueError("components_ must be a finite, non-negative 2-D array.")
    return comp


def _topic_word(comp):
    totals = comp.sum(axis=1, keepdims=True)
    if np.any(totals <= 0):
        raise ValueError("a topic of components_ has no mass (a row sums to zero).")
    return comp / totals


def _check_counts(X, n_features):
    if sp.issparse(X):
        X = sp.csr_array(X, dtype=np.float64)
        data = X.data
    else:
        X = np.asarray(X, dtype=np.float64)
        data = X
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D document-word count matrix, got {X.ndim} dimensions.")
    if X.shape[1] != n_features:
        raise ValueError(
            f"X has {X.shape[1]} features, but the model's topics have {n_features} words."
        )
    if not np.all(np.isfinite(data)):
        raise ValueError("X contains NaN or infinity.")
    if np.any(data < 0):
        raise ValueError("X contains negative counts.")
    return X


def _row_sums(X):
    return np.asarray(X.sum(axis=1)).ravel().astype(np.float64)


def _col_sums(X):
    return np.asarray(X.sum(axis=0)).ravel().astype(np.float64)


def _vocabulary(model, feature_names, n_features):
    if feature_names is None:
        feature_names = getattr(model, "feature_names_in_", None)
    if feature_names is None:
        return np.asarray([f"word{j}" for j in range(n_features)], dtype=object)
    names = np.asarray(feature_names, dtype=object)
    if names.ndim != 1 or names.shape[0] != n_features:
        raise ValueError(
            f"feature_names has {names.size} entries but the topics have {n_features} words."
        )
    return names


def _check_positive_int(value, name):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def _doc_topic(model, X, n_topics):
    theta = np.asarray(model.transform(X), dtype=np.float64)
    if theta.shape != (X.shape[0], n_topics):
        raise ValueError(
            f"transform returned shape {theta.shape}, expected {(X.shape[0], n_topics)}."
        )
    return theta


# --------------------------------------------------------------------------------------
# topic sizes and dead topics


def topic_sizes(model, X=None):
    """Expected number of tokens assigned to each topic.

    With the model's topic-word prior tau known (``topic_word_prior_``, as in
    :class:`~sparseclust.SparseLDA`, :class:`~sparseclust.HDPTopicModel` and scikit-learn's
    ``LatentDirichletAllocation``), the size of topic k is what training assigned to it,

        n_k = sum_v (lambda_kv - tau),

    with lambda = ``components_`` (clipped at 0). Otherwise it is computed on documents X
    from the document-topic proportions theta_dk = ``transform(X)`` and the document lengths
    N_d: n_k = sum_d N_d theta_dk (X is then required).

    Parameters
    ----------
    model : fitted topic model
        Has ``components_`` and ``transform``.
    X : {array-like, sparse matrix} of shape (n_documents, n_words), default=None
        Documents; only used when the model has no ``topic_word_prior_``.

    Returns
    -------
    sizes : ndarray of shape (n_topics,)
    """
    comp = _components(model)
    tau = getattr(model, "topic_word_prior_", None)
    if tau is not None:
        return np.maximum(comp - float(tau), 0.0).sum(axis=1)
    if X is None:
        raise ValueError(
            f"{type(model).__name__} has no topic_word_prior_: pass the documents X to "
            "measure the topic sizes on them."
        )
    X = _check_counts(X, comp.shape[1])
    return _doc_topic(model, X, comp.shape[0]).T @ _row_sums(X)


def _live(sizes, min_tokens):
    if not isinstance(min_tokens, numbers.Real) or not np.isfinite(min_tokens) or min_tokens < 0:
        raise ValueError(f"min_tokens must be a finite number >= 0, got {min_tokens!r}.")
    live = np.flatnonzero(sizes >= min_tokens)
    if live.size == 0:
        raise ValueError(
            f"no topic holds min_tokens={min_tokens} expected tokens (largest: "
            f"{sizes.max():.3g}); lower min_tokens."
        )
    return live


# --------------------------------------------------------------------------------------
# pyLDAvis


def pyldavis_data(model, X, feature_names=None, *, min_tokens=1.0):
    """The arguments of ``pyLDAvis.prepare`` for a fitted topic model.

    Returns a dict with exactly the keys ``pyLDAvis.prepare`` takes as data:
    ``topic_term_dists`` (K', V) the posterior-mean topics E[phi_k] of the live topics,
    ``doc_topic_dists`` (D, K') the document-topic proportions ``transform(X)`` restricted to
    the live topics and renormalised to sum to one, ``doc_lengths`` (D,) the tokens of each
    document, ``vocab`` (V,) the words, and ``term_frequency`` (V,) the count of each word in
    X. A topic is dead, and dropped, when it holds fewer than ``min_tokens`` expected tokens
    (:func:`topic_sizes`); the live topics keep their order, and
    ``np.flatnonzero(topic_sizes(model, X) >= min_tokens)`` gives their rows of
    ``components_``.

    Words that never occur in X are dropped from all arrays (pyLDAvis takes the logarithm
    of term frequencies), and the topic rows are renormalised over the remaining words.
    Documents with no tokens keep their proportions and weigh nothing (length 0).

    Parameters
    ----------
    model : fitted topic model
        Has ``components_`` and ``transform``.
    X : {array-like, sparse matrix} of shape (n_documents, n_words)
        Word counts of the documents to visualise (typically the training documents).
    feature_names : sequence of str of length n_words, default=None
        The vocabulary; default ``model.feature_names_in_`` when the model was fitted on a
        DataFrame, else ``word0``, ``word1``, ...
    min_tokens : float, default=1.0
        Topics with fewer expected tokens are dropped.

    Returns
    -------
    data : dict
        ``pyLDAvis.prepare(**data)`` builds the visualisation.
    """
    comp = _components(model)
    X = _check_counts(X, comp.shape[1])
    vocab = _vocabulary(model, feature_names, comp.shape[1])
    live = _live(topic_sizes(model, X), min_tokens)
    tf = _col_sums(X)
    used = np.flatnonzero(tf > 0)
    if used.size == 0:
        raise ValueError("X contains no tokens.")
    phi = _topic_word(comp[live][:, used])
    theta = _doc_topic(model, X, comp.shape[0])[:, live]
    mass = theta.sum(axis=1, keepdims=True)
    if np.any(mass <= 0):
        raise ValueError("a document has no weight on any live topic.")
    return {
        "topic_term_dists": phi,
        "doc_topic_dists": theta / mass,
        "doc_lengths": _row_sums(X),
        "vocab": [str(w) for w in vocab[used]],
        "term_frequency": tf[used],
    }


def pyldavis_prepare(model, X, feature_names=None, *, min_tokens=1.0, **kwargs):
    """``pyLDAvis.prepare`` on :func:`pyldavis_data` (requires the ``pyLDAvis`` package).

    Extra keyword arguments (``R``, ``lambda_step``, ``mds``, ``sort_topics``, ``n_jobs``,
    ...) are passed to ``pyLDAvis.prepare``; ``n_jobs`` defaults to 1. Save the result with
    ``pyLDAvis.save_html`` or show it with ``pyLDAvis.display``.
    """
    try:
        import pyLDAvis
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "pyldavis_prepare needs pyLDAvis (pip install pyLDAvis); pyldavis_data gives "
            "the same data without it."
        ) from exc
    kwargs.setdefault("n_jobs", 1)
    return pyLDAvis.prepare(**pyldavis_data(model, X, feature_names, min_tokens=min_tokens),
                            **kwargs)


# --------------------------------------------------------------------------------------
# gensim-style listings


def show_topics(model, feature_names=None, n_words=10, *, X=None, min_tokens=1.0):
    """Topics as gensim's ``show_topics(formatted=False)`` lists them.

    Parameters
    ----------
    model : fitted topic model
    feature_names : sequence of str of length n_words, default=None
        See :func:`pyldavis_data`.
    n_words : int, default=10
        Words per topic (capped at the vocabulary size).
    X : documents, default=None
        Only needed to find dead topics of a model without ``topic_word_prior_``.
    min_tokens : float, default=1.0
        Topics with fewer expected tokens (:func:`topic_sizes`) are left out; 0 keeps all.

    Returns
    -------
    topics : list of (int, list of (str, float))
        ``(k, [(word, E[phi_kv]), ...])`` for every live topic k (its row in
        ``components_``), words by decreasing probability.
    """
    comp = _components(model)
    n_words = min(_check_positive_int(n_words, "n_words"), comp.shape[1])
    vocab = _vocabulary(model, feature_names, comp.shape[1])
    phi = _topic_word(comp)
    if isinstance(min_tokens, numbers.Real) and min_tokens == 0:
        live = np.arange(comp.shape[0])
    else:
        live = _live(topic_sizes(model, X), min_tokens)
    out = []
    for k in live:
        top = np.argsort(-phi[k], kind="stable")[:n_words]
        out.append((int(k), [(str(vocab[j]), float(phi[k, j])) for j in top]))
    return out


def gensim_topics(model, feature_names=None, n_words=10, *, X=None, min_tokens=1.0):
    """Each live topic's top words, the ``topics=`` argument of gensim's ``CoherenceModel``.

    ``CoherenceModel(topics=gensim_topics(model, vocab), corpus=..., dictionary=...,
    coherence="u_mass")`` scores the topics with gensim's coherence measures (the words
    must be in the gensim dictionary). Arguments as in :func:`show_topics`.

    Returns
    -------
    topics : list of list of str
    """
    return [[w for w, _ in words] for _, words in
            show_topics(model, feature_names, n_words, X=X, min_tokens=min_tokens)]


def document_topics(model, X, *, n_topics=None, min_probability=0.01):
    """Each document's topics by decreasing proportion, like gensim's
    ``get_document_topics``.

    Parameters
    ----------
    model : fitted topic model
    X : {array-like, sparse matrix} of shape (n_documents, n_words)
    n_topics : int or None, default=None
        Keep at most this many topics per document (None: no limit).
    min_probability : float in [0, 1], default=0.01
        Leave out topics with a smaller proportion theta_dk (from ``transform``).

    Returns
    -------
    listings : list of list of (int, float)
        For document d, ``[(k, theta_dk), ...]`` with theta_dk >= min_probability,
        largest first (ties by topic index).
    """
    comp = _components(model)
    X = _check_counts(X, comp.shape[1])
    if n_topics is not None:
        n_topics = _check_positive_int(n_topics, "n_topics")
    if not isinstance(min_probability, numbers.Real) or not 0 <= min_probability <= 1:
        raise ValueError(f"min_probability must be in [0, 1], got {min_probability!r}.")
    theta = _doc_topic(model, X, comp.shape[0])
    out = []
    for row in theta:
        order = np.argsort(-row, kind="stable")
        order = order[row[order] >= min_probability]
        if n_topics is not None:
            order = order[:n_topics]
        out.append([(int(k), float(row[k])) for k in order])
    return out


def topic_summary(model, X, feature_names=None, n_words=10, *, min_tokens=1.0):
    """A pandas table of the live topics (requires pandas).

    Parameters
    ----------
    model : fitted topic model
    X : {array-like, sparse matrix} of shape (n_documents, n_words)
        Reference documents of the coherence (typically the training documents).
    feature_names, n_words, min_tokens
        As in :func:`show_topics`; ``n_words >= 2`` (coherence scores word pairs).

    Returns
    -------
    summary : pandas.DataFrame
        One row per live topic, index ``topic`` (the row of ``components_``), sorted by size,
        columns ``top_words`` (space-separated, most probable first), ``size`` (expected
        tokens, :func:`topic_sizes`), ``share`` (size over the live topics' total) and
        ``coherence`` (UMass coherence of the top words on X,
        :func:`sparseclust.metrics.umass_coherence`, Mimno et al. 2011; closer to 0 is more
        coherent).
    """
    try:
        import pandas as pd
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("topic_summary needs pandas (pip install pandas).") from exc
    from .metrics import umass_coherence

    comp = _components(model)
    X = _check_counts(X, comp.shape[1])
    if _check_positive_int(n_words, "n_words") < 2:
        raise ValueError("n_words must be at least 2 for the coherence.")
    sizes = topic_sizes(model, X)
    topics = show_topics(model, feature_names, n_words, X=X, min_tokens=min_tokens)
    live = np.array([k for k, _ in topics])
    n = min(int(n_words), comp.shape[1])
    coherence = umass_coherence(comp[live], X, top_n=n)
    frame = pd.DataFrame(
        {
            "top_words": [" ".join(w for w, _ in words) for _, words in topics],
            "size": sizes[live],
            "share": sizes[live] / sizes[live].sum(),
            "coherence": np.asarray(coherence, dtype=np.float64),
        },
        index=pd.Index(live, name="topic"),
    )
    return frame.sort_values("size", ascending=False, kind="stable")
