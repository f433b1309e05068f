# SPDX-License-Identifier: BSD-3-Clause
"""Topic models: L-sparse variational LDA and HDP (Hughes & Sudderth 2016, Sec. 5-6),
stochastic-EM LDA."""

from ._hdp import HDPTopicModel
from ._local import NonIntegerCountsWarning
from ._sem import StochasticEMLDA
from ._sparse_lda import SparseLDA

__all__ = ["HDPTopicModel", "NonIntegerCountsWarning", "SparseLDA", "StochasticEMLDA"]
