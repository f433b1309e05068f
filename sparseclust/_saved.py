# SPDX-License-Identifier: BSD-3-Clause
"""What ``sparseclust topics --save-model`` saves: a model that knows its words.

A topic model fitted by the command line is saved as a scikit-learn
``Pipeline([("vectorizer", V), ("model", estimator)])``:

- text input (a folder of ``.txt`` files or one document per line): ``V`` is the fitted
  ``CountVectorizer`` that counted the training corpus (same tokenization, stop words,
  ``--min-df`` / ``--max-df`` filters and vocabulary), so ``pipe.transform(["raw text", ...])``
  gives document-topic proportions;
- word-id input (UCI bag of words, LDA-C): ``V`` is a :class:`WordIdVocabulary`, which passes
  count matrices over the model's word ids through unchanged and holds the vocabulary
  (``vocabulary_``, ``get_feature_names_out``) so that a corpus with its own vocabulary file
  can be mapped onto the model's columns.

The vocabulary is not stored as ``feature_names_in_`` on the estimator: scikit-learn then
warns on every sparse (hence nameless) input.

:func:`slim_copy` returns a copy of a fitted estimator without its training caches, for saving.
"""

import copy

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin

__all__ = ["WordIdVocabulary", "slim_copy", "topic_pipeline", "pipeline_vocabulary"]

#: private attributes of fitted topic models that hold training state, not parameters, and
#: what the saved copy keeps of them: the stochastic step's state (with a K x V copy of the
#: sufficient statistics) and the HDP's per-document statistics become None (partial_fit then
#: resumes as after a memoized fit); the sampler's random state is dropped (partial_fit
#: seeds a new one from random_state)
_TRAINING_STATE = {"_svi_state": None, "_doc_stats": None}
_DROPPED = ("_rng",)


def slim_copy(estimator):
    """A shallow copy of ``estimator`` without training state, for saving.

    The live estimator is not changed. Besides ``_TRAINING_STATE`` and ``_DROPPED``, the
    attributes an estimator lists in ``_recomputed_on_load`` (arrays it rebuilds from
    ``components_`` when unpickled) are left out, and a ``CountVectorizer``'s
    ``stop_words_`` (the words its document-frequency filters dropped: introspection only,
    as large as the training vocabulary) becomes None.
    """
    from sklearn.pipeline import Pipeline

    if isinstance(estimator, Pipeline):
        out = copy.copy(estimator)
        out.steps = [(name, slim_copy(step)) for name, step in estimator.steps]
        return out
    out = copy.copy(estimator)
    state = vars(out)
    for name, value in _TRAINING_STATE.items():
        if name in state:
            state[name] = value
    for name in _DROPPED + tuple(getattr(out, "_recomputed_on_load", ())):
        state.pop(name, None)
    if "stop_words_" in state:
        state["stop_words_"] = None
    return out


class WordIdVocabulary(TransformerMixin, BaseEstimator):
    """Pass-through first step of a saved pipeline whose input is counts over word ids.

    Parameters
    ----------
    feature_names : array-like of str
        The words of columns ``0 .. n_features - 1``.

    Attributes
    ----------
    vocabulary_ : dict
        Word -> column.
    n_features_in_ : int
    """

    def __init__(self, feature_names=None):
        self.feature_names = feature_names

    def fit(self, X=None, y=None):
        names = np.asarray(self.feature_names, dtype=str)
        self.vocabulary_ = {w: j for j, w in enumerate(names.tolist())}
        self.n_features_in_ = len(names)
        return self

    def get_feature_names_out(self, input_features=None):
        return np.asarray(self.feature_names, dtype=object)

    def transform(self, X):
        """``X`` (n_documents, n_features) as a CSR matrix of float64, unchanged."""
        X = sp.csr_matrix(X, dtype=np.float64)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} word ids, the model's vocabulary has "
                f"{self.n_features_in_} words"
            )
        return X


def topic_pipeline(vectorizer, model):
    """``Pipeline([("vectorizer", vectorizer), ("model", model)])``, both fitted."""
    from sklearn.pipeline import Pipeline

    return Pipeline([("vectorizer", vectorizer), ("model", model)])


def pipeline_vocabulary(pipe):
    """The words of the model's columns, an array of str."""
    return np.asarray(pipe.named_steps["vectorizer"].get_feature_names_out(), dtype=str)


def map_columns(X, words, vocabulary):
    """Counts ``X`` over ``words`` (its columns) moved to the columns ``vocabulary``
    (word -> column) of a model; words the model does not know are dropped.

    Returns ``(X_mapped csr, n_known_words, n_dropped_tokens)``.
    """
    X = sp.csr_matrix(X, dtype=np.float64)
    src, dst = [], []
    for j, w in enumerate(words):
        k = vocabulary.get(str(w))
        if k is not None:
            src.append(j)
            dst.append(k)
    P = sp.csr_matrix(
        (np.ones(len(src)), (np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64))),
        shape=(X.shape[1], len(vocabulary)),
    )
    Y = sp.csr_matrix(X @ P)
    return Y, len(src), float(X.sum() - Y.sum())
