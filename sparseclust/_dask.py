# SPDX-License-Identifier: BSD-3-Clause
"""Training on Dask collections (``pip install sparseclust[dask]``).

The statistics of every model are additive (:class:`sparseclust._engine.SuffStats`), so the
local step maps over the partitions of a Dask collection and its statistics reduce. This
module runs that map and reduction with Dask; the learning algorithms themselves stay in
:func:`sparseclust._engine.fit_engine`, which receives the partitions as a *partitioned source*
(:class:`DaskSource`) and a model whose local step runs on the workers
(:class:`_DistributedModel`).

Input
    a ``dask.array.Array`` of shape (n_documents, n_features) chunked along the rows only
    (one chunk along the columns), whose blocks are scipy CSR matrices/arrays or dense numpy
    arrays; or a ``dask.bag.Bag`` whose items are such 2-D blocks (the items of one bag
    partition are stacked into one partition). SparseGaussianMixture takes dense rows
    (:class:`DaskRows`: the prior's data moments and the initial statistics are reduced
    from the partitions too).
Where it runs
    on the active ``distributed.Client`` when there is one (``distributed.default_client``),
    else on Dask's default scheduler in this process.
A round
    the validated partitions are computed once and stay on the workers (futures whose lineage
    is the collection's graph, so Dask recomputes a partition lost with its worker); the
    client broadcasts the parameters the local step reads (one node of the task graph that
    every task of the round depends on, :meth:`_Runner.broadcast`), one task per partition
    runs the local step, and the statistics are
    summed by a tree of tasks (``split_every`` partitions per node) on the workers; only the
    sum reaches the client, which runs the global step, the objective and any moves.
Moves (HDPTopicModel, the Dirichlet-process mixture)
    what a move needs from a visit besides the statistics (the merge terms of the candidate
    pairs, the co-usage of the topics, the saved rows of the documents that use a delete
    candidate, or the responsibilities of the rows that do) is returned by the same tasks
    and reduced with the statistics (:meth:`_DistributedModel.visit`); a delete proposal
    re-runs the local step of its documents (rows) on the partitions that hold them, with
    the candidate parameters broadcast (:meth:`_Batches.map_rows`). The move logic itself
    is the in-process one.

Nothing here is imported by ``import sparseclust``: the estimators import this module only
when ``fit`` receives a Dask collection, and this module imports Dask only inside functions.
"""

import copy
import functools
import types

import numpy as np
import scipy.sparse as sp

from ._engine import VariationalModel, is_dask_collection
from ._kernels import _tokens
from .topics._local import TopicTables, check_counts
from .topics._sem_sampler import (
    _MIN_WORK_PER_THREAD,
    _RaoBlackwell,
    _Sampler,
    _seed,
    _z_dtype,
    run_sweeps,
    token_layout,
)
from .utils._threads import effective_n_threads, threads_for_work

__all__ = ["is_dask_collection", "DaskSource", "DaskRows", "prepare_lda", "fit_sem"]

#: partitions (or partial sums) summed by one task of the reduction tree
SPLIT_EVERY = 8


def _require_dask():
    try:
        import dask  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the [dask] extra is not installed
        raise ImportError(
            "fitting a Dask collection needs dask and distributed: pip install "
            "sparseclust[dask]"
        ) from exc


def _active_client():
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover - dask without distributed
        return None
    try:
        return default_client()
    except ValueError:  # no client
        return None


# ---------------------------------------------------------------------------------------
# tasks (run on the workers; module-level so that they pickle by reference)


def _bag_item(item, whom, n_features=None):
    """An item of a bag partition as a 2-D block: a 2-D block as it is, a 1-D row (a list,
    an array or a 1-D sparse array) as one row; ``n_features`` given: its width is checked."""
    if sp.issparse(item):
        block = item.reshape(1, -1) if item.ndim == 1 else item
    else:
        block = np.asarray(item)
        if block.ndim == 1:
            block = block.reshape(1, -1)
    if block.ndim != 2:
        raise ValueError(
            f"{whom}: the items of a Dask bag must be 2-D blocks (rows, features) or 1-D rows; "
            f"got an item of shape {block.shape}."
        )
    if n_features is not None and block.shape[1] != n_features:
        raise ValueError(
            f"{whom}: a partition has an item of shape {block.shape}; every partition must "
            f"have the {n_features} columns of the first."
        )
    return block


