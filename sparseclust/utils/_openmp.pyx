# SPDX-License-Identifier: BSD-3-Clause
"""OpenMP queries used to pick a thread count; they also work in a build without OpenMP."""

from sparseclust._kernels._parallel cimport SC_OPENMP, sc_omp_max_threads


def openmp_max_threads():
    """Return ``omp_get_max_threads()``: honours ``OMP_NUM_THREADS`` and threadpoolctl.

    1 when the package was built without OpenMP.
    """
    return sc_omp_max_threads()


def openmp_enabled():
    """Whether the compiled kernels were built with OpenMP (else they run on one thread)."""
    return bool(SC_OPENMP)
