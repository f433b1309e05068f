# SPDX-License-Identifier: BSD-3-Clause
"""Bad input gets a clear error, the same in every estimator; valid edge cases still fit."""

import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from sparseclust.mixture import SparseGaussianMixture
from sparseclust.topics import HDPTopicModel, SparseLDA, StochasticEMLDA
from sparseclust.topics._local import NonIntegerCountsWarning

pytestmark = pytest.mark.contract

TOPIC_MODELS = {
    "SparseLDA": lambda: SparseLDA(3, max_iter=2, random_state=0),  # the Gibbs step
    "SparseLDA-variational": lambda: SparseLDA(3, local_step="variational", max_iter=2,
                                               random_state=0),
    "HDPTopicModel": lambda: HDPTopicModel(max_components=4, max_iter=2, random_state=0),
    "StochasticEMLDA": lambda: StochasticEMLDA(3, max_iter=2, random_state=0),
}
#: the estimators that sample one topic per token (whole tokens)
SAMPLED = ["SparseLDA", "StochasticEMLDA"]
DOCS = ["the cat sat on the mat", "a dog ran far", "the dog sat", "cats and dogs"] * 3


def _counts(D=24, V=15, seed=0):
    X = np.random.default_rng(seed).poisson(1.0, (D, V)).astype(float)
    X[:, 0] += 1.0  # no empty document
    return X