def _check_part(block, template, whom, n_features):
    """Validate one partition exactly as ``fit`` validates an in-memory matrix (same errors);
    returns it as canonical CSR."""
    if isinstance(block, (list, tuple)):  # a bag partition: 2-D blocks or 1-D rows
        blocks = [_bag_item(b, whom, n_features) for b in block]
        if not blocks:
            block = sp.csr_array((0, n_features))
        else:
            block = sp.vstack([sp.csr_array(b) for b in blocks], format="csr") \
                if len(blocks) > 1 else blocks[0]
    if getattr(block, "ndim", 2) != 2 or block.shape[1] != n_features:
        raise ValueError(
            f"{whom}: a partition has shape {getattr(block, 'shape', None)}; every partition "
            f"must have the {n_features} columns of the first."
        )
    est = copy.copy(template)
    if block.shape[0] == 0:
        return sp.csr_array(block, dtype=np.float64)
    return check_counts(est, block, reset=True, whom=whom)


def _check_rows(block, template, whom, n_features, dtype):
    """Validate one partition of dense rows as ``SparseGaussianMixture.fit`` validates an
    in-memory array (same errors); returns a C-contiguous array of ``dtype``."""
    from sklearn.utils.validation import validate_data

    if isinstance(block, (list, tuple)):  # a bag partition: 2-D blocks or 1-D rows
        items = [_bag_item(b, whom, n_features) for b in block]
        if not items:
            block = np.zeros((0, n_features), dtype=dtype)
        elif any(sp.issparse(b) for b in items):  # refused below, as in process
            block = sp.vstack([sp.csr_array(b) for b in items], format="csr")
        else:
            block = np.vstack(items)
    if getattr(block, "ndim", 2) != 2 or block.shape[1] != n_features:
        raise ValueError(
            f"{whom}: a partition has shape {getattr(block, 'shape', None)}; every partition "
            f"must have the {n_features} columns of the first."
        )
    if block.shape[0] == 0:
        return np.zeros((0, n_features), dtype=dtype)
    return validate_data(copy.copy(template), block, dtype=dtype, reset=True, order="C",
                         ensure_min_samples=1)


def _part_info(part):
    return int(part.shape[0]), float(part.sum()), int(part.shape[1])


def _fresh(model):
    """A copy of ``model`` whose counters (and ``timer``) start from zero."""
    m = copy.copy(model)
    counters = getattr(model, "counters", None)
    if counters is not None:
        m.counters = {k: 0 for k in counters}
    timer = getattr(model, "timer", None)
    if timer is not None:
        m.timer = type(timer)()
    return m


def _increments(m):
    """The counters of a :func:`_fresh` copy after its work; the seconds of its ``timer``
    under ``'timer:<name>'``."""
    out = dict(getattr(m, "counters", {}) or {})
    timer = getattr(m, "timer", None)
    if timer is not None:
        out.update({f"timer:{k}": v for k, v in timer.seconds.items()})
    return out


def _local_part(part, model, params):
    """The local step of ``model`` on one partition: (statistics, counter increments)."""
    m = _fresh(model)
    stats = m.local_step(part, params)
    return stats, _increments(m)


def _sum_pairs(*items):
    """Sum of (statistics, counters) pairs: a node of the reduction tree."""
    stats, counters = items[0][0], dict(items[0][1])
    for s, c in items[1:]:
        stats = stats + s
        for k, v in c.items():
            counters[k] = counters.get(k, 0) + v
    return stats, counters


def _visit_part(part, ctx, params, offset):
    """The memoized/batch visit of one partition (``model.visit_local``, the context of
    ``model.visit_context``; ``offset`` is the partition's first row in its batch):
    (statistics, side results for the moves, counter increments)."""
    model, context = ctx
    m = _fresh(model)
    stats, side = m.visit_local(part, params, context, doc_offset=offset)
    return stats, side, _increments(m)


def _sum_visits(combine, *items):
    """A node of the reduction tree of visits: statistics add, sides combine in partition
    order (``combine(a, b)``), counters add."""
    stats, side, counters = items[0][0], items[0][1], dict(items[0][2])
    for s, d, c in items[1:]:
        stats = stats + s
        side = combine(side, d)
        for k, v in c.items():
            counters[k] = counters.get(k, 0) + v
    return stats, side, counters


def _rows_part(part, rows, job, own):
    """``fn(part[rows], *args, *own)`` for ``job = (fn, args)``: a map over selected rows
    (``own``: arrays aligned with ``rows``)."""
    fn, args = job
    return fn(part[rows], *args, *own)


