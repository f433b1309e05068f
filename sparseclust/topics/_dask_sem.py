# SPDX-License-Identifier: BSD-3-Clause
"""StochasticEMLDA (algorithm='batch') on a Dask collection of counts, through the Dask layer
(:mod:`sparseclust._dask`): the token assignments of a partition stay on its worker, the
model's partition pieces (:func:`sparseclust.topics._sem_sampler.sweep_partition` and its
companions) map over the partitions, the word-topic counts reduce, and the sweep loop is the
model's (:func:`sparseclust.topics._sem_sampler.run_sweeps`). The estimator imports this
module only when ``fit`` receives a Dask collection."""

import sys
import threading

import numpy as np

from .._dask._core import _Runner, _set_n_features, _sum, _top_level, _tree
from .._kernels import _stats
from ..utils._threads import effective_n_threads
from ._dask_lda import _check_part, partition_template
from ._sem_sampler import (
    _Sampler,
    _seed,
    init_partition,
    rao_blackwell_partitions,
    release_sweep_sampler,
    run_sweeps,
    sweep_block_bounds,
    sweep_partition,
)

__all__ = ["fit_sem"]


def _first(pair):
    return pair[0]


def _second(pair):
    return pair[1]


def _sum_sem(*items):
    out = list(items[0])
    for it in items[1:]:
        for j, v in enumerate(it):
            out[j] = out[j] + v
    return tuple(out)


#: the whole-data count arrays this process made (at most ``_POOL_SIZE``), reused by a later
#: sweep once nothing else refers to them
_COUNTS_POOL = []
_COUNTS_POOL_LOCK = threading.Lock()
_POOL_SIZE = 3
_PROBE = [object()]


def _zero_counts(V, K):
    """A zeroed (V, K) int32 array: one of this process's earlier count arrays that nothing
    refers to any more (the pool's own reference is the only one), else a new one kept in
    the pool.

    A sweep's counts W are large (V K 4 bytes); a new array of that size pays a page fault
    for every page at its first write, which costs more than adding the counts into memory
    already mapped. The counts of two rounds back are free when a round adds up its own (the
    sweep tasks, the worker's store and the client hold only the latest), so a pool of three
    arrays lets every round after the third reuse memory. An array anything still refers to
    (Dask's worker store, a sampler, a view, a callback's caller) is never reused.
    """
    with _COUNTS_POOL_LOCK:
        # the count of an object only a list holds, read the same way (the interpreter's
        # own references during the call are the same for both)
        only_listed = sys.getrefcount(_PROBE[0])
        for i in range(len(_COUNTS_POOL)):
            if (_COUNTS_POOL[i].shape == (V, K)
                    and sys.getrefcount(_COUNTS_POOL[i]) == only_listed):
                W = _COUNTS_POOL[i]
                W.fill(0)
                return W
        W = np.zeros((V, K), np.int32)
        _COUNTS_POOL.append(W)
        del _COUNTS_POOL[:-_POOL_SIZE]
        return W


def release_counts_pool():
    """Drop this process's pool of count arrays (run on every worker when a fit ends)."""
    with _COUNTS_POOL_LOCK:
        _COUNTS_POOL.clear()


def _dense_counts(*items):
    """The whole-data counts W (V, K) int32: the word-topic counts (sparse int64) of the top
    level of the reduction tree added up."""
    V, K = items[0][0].shape
    W = _zero_counts(V, K)
    for it in items:
        c = it[0]
        _stats.csr_add_counts(W, c.indptr, c.indices, c.data.astype(np.int64, copy=False))
    return W


def _sum_tails(*items):
    """The sums other than the counts over the top level of the reduction tree, in child
    order (as :func:`_sum_sem` adds them)."""
    return _sum_sem(*(it[1:] for it in items))


def _prepend(x, rest):
    return (x, *rest)


def _log_joint(W, sampler_args, beta):
    """log p(x | z, beta) of the whole-data counts W, on the worker that holds them."""
    return _Sampler(W.shape[0], *sampler_args).topic_log_joint(W, beta)


def _sem_round(runner, fn, per_part_args, shared_args, joint=None):
    """Map ``fn`` over the partitions and tree-sum its statistics into the whole-data counts
    W. Returns the new per-partition assignments and, for each partition, W (futures on a
    client: every input of the next sweep is a task output, so Dask can recompute what a
    lost worker held from lineage), and on the client the other sums, with the log joint of
    W first when ``joint = (sampler arguments, beta)`` (computed where W is: the client
    fetches W only when it reads it).

    The sparse counts are summed by a tree of tasks; its top level is added into a dense W
    once on every partitions' home worker, in parallel, and each partition's next task reads
    the W of its home: no worker waits while one adds them up, and no dense (V, K) array
    crosses between workers (each receives the other workers' top-level sums instead, sparse:
    about 12 bytes a stored entry, against 4 a dense one)."""
    import dask

    outs = [runner.task(i, fn, *per_part_args[i], *shared_args)
            for i in range(len(runner.parts))]
    zs = [dask.delayed(_first, pure=False)(o) for o in outs]
    top = _top_level([dask.delayed(_second, pure=False)(o) for o in outs], _sum_sem)
    groups = runner.by_home()
    Ws = []
    for h in groups:
        with runner.on(h):
            Ws.append(dask.delayed(_dense_counts, pure=False)(*top))
    rest = dask.delayed(_sum_tails, pure=False)(*top)
    if joint is not None:
        with runner.on(next(iter(groups))):
            lj = dask.delayed(_log_joint, pure=False)(Ws[0], *joint)
        rest = dask.delayed(_prepend, pure=False)(lj, rest)
    if runner.client is not None:
        futs = runner.client.compute(zs + Ws + [rest])
        zs, Ws, rest = futs[:len(zs)], futs[len(zs):-1], futs[-1].result()
    else:
        res = dask.compute(*zs, *Ws, rest)
        zs, Ws, rest = list(res[:len(zs)]), list(res[len(zs):-1]), res[-1]
    W_of = [None] * len(zs)
    for W, idx in zip(Ws, groups.values(), strict=True):
        for i in idx:
            W_of[i] = W
    return zs, W_of, rest


