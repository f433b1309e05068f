# SPDX-License-Identifier: BSD-3-Clause
"""Topic models with L-sparse document local steps (paper 000, Sec. 5-6)."""

from ._hdp import HDPTopicModel
from ._sparse_lda import SparseLDA

__all__ = ["HDPTopicModel", "SparseLDA"]
