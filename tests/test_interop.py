# SPDX-License-Identifier: BSD-3-Clause
"""sparseclust.interop against independent computations, pyLDAvis and gensim.

pandas, pyLDAvis and gensim are in the ``test`` extra (pyLDAvis requires the other two).
"""

import gensim
import numpy as np
import pandas as pd
import pyLDAvis
import pytest
import scipy.sparse as sp
from gensim.models.coherencemodel import CoherenceModel
from sklearn.decomposition import LatentDirichletAllocation

from sparseclust import HDPTopicModel, SparseLDA
from sparseclust.interop import (
    document_topics,
    gensim_topics,
    pyldavis_data,
    pyldavis_prepare,
    show_topics,
    topic_sizes,
    topic_summary,
)
from sparseclust.metrics import umass_coherence


def _corpus(seed=0, D=120, V=40, K=4):
    """Documents from K planted block topics (each on its own V/K words), as CSR counts."""
    rng = np.random.default_rng(seed)
    block = V // K
    X = np.zeros((D, V))
    for d in range(D):
        k = d % K
        X[d, k * block:(k + 1) * block] = rng.poisson(2.0, block)
    X[:, -1] = 0  # a word that never occurs
    return sp.csr_array(X)


@pytest.fixture(scope="module")
def fitted():
    X = _corpus()
    lda = SparseLDA(n_components=6, L=3, max_iter=30, random_state=0).fit(X)
    vocab = np.array([f"w{j:02d}" for j in range(X.shape[1])], dtype=object)
    return lda, X, vocab


class _Fixed:
    """A minimal topic model: given components_ and document proportions, no prior."""

    def __init__(self, components, theta):
        self.components_ = components
        self._theta = theta

    def transform(self, X):
        return self._theta[: X.shape[0]]


def test_topic_sizes_from_prior_and_from_documents(fitted):
    lda, X, _ = fitted
    expected = (lda.components_ - lda.topic_word_prior_).sum(axis=1)
    np.testing.assert_allclose(topic_sizes(lda), expected)
    # the sizes of a fit are the tokens of its training data
    assert topic_sizes(lda).sum() == pytest.approx(X.sum(), rel=1e-6)
    # a model without a prior: sum_d N_d theta_dk on the documents
    theta = lda.transform(X)
    model = _Fixed(lda.components_, theta)
    manual = np.array([sum(X[[d]].sum() * theta[d, k] for d in range(X.shape[0]))
                       for k in range(theta.shape[1])])
    np.testing.assert_allclose(topic_sizes(model, X), manual)
    with pytest.raises(ValueError, match="pass the documents X"):
        topic_sizes(model)


def test_pyldavis_data_drops_dead_topics_and_unused_words():
    rng = np.random.default_rng(1)
    X = _corpus(1)
    K, V = 5, X.shape[1]
    comp = rng.gamma(1.0, 1.0, (K, V)) + 0.1
    comp[2] = 0.1  # exactly the prior: no token
    theta = rng.dirichlet(np.ones(K), X.shape[0])
    model = _Fixed(comp, theta)
    model.topic_word_prior_ = 0.1
    data = pyldavis_data(model, X, [f"v{j}" for j in range(V)])
    assert set(data) == {"topic_term_dists", "doc_topic_dists", "doc_lengths", "vocab",
                         "term_frequency"}
    live, used = [0, 1, 3, 4], np.arange(V - 1)  # topic 2 dead, the last word unused
    phi = comp[live][:, used]
    np.testing.assert_allclose(data["topic_term_dists"], phi / phi.sum(1, keepdims=True))
    th = theta[:, live]
    np.testing.assert_allclose(data["doc_topic_dists"], th / th.sum(1, keepdims=True))
    dense = X.toarray()
    np.testing.assert_array_equal(data["doc_lengths"], dense.sum(1))
    np.testing.assert_array_equal(data["term_frequency"], dense.sum(0)[used])
    assert data["vocab"] == [f"v{j}" for j in used]
    # the caller's arrays are untouched
    assert np.all(comp[2] == 0.1) and X.shape == (120, 40)


def test_pyldavis_prepare_runs_and_matches_topic_shares(fitted):
    lda, X, vocab = fitted
    data = pyldavis_data(lda, X, vocab)
    vis = pyldavis_prepare(lda, X, vocab, sort_topics=False)
    assert isinstance(vis, pyLDAvis.PreparedData)
    # pyLDAvis's topic frequency (percent of tokens) from its inputs, computed here directly
    freq = data["doc_topic_dists"].T @ data["doc_lengths"]
    np.testing.assert_allclose(vis.topic_coordinates.sort_values("topics")["Freq"].to_numpy(),
                               100 * freq / freq.sum(), rtol=1e-6)
    html = pyLDAvis.prepared_data_to_html(vis)
    assert vocab[0] in html or any(w in html for w in data["vocab"])