def _combine_results(*items):
    """A node of the reduction tree of :meth:`_Batches.map_rows`: results are tuples whose
    entries combine by type, in partition order: arrays stack along the rows, dicts
    (counters) add key by key, anything else (statistics, numbers) adds."""
    out = list(items[0])
    for it in items[1:]:
        for j, v in enumerate(it):
            o = out[j]
            if isinstance(o, np.ndarray):
                out[j] = np.concatenate([o, v], axis=0)
            elif isinstance(o, dict):
                o = dict(o)
                for k, x in v.items():
                    o[k] = o.get(k, 0) + x
                out[j] = o
            else:
                out[j] = o + v
    return tuple(out)


def _sum(*items):
    out = items[0]
    for x in items[1:]:
        out = out + x
    return out


def _tree(leaves, combine, split_every=SPLIT_EVERY):
    """A tree of ``combine`` tasks over delayed ``leaves`` (``split_every`` children each)."""
    import dask

    level = list(leaves)
    while len(level) > 1:
        level = [dask.delayed(combine, pure=False)(*level[i:i + split_every])
                 if len(level[i:i + split_every]) > 1 else level[i]
                 for i in range(0, len(level), split_every)]
    return level[0]


# ---------------------------------------------------------------------------------------
# partitions and rounds


class _Runner:
    """The validated partitions of a collection and the map / tree-reduce of a round, on the
    active client or, without one, on Dask's default scheduler."""

    def __init__(self, X, template, whom, check=None, check_args=()):
        _require_dask()
        import dask

        self.client = _active_client()
        blocks, n_features = _blocks(X, whom)
        self.n_features = n_features
        check = _check_part if check is None else check
        parts = [dask.delayed(check, pure=False)(b, template, whom, n_features, *check_args)
                 for b in blocks]
        if self.client is not None:
            # futures: the partitions stay on the workers (recomputed from the collection's
            # graph if a worker is lost)
            self.parts = self.client.compute(parts)
            info = self.client.gather(self.client.map(_part_info, self.parts, pure=False))
        else:
            self.parts = list(dask.compute(*parts))
            info = [_part_info(p) for p in self.parts]
        self.rows = np.array([r for r, _, _ in info], dtype=np.int64)
        self.tokens = np.array([t for _, t, _ in info])
        if self.rows.sum() == 0:
            raise ValueError(f"{whom}: cannot fit on an empty dataset.")

    def broadcast(self, obj):
        """``obj`` as one node of the graph that every task of a round depends on (Dask
        sends it to each worker that runs one of them), or ``obj`` itself without a client.

        A graph node rather than ``Client.scatter``: scattered data cannot be recomputed,
        a node of the graph can, so a round survives the loss of any worker.
        """
        if self.client is None:
            return obj
        import uuid

        import dask

        return dask.delayed(obj, name=f"sparseclust-params-{uuid.uuid4().hex}",
                            traverse=False)

    def compute(self, *objs):
        if self.client is None:
            import dask

            return dask.compute(*objs)
        import warnings

        with warnings.catch_warnings():
            # the parameters are a node of the graph on purpose (see broadcast)
            warnings.filterwarnings("ignore", message=".*large graph.*")
            return self.client.gather(self.client.compute(list(objs)))

    def first(self):
        """The first non-empty partition, on the client."""
        b = int(np.flatnonzero(self.rows)[0])
        p = self.parts[b]
        return p.result() if self.client is not None else p

    def map_reduce(self, fn, idx, *args):
        """``sum_i fn(part_i, *args)`` over the partitions ``idx``: one task per partition,
        summed by a tree of tasks; returns the sum on the client."""
        import dask

        leaves = [dask.delayed(fn, pure=False)(self.parts[i], *args) for i in idx]
        return self.compute(_tree(leaves, _sum_pairs))[0]


