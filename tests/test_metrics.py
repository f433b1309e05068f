# SPDX-License-Identifier: BSD-3-Clause
"""Tests of sparseclust.metrics against slow, independent references."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import digamma
from sklearn.decomposition import LatentDirichletAllocation
from sklearn.exceptions import NotFittedError

from sparseclust.metrics import (
    PROB_FLOOR,
    DocumentCompletionScorer,
    document_completion_score,
    left_to_right_score,
    npmi_coherence,
    split_document_types,
    top_words,
    umass_coherence,
)

# ---------------------------------------------------------------------------------------
# helpers


def planted_corpus(n_docs=150, n_topics=4, words_per_topic=8, doc_len=60, alpha=0.2, seed=0):
    """Block topics: topic k puts 95% of its mass on its own block of words."""
    rng = np.random.default_rng(seed)
    V = n_topics * words_per_topic
    phi = np.full((n_topics, V), 0.05 / (V - words_per_topic))
    for k in range(n_topics):
        phi[k, k * words_per_topic : (k + 1) * words_per_topic] = 0.95 / words_per_topic
    X = np.zeros((n_docs, V))
    for d in range(n_docs):
        pi = rng.dirichlet(np.full(n_topics, alpha))
        X[d] = rng.multinomial(doc_len, pi @ phi)
    return sp.csr_array(X), phi


def reference_local_step(counts, log_phi, alpha, tol=1e-11, max_iter=100000):
    """Dense LDA local step for one document by plain fixed-point iteration.

    Cold start from uniform document weights, then alternate
    r_uk ∝ exp(psi(theta_k) + log phi_k,u) and N_k = sum_u c_u r_uk, theta = N + alpha.
    """
    K = log_phi.shape[0]
    W = log_phi + math.log(1.0 / K)  # (K, U)
    r = np.exp(W - W.max(axis=0))
    r /= r.sum(axis=0)
    N = r @ counts
    for _ in range(max_iter):
        elogpi = digamma(N + alpha)
        W = log_phi + elogpi[:, None]
        r = np.exp(W - W.max(axis=0))
        r /= r.sum(axis=0)
        N_new = r @ counts
        done = np.max(np.abs(N_new - N)) < tol
        N = N_new
        if done:
            break
    return N


def reference_score(phi, X_obs, X_held, alpha):
    """Slow document completion on a given split: per-document loops in numpy."""
    phi = phi / phi.sum(axis=1, keepdims=True)
    log_phi = np.log(phi)
    X_obs = sp.csr_array(X_obs)
    X_held = sp.csr_array(X_held)
    total, tokens = 0.0, 0.0
    for d in range(X_obs.shape[0]):
        lo, hi = X_obs.indptr[d], X_obs.indptr[d + 1]
        u, c = X_obs.indices[lo:hi], X_obs.data[lo:hi]
        N = reference_local_step(c, log_phi[:, u], alpha)
        theta = N + alpha
        pi = theta / theta.sum()
        lo, hi = X_held.indptr[d], X_held.indptr[d + 1]
        for v, cnt in zip(X_held.indices[lo:hi], X_held.data[lo:hi], strict=True):
            total += cnt * math.log(float(pi @ phi[:, v]))
            tokens += cnt
    return total / tokens


def brute_force_umass(phi, X, top_n, eps=1.0):
    """Eq. 13 of Mimno, Hoffman & Blei 2012 by counting documents one at a time with Python
    sets."""
    X = np.asarray(sp.csr_array(X).toarray())
    doc_words = [set(np.flatnonzero(row > 0).tolist()) for row in X]
    out = []
    for k in range(phi.shape[0]):
        order = sorted(range(phi.shape[1]), key=lambda j: (-phi[k, j], j))[:top_n]
        c = 0.0
        for m in range(1, top_n):
            for j in range(m):
                vm, vl = order[m], order[j]
                d_l = sum(1 for ws in doc_words if vl in ws)
                d_ml = sum(1 for ws in doc_words if vl in ws and vm in ws)
                c += math.log((d_ml + eps) / max(d_l, 1))
        out.append(c)
    return np.array(out)


# ---------------------------------------------------------------------------------------
# split


def test_split_document_types_rule_and_partition():
    rng = np.random.default_rng(1)
    X = sp.random_array((60, 40), density=0.15, rng=rng, format="csr")
    X.data = np.ceil(X.data * 4)
    X = X.tolil()
    X[0, :] = 0
    X[1, :] = 0
    X[1, 3] = 7  # one type: skipped
    X = X.tocsr()
    A, B, kept = split_document_types(X, heldout_fraction=0.2, random_state=0)
    n_types = np.diff(X.indptr)
    assert kept.tolist() == np.flatnonzero(n_types >= 2).tolist()
    assert 0 not in kept and 1 not in kept
    # parts add up to the kept rows and have disjoint types
    np.testing.assert_array_equal((A + B).toarray(), X[kept].toarray())
    assert (A.multiply(B)).nnz == 0
    for i, d in enumerate(kept):
        n = n_types[d]
        h = min(max(math.floor(0.2 * n + 0.5), 1), n - 1)
        assert B[[i]].nnz == h
        assert A[[i]].nnz == n - h


def test_split_is_seeded_and_random():
    X, _ = planted_corpus(n_docs=40)
    A1, B1, _ = split_document_types(X, 0.3, random_state=5)
    A2, B2, _ = split_document_types(X, 0.3, random_state=5)
    A3, B3, _ = split_document_types(X, 0.3, random_state=6)
    assert (A1 != A2).nnz == 0 and (B1 != B2).nnz == 0
    assert (B1 != B3).nnz > 0


def test_split_does_not_modify_input():
    X, _ = planted_corpus(n_docs=20)
    before = X.copy()
    split_document_types(X, 0.2, random_state=0)
    np.testing.assert_array_equal(X.toarray(), before.toarray())


# ---------------------------------------------------------------------------------------
# document completion


@pytest.mark.kernels
@pytest.mark.parametrize("alpha", [0.1, 0.7])
def test_document_completion_matches_reference(alpha):
    X, phi_true = planted_corpus(n_docs=30, seed=2)
    rng = np.random.default_rng(3)
    phi = 0.5 * phi_true + 0.5 * rng.dirichlet(np.ones(phi_true.shape[1]), size=4)
    score = document_completion_score(
        phi,
        X,
        heldout_fraction=0.2,
        random_state=7,
        doc_topic_prior=alpha,
        max_iter=20000,
        tol=1e-10,
    )
    A, B, _ = split_document_types(X, 0.2, random_state=7)
    expected = reference_score(phi, A, B, alpha)
    assert score == pytest.approx(expected, rel=1e-7, abs=1e-9)


def test_uniform_topics_score_is_minus_log_v():
    # with phi_kv = 1/V every mixture predicts 1/V: the score is exactly -log V
    X, phi = planted_corpus(n_docs=25)
    V = phi.shape[1]
    score = document_completion_score(np.ones((3, V)), X, random_state=0)
    assert score == pytest.approx(-math.log(V), rel=1e-12)


def test_planted_topics_beat_random_topics():
    X, phi_true = planted_corpus(n_docs=120, seed=4)
    rng = np.random.default_rng(5)
    s_true = document_completion_score(phi_true, X, random_state=0)
    for _ in range(3):
        phi_rand = rng.dirichlet(np.ones(phi_true.shape[1]), size=phi_true.shape[0])
        assert s_true > document_completion_score(phi_rand, X, random_state=0) + 0.2
    # and the planted score is close to the entropy bound of the generating process
    assert s_true < 0


def test_document_completion_deterministic_and_seed_dependent():
    X, phi = planted_corpus(n_docs=60, seed=6)
    s1 = document_completion_score(phi, X, random_state=11)
    s2 = document_completion_score(phi, X, random_state=11)
    s3 = document_completion_score(phi, X, random_state=12)
    assert s1 == s2
    assert s1 != s3


@pytest.mark.kernels
def test_document_completion_threads_agree():
    X, phi = planted_corpus(n_docs=60, seed=6)
    s1 = document_completion_score(phi, X, random_state=1, n_threads=1)
    s2 = document_completion_score(phi, X, random_state=1, n_threads=2)
    assert s1 == pytest.approx(s2, rel=1e-10)


@pytest.mark.contract
def test_document_completion_accepts_fitted_sklearn_model_and_normalizes_rows():
    X, _ = planted_corpus(n_docs=80, seed=8)
    lda = LatentDirichletAllocation(
        n_components=4, doc_topic_prior=0.3, topic_word_prior=0.1, max_iter=5, random_state=0
    ).fit(X)
    s_model = document_completion_score(lda, X, random_state=0)
    # the model's alpha (doc_topic_prior_) is used, and components_ are normalized
    s_matrix = document_completion_score(
        lda.components_ * 17.0, X, random_state=0, doc_topic_prior=0.3
    )
    assert s_model == pytest.approx(s_matrix, rel=1e-12)
    # an explicit doc_topic_prior overrides the model's
    s_other = document_completion_score(lda, X, random_state=0, doc_topic_prior=2.0)
    assert s_other != pytest.approx(s_model, rel=1e-9)


def test_document_completion_zero_topic_probabilities_are_floored():
    X, phi = planted_corpus(n_docs=40, seed=9)
    phi0 = phi.copy()
    phi0[:, -1] = 0.0  # a word no topic can emit
    score = document_completion_score(phi0, X, random_state=0)
    assert np.isfinite(score)
    floored = np.maximum(phi0 / phi0.sum(1, keepdims=True), PROB_FLOOR)
    expected = document_completion_score(floored, X, random_state=0)
    assert score == pytest.approx(expected, rel=1e-12)


def test_document_completion_details_add_up():
    X, phi = planted_corpus(n_docs=30, seed=10)
    score, det = document_completion_score(phi, X, random_state=0, return_details=True)
    assert score == pytest.approx(det["doc_loglik"].sum() / det["doc_tokens"].sum())
    np.testing.assert_allclose(det["doc_topic"].sum(axis=1), 1.0)
    assert det["doc_topic"].shape == (len(det["kept"]), 4)


def test_document_completion_does_not_modify_inputs():
    X, phi = planted_corpus(n_docs=30, seed=10)
    X_before, phi_before = X.copy(), phi.copy()
    document_completion_score(phi, X, random_state=0)
    np.testing.assert_array_equal(X.toarray(), X_before.toarray())
    np.testing.assert_array_equal(phi, phi_before)


def test_document_completion_read_only_and_float32_inputs():
    X, phi = planted_corpus(n_docs=30, seed=10)
    Xd = X.toarray().astype(np.float32)
    Xd.setflags(write=False)
    phi_ro = phi.copy()
    phi_ro.setflags(write=False)
    s = document_completion_score(phi_ro, Xd, random_state=0)
    assert s == pytest.approx(document_completion_score(phi, X, random_state=0), rel=1e-10)


def test_completion_scorer_equals_the_score_and_scores_pipelines_on_their_last_step():
    import pickle

    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.pipeline import make_pipeline

    from sparseclust import SparseLDA

    X, _ = planted_corpus(seed=3)
    lda = SparseLDA(4, max_iter=5, random_state=0).fit(X)
    scorer = DocumentCompletionScorer(heldout_fraction=0.3, random_state=2)
    want = document_completion_score(lda, X, 0.3, 2)
    assert scorer(lda, X) == want
    assert scorer(lda, X, None) == want
    # the default split seed is fixed (0), so every candidate of a search sees one split
    assert DocumentCompletionScorer()(lda, X) == document_completion_score(lda, X,
                                                                           random_state=0)
    assert pickle.loads(pickle.dumps(scorer))(lda, X) == want
    assert "heldout_fraction=0.3" in repr(scorer)
    # a pipeline on text: the fold goes through the vectorizer, the topic model scores it
    words = [f"w{v}" for v in range(X.shape[1])]
    docs = [" ".join(w for v, w in enumerate(words) for _ in range(int(row[v])))
            for row in X.toarray()]
    pipe = make_pipeline(CountVectorizer(vocabulary=words, token_pattern=r"\S+"),
                         SparseLDA(4, max_iter=5, random_state=0)).fit(docs)
    counts = pipe[0].transform(docs)
    assert scorer(pipe, docs) == document_completion_score(pipe[-1], counts, 0.3, 2)


def test_completion_scorer_unwraps_pipelines_and_refuses_what_it_cannot_score():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline, make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    from sparseclust import SparseLDA

    X, _ = planted_corpus(seed=4)
    scorer = DocumentCompletionScorer()
    want = document_completion_score(SparseLDA(4, max_iter=5, random_state=0).fit(X), X,
                                     random_state=0)
    # a one-step pipeline, a 'passthrough' step and a nested pipeline score the same model
    one = make_pipeline(SparseLDA(4, max_iter=5, random_state=0)).fit(X)
    assert scorer(one, X) == want
    nested = Pipeline([("skip", "passthrough"),
                       ("inner", make_pipeline(FunctionTransformer(),
                                               SparseLDA(4, max_iter=5, random_state=0)))])
    assert scorer(nested.fit(X), X) == want
    # not a topic model at the end: a clear error, not a misleading one
    clf = make_pipeline(LogisticRegression()).fit(X, np.arange(X.shape[0]) % 2)
    with pytest.raises(TypeError, match="fitted topic model"):
        scorer(clf, X)
    # what would make every score of a search NaN is refused when the scorer is made
    for bad in (0.0, 1.0, 1.5, "0.2"):
        with pytest.raises(ValueError, match="heldout_fraction"):
            DocumentCompletionScorer(heldout_fraction=bad)
    for bad in (None, 0.5, True, np.random.RandomState(0)):
        with pytest.raises(ValueError, match="integer random_state"):
            DocumentCompletionScorer(random_state=bad)


def test_completion_scorer_in_a_grid_search_over_the_number_of_topics():
    from sklearn.model_selection import GridSearchCV, KFold

    from sparseclust import SparseLDA

    X, _ = planted_corpus(n_docs=240, n_topics=4, seed=5)
    folds = KFold(3, shuffle=True, random_state=0)
    grid = {"n_components": [1, 4]}
    search = GridSearchCV(SparseLDA(max_iter=10, random_state=0), grid,
                          scoring=DocumentCompletionScorer(), cv=folds).fit(X)
    # the same numbers by hand: fit on each training fold, score its test fold
    for i, K in enumerate(grid["n_components"]):
        by_hand = []
        for train, test in folds.split(X):
            m = SparseLDA(K, max_iter=10, random_state=0).fit(X[train])
            by_hand.append(document_completion_score(m, X[test], random_state=0))
        assert search.cv_results_["mean_test_score"][i] == pytest.approx(np.mean(by_hand),
                                                                         rel=1e-12)
    # four planted topics predict held-out words better than one
    assert search.best_params_ == {"n_components": 4}


def test_document_completion_validation():
    X, phi = planted_corpus(n_docs=20)
    with pytest.raises(ValueError, match="features"):
        document_completion_score(phi[:, :-1], X)
    Xneg = X.toarray()
    Xneg[0, 0] = -1
    with pytest.raises(ValueError, match="[Nn]egative"):
        document_completion_score(phi, Xneg)
    bad = phi.copy()
    bad[0, 0] = -0.1
    with pytest.raises(ValueError, match="nonnegative"):
        document_completion_score(bad, X)
    bad = phi.copy()
    bad[1] = 0
    with pytest.raises(ValueError, match="positive sum"):
        document_completion_score(bad, X)
    nan = phi.copy()
    nan[0, 0] = np.nan
    with pytest.raises(ValueError):
        document_completion_score(nan, X)
    for frac in (0, 1, 1.5, -0.2):
        with pytest.raises(ValueError, match="heldout_fraction"):
            document_completion_score(phi, X, heldout_fraction=frac)
    with pytest.raises(ValueError, match="doc_topic_prior"):
        document_completion_score(phi, X, doc_topic_prior=-1.0)
    with pytest.raises(ValueError, match="doc_topic_prior"):
        document_completion_score(phi, X, doc_topic_prior=np.ones(3))
    with pytest.raises(ValueError, match="2 distinct words"):
        document_completion_score(phi, sp.csr_array(np.eye(5, phi.shape[1]) * 3))
    with pytest.raises(NotFittedError):
        document_completion_score(LatentDirichletAllocation(n_components=4), X)


# ---------------------------------------------------------------------------------------
# coherence and top words


@pytest.mark.parametrize("top_n", [2, 5, 10])
def test_umass_coherence_matches_brute_force(top_n):
    rng = np.random.default_rng(0)
    X = sp.random_array((80, 30), density=0.2, rng=rng, format="csr")
    X.data = np.ceil(X.data * 3)  # counts above 1 must not matter
    phi = rng.dirichlet(np.ones(30), size=6)
    got = umass_coherence(phi, X, top_n=top_n)
    assert got.shape == (6,)
    np.testing.assert_allclose(got, brute_force_umass(phi, X, top_n), rtol=1e-12)


def test_umass_coherence_is_binary_in_counts():
    rng = np.random.default_rng(1)
    X = sp.random_array((50, 20), density=0.3, rng=rng, format="csr")
    phi = rng.dirichlet(np.ones(20), size=3)
    Xb = X.copy()
    Xb.data[:] = 1
    X5 = X.copy()
    X5.data = np.ceil(X5.data * 50)
    np.testing.assert_allclose(umass_coherence(phi, Xb, 6), umass_coherence(phi, X5, 6))


def test_umass_coherence_unseen_word_is_finite():
    rng = np.random.default_rng(2)
    X = sp.random_array((40, 15), density=0.3, rng=rng, format="lil")
    X[:, 0] = 0  # word 0 occurs nowhere
    X = X.tocsr()
    phi = rng.dirichlet(np.ones(15), size=3)
    phi[1, 0] = 10.0  # ... but tops topic 1
    got = umass_coherence(phi, X, top_n=5)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, brute_force_umass(phi, X, 5), rtol=1e-12)


def test_umass_coherence_orders_planted_topics_above_random():
    X, phi_true = planted_corpus(n_docs=200, alpha=0.05, seed=3)
    rng = np.random.default_rng(4)
    phi_rand = rng.dirichlet(np.ones(phi_true.shape[1]), size=phi_true.shape[0])
    assert umass_coherence(phi_true, X, 5).mean() > umass_coherence(phi_rand, X, 5).mean()


def test_umass_coherence_validation():
    X, phi = planted_corpus(n_docs=20)
    with pytest.raises(ValueError, match="top_n"):
        umass_coherence(phi, X, top_n=1)
    with pytest.raises(ValueError, match="top_n"):
        umass_coherence(phi, X, top_n=phi.shape[1] + 1)
    with pytest.raises(ValueError, match="features"):
        umass_coherence(phi, X[:, :-2])
    with pytest.raises(ValueError, match="epsilon"):
        umass_coherence(phi, X, epsilon=0)


def test_top_words_order_and_model_input():
    phi = np.array([[0.1, 0.5, 0.4], [0.7, 0.1, 0.2]])
    names = ["a", "b", "c"]
    assert top_words(phi, names, n=2) == [["b", "c"], ["a", "c"]]
    assert top_words(phi, names, n=10) == [["b", "c", "a"], ["a", "c", "b"]]
    X, _ = planted_corpus(n_docs=50)
    lda = LatentDirichletAllocation(n_components=3, max_iter=3, random_state=0).fit(X)
    vocab = [f"w{j}" for j in range(X.shape[1])]
    expect = [[vocab[j] for j in np.argsort(-row, kind="stable")[:4]] for row in lda.components_]
    assert top_words(lda, vocab, n=4) == expect
    with pytest.raises(ValueError, match="feature_names"):
        top_words(phi, ["a", "b"])
    with pytest.raises(ValueError, match="positive integer"):
        top_words(phi, names, n=0)


# ---------------------------------------------------------------------------------------
# left-to-right estimator


def exact_log_likelihood(phi, alpha, words):
    """log p(w) by enumerating every topic assignment, theta integrated out analytically.

    p(w) = sum_z p(z | alpha) prod_n phi[z_n, w_n], with the Dirichlet-multinomial
    p(z | alpha) = Gamma(A) / Gamma(N + A) prod_k Gamma(n_k + alpha_k) / Gamma(alpha_k).
    """
    from itertools import product

    from scipy.special import gammaln

    K = phi.shape[0]
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), K)
    terms = []
    for z in product(range(K), repeat=len(words)):
        n = np.bincount(np.asarray(z, dtype=np.int64), minlength=K)
        lp = gammaln(alpha.sum()) - gammaln(len(words) + alpha.sum())
        lp += np.sum(gammaln(n + alpha) - gammaln(alpha))
        lp += sum(math.log(phi[k, w]) for k, w in zip(z, words, strict=True))
        terms.append(lp)
    return float(np.logaddexp.reduce(terms))


def tiny_model():
    rng = np.random.default_rng(3)
    phi = rng.dirichlet(np.full(4, 0.5), size=3)  # K = 3, V = 4
    alpha = np.array([0.3, 0.7, 1.2])
    return phi, alpha


@pytest.mark.parametrize("counts", [[2, 0, 2, 1], [0, 3, 0, 1], [1, 1, 1, 1]])
def test_left_to_right_matches_exact_enumeration(counts):
    phi, alpha = tiny_model()
    words = np.repeat(np.arange(4), counts).tolist()
    exact = exact_log_likelihood(phi, alpha, words) / len(words)
    # D copies of the document: every row gets its own random streams, so the rows are D
    # independent estimates of the same log p(w)
    X = sp.csr_array(np.tile(np.asarray(counts, dtype=np.float64), (300, 1)))
    score, std, details = left_to_right_score(
        phi,
        X,
        doc_topic_prior=alpha,
        n_particles=10,
        random_state=0,
        return_std=True,
        return_details=True,
    )
    per_doc = details["doc_loglik"] / len(words)
    np.testing.assert_allclose(score, per_doc.mean(), rtol=1e-12)
    # the standard error across documents is that of the mean of the per-document estimates
    np.testing.assert_allclose(std, per_doc.std(ddof=1) / math.sqrt(300), rtol=1e-9)
    # the exact value lies well within the standard error of one estimate (R = 10)
    assert abs(score - exact) < 0.5 * per_doc.std(ddof=1)
    # more particles: closer, down to the estimator's small bias (Alg. 3's particles after
    # one sweep per position are not exact posterior draws; at most ~0.01 nats/token on
    # these documents, see left_to_right_score)
    one = left_to_right_score(phi, X, doc_topic_prior=alpha, n_particles=1, random_state=0)
    many = left_to_right_score(phi, X, doc_topic_prior=alpha, n_particles=100, random_state=0)
    assert abs(many - exact) < 0.015
    assert abs(many - exact) < abs(one - exact)


def test_left_to_right_single_token_is_exact():
    # one token: p(w) = sum_k alpha_k phi_kw / sum alpha, whatever the particles do
    phi, alpha = tiny_model()
    X = sp.csr_array(np.eye(4))
    _, details = left_to_right_score(
        phi, X, doc_topic_prior=alpha, n_particles=3, random_state=0, return_details=True
    )
    expected = np.log(alpha @ phi / alpha.sum())
    np.testing.assert_allclose(details["doc_loglik"], expected, rtol=1e-12)
    np.testing.assert_array_equal(details["doc_tokens"], np.ones(4))


def test_left_to_right_uniform_topics_is_minus_log_v():
    X, _ = planted_corpus(n_docs=10, doc_len=15)
    V = X.shape[1]
    score = left_to_right_score(np.ones((3, V)), X, n_particles=2, random_state=0)
    assert score == pytest.approx(-math.log(V), rel=1e-12)


def test_left_to_right_planted_topics_beat_random_topics():
    X, phi = planted_corpus(n_docs=30, doc_len=30)
    rand = np.random.default_rng(1).dirichlet(np.ones(phi.shape[1]), size=phi.shape[0])
    good = left_to_right_score(phi, X, doc_topic_prior=0.2, random_state=0)
    bad = left_to_right_score(rand, X, doc_topic_prior=0.2, random_state=0)
    assert good > bad + 0.5


@pytest.mark.kernels
def test_left_to_right_deterministic_threads_and_float32():
    X, phi = planted_corpus(n_docs=40, doc_len=25)
    kw = dict(doc_topic_prior=0.2, n_particles=4)
    a = left_to_right_score(phi, X, random_state=7, n_threads=1, **kw)
    b = left_to_right_score(phi, X, random_state=7, n_threads=2, **kw)
    c = left_to_right_score(phi, X, random_state=8, n_threads=1, **kw)
    assert a == b
    assert a != c
    d = left_to_right_score(
        phi.astype(np.float32), X.astype(np.float32), random_state=7, n_threads=2, **kw
    )
    assert d == pytest.approx(a, abs=1e-4)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_left_to_right_model_prior_and_inputs_unchanged():
    X, _ = planted_corpus(n_docs=60, doc_len=20)
    lda = LatentDirichletAllocation(n_components=4, doc_topic_prior=0.3, random_state=0).fit(X)
    X_before = X.copy()
    lam = lda.components_.copy()
    s_model = left_to_right_score(lda, X[:10], random_state=0)
    s_array = left_to_right_score(lam, X[:10], doc_topic_prior=0.3, random_state=0)
    assert s_model == s_array
    np.testing.assert_array_equal(lda.components_, lam)
    assert (X != X_before).nnz == 0

    from sparseclust import SparseLDA

    model = SparseLDA(n_components=3, random_state=0, max_iter=3).fit(X)
    s1 = left_to_right_score(model, X[:5], random_state=0)
    s2 = left_to_right_score(
        model.topic_word_distribution_, X[:5], doc_topic_prior=model.doc_topic_prior_,
        random_state=0,
    )
    assert s1 == s2


def test_left_to_right_per_topic_prior_and_empty_rows():
    phi, _ = tiny_model()
    X = sp.csr_array(np.array([[1.0, 0, 2, 0], [0, 0, 0, 0], [0, 1, 0, 1]]))
    alpha = np.array([0.1, 1.0, 5.0])
    s, details = left_to_right_score(
        phi, X, doc_topic_prior=alpha, n_particles=5, random_state=0, return_details=True
    )
    assert details["doc_loglik"][1] == 0.0
    assert details["doc_tokens"].tolist() == [3.0, 0.0, 2.0]
    assert s == pytest.approx(details["doc_loglik"].sum() / 5)
    s_sym = left_to_right_score(phi, X, doc_topic_prior=1.0, n_particles=5, random_state=0)
    assert s != s_sym


def test_left_to_right_validation():
    phi, _ = tiny_model()
    X = sp.csr_array(np.array([[1.0, 0, 2, 0]]))
    with pytest.raises(ValueError, match="n_particles"):
        left_to_right_score(phi, X, n_particles=0)
    with pytest.raises(ValueError, match="n_particles"):
        left_to_right_score(phi, X, n_particles=2.5)
    with pytest.raises(ValueError, match="integer word counts"):
        left_to_right_score(phi, X * 0.5)
    with pytest.raises(ValueError, match="(?i)negative"):
        left_to_right_score(phi, -X)
    with pytest.raises(ValueError):
        left_to_right_score(phi, sp.csr_array(np.array([[np.nan, 0, 1, 0]])))
    with pytest.raises(ValueError, match="features"):
        left_to_right_score(phi, sp.csr_array(np.ones((1, 5))))
    with pytest.raises(ValueError, match="doc_topic_prior"):
        left_to_right_score(phi, X, doc_topic_prior=[1.0, 2.0])
    with pytest.raises(ValueError, match="doc_topic_prior"):
        left_to_right_score(phi, X, doc_topic_prior=-1.0)
    with pytest.raises(ValueError, match="no tokens"):
        left_to_right_score(phi, sp.csr_array((2, 4)))
    with pytest.raises(ValueError, match="nonnegative"):
        left_to_right_score(-phi, X)
    with pytest.raises(NotFittedError):
        left_to_right_score(LatentDirichletAllocation(), X)
    _, std = left_to_right_score(phi, X, random_state=0, return_std=True)
    assert math.isnan(std)  # one document: no spread across documents


# ---------------------------------------------------------------------------------------
# NPMI coherence


def brute_force_npmi(top, contexts):
    """Mean NPMI over the pairs of ``top`` with contexts given as Python sets of word ids."""
    n = len(contexts)
    vals = []
    for i in range(len(top)):
        for j in range(i + 1, len(top)):
            a, b = top[i], top[j]
            pa = sum(a in c for c in contexts) / n
            pb = sum(b in c for c in contexts) / n
            pab = sum(a in c and b in c for c in contexts) / n
            if pab == 0:
                vals.append(-1.0)
            elif pab == 1:
                vals.append(1.0)
            else:
                vals.append(math.log(pab / (pa * pb)) / -math.log(pab))
    return sum(vals) / len(vals)


def windows_of(doc, s):
    if len(doc) == 0:
        return []
    if len(doc) <= s:
        return [set(doc)]
    return [set(doc[t : t + s]) for t in range(len(doc) - s + 1)]


def token_corpus(seed=0, n_docs=40, V=12):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, V, size=rng.integers(0, 25)).tolist() for _ in range(n_docs)], V


@pytest.mark.parametrize("window", [None, 1, 3, 10])
def test_npmi_matches_brute_force_sets(window):
    docs, V = token_corpus()
    phi = np.random.default_rng(5).dirichlet(np.ones(V), size=4)
    top_n = 5
    got = npmi_coherence(phi, docs, top_n=top_n, window=window)
    order = np.argsort(-phi, axis=1, kind="stable")[:, :top_n]
    if window is None:
        contexts = [set(d) for d in docs]
    else:
        contexts = [w for d in docs for w in windows_of(d, window)]
    expected = [brute_force_npmi(order[k].tolist(), contexts) for k in range(4)]
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    if window is None:  # the document-term matrix gives the same
        X = np.zeros((len(docs), V))
        for d, doc in enumerate(docs):
            np.add.at(X[d], doc, 2.0)
        np.testing.assert_allclose(npmi_coherence(phi, sp.csr_array(X), top_n=top_n), got)


def test_npmi_edge_conventions():
    # words 0 and 1 in every document: p = 1 -> NPMI 1; word 2 never with word 3 -> -1;
    # word 4 absent from the reference -> -1 with everything
    docs = [[0, 1, 2], [0, 1, 3], [1, 0, 2, 2]]
    phi = np.array(
        [[0.5, 0.4, 0.05, 0.03, 0.02], [0.02, 0.03, 0.5, 0.4, 0.05], [0.4, 0.03, 0.02, 0.05, 0.5]]
    )
    c = npmi_coherence(phi, docs, top_n=2)
    assert c[0] == 1.0
    assert c[1] == -1.0
    assert c[2] == -1.0
    # words only ever together (but not everywhere): NPMI = 1 by the formula itself
    docs = [[0, 1], [2], [0, 1, 3]]
    assert npmi_coherence(phi[:1], docs, top_n=2)[0] == pytest.approx(1.0)
    # independent-ish words are near 0 and within [-1, 1]
    docs, V = token_corpus(seed=2, n_docs=60)
    c = npmi_coherence(np.random.default_rng(0).random((6, V)), docs, top_n=6, window=4)
    assert np.all((c >= -1) & (c <= 1))


def test_npmi_planted_topics_above_random():
    X, phi = planted_corpus()
    rand = np.random.default_rng(1).dirichlet(np.ones(phi.shape[1]), size=phi.shape[0])
    assert npmi_coherence(phi, X, top_n=5).mean() > npmi_coherence(rand, X, top_n=5).mean()


def test_npmi_validation():
    docs, V = token_corpus()
    phi = np.ones((2, V))
    X = sp.csr_array(np.ones((3, V)))
    with pytest.raises(ValueError, match="token sequences"):
        npmi_coherence(phi, X, window=5)
    with pytest.raises(ValueError, match="window"):
        npmi_coherence(phi, docs, window=0)
    with pytest.raises(ValueError, match="top_n"):
        npmi_coherence(phi, docs, top_n=1)
    with pytest.raises(ValueError, match="outside"):
        npmi_coherence(phi, [[0, V]])
    with pytest.raises(ValueError, match="outside"):
        npmi_coherence(phi, [[-1, 2]])
    with pytest.raises(ValueError, match="integer word ids"):
        npmi_coherence(phi, [[0.5, 1.0]])
    with pytest.raises(ValueError, match="no documents"):
        npmi_coherence(phi, [])
    with pytest.raises(ValueError, match="features"):
        npmi_coherence(phi, sp.csr_array(np.ones((3, V + 1))))
    with pytest.raises(ValueError, match="document-term matrix or a list"):
        npmi_coherence(phi, "0 1 2")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_left_to_right_takes_hdp_and_sem_priors():
    from sparseclust import HDPTopicModel, StochasticEMLDA

    X, _ = planted_corpus(n_docs=60, doc_len=20)
    hdp = HDPTopicModel(max_components=5, max_iter=3, random_state=0).fit(X)
    alpha = np.asarray(hdp.doc_topic_prior_)
    assert alpha.shape == (hdp.topic_word_distribution_.shape[0],)
    assert np.ptp(alpha) > 0  # a per-topic prior
    s1 = left_to_right_score(hdp, X[:5], n_particles=3, random_state=0)
    s2 = left_to_right_score(
        hdp.topic_word_distribution_, X[:5], doc_topic_prior=alpha, n_particles=3,
        random_state=0,
    )
    s3 = left_to_right_score(
        hdp.topic_word_distribution_, X[:5], doc_topic_prior=float(alpha.mean()),
        n_particles=3, random_state=0,
    )
    assert s1 == s2 and s1 != s3

    sem = StochasticEMLDA(n_components=3, max_iter=5, random_state=0).fit(X)
    s1 = left_to_right_score(sem, X[:5], n_particles=3, random_state=0)
    s2 = left_to_right_score(
        sem.topic_word_distribution_, X[:5], doc_topic_prior=sem.doc_topic_prior_,
        n_particles=3, random_state=0,
    )
    assert s1 == s2
