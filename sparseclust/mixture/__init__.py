# SPDX-License-Identifier: BSD-3-Clause
"""Mixture models with L-sparse variational posteriors."""

from ._sparse_gmm import SparseGaussianMixture

__all__ = ["SparseGaussianMixture"]
