# SPDX-License-Identifier: BSD-3-Clause
"""The Dask layer itself, which knows no model: the validated partitions of a collection and
the map / tree-reduce of a round (:class:`_Runner`), the partitions as the batches of
:func:`sparseclust._engine.fit_engine` (:class:`DaskSource`), and a model whose local step
and visits run on the workers (:class:`_DistributedModel`). See :mod:`sparseclust._dask`."""

import copy
import functools

import numpy as np
import scipy.sparse as sp

from .._engine import VariationalModel

__all__ = ["DaskSource"]

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


def _set_n_features(est, n_features):
    """``est`` learns the number of columns of a collection (which has no feature names)."""
    est.n_features_in_ = n_features
    if hasattr(est, "feature_names_in_"):
        del est.feature_names_in_


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


def _state_part(part, state, first, job):
    """One partition's share of a round of a model whose partitions carry state between
    rounds (``job = (model, data)``; ``model.state_part``): (new state, statistics, counter
    increments). ``first`` is the partition's first row in its batch."""
    model, data = job
    m = _fresh(model)
    new, stats = m.state_part(part, data, state, first)
    return new, stats, _increments(m)


def _first(item):
    return item[0]


def _tail(item):
    return tuple(item[1:])


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


def _top_level(leaves, combine, split_every=SPLIT_EVERY):
    """The delayed ``leaves`` summed by ``combine`` tasks (``split_every`` children each)
    until at most ``split_every`` nodes are left: that top level, as a list."""
    import dask

    level = list(leaves)
    while len(level) > split_every:
        level = [dask.delayed(combine, pure=False)(*level[i:i + split_every])
                 if len(level[i:i + split_every]) > 1 else level[i]
                 for i in range(0, len(level), split_every)]
    return level


def _tree(leaves, combine, split_every=SPLIT_EVERY):
    """A tree of ``combine`` tasks over delayed ``leaves`` (``split_every`` children each)."""
    import dask

    level = _top_level(leaves, combine, split_every)
    return level[0] if len(level) == 1 else dask.delayed(combine, pure=False)(*level)


# ---------------------------------------------------------------------------------------
# partitions and rounds