def _blocks(X, whom):
    """The partitions of a Dask array (rows) or bag as delayed objects, and n_features."""
    import dask.array as da
    import dask.bag as db

    if isinstance(X, da.Array):
        if X.ndim != 2:
            raise ValueError(f"{whom}: expected a 2-D Dask array, got {X.ndim} dimensions.")
        if X.numblocks[1] != 1:
            raise ValueError(
                f"{whom}: the Dask array has {X.numblocks[1]} chunks along the columns; "
                "chunk it along the rows only (e.g. X.rechunk({1: -1})), so that every "
                "partition holds whole documents."
            )
        n_features = int(X.shape[1])
        return list(X.to_delayed().ravel()), n_features
    if isinstance(X, db.Bag):
        import dask

        parts = list(X.to_delayed())
        if not parts:
            raise ValueError(f"{whom}: the Dask bag has no partitions.")
        # the number of columns comes from the first item
        first = dask.compute(X.take(1, npartitions=-1, compute=False))[0]
        if not first:
            raise ValueError(f"{whom}: cannot fit on an empty dataset.")
        return parts, int(_bag_item(first[0], whom).shape[1])
    raise TypeError(f"{whom}: unsupported Dask collection {type(X).__name__}; pass a "
                    "dask.array.Array or a dask.bag.Bag of 2-D blocks or 1-D rows.")


class _Batch:
    """A batch of training: a set of partitions (their indices) and its number of rows."""

    def __init__(self, idx, n_rows):
        self.idx = [int(i) for i in idx]
        self.n_rows = int(n_rows)


class _Batches(list):
    """The fixed batches of a :class:`DaskSource` (a list of :class:`_Batch`) with
    :meth:`map_rows`, which runs a function on selected rows of the batches where their
    partitions are."""

    def __init__(self, runner, batches):
        super().__init__(batches)
        self.runner = runner

    def map_rows(self, fn, rows, args, row_args=None):
        """For every batch b of ``rows`` (b -> increasing row positions in the batch, whose
        rows are those of its partitions in order): ``fn(X_rows, *args, *own)`` on each
        partition that holds selected rows (``args`` broadcast once; ``own`` the slices of
        ``row_args[b]``, arrays aligned with ``rows[b]``), the per-partition results (tuples)
        combined in row order by a tree of tasks (:func:`_combine_results`). Returns {b:
        combined result}."""
        import dask

        r = self.runner
        job = r.broadcast((fn, args))
        roots, keys = [], []
        for bb, sel in rows.items():
            sel = np.asarray(sel, dtype=np.int64)
            if sel.size > 1 and np.any(np.diff(sel) <= 0):
                raise ValueError("map_rows needs increasing row positions")
            own_all = () if row_args is None else tuple(row_args[bb])
            batch = self[bb]
            sizes = r.rows[batch.idx]
            bounds = np.concatenate([[0], np.cumsum(sizes)])
            cut = np.searchsorted(sel, bounds)
            leaves = []
            for j, i in enumerate(batch.idx):
                a, b = cut[j], cut[j + 1]
                if b > a:
                    own = tuple(x[a:b] for x in own_all)
                    leaves.append(dask.delayed(_rows_part, pure=False)(
                        r.parts[i], sel[a:b] - bounds[j], job, own))
            if leaves:
                roots.append(_tree(leaves, _combine_results))
                keys.append(bb)
        return dict(zip(keys, r.compute(*roots), strict=True)) if roots else {}


class DaskSource:
    """The partitions of a Dask collection as the batches of :func:`fit_engine`.

    * batch training: one batch, every partition (each round maps over all of them);
    * memoized training: the partitions are split, in order, into ``min(n_batches, P)``
      groups of consecutive partitions (``numpy.array_split``); a group is a fixed batch
      whose statistics (the tree-reduced sum over its partitions) are cached on the client.
      Visiting a group maps the local step over its partitions in parallel under the current
      parameters; the update S <- S - S_b^old + S_b^new and the global step follow on the
      client, so the objective never decreases (as in-process);
    * stochastic training: every pass permutes the partitions and cuts the permutation into
      minibatches of ``m = max(1, round(batch_size / mean partition rows))`` partitions;
      a step maps over the minibatch's partitions and blends its reduced statistics.
    """

    def __init__(self, runner):
        self.runner = runner
        self.n_samples = int(runner.rows.sum())
        self.P = len(runner.rows)

    def _batch(self, idx):
        return _Batch(idx, self.runner.rows[list(idx)].sum())

    def fixed_batches(self, algorithm, n_batches):
        if algorithm == "batch":
            return _Batches(self.runner, [self._batch(range(self.P))])
        groups = np.array_split(np.arange(self.P), min(max(int(n_batches), 1), self.P))
        return _Batches(self.runner, [self._batch(g) for g in groups])

    def minibatch_partitions(self, batch_size):
        """Partitions per stochastic minibatch."""
        mean_rows = self.n_samples / self.P
        return int(max(1, round(batch_size / max(mean_rows, 1.0))))

    def minibatches(self, rng, batch_size):
        m = self.minibatch_partitions(batch_size)
        perm = rng.permutation(self.P)
        for s in range(0, self.P, m):
            b = self._batch(perm[s:s + m])
            if b.n_rows:
                yield b