def fit_sem(est, X, callback):
    """``StochasticEMLDA.fit`` (algorithm='batch') on a Dask collection.

    The token assignments z of a partition stay on its worker (the output of its last sweep
    task); a sweep maps over the partitions reading the whole-data word-topic counts W on
    their worker (one round per block of ``sweep_blocks``, whose 'auto' is 1 here; each
    worker builds the sampler's tables of W once per round, for all its partitions, and
    drops them when the fit ends), the new counts of every partition are
    summed by a tree of tasks whose top level every worker adds into its own copy of the
    next W (:func:`_sem_round`), and the log joint of W is computed where one copy is. The
    client fetches W (V x K) only for a callback, which receives it, and at the end with
    ``topic_estimate='sample'``. Documents keep the random streams of the in-process fit
    (keyed by their row in the whole collection), so the assignments and the counts equal
    those of the in-process fit with the same number of blocks exactly; the log joint and
    the Rao-Blackwellized topics (summed over the partitions in another order) equal it to
    floating-point rounding.
    """
    import time

    import dask
    from sklearn.utils import check_random_state

    whom = "StochasticEMLDA.fit"
    runner = _Runner(X, partition_template(est), whom, _check_part)
    _set_n_features(est, runner.n_features)
    rng = check_random_state(est.random_state)
    seed = _seed(rng)
    D, V = int(runner.rows.sum()), runner.n_features
    K = est.n_components
    beta = float(est.topic_word_prior)
    n_threads = effective_n_threads(est.n_threads)
    offsets = np.concatenate([[0], np.cumsum(runner.rows)[:-1]]).astype(np.int64)
    # (checks the sampler's settings before any work on the workers)
    sampler_args = est._sampler_args(n_threads)
    alpha = _Sampler(V, *sampler_args).alpha
    t_start = time.perf_counter()
    try:
        zs, Ws, (word_totals, N) = _sem_round(
            runner, init_partition, [(int(o),) for o in offsets], (seed, K, n_threads))
    except BaseException:
        _release(runner)
        raise
    state = {"zs": zs, "W": Ws}
    # the state holds the latest round only: the first round's assignments and counts are
    # released on the workers once the first sweep replaces them
    del zs, Ws

    bounds = sweep_block_bounds(D, est._sweep_blocks(N, D, V, dask=True))
    one = len(bounds) == 2

    def sweep(it):
        # one round per block of documents (sweep_blocks): the partitions sweep their
        # documents of the block, and the counts of every partition make the next W
        ll_docs = changed = 0
        for d0, d1 in zip(bounds[:-1], bounds[1:], strict=True):
            zs = state["zs"]
            Ws = state["W"]
            last = d1 == D
            state["zs"], state["W"], rest = _sem_round(
                runner, sweep_partition,
                [(zs[i], int(offsets[i]), Ws[i]) for i in range(len(zs))],
                (word_totals, sampler_args, beta, seed, it, None if one else (d0, d1)),
                joint=(sampler_args, beta) if last else None)
            if last:
                ll_topics, rest = rest[0], rest[1:]
            ll_docs += rest[0]
            changed += rest[1]
        # W (V x K) comes to the client only for a callback, which receives it
        W = runner.value(state["W"][0]) if callback is not None else None
        state["W_local"] = W
        return W, ll_topics + float(ll_docs), changed

    def estimate(final=False):
        if not state:
            raise RuntimeError("topic_estimate can only be called during fit (from the "
                               "callback); after fit use components_")
        if est.topic_estimate == "sample":
            W = state["W_local"]
            if W is None:
                W = state["W_local"] = runner.value(state["W"][0])
        else:
            # one array per worker, over the partitions it holds, with its own copy of W;
            # the workers' arrays are then summed
            per_home = []
            for h, idx in runner.by_home().items():
                with runner.on(h):
                    per_home.append(dask.delayed(rao_blackwell_partitions, pure=False)(
                        state["W"][idx[0]], beta, alpha, n_threads,
                        *[x for i in idx for x in (runner.parts[i], state["zs"][i])]))
            W = runner.compute(_tree(per_home, _sum))[0].astype(np.float32)
        if final:
            # the sweeps are done: the chains and counts on the workers are released, and a
            # callback that kept this function cannot reach them
            state.clear()
        return W

    try:
        return run_sweeps(est, sweep, n_tokens=N, n_docs=D, rng=rng,
                          elapsed=time.perf_counter() - t_start, callback=callback,
                          estimate=estimate)
    finally:
        _release(runner)


def _release_here():
    """Drop this process's shared sweep sampler (the last counts and their tables) and its
    pool of count arrays."""
    try:
        release_sweep_sampler()
    finally:
        release_counts_pool()


def _release(runner):
    """:func:`_release_here` on every worker and in this process. It runs when a fit ends
    or fails: a worker that cannot be reached gives a warning, not an error that would
    replace the fit's result or its own error."""
    try:
        if runner.client is not None:
            runner.client.run(_release_here)
    except Exception as exc:
        import warnings

        warnings.warn(f"StochasticEMLDA.fit could not release the sweep samplers and count "
                      f"arrays on every Dask worker ({type(exc).__name__}: {exc}); they are "
                      "released at the next fit's end", RuntimeWarning, stacklevel=3)
    finally:
        _release_here()