def _make(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning of the short fits
        return TOPIC_MODELS[name]()


def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def _text_inputs():
    import pandas as pd

    return {"list": DOCS, "array": np.array(DOCS), "series": pd.Series(DOCS),
            "object-array": np.array(DOCS, dtype=object)}


# -- text -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["list", "array", "series", "object-array"])
@pytest.mark.parametrize("name", list(TOPIC_MODELS))
def test_topic_models_say_to_vectorize_text(name, kind):
    X = _text_inputs()[kind]
    cls = name.split("-")[0]
    for method in ("fit", "partial_fit"):
        with pytest.raises(ValueError, match=rf"{cls}\.{method} expects a document-word count "
                           r"matrix, got text; .*CountVectorizer"):
            getattr(_make(name), method)(X)
    m = _quiet(_make(name).fit, _counts(V=4))
    for method in ("transform", "score", "partial_fit"):
        with pytest.raises(ValueError, match=rf"{cls}\.{method} expects .* got text; .*"
                           "load_text_lines"):
            getattr(m, method)(X)


@pytest.mark.parametrize("kind", ["list", "array", "series", "object-array"])
def test_mixture_says_to_vectorize_text(kind):
    X = _text_inputs()[kind]
    for method in ("fit", "partial_fit"):
        with pytest.raises(ValueError, match="SparseGaussianMixture.* expects numeric feature "
                           "vectors .* got text"):
            getattr(SparseGaussianMixture(n_components=2), method)(X)
    m = _quiet(SparseGaussianMixture(n_components=2, random_state=0).fit,
               np.random.default_rng(0).standard_normal((30, 4)))
    for method in ("transform", "score", "predict", "predict_proba"):
        with pytest.raises(ValueError, match="expects numeric feature vectors"):
            getattr(m, method)(X)


def test_numeric_object_arrays_still_fit():
    X = _counts().astype(object)
    for name in TOPIC_MODELS:
        assert _quiet(_make(name).fit, X).transform(X).shape[0] == X.shape[0]


# -- no documents, no tokens ------------------------------------------------------------

@pytest.mark.parametrize("method", ["fit", "partial_fit"])
@pytest.mark.parametrize("name", list(TOPIC_MODELS))
def test_corpus_without_tokens_or_documents(name, method):
    cls = name.split("-")[0]
    for X in (np.zeros((6, 10)), sp.csr_array((6, 10)), np.zeros((6, 10), dtype=np.float32)):
        with pytest.raises(ValueError, match=rf"{cls}\.{method}: the corpus has no tokens "
                           r"\(every count is 0\); there is nothing to fit"):
            getattr(_make(name), method)(X)
    for X in (np.zeros((0, 10)), sp.csr_array((0, 10))):
        with pytest.raises(ValueError, match=rf"{cls}\.{method}: the corpus has no documents "
                           r"\(X has shape \(0, 10\)\); there is nothing to fit"):
            getattr(_make(name), method)(X)
    # a fitted model refuses an all-zero minibatch too, and is left as it was
    X = _counts(V=10)
    m = _quiet(_make(name).fit, X)
    before = m.components_.copy()
    with pytest.raises(ValueError, match="no tokens"):
        m.partial_fit(np.zeros((3, 10)))
    np.testing.assert_array_equal(m.components_, before)


def test_mixture_without_samples():
    # scikit-learn's validation already refuses 0 samples (and the mixture needs 2 to fit)
    for method in ("fit", "partial_fit"):
        with pytest.raises(ValueError, match="0 sample"):
            getattr(SparseGaussianMixture(n_components=2), method)(np.zeros((0, 3)))


@pytest.mark.parametrize("name", list(TOPIC_MODELS))
def test_transform_and_score_of_empty_documents_still_work(name):
    m = _quiet(_make(name).fit, _counts(V=10))
    Z = np.zeros((3, 10))
    T = m.transform(Z)  # the prior mean (E[beta] for the HDP), the same for every row
    np.testing.assert_allclose(T, np.broadcast_to(T[0], T.shape))
    np.testing.assert_allclose(T.sum(axis=1), 1.0)
    assert m.score(Z) == 0.0
    with pytest.raises(ValueError, match="no documents"):
        m.transform(np.zeros((0, 10)))


# -- non-integer counts -----------------------------------------------------------------

@pytest.mark.parametrize("method", ["fit", "partial_fit"])
@pytest.mark.parametrize("name", SAMPLED)
def test_sampled_steps_refuse_weights_that_round_away(name, method):
    X = _counts()
    cls = name.split("-")[0]
    row_normalised = X / X.sum(axis=1, keepdims=True)
    tfidf = sp.csr_array(X / np.linalg.norm(X, axis=1, keepdims=True))
    for W in (row_normalised, tfidf, X * 0.15):
        with pytest.raises(ValueError, match=rf"{cls}\.{method}: .*samples one topic per token "
                           r"and needs whole-number counts; got non-integer values \(e\.g\. "
                           r"[0-9.]+ at row 0, column 0\)\. Rounded half up .*less than half"
                           r".*CountVectorizer.*local_step='variational'"):
            getattr(_make(name), method)(W)


@pytest.mark.parametrize("name", SAMPLED)
def test_sampled_steps_warn_when_rounding_keeps_most_of_the_weight(name):
    X = _counts()
    Xf = X + 0.25  # rounds back to X (half up), with a warning
    Xf[X == 0] = 0.0
    with pytest.warns(NonIntegerCountsWarning, match=r"needs whole-number counts; .*"
                      r"e\.g\. 2\.25 at row 0, column 0.* rounded half up to whole tokens"):
        m = _quiet_except_rounding(_make(name).fit, Xf)
    if name == "StochasticEMLDA":  # the sweeps read nothing but the rounded tokens
        np.testing.assert_array_equal(m.components_, _quiet(_make(name).fit, X).components_)
    assert np.all(np.isfinite(m.components_))
    if name == "StochasticEMLDA":  # its fold-in samples too; SparseLDA's transform does not
        with pytest.warns(NonIntegerCountsWarning):
            m.transform(Xf)


def _quiet_except_rounding(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("always", NonIntegerCountsWarning)
        return fn(*args)


@pytest.mark.parametrize("name", ["SparseLDA-variational", "HDPTopicModel"])
def test_variational_models_take_fractional_weights_without_warning(name):
    X = _counts()
    tfidf = sp.csr_array(X / np.linalg.norm(X, axis=1, keepdims=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("error", NonIntegerCountsWarning)
        m = _make(name).fit(tfidf)
        assert np.all(np.isfinite(m.transform(tfidf)))


@pytest.mark.parametrize("name", SAMPLED)
def test_sampled_score_reads_fractional_weights_without_warning(name):
    m = _quiet(_make(name).fit, _counts())
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonIntegerCountsWarning)
        assert np.isfinite(m.score(_counts() * 0.3))


# -- valid edge cases -------------------------------------------------------------------

@pytest.mark.parametrize("name", list(TOPIC_MODELS))
def test_empty_documents_float32_and_one_document_fit(name):
    X = _counts()
    X[[2, 9]] = 0.0
    copy = X.copy()
    m = _quiet(_make(name).fit, X)
    assert np.all(np.isfinite(m.components_))
    np.testing.assert_array_equal(X, copy)  # the caller's array is untouched
    T = m.transform(X)
    np.testing.assert_allclose(T.sum(axis=1), 1.0)
    m32 = _quiet(_make(name).fit, X.astype(np.float32))
    np.testing.assert_array_equal(m32.components_, m.components_)
    assert m32.transform(X.astype(np.float32)).dtype == np.float32
    for one in (X[:1], np.vstack([np.zeros(X.shape[1]), X[:1]])):
        m1 = _quiet(_make(name).fit, one)
        assert np.all(np.isfinite(m1.transform(one))) and np.isfinite(m1.score(one))
        _quiet(_make(name).partial_fit, one)


def test_hdp_one_document_with_moves_and_the_default_start():
    # a delete move must not try to remove the last live topic (it once re-inferred the
    # documents with no topic left: "log_topic_word ... got shape (0, V)")
    x = np.vstack([np.zeros(30), np.r_[np.ones(3), np.zeros(27)]])
    for seed in range(3):
        m = _quiet(HDPTopicModel(random_state=seed).fit, x)
        assert m.n_components_ >= 1 and np.isfinite(m.score(x))


# -- set_output without its library -----------------------------------------------------

@pytest.mark.parametrize("make", [lambda: SparseLDA(2, max_iter=1),
                                  lambda: HDPTopicModel(max_components=3, max_iter=1),
                                  lambda: StochasticEMLDA(2, max_iter=1),
                                  lambda: SparseGaussianMixture(n_components=2)])
def test_set_output_without_pandas_fails_before_the_fit(monkeypatch, make):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    est = make().set_output(transform="pandas")  # scikit-learn does not check here
    with pytest.raises(ImportError, match=r"set to 'pandas' .* pandas is not installed"):
        est.fit(_counts(V=4))
    assert not hasattr(est, "n_features_in_")  # raised before the data was even validated


def test_gibbs_fitted_sparse_lda_transforms_fractional_weights_without_warning():
    # transform is the variational step whichever step fitted the topics: tf-idf rows are
    # read as they are (no rounding, no warning), equal to the variational step's transform
    X = _counts()
    tfidf = sp.csr_array(X / np.linalg.norm(X, axis=1, keepdims=True))
    m = _quiet(SparseLDA(3, max_iter=2, random_state=0).fit, X)
    assert m.local_step == "gibbs"
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonIntegerCountsWarning)
        theta = m.transform(tfidf)
    assert np.all(np.isfinite(theta))
    np.testing.assert_array_equal(theta, m.set_params(local_step="variational").transform(tfidf))
    # fit still refuses what rounding would mostly lose
    with pytest.raises(ValueError, match="needs whole-number counts"):
        SparseLDA(3, max_iter=2, random_state=0).fit(tfidf)