class _DistributedModel(VariationalModel):
    """``model`` with its local step mapped over partitions and reduced by Dask; the global
    step, the objective and the hooks run here, on the client."""

    def __init__(self, model, runner, ship):
        self.model = model
        self.runner = runner
        self.ship = ship
        self._shipped = (None, None)

    def n_samples(self, X):
        return X.n_rows

    def _params_on_workers(self, params):
        held, fut = self._shipped
        if held is not params:
            self._shipped = (None, None)  # the old broadcast is released
            self._shipped = (params, self.runner.broadcast(self.ship(params)))
        return self._shipped[1]

    def _count(self, counters):
        mc = getattr(self.model, "counters", None)
        timer = getattr(self.model, "timer", None)
        for k, v in counters.items():
            if k.startswith("timer:") and timer is not None:
                timer.seconds[k[6:]] = timer.seconds.get(k[6:], 0.0) + v
            elif mc is not None:
                mc[k] = mc.get(k, 0) + v

    def _task_model(self):
        """The model the tasks receive: a model with move bookkeeping sends a copy without
        it (``worker_model``), made now since the moves may change the model."""
        wm = getattr(self.model, "worker_model", None)
        return wm() if wm is not None else self.model

    def local_step(self, X, params):
        model = self._task_model()
        stats, counters = self.runner.map_reduce(_local_part, X.idx, model,
                                                 self._params_on_workers(params))
        self._count(counters)
        return stats

    def visit(self, X, params, batch):
        """The visit of a batch in batch/memoized training. A model with moves
        (``visit_local`` / ``visit_context`` / ``combine_sides`` / ``record_visit``) runs
        ``visit_local`` on every partition of the batch with the round's context broadcast;
        the statistics and the side results its moves need (e.g. merge terms, co-usage, the
        rows of the documents a delete would re-infer) reduce by the tree of tasks, and the
        client records them as the in-process visit does."""
        if getattr(self.model, "visit_local", None) is None:
            return self.local_step(X, params)
        import dask

        r = self.runner
        ctx = r.broadcast((self._task_model(), self.model.visit_context()))
        shipped = self._params_on_workers(params)
        sizes = r.rows[X.idx]
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        leaves = [dask.delayed(_visit_part, pure=False)(r.parts[i], ctx, shipped, int(o))
                  for i, o in zip(X.idx, starts, strict=True)]
        combine = functools.partial(_sum_visits, type(self.model).combine_sides)
        stats, side, counters = r.compute(_tree(leaves, combine))[0]
        self._count(counters)
        self.model.record_visit(batch, side, params)
        return stats

    def global_step(self, stats):
        # the old parameters and their broadcast go before the new ones are built, as in
        # process (the engine holds no other reference), so that the client never holds two
        # (V, K) tables at once
        self._shipped = (None, None)
        return self.model.global_step(stats)

    def initial_params(self, init_stats):
        return self.model.initial_params(init_stats)

    def elbo(self, stats, params):
        return self.model.elbo(stats, params)

    def before_pass(self, stats, params, state):
        return self.model.before_pass(stats, params, state)

    def can_stop(self):
        return self.model.can_stop()

    def after_pass(self, stats, params, state):
        return self.model.after_pass(stats, params, state)

    def before_step(self, X, rows):
        # a partition's rows have no index the wrapped model knows
        return self.model.before_step(None, None)

    def after_step(self, rho, scale):
        return self.model.after_step(rho, scale)


def _ship_lda(params):
    """What SparseLDA's local step reads: the E[log phi] table alone (not lambda, not S)."""
    return types.SimpleNamespace(tables=TopicTables.from_transposed(params.tables.CT))


def _ship_hdp(params):
    """What HDPTopicModel's local step reads (:meth:`HDPParams.for_local`)."""
    return params.for_local()


