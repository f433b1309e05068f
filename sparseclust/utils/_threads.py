# SPDX-License-Identifier: BSD-3-Clause
"""Thread-count control shared by every parallel kernel."""

import functools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from threadpoolctl import ThreadpoolController

from ._openmp import openmp_max_threads


def _cpu_count():
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        n = os.cpu_count() or 1
    # cgroup v2 CPU quota (containers)
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            quota, period = fh.read().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def effective_n_threads(n_threads=None):
    """Number of OpenMP threads a kernel should use.

    Parameters
    ----------
    n_threads : int or None
        ``None`` uses ``omp_get_max_threads()`` (which honours ``OMP_NUM_THREADS`` and
        ``threadpoolctl.threadpool_limits``), capped by the CPUs available to this process.
        A positive value is used as given; ``-1`` means all available CPUs, ``-2`` all but one, ...

    Returns
    -------
    n : int, >= 1
        In a build without OpenMP (:func:`openmp_enabled` is False) ``None`` gives 1 and the
        kernels run serially whatever the value.
    """
    if n_threads is None:
        return max(1, min(openmp_max_threads(), _cpu_count()))
    n_threads = _check_n_threads(n_threads)
    if n_threads < 0:
        return max(1, _cpu_count() + 1 + n_threads)
    return n_threads


def _check_n_threads(n_threads):
    if isinstance(n_threads, bool) or not isinstance(n_threads, (int, np.integer)):
        raise ValueError(f"n_threads must be an integer or None, got {n_threads!r}.")
    n_threads = int(n_threads)
    if n_threads == 0:
        raise ValueError("n_threads must be a non-zero integer or None, got 0.")
    return n_threads


@functools.lru_cache(maxsize=1)
def _blas_controller():
    # library discovery costs milliseconds: do it once per process
    return ThreadpoolController()


def single_threaded_blas():
    """Context manager limiting BLAS to one thread around kernels that run their own threads.

    Our OpenMP kernels that call BLAS from inside a parallel region (e.g. per-cluster ``syrk``)
    must not oversubscribe the cores with BLAS threads.
    """
    return _blas_controller().limit(limits=1, user_api="blas")


def threads_for_work(n_threads, work, min_work, *, scale=True, cap_explicit=True):
    """Threads for one kernel call that does ``work`` units of work.

    Waking an OpenMP team costs more than a small call's work, so small calls get fewer
    threads. ``n = effective_n_threads(n_threads)`` bounds the result; below ``min_work``
    units the call runs on one thread.

    Parameters
    ----------
    n_threads : int or None
        As for :func:`effective_n_threads`.
    work : int
        Units of work of the call (tokens, nonzeros, weights, ...).
    min_work : int
        Units of work worth one thread.
    scale : bool, default=True
        True: one thread per ``min_work`` units, ``max(1, min(n, work // min_work))``.
        False: all or one, ``1 if work < min_work else n``.
    cap_explicit : bool, default=True
        False: an explicit ``n_threads`` (not None) is used as given whatever the work; only
        the ``None`` default adapts to the work.

    Returns
    -------
    n : int, >= 1
    """
    n = effective_n_threads(n_threads)
    if n_threads is not None and not cap_explicit:
        return n
    if scale:
        return max(1, min(n, int(work) // int(min_work)))
    return 1 if work < min_work else n


def map_blocks(fn, blocks, n_threads=1):
    """``[fn(b) for b in blocks]``, on up to ``effective_n_threads(n_threads)`` Python threads.

    For numpy work that releases the GIL (ufuncs such as ``scipy.special.psi`` and
    ``gammaln``, reductions) over independent blocks of an array: each block's result is what
    the serial loop computes, in the same order, so the threads change no bit of it.
    """
    blocks = list(blocks)
    n = min(effective_n_threads(n_threads), len(blocks))
    if n <= 1:
        return [fn(b) for b in blocks]
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(fn, blocks))
