# SPDX-License-Identifier: BSD-3-Clause
"""The base class of the topic models (:class:`SparseLDA`, :class:`HDPTopicModel`,
:class:`StochasticEMLDA`): count validation, the inputs of ``fit`` (a count matrix, a
:class:`~sparseclust.datasets.CorpusStream` or a Dask collection), the trace of a
``partial_fit`` step, the normalisation of ``transform``, ``score`` from the document
bounds, ``perplexity`` and the output feature names."""

import numbers
import time

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval

from .._base import SparseEstimatorBase
from .._engine import is_dask_collection, stochastic_step
from ..datasets._stream import CorpusStream
from ._local import check_counts, check_whole_counts, require_tokens

__all__ = ["TopicModelBase"]


def _mean_doc_tokens(X):
    """Mean number of tokens per document of X (1 for a minibatch without tokens)."""
    n = float(X.sum())
    return n / X.shape[0] if n > 0 else 1.0


class TopicModelBase(SparseEstimatorBase):
    """Base class of the topic models (not for direct use).

    A subclass sets ``_name`` (the class name its messages use), ``_init_stats(X, rng)``
    (the initial statistics of ``fit`` on the documents X) and, when its local step samples
    one topic per token, ``_whole_counts_rule()``.
    """

    _parameter_constraints = {
        **SparseEstimatorBase._parameter_constraints,
        "topic_word_prior": [Interval(numbers.Real, 0, None, closed="neither")],
        "kappa": [Interval(numbers.Real, 0, 1, closed="right")],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.sparse = True
        return tags

    # -----------------------------------------------------------------------------------
    # input

    def _whole_counts_rule(self):
        """``(why, instead)`` when the estimator's sampled local step draws one topic per
        token (non-integer counts are then rounded, or refused, where it runs; see
        :func:`~sparseclust.topics._local.check_whole_counts`), else None."""
        return None

    def _check_X(self, X, *, reset, whom, fitting=False, sampled=True):
        """Validated document-word counts (:func:`~sparseclust.topics._local.check_counts`);
        whole tokens where the call runs the sampled local step (``sampled``: False for a
        method that runs the variational step, as ``score`` does)."""
        X = check_counts(self, X, reset=reset, whom=whom, fitting=fitting)
        rule = self._whole_counts_rule()
        if rule is not None and sampled:
            why, instead = rule
            check_whole_counts(X, whom, fitting=fitting, why=why, instead=instead)
        return X

    def _prepare_stream(self, stream, rng, whom):
        """For ``fit`` on a :class:`CorpusStream`: validate every minibatch (one read, the first
        sets ``n_features_in_``), initialize the topics from the first minibatch with
        ``_init_stats``; returns (validating stream, initial statistics, documents, tokens)."""
        if self.algorithm != "memoized":
            raise ValueError(
                f"fitting a CorpusStream needs algorithm='memoized' (got {self.algorithm!r}); "
                "for stochastic training call partial_fit on each minibatch."
            )
        first, n_docs, n_tokens = None, 0, 0.0
        for Xb in stream:
            Xb = self._check_X(Xb, reset=first is None, whom=whom)
            if first is None:
                first = Xb
            n_docs += Xb.shape[0]
            n_tokens += float(Xb.sum())
        if first is None or n_docs == 0:
            raise ValueError("cannot fit on an empty dataset: the stream has no documents.")
        require_tokens(whom, n_tokens)
        init = self._init_stats(first, rng)

        def checked():
            for Xb in stream:
                yield self._check_X(Xb, reset=False, whom=whom)

        wrapped = CorpusStream(checked, n_features=stream.n_features,
                               n_documents=stream.n_documents, batch_size=stream.batch_size,
                               feature_names=stream.feature_names, source=stream.source)
        return wrapped, init, n_docs, n_tokens

    def _dask_options(self):
        """Keywords of :func:`~sparseclust.topics._dask_lda.prepare_lda` for this model."""
        return {}

    def _fit_input(self, X, whom):
        """The data of a variational ``fit``: a count matrix, a :class:`CorpusStream` or a
        Dask collection. Returns ``(data, initial statistics, documents, tokens, wrap, rng)``,
        ``wrap`` wrapping the model for the engine on a Dask collection (else None)."""
        wrap = None
        if isinstance(X, CorpusStream):
            rng = check_random_state(self.random_state)
            X, init, n_docs, n_tokens = self._prepare_stream(X, rng, whom)
        elif is_dask_collection(X):
            from ._dask_lda import prepare_lda

            rng = check_random_state(self.random_state)
            X, init, n_docs, n_tokens, wrap = prepare_lda(self, X, rng, whom,
                                                          **self._dask_options())
            require_tokens(whom, n_tokens)
        else:
            X = self._check_X(X, reset=True, whom=whom, fitting=True)
            rng = check_random_state(self.random_state)
            init = self._init_stats(X, rng)
            n_docs, n_tokens = X.shape[0], float(X.sum())
        return X, init, n_docs, n_tokens, wrap, rng

    # -----------------------------------------------------------------------------------
    # partial_fit

    def _partial_fit_input(self, X, whom, n_fitted, *, same_k=True):
        """The validated minibatch of ``partial_fit`` and whether it starts the model.

        ``n_fitted`` is the number of topics of the fitted model, None when nothing is
        fitted (then X sets ``n_features_in_``). With ``same_k`` a fitted model must still
        have ``n_components`` topics (a changed ``n_components`` needs a new ``fit``).
        """
        first = n_fitted is None
        X = self._check_X(X, reset=first, whom=whom, fitting=True)
        if same_k and not first and n_fitted != self.n_components:
            raise ValueError(
                f"n_components={self.n_components} differs from the {n_fitted} topics of the "
                "fitted model; call fit to start over."
            )
        return X, first

    def _timed_step(self, model, state, X, total, delta):
        """One stochastic step of ``partial_fit`` (:func:`~sparseclust._engine.stochastic_step`)
        on the minibatch X scaled to ``total`` documents: (parameters, seconds, timings)."""
        timings = {}
        t0 = time.perf_counter()
        params = stochastic_step(model, state, X, kappa=self.kappa, delta=delta,
                                 total_samples=total, timings=timings)
        return params, time.perf_counter() - t0, timings

    def _record_step(self, X, total, elbo, elapsed, rho, timings, extra):
        """Record one ``partial_fit`` step (see ``_append_step``). The objective is scaled to
        ``total`` documents, so its change is divided by about total * (tokens per document
        of the minibatch X)."""
        prev = self.lower_bounds_[-1] if self.lower_bounds_ else -np.inf
        scale = max(float(total) * _mean_doc_tokens(X), 1.0)
        change = abs(elbo - prev) / scale if np.isfinite(prev) else np.inf
        self._append_step(self.n_batch_iter_, elbo, elapsed, rho, timings, extra,
                          elbo_change=change)

    # -----------------------------------------------------------------------------------
    # inference

    @staticmethod
    def _doc_topic(theta, X, normalize=True):
        """``transform``'s result from theta (n_samples, n_topics): the rows divided by
        their sums unless ``normalize`` is False, in the dtype of X."""
        if normalize:
            theta /= theta.sum(axis=1, keepdims=True)
        return theta.astype(X.dtype, copy=False)

    @staticmethod
    def _per_token_bound(res):
        """The per-token document bound of a local step's result (0.0 without tokens)."""
        if res.n_tokens == 0:
            return 0.0
        return float((res.elbo_local + res.elbo_data) / res.n_tokens)

    def perplexity(self, X):
        """exp(-score(X)): per-token perplexity bound.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        perplexity : float
        """
        return float(np.exp(-self.score(X)))

    @property
    def _n_features_out(self):
        return self.components_.shape[0]