def prepare_lda(est, X, rng, whom, ship=_ship_lda):
    """For ``SparseLDA.fit`` (or ``HDPTopicModel.fit``, ``ship=_ship_hdp``) on a Dask
    collection: validate the partitions on the workers, set ``n_features_in_``, initialize
    the topics (``init`` on the first non-empty partition, an ``init`` estimator fitted on it,
    or the given array); returns
    (source, initial statistics, documents, tokens, wrap) where ``wrap(model)`` is the model
    to hand to the engine, whose tasks receive ``ship(params)``."""
    runner = _Runner(X, type(est)(), whom)
    est.n_features_in_ = runner.n_features
    if hasattr(est, "feature_names_in_"):
        del est.feature_names_in_
    if isinstance(est.init, str) or hasattr(est.init, "fit"):  # an estimator is fitted on it
        init = est._init_stats(runner.first(), rng)
    else:
        init = est._init_stats(sp.csr_array((1, runner.n_features)), rng)
    source = DaskSource(runner)

    def wrap(model):
        return _DistributedModel(model, runner, ship)

    return source, init, source.n_samples, float(runner.tokens.sum()), wrap


# ---------------------------------------------------------------------------------------
# dense rows (SparseGaussianMixture)


def _moments_part(part, full):
    """(n, mean, scatter about the mean) of one partition: the (D, D) scatter when ``full``,
    else its diagonal."""
    X = np.asarray(part, dtype=np.float64)
    n = X.shape[0]
    D = X.shape[1]
    if n == 0:
        return 0, np.zeros(D), np.zeros((D, D) if full else D)
    mean = X.mean(axis=0)
    Xc = X - mean
    return n, mean, (Xc.T @ Xc if full else np.einsum("ij,ij->j", Xc, Xc))


def _sum_moments(*items):
    """Pooled (n, mean, scatter) of several parts (Chan, Golub & LeVeque 1979)."""
    n, mean, M2 = items[0]
    mean, M2 = mean.copy(), M2.copy()
    for nb, mb, M2b in items[1:]:
        if nb == 0:
            continue
        tot = n + nb
        delta = mb - mean
        mean = mean + delta * (nb / tot)
        M2 = M2 + M2b + (np.outer(delta, delta) if M2.ndim == 2 else delta * delta) * (
            n * nb / tot)
        n = tot
    return n, mean, M2


class _PooledMoments:
    """The data moments ``SparseGaussianMixture._build_prior`` reads, from the pooled
    (n, mean, scatter) of the partitions."""

    def __init__(self, n, D, dtype, mean, M2):
        self.shape, self.dtype = (int(n), int(D)), dtype
        self._mean, self._M2 = mean, M2

    def mean(self):
        return self._mean

    def second(self):
        n = self.shape[0]
        if self._M2.ndim == 2:
            return self._M2 / n + np.outer(self._mean, self._mean)
        return np.diag(self._M2 / n + self._mean ** 2)

    def cov(self):
        return self._M2 / (self.shape[0] - 1)

    def var(self):
        return (np.diag(self._M2) if self._M2.ndim == 2 else self._M2) / (self.shape[0] - 1)


def _ship_same(params):
    return params


def _collection_dtype(X):
    """The float dtype the partitions are validated to: the collection's when it is float32
    or float64 (as ``validate_data(dtype=[np.float64, np.float32])`` keeps it), else float64."""
    import dask.array as da

    if isinstance(X, da.Array):
        dt = np.dtype(X.dtype)
    else:
        import dask

        first = dask.compute(X.take(1, npartitions=-1, compute=False))[0]
        dt = np.asarray(first[0]).dtype if first else np.dtype(np.float64)
    return dt if dt in (np.float32, np.float64) else np.dtype(np.float64)


