# SPDX-License-Identifier: BSD-3-Clause
"""The base class of the estimators, as ``sklearn/mixture/_base.py`` is for its mixtures.

It owns what every estimator does the same way around its model: the training record
(``trace_``, ``lower_bounds_``, the counters of the model merged into the trace), the
``ConvergenceWarning``, the bookkeeping of a ``partial_fit`` continuation, ``fit_transform``
and the common tags. Each estimator supplies its model (local step, global step, objective,
moves) and its own parameters; the topic models share more in
:class:`sparseclust.topics._base.TopicModelBase`.
"""

import numbers
import warnings

from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval

__all__ = ["SparseEstimatorBase", "merge_counters"]


def merge_counters(trace, counters, extras=None):
    """The trace entries with the model's counters of each pass merged in.

    ``counters[i]`` is a snapshot of the model's cumulative counters after pass i; entry i
    gets each counter's increase during pass i, then the fields of ``extras[i]`` (when
    given). Returns new entries; ``trace`` is not modified.
    """
    merged, prev = [], {}
    for i, (entry, snap) in enumerate(zip(trace, counters, strict=True)):
        entry = dict(entry)
        entry.update({k: snap[k] - prev.get(k, 0) for k in snap})
        prev = snap
        if extras is not None:
            entry.update(extras[i])
        merged.append(entry)
    return merged


class SparseEstimatorBase(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Base class of the estimators of the package (not for direct use).

    Subclasses set the fitted attributes of their model; the base keeps the training record
    the same across estimators:

    - ``trace_``: one dict per pass of ``fit`` and per step of ``partial_fit``;
    - ``lower_bounds_``: the objective after each of them, ``lower_bound_`` the last one;
    - ``converged_``, ``n_iter_`` and ``n_batch_iter_``.

    Its ``_parameter_constraints`` are those of the parameters every estimator has, with
    the same meaning; a subclass adds its own.
    """

    _parameter_constraints = {
        "total_samples": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "n_threads": [numbers.Integral, None],
        "verbose": ["verbose"],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float32", "float64"]
        return tags

    def fit_transform(self, X, y=None, **fit_params):
        """``fit(X, **fit_params)`` then ``transform(X)``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : ignored
        **fit_params
            Passed to :meth:`fit` (``callback``).

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components)
        """
        return self.fit(X, y, **fit_params).transform(X)

    # -----------------------------------------------------------------------------------
    # convergence

    def _passes(self):
        """``max_iter`` with its default resolved; an estimator whose default depends on
        other parameters (``max_iter=None``) overrides this."""
        return self.max_iter

    def _tolerance(self):
        """``tol`` with its default resolved; overridden like :meth:`_passes`."""
        return self.tol

    def _warn_not_converged(self, change, unit, *, tol=None, n_init=1, stacklevel=3):
        """Warn that ``fit`` stopped at :meth:`_passes` passes before its objective's change
        per pass (``change``, in nats per ``unit``) fell below ``tol`` (default
        :meth:`_tolerance`). ``stacklevel`` counts from the caller of this method (3: the
        caller of ``fit`` when ``fit`` calls it)."""
        tol = self._tolerance() if tol is None else tol
        max_iter = self._passes()
        what = type(self).__name__
        if n_init > 1:
            what = f"{what} (best of {n_init} initializations)"
        warnings.warn(
            f"{what} did not converge in {max_iter} passes: the last ELBO change was "
            f"{change:.3g} nats per {unit}, tol={tol}. Increase max_iter (or tol).",
            ConvergenceWarning,
            stacklevel=stacklevel,
        )

    # -----------------------------------------------------------------------------------
    # partial_fit

    def _start_partial_fit(self):
        """The training record of a model whose first ``partial_fit`` step is about to be
        taken (nothing fitted before it)."""
        self._n_samples_fit = None
        self.lower_bounds_ = []
        self.trace_ = []
        self.n_iter_ = 0
        self.n_batch_iter_ = 0
        self.converged_ = False

    def _step_total(self, n_rows):
        """The number of rows a ``partial_fit`` minibatch of ``n_rows`` rows is scaled to:
        ``total_samples``, else the rows given to ``fit`` when the model was fitted by
        ``fit``, else the minibatch's own size."""
        if self.total_samples is not None:
            return self.total_samples
        if getattr(self, "_n_samples_fit", None):
            return self._n_samples_fit
        return n_rows

    def _append_step(self, step, elbo, elapsed, rho, timings, extra, **change):
        """Record one ``partial_fit`` step: ``lower_bounds_`` and ``trace_`` grow by one
        entry (after fit's passes or earlier steps), ``lower_bound_`` is the step's objective.

        The entry holds ``pass`` (None), ``step``, ``elapsed`` (cumulative), ``elbo``, the
        keyword ``elbo_change`` when given, ``rho``, the step's ``time_local`` and
        ``time_global`` (from ``timings``), then the model's own fields ``extra``.
        """
        self.lower_bounds_.append(elbo)
        self.lower_bound_ = elbo
        entry = {
            "pass": None,
            "step": step,
            "elapsed": (self.trace_[-1]["elapsed"] if self.trace_ else 0.0) + elapsed,
            "elbo": elbo,
            **change,
            "rho": rho,
            "time_local": timings.get("local", 0.0),
            "time_global": timings.get("global", 0.0),
        }
        entry.update(extra)
        self.trace_.append(entry)