class _Runner:
    """The validated partitions of a collection and the map / tree-reduce of a round, on the
    active client or, without one, on Dask's default scheduler."""

    def __init__(self, X, template, whom, check, check_args=()):
        """``check(block, template, whom, n_features, *check_args)`` validates a partition
        on its worker (as ``fit`` validates an in-memory matrix) and returns it."""
        _require_dask()
        import dask

        self.client = _active_client()
        self._homes = None  # each partition's worker (:meth:`_place`), set at first use
        blocks, n_features = _blocks(X, whom)
        self.n_features = n_features
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

    def task(self, i, fn, *args):
        """The delayed ``fn(part_i, *args)``, on partition ``i``'s home worker."""
        import dask

        with self._at_home(i):
            return dask.delayed(fn, pure=False)(self.parts[i], *args)

    def by_home(self):
        """The partitions grouped by home worker (:meth:`_place`): {worker: [partition
        indices]}, in the order of each worker's first partition; one group keyed None
        without a client."""
        if self.client is None:
            return {None: list(range(len(self.parts)))}
        if self._homes is None:
            self._homes = self._place()
        groups = {}
        for i, h in enumerate(self._homes):
            groups.setdefault(h, []).append(i)
        return groups

    def on(self, home):
        """A context in which tasks are created to run on worker ``home`` (a loose
        restriction, as for the partitions' tasks; none for None)."""
        import contextlib

        import dask

        if home is None:
            return contextlib.nullcontext()
        return dask.annotate(workers=[home], allow_other_workers=True)

    def _at_home(self, i):
        """A context in which the tasks of partition ``i`` are created to run on its home
        worker (:meth:`_place`; a loose restriction: another worker may run them if that one
        is lost). Without it the scheduler places a round's tasks near their largest input,
        the broadcast model, and one worker runs most partitions while the other waits."""
        if self.client is not None and self._homes is None:
            self._homes = self._place()
        return self.on(None if self.client is None else self._homes[i])

    def _place(self):
        """A home worker for every partition, balancing the tokens per worker thread: the
        partitions, largest first, stay on a worker that holds them while its share allows
        (its threads' part of all tokens, one partition over), and otherwise go to the worker
        of least tokens per thread (Dask copies such a partition there once)."""
        threads = {a: max(int(w.get("nthreads", 1)), 1)
                   for a, w in self.client.scheduler_info()["workers"].items()}
        if not threads:
            return [None] * len(self.parts)
        who = self.client.who_has(self.parts)
        total, n_threads = float(self.tokens.sum()), sum(threads.values())
        load = dict.fromkeys(sorted(threads), 0.0)
        homes = [None] * len(self.parts)
        for i in np.argsort(-self.tokens, kind="stable"):
            t = float(self.tokens[i])
            held = [a for a in sorted(who.get(self.parts[i].key, ())) if a in load]
            fits = [a for a in held if load[a] + t <= total * threads[a] / n_threads + t / 2]
            home = (min(fits, key=lambda a: load[a] / threads[a]) if fits
                    else min(load, key=lambda a: (load[a] + t) / threads[a]))
            load[home] += t
            homes[i] = home
        return homes

    def value(self, x):
        """``x`` on the client: the result of a future, or ``x`` itself without a client."""
        return x.result() if self.client is not None else x

    def first(self):
        """The first non-empty partition, on the client."""
        return self.value(self.parts[int(np.flatnonzero(self.rows)[0])])

    def map_reduce(self, fn, idx, *args):
        """``sum_i fn(part_i, *args)`` over the partitions ``idx``: one task per partition,
        summed by a tree of tasks; returns the sum on the client."""
        leaves = [self.task(i, fn, *args) for i in idx]
        return self.compute(_tree(leaves, _sum_pairs))[0]

    def map_state(self, fn, idx, states, firsts, *args):
        """A round that carries state per partition: ``fn(part_i, state_i, first_i, *args)``
        returns (new state, statistics, counters) for each partition ``idx[j]`` (``states[j]``
        None in its first round); the statistics and counters are summed by a tree of tasks.
        Returns (new states, statistics, counters). On a client the new states stay on the
        workers (futures: every input of the next round is a task output, so Dask recomputes
        what a lost worker held from lineage); without one they are values."""
        import dask

        outs = [self.task(i, fn, s, int(f), *args)
                for i, s, f in zip(idx, states, firsts, strict=True)]
        new = [dask.delayed(_first, pure=False)(o) for o in outs]
        total = _tree([dask.delayed(_tail, pure=False)(o) for o in outs], _sum_pairs)
        if self.client is not None:
            futs = self.client.compute(new + [total])
            stats, counters = futs[-1].result()
            return futs[:-1], stats, counters
        res = dask.compute(*new, total)
        return list(res[:-1]), res[-1][0], res[-1][1]


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
                    leaves.append(r.task(i, _rows_part, sel[a:b] - bounds[j], job, own))
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
    step, the objective and the hooks run here, on the client.

    A model whose partitions carry state between visits of the same fixed batch (e.g. the
    chains of a sampled local step) defines ``state_job(params, batch)`` (on the client:
    the model copy and the data its tasks receive, for a visit of fixed batch ``batch`` or,
    for None, a stochastic step), ``state_part(X, data, state, first)`` (on a worker: the
    partition's new state and statistics; ``first`` is its first row in the batch). The
    states stay on the workers, one per partition of each fixed batch."""

    def __init__(self, model, runner, ship):
        self.model = model
        self.runner = runner
        self.ship = ship
        self._shipped = (None, None)
        self._states = {}
        # a Monte Carlo objective is compared over windows of passes, as in process
        self.noisy_objective = bool(getattr(model, "noisy_objective", False))
        update = getattr(model, "stochastic_update", None)
        if update is not None:  # the model's own blend of the stochastic statistics
            self.stochastic_update = update

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
        if getattr(self.model, "state_job", None) is not None:
            return self._state_round(X, params, None)
        model = self._task_model()
        stats, counters = self.runner.map_reduce(_local_part, X.idx, model,
                                                 self._params_on_workers(params))
        self._count(counters)
        return stats

    def _state_round(self, X, params, batch):
        """A stochastic step (``batch`` None) or the visit of fixed batch ``batch`` by a
        model whose partitions carry state (see the class docstring)."""
        r = self.runner
        job = r.broadcast(self.model.state_job(params, batch))
        states = self._states.get(batch) if batch is not None else None
        if states is None:
            states = [None] * len(X.idx)
        sizes = r.rows[X.idx]
        firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        new, stats, counters = r.map_state(_state_part, X.idx, states, firsts, job)
        if batch is not None:
            self._states[batch] = new
        self._count(counters)
        return stats

    def visit(self, X, params, batch):
        """The visit of a batch in batch/memoized training. A model with moves
        (``visit_local`` / ``visit_context`` / ``combine_sides`` / ``record_visit``) runs
        ``visit_local`` on every partition of the batch with the round's context broadcast;
        the statistics and the side results its moves need (e.g. merge terms, co-usage, the
        rows of the documents a delete would re-infer) reduce by the tree of tasks, and the
        client records them as the in-process visit does. A model whose partitions carry
        state visits through :meth:`_state_round`."""
        if getattr(self.model, "state_job", None) is not None:
            return self._state_round(X, params, batch)
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

    @property
    def edits_batch_stats(self):
        return getattr(self.model, "edits_batch_stats", False)

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
