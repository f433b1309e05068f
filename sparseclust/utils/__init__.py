# SPDX-License-Identifier: BSD-3-Clause
"""Small shared helpers."""

from ._checkpoint import Checkpoint
from ._openmp import openmp_enabled
from ._threads import effective_n_threads, single_threaded_blas

__all__ = ["Checkpoint", "effective_n_threads", "openmp_enabled", "single_threaded_blas"]
