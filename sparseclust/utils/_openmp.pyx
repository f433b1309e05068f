# SPDX-License-Identifier: BSD-3-Clause
"""OpenMP queries used to pick a thread count."""

cimport openmp


def openmp_max_threads():
    """Return ``omp_get_max_threads()``: honours ``OMP_NUM_THREADS`` and threadpoolctl."""
    return openmp.omp_get_max_threads()