def test_show_topics_and_gensim_topics(fitted):
    lda, X, vocab = fitted
    topics = show_topics(lda, vocab, n_words=5)
    phi = lda.components_ / lda.components_.sum(axis=1, keepdims=True)
    live = np.flatnonzero(topic_sizes(lda) >= 1.0)
    assert [k for k, _ in topics] == list(live)
    for k, words in topics:
        top = np.argsort(-phi[k])[:5]
        assert [w for w, _ in words] == list(vocab[top])
        np.testing.assert_allclose([p for _, p in words], phi[k, top])
    assert gensim_topics(lda, vocab, n_words=5) == [[w for w, _ in ws] for _, ws in topics]
    assert len(show_topics(lda, vocab, min_tokens=0)) == lda.n_components
    with pytest.raises(ValueError, match="n_words"):
        show_topics(lda, vocab, n_words=0)
    with pytest.raises(ValueError, match="feature_names"):
        show_topics(lda, vocab[:-1])


def test_gensim_coherence_model_accepts_the_topics(fitted):
    lda, X, vocab = fitted
    topics = gensim_topics(lda, vocab, n_words=6)
    dictionary = gensim.corpora.Dictionary([list(vocab)])
    dense = X.toarray().astype(int)
    corpus = [[(dictionary.token2id[vocab[j]], int(c)) for j, c in enumerate(row) if c]
              for row in dense]
    cm = CoherenceModel(topics=topics, corpus=corpus, dictionary=dictionary,
                        coherence="u_mass")
    per_topic = np.asarray(cm.get_coherence_per_topic())
    # gensim's u_mass is the mean over the M (M - 1) / 2 word pairs of
    # log((D(v_m, v_l) + 1e-12) / D(v_l)); ours is the sum, with the same epsilon
    live = [k for k, _ in show_topics(lda, vocab, n_words=6)]
    ours = umass_coherence(lda.components_[live], X, top_n=6, epsilon=1e-12)
    np.testing.assert_allclose(per_topic, np.asarray(ours) / 15, rtol=1e-6)


def test_document_topics_against_transform(fitted):
    lda, X, _ = fitted
    theta = lda.transform(X)
    listing = document_topics(lda, X, n_topics=2, min_probability=0.05)
    assert len(listing) == X.shape[0]
    for d, topics in enumerate(listing):
        expected = [k for k in np.argsort(-theta[d], kind="stable") if theta[d, k] >= 0.05][:2]
        assert [k for k, _ in topics] == expected
        np.testing.assert_allclose([p for _, p in topics], theta[d, expected])
    full = document_topics(lda, X, min_probability=0.0)
    assert all(len(t) == lda.n_components for t in full)
    np.testing.assert_allclose([sum(p for _, p in t) for t in full], 1.0)
    with pytest.raises(ValueError, match="min_probability"):
        document_topics(lda, X, min_probability=1.5)
    with pytest.raises(ValueError, match="negative"):
        document_topics(lda, -X.toarray())
    with pytest.raises(ValueError, match="features"):
        document_topics(lda, X[:, :5])


def test_topic_summary(fitted):
    lda, X, vocab = fitted
    table = topic_summary(lda, X, vocab, n_words=4)
    assert isinstance(table, pd.DataFrame)
    assert list(table.columns) == ["top_words", "size", "share", "coherence"]
    sizes = topic_sizes(lda)
    live = np.flatnonzero(sizes >= 1.0)
    assert sorted(table.index) == list(live)
    assert np.all(np.diff(table["size"].to_numpy()) <= 0)  # largest first
    np.testing.assert_allclose(table["size"], sizes[table.index])
    assert table["share"].sum() == pytest.approx(1.0)
    coh = umass_coherence(lda.components_[table.index.to_numpy()], X, top_n=4)
    np.testing.assert_allclose(table["coherence"], coh)
    phi = lda.components_ / lda.components_.sum(axis=1, keepdims=True)
    for k, words in table["top_words"].items():
        assert words.split() == list(vocab[np.argsort(-phi[k])[:4]])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_other_topic_models():
    X = _corpus(2)
    hdp = HDPTopicModel(max_components=8, L=3, max_iter=10, random_state=0).fit(X)
    data = pyldavis_data(hdp, X)
    assert data["topic_term_dists"].shape[0] == hdp.n_components_
    assert data["vocab"][0] == "word0"
    np.testing.assert_allclose(data["doc_topic_dists"].sum(axis=1), 1.0)
    sk = LatentDirichletAllocation(n_components=4, max_iter=5, random_state=0).fit(X)
    topics = show_topics(sk, n_words=3)
    assert len(topics) == 4 and all(len(w) == 3 for _, w in topics)
    with pytest.raises(TypeError, match="not a fitted topic model"):
        show_topics(LatentDirichletAllocation())
