# SPDX-License-Identifier: BSD-3-Clause
# OpenMP queries that compile with and without OpenMP, and the checked per-thread allocation
# of the parallel kernels (sc_parallel.h).

cdef extern from "sc_parallel.h" nogil:
    const int SC_OPENMP
    int sc_omp_max_threads()
    int sc_omp_thread_num()
    void* sc_thread_malloc(size_t nbytes)
    void sc_set_alloc_fail_thread(int thread)
