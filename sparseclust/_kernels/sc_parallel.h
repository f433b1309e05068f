// SPDX-License-Identifier: BSD-3-Clause
//
// OpenMP queries that also compile without OpenMP, and the per-thread buffer allocation of the
// parallel kernels.
//
// Without OpenMP (a compiler that lacks it, or SPARSECLUST_NO_OPENMP=1 at build time) the
// pragmas Cython emits for prange/parallel are ignored and every loop runs on one thread;
// <omp.h> must then not be included, and the queries below answer for one thread.
//
// sc_thread_malloc is malloc for the buffers a thread allocates at the start of a parallel
// block.  The kernels check every such buffer for NULL inside the parallel loop (skipping the
// work and counting a failure) and raise MemoryError after the block.  To test that path, a
// module can make allocations fail on purpose: sc_alloc_fail_thread >= 0 selects the thread
// whose allocations fail, -2 makes every thread's fail, -1 (the default) none.  Each extension module has its own copy
// of the variable (it is static), set through the module's _fail_thread_allocations() (for tests).
#pragma once

#include <stdlib.h>

#ifdef _OPENMP
#include <omp.h>
#define SC_OPENMP 1
static inline int sc_omp_max_threads(void) { return omp_get_max_threads(); }
static inline int sc_omp_thread_num(void) { return omp_get_thread_num(); }
#else
#define SC_OPENMP 0
static inline int sc_omp_max_threads(void) { return 1; }
static inline int sc_omp_thread_num(void) { return 0; }
#endif

static int sc_alloc_fail_thread = -1;

static inline void sc_set_alloc_fail_thread(int thread) { sc_alloc_fail_thread = thread; }

static inline void* sc_thread_malloc(size_t nbytes) {
    if (sc_alloc_fail_thread == -2) return NULL;
    if (sc_alloc_fail_thread >= 0 && sc_omp_thread_num() == sc_alloc_fail_thread) return NULL;
    return malloc(nbytes);
}
