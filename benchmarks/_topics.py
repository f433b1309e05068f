# SPDX-License-Identifier: BSD-3-Clause
"""Topic-model runs shared by the suites: our estimators and the peers, on one clock.

Every method gets the same priors (alpha = 0.5 / K per topic, topic-word prior 0.1), one
thread (``n_threads=1``, tomotopy ``workers=1``, BLAS limited to one thread) and process
CPU seconds, with the model's initialisation inside the clock. Converting the CSR counts to
a peer's own input format (token lists, bag-of-words tuples) is outside it, as building the
CSR matrix is for ours. Topics are scored by one function,
:func:`sparseclust.metrics.document_completion_score` (20% of each held-out document's
tokens held out, split seed 0, the same alpha).
"""

import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

from ._common import token_lists

TOPIC_WORD_PRIOR = 0.1


def doc_topic_prior(K):
    return 0.5 / K


def heldout(topic_word, X, alpha):
    """Document completion (nats per held-out token) of a topic-word matrix on ``X``."""
    from sparseclust.metrics import document_completion_score

    return float(document_completion_score(np.asarray(topic_word), X, random_state=0,
                                           doc_topic_prior=alpha, n_threads=1))


class Clock:
    """Process CPU and wall seconds of a block, BLAS held to one thread."""

    def __enter__(self):
        self._limits = threadpool_limits(1)
        self._limits.__enter__()
        self.cpu0, self.wall0 = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.cpu = time.process_time() - self.cpu0
        self.wall = time.perf_counter() - self.wall0
        self._limits.__exit__(*exc)
        return False


def ours(method, K, seed, **params):
    """An unfitted estimator of ours with the shared priors: ``'sparselda'`` (its
    defaults: the Gibbs local step), ``'sparselda-gibbs'`` (``local_step='gibbs'``, named),
    ``'sparselda-variational'`` (``local_step='variational'``) or ``'sem'``."""
    from sparseclust.topics import SparseLDA, StochasticEMLDA

    common = dict(n_components=K, doc_topic_prior=doc_topic_prior(K),
                  topic_word_prior=TOPIC_WORD_PRIOR, random_state=seed, n_threads=1)
    if method == "sparselda":
        return SparseLDA(**common, **params)
    if method == "sparselda-gibbs":
        return SparseLDA(**common, local_step="gibbs", **params)
    if method == "sparselda-variational":
        return SparseLDA(**common, local_step="variational", **params)
    if method == "sem":
        return StochasticEMLDA(**common, **params)
    raise ValueError(method)


def fit_ours(method, X, K, seed, params=None, callback=None):
    """Fit one of ours; returns ``(model, clock)``."""
    model = ours(method, K, seed, **(params or {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a ConvergenceWarning is recorded as n_iter
        with Clock() as clock:
            model.fit(X, callback=callback)
    return model, clock


class Tomotopy:
    """tomotopy ``LDAModel`` (collapsed Gibbs sampling), priors fixed (``optim_interval=0``),
    one worker. ``start`` builds the model (inside the clock), ``train(n)`` runs n sweeps."""

    def __init__(self, X, K, seed):
        self.docs = token_lists(X)  # the peer's input format, outside the clock
        self.K, self.V, self.seed = K, X.shape[1], seed

    def start(self):
        import tomotopy as tp

        self.model = tp.LDAModel(tw=tp.TermWeight.ONE, k=self.K, alpha=doc_topic_prior(self.K),
                                 eta=TOPIC_WORD_PRIOR, seed=self.seed)
        self.model.optim_interval = 0
        for words in self.docs:
            if words:
                self.model.add_doc(words)
        self.model.train(0, workers=1)

    def train(self, sweeps):
        self.model.train(sweeps, workers=1)

    def topic_word(self):
        cols = np.array([int(w) for w in self.model.used_vocabs])
        phi = np.zeros((self.K, self.V))
        for k in range(self.K):
            phi[k, cols] = self.model.get_topic_word_dist(k)
        missing = np.setdiff1d(np.arange(self.V), cols)
        if missing.size:  # words without a training token: the prior's share
            phi[:, missing] = phi[:, cols].min(axis=1, keepdims=True)
        return phi / phi.sum(axis=1, keepdims=True)


def fit_tomotopy(X, K, seed, sweeps):
    runner = Tomotopy(X, K, seed)
    with Clock() as clock:
        runner.start()
        runner.train(sweeps)
    return runner.topic_word(), clock


def fit_gensim(X, K, seed, passes):
    """gensim ``LdaModel`` (online variational Bayes, its default chunks and schedule),
    ``passes`` passes."""
    from gensim.models import LdaModel

    corpus = [list(zip(X.indices[X.indptr[d]:X.indptr[d + 1]].tolist(),
                       X.data[X.indptr[d]:X.indptr[d + 1]].tolist(), strict=True))
              for d in range(X.shape[0])]
    id2word = {j: str(j) for j in range(X.shape[1])}
    with Clock() as clock:
        model = LdaModel(corpus, num_topics=K, id2word=id2word,
                         alpha=np.full(K, doc_topic_prior(K)), eta=TOPIC_WORD_PRIOR,
                         passes=passes, random_state=seed, eval_every=None)
    return model.get_topics(), clock


def fit_sklearn(X, K, seed, max_iter):
    """scikit-learn ``LatentDirichletAllocation``, batch variational Bayes."""
    from sklearn.decomposition import LatentDirichletAllocation

    model = LatentDirichletAllocation(n_components=K, doc_topic_prior=doc_topic_prior(K),
                                      topic_word_prior=TOPIC_WORD_PRIOR, learning_method="batch",
                                      max_iter=max_iter, random_state=seed)
    with Clock() as clock:
        model.fit(X)
    phi = model.components_
    return phi / phi.sum(axis=1, keepdims=True), clock


def fmt(x, digits=3):
    """A figure for a table (``-`` for a missing one)."""
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "–"
    if isinstance(x, (int, np.integer)):
        return f"{x:,}"
    return f"{x:,.{digits}f}"


def signed(x, digits=3):
    """A difference for a table, with its sign."""
    return "–" if x is None else f"{x:+.{digits}f}"


def median(xs):
    xs = [x for x in xs if x is not None]
    return float(np.median(xs)) if xs else None


def mean(xs):
    xs = [x for x in xs if x is not None]
    return float(np.mean(xs)) if xs else None