class DaskRows:
    """The partitions of a Dask collection of dense rows, validated on the workers, for
    ``SparseGaussianMixture.fit``: its shape and dtype, the pooled data moments of the prior
    (:meth:`moments`), sums of per-partition statistics (:meth:`map_sum`, the initial
    responsibilities) and the engine's source and model (:meth:`wrap`)."""

    def __init__(self, est, X, whom, reset=True):
        dtype = _collection_dtype(X)
        self.runner = runner = _Runner(X, type(est)(), whom, check=_check_rows,
                                       check_args=(dtype,))
        n, D = int(runner.rows.sum()), runner.n_features
        if n < 2:
            raise ValueError(f"Found array with {n} sample(s) (shape=({n}, {D})) while a "
                             f"minimum of 2 is required by {type(est).__name__}.")
        if reset:
            est.n_features_in_ = D
            if hasattr(est, "feature_names_in_"):
                del est.feature_names_in_
        elif D != est.n_features_in_:
            raise ValueError(f"X has {D} features, but {type(est).__name__} is expecting "
                             f"{est.n_features_in_} features as input.")
        self.shape = (n, D)
        self.dtype = dtype
        self.n_partitions = len(runner.rows)
        self.offsets = np.concatenate([[0], np.cumsum(runner.rows)]).astype(np.int64)

    def moments(self, full):
        """The pooled moments (:class:`_PooledMoments`) of all rows."""
        import dask

        r = self.runner
        leaves = [dask.delayed(_moments_part, pure=False)(p, bool(full)) for p in r.parts]
        n, mean, M2 = r.compute(_tree(leaves, _sum_moments))[0]
        return _PooledMoments(n, self.shape[1], self.dtype, mean, M2)

    def split_rows(self, A):
        """Per-partition argument tuples holding the partition's rows of ``A``."""
        return [(A[self.offsets[i]:self.offsets[i + 1]],) for i in range(self.n_partitions)]

    def head(self, n_rows):
        """The rows of the first partitions, up to the first that brings at least
        ``n_rows`` rows (here, on the client)."""
        got, total = [], 0
        for i in range(self.n_partitions):
            if self.runner.rows[i]:
                p = self.runner.parts[i]
                got.append(p.result() if self.runner.client is not None else p)
                total += got[-1].shape[0]
                if total >= n_rows:
                    break
        return np.vstack(got)

    def map_sum(self, fn, per_part, shared):
        """``sum_i fn(part_i, *shared, *per_part[i])`` over the partitions, by a tree of
        tasks (``shared`` broadcast once)."""
        import dask

        r = self.runner
        job = r.broadcast(tuple(shared))
        idx = [i for i in range(self.n_partitions) if r.rows[i]]
        leaves = [dask.delayed(_apply_part, pure=False)(
            r.parts[i], fn, job, () if per_part is None else per_part[i]) for i in idx]
        return r.compute(_tree(leaves, _sum))[0]

    def wrap(self, model):
        """(source, model) for the engine: the partitions as batches, the local step on the
        workers."""
        return DaskSource(self.runner), _DistributedModel(model, self.runner, _ship_same)


def _apply_part(part, fn, shared, own):
    return fn(part, *shared, *own)


# ---------------------------------------------------------------------------------------
# stochastic EM (StochasticEMLDA, algorithm='batch')


def _sem_init(part, offset, seed, K, n_threads):
    """Uniform initial assignments of one partition (document keys offset..offset+D-1, as
    in-process) and their word-topic counts; returns (z, counts, word totals)."""
    D, V = part.shape
    lay = token_layout(part)
    N = int(lay.tokptr[-1])
    keys = np.arange(offset, offset + D, dtype=np.uint64)
    z = np.empty(N, dtype=_z_dtype(K))
    nt = threads_for_work(n_threads, N, _MIN_WORK_PER_THREAD)
    _tokens.random_assign(lay.tokptr, z, keys, seed, K, nt)
    W = np.zeros((V, K), np.int32)
    _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W, nt)
    totals = np.bincount(lay.indices, weights=lay.cnt, minlength=V).astype(np.int64)
    return z, (sp.csr_array(W, dtype=np.int64), totals, N)


def _sem_sweep(part, z, offset, W, word_totals, sampler_args, beta, seed, sweep):
    """One stochastic-EM sweep of one partition reading the whole-data counts W: returns
    (new z, (new word-topic counts as sparse int64, log-likelihood of its documents, tokens
    that changed topic))."""
    D, V = part.shape
    lay = token_layout(part)
    smp = _Sampler(V, *sampler_args)
    smp.set_weights_from_counts(W, beta, word_totals)
    smp.build_tables()
    keys = np.arange(offset, offset + D, dtype=np.uint64)
    z = z.copy()  # the previous assignments stay valid (Dask may recompute from them)
    Wout = np.zeros_like(W)
    ll_doc = np.zeros(D)
    changed = smp.sweep(lay, z, keys, seed, sweep, Wout=Wout, ll_doc=ll_doc)
    return z, (sp.csr_array(Wout, dtype=np.int64), float(ll_doc.sum()), int(changed))


def _sem_rb(part, z, W, beta, alpha, n_threads):
    """The Rao-Blackwellized word-topic counts (V, K) float64 of one partition's assignments
    z given the whole-data counts W (``StochasticEMLDA(topic_estimate='rao_blackwell')``);
    summed over the partitions in float64, kept as float32 as in-process."""
    return _RaoBlackwell(W.shape[1], beta, alpha, n_threads, W=W).sum(token_layout(part), [z])


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


