# SPDX-License-Identifier: BSD-3-Clause
"""sparseclust: fast clustering and topic models through sparse posteriors.

Estimators follow scikit-learn's API:

- :class:`SparseGaussianMixture` -- variational Gaussian mixture with L-sparse responsibilities;
- :class:`SparseLDA` -- latent Dirichlet allocation with the L-sparse document local step;
- :class:`HDPTopicModel` -- hierarchical Dirichlet process topic model that learns its number
  of topics (birth, merge and delete moves);
- :class:`StochasticEMLDA` -- latent Dirichlet allocation by parallel stochastic EM (one
  sampled topic per token, double-buffered counts, alias-table sampling).

:func:`save` and :func:`load` write and read fitted estimators in a versioned format.
:class:`TruncationWarning` says that a model which learns its number of components ended
with at least as many as it started from.
"""

import importlib

__version__ = "0.1.0"

_LAZY = {
    "HDPTopicModel": "sparseclust.topics",
    "SparseGaussianMixture": "sparseclust.mixture",
    "SparseLDA": "sparseclust.topics",
    "StochasticEMLDA": "sparseclust.topics",
    "TruncationWarning": "sparseclust._moves",
}

_FUNCS = {"save": "sparseclust._persist", "load": "sparseclust._persist"}

__all__ = sorted(_LAZY) + sorted(_FUNCS) + ["__version__"]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _FUNCS:
        return getattr(importlib.import_module(_FUNCS[name]), name)
    raise AttributeError(f"module 'sparseclust' has no attribute {name!r}")


def __dir__():
    return __all__