def _dense_counts(total):
    """The whole-data word-topic counts W (V, K) int32 from a reduced sum."""
    return np.ascontiguousarray(total[0].toarray(), dtype=np.int32)


def _rest(total):
    return tuple(total[1:])


def _sem_round(runner, fn, per_part_args, shared_args):
    """Map ``fn`` over the partitions and tree-sum its statistics. Returns the new
    per-partition assignments and the counts W (futures on a client: every input of the next
    sweep is a task output, so Dask can recompute what a lost worker held from lineage), and
    the other sums on the client."""
    import dask

    outs = [dask.delayed(fn, pure=False)(runner.parts[i], *per_part_args[i], *shared_args)
            for i in range(len(runner.parts))]
    zs = [dask.delayed(_first, pure=False)(o) for o in outs]
    total = _tree([dask.delayed(_second, pure=False)(o) for o in outs], _sum_sem)
    W = dask.delayed(_dense_counts, pure=False)(total)
    rest = dask.delayed(_rest, pure=False)(total)
    if runner.client is not None:
        futs = runner.client.compute(zs + [W, rest])
        return futs[:-2], futs[-2], futs[-1].result()
    res = dask.compute(*zs, W, rest)
    return list(res[:-2]), res[-2], res[-1]


def _value(runner, x):
    return x.result() if runner.client is not None else x


def fit_sem(est, X, callback):
    """``StochasticEMLDA.fit`` (algorithm='batch') on a Dask collection.

    The token assignments z of a partition stay on its worker (the output of its last sweep
    task); a sweep maps over the partitions with the whole-data word-topic counts W
    broadcast, the new counts of every partition are summed by a tree of tasks and W is
    replaced on the client. Documents keep the random streams of the in-process fit (keyed
    by their row in the whole collection), so the assignments and the counts equal the
    in-process fit's exactly; the log joint and the Rao-Blackwellized topics (summed over the
    partitions in another order) equal it to floating-point rounding.
    """
    import time

    from sklearn.utils import check_random_state


    whom = "StochasticEMLDA.fit"
    runner = _Runner(X, type(est)(), whom)
    est.n_features_in_ = runner.n_features
    if hasattr(est, "feature_names_in_"):
        del est.feature_names_in_
    rng = check_random_state(est.random_state)
    seed = _seed(rng)
    D, V = int(runner.rows.sum()), runner.n_features
    K = est.n_components
    beta = float(est.topic_word_prior)
    n_threads = effective_n_threads(est.n_threads)
    offsets = np.concatenate([[0], np.cumsum(runner.rows)[:-1]]).astype(np.int64)
    t_start = time.perf_counter()
    zs, W_fut, (word_totals, N) = _sem_round(
        runner, _sem_init, [(int(o),) for o in offsets], (seed, K, n_threads))
    W = _value(runner, W_fut)
    smp = est._new_sampler(V)
    smp.set_weights_from_counts(W, beta, word_totals)
    sampler_args = est._sampler_args(n_threads)
    state = {"zs": zs, "W": W_fut}

    def sweep(it):
        zs = state["zs"]
        state["zs"], state["W"], (ll_docs, changed) = _sem_round(
            runner, _sem_sweep, [(zs[i], int(offsets[i])) for i in range(len(zs))],
            (state["W"], word_totals, sampler_args, beta, seed, it))
        W = _value(runner, state["W"])
        state["W_local"] = W
        return W, smp.set_weights_from_counts(W, beta, word_totals) + float(ll_docs), changed

    def estimate(final=False):
        import dask

        if not state:
            raise RuntimeError("topic_estimate can only be called during fit (from the "
                               "callback); after fit use components_")
        if est.topic_estimate == "sample":
            W = state["W_local"]
        else:
            if final:
                smp.release_tables()
            parts = [dask.delayed(_sem_rb, pure=False)(runner.parts[i], state["zs"][i],
                                                       state["W"], beta, smp.alpha, n_threads)
                     for i in range(len(runner.parts))]
            total = _tree(parts, _sum)
            if runner.client is not None:
                total = runner.client.compute(total).result()
            else:
                total = dask.compute(total)[0]
            W = total.astype(np.float32)
        if final:
            # the sweeps are done: the chains and counts on the workers are released, and a
            # callback that kept this function cannot reach them
            state.clear()
        return W

    return run_sweeps(est, sweep, n_tokens=N, n_docs=D, rng=rng,
                      elapsed=time.perf_counter() - t_start, callback=callback,
                      estimate=estimate)
