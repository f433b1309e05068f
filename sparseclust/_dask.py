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
    partition are stacked into one partition).
Where it runs
    on the active ``distributed.Client`` when there is one (``distributed.default_client``),
    else on Dask's default scheduler in this process.
A round
    the validated partitions are computed once and stay on the workers (futures whose lineage
    is the collection's graph, so Dask recomputes a partition lost with its worker); the
    client broadcasts the parameters the local step reads (``Client.scatter(...,
    broadcast=True)``), one task per partition runs the local step, and the statistics are
    summed by a tree of tasks (``split_every`` partitions per node) on the workers; only the
    sum reaches the client, which runs the global step, the objective and any moves.

Nothing here is imported by ``import sparseclust``: the estimators import this module only
when ``fit`` receives a Dask collection, and this module imports Dask only inside functions.
"""

import copy
import types

import numpy as np
import scipy.sparse as sp

from ._engine import VariationalModel, is_dask_collection

__all__ = ["is_dask_collection", "DaskSource", "prepare_lda", "fit_sem"]

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


def _check_part(block, template, whom, n_features):
    """Validate one partition exactly as ``fit`` validates an in-memory matrix (same errors);
    returns it as canonical CSR."""
    from .topics._local import check_counts

    if isinstance(block, (list, tuple)):  # a bag partition: its items are 2-D blocks
        blocks = [b for b in block]
        if not blocks:
            block = sp.csr_array((0, n_features))
        else:
            block = sp.vstack([sp.csr_array(b) if sp.issparse(b) else sp.csr_array(
                np.asarray(b)) for b in blocks], format="csr") if len(blocks) > 1 else blocks[0]
    if getattr(block, "ndim", 2) != 2 or block.shape[1] != n_features:
        raise ValueError(
            f"{whom}: a partition has shape {getattr(block, 'shape', None)}; every partition "
            f"must have the {n_features} columns of the first."
        )
    est = copy.copy(template)
    if block.shape[0] == 0:
        return sp.csr_array(block, dtype=np.float64)
    return check_counts(est, block, reset=True, whom=whom)


def _part_info(part):
    return int(part.shape[0]), float(part.sum()), int(part.shape[1])


def _local_part(part, model, params):
    """The local step of ``model`` on one partition: (statistics, counter increments)."""
    m = copy.copy(model)
    counters = getattr(model, "counters", None)
    if counters is not None:
        m.counters = {k: 0 for k in counters}
    stats = m.local_step(part, params)
    return stats, dict(getattr(m, "counters", {}) or {})


def _sum_pairs(*items):
    """Sum of (statistics, counters) pairs: a node of the reduction tree."""
    stats, counters = items[0][0], dict(items[0][1])
    for s, c in items[1:]:
        stats = stats + s
        for k, v in c.items():
            counters[k] = counters.get(k, 0) + v
    return stats, counters


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

    def __init__(self, X, template, whom):
        _require_dask()
        import dask

        self.client = _active_client()
        blocks, n_features = _blocks(X, whom)
        self.n_features = n_features
        parts = [dask.delayed(_check_part, pure=False)(b, template, whom, n_features)
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
        return parts, int(first[0].shape[1])
    raise TypeError(f"{whom}: unsupported Dask collection {type(X).__name__}; pass a "
                    "dask.array.Array or a dask.bag.Bag of 2-D blocks.")


class _Batch:
    """A batch of training: a set of partitions (their indices) and its number of rows."""

    def __init__(self, idx, n_rows):
        self.idx = [int(i) for i in idx]
        self.n_rows = int(n_rows)


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
            return [self._batch(range(self.P))]
        groups = np.array_split(np.arange(self.P), min(max(int(n_batches), 1), self.P))
        return [self._batch(g) for g in groups]

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

    def local_step(self, X, params):
        stats, counters = self.runner.map_reduce(_local_part, X.idx, self.model,
                                                 self._params_on_workers(params))
        mc = getattr(self.model, "counters", None)
        if mc is not None:
            for k, v in counters.items():
                mc[k] = mc.get(k, 0) + v
        return stats

    def visit(self, X, params, batch):
        return self.local_step(X, params)

    def global_step(self, stats):
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


def _ship_lda(params):
    """What SparseLDA's local step reads: the E[log phi] table alone (not lambda, not S)."""
    from .topics._local import TopicTables

    return types.SimpleNamespace(tables=TopicTables.from_transposed(params.tables.CT))


def prepare_lda(est, X, rng, whom):
    """For ``SparseLDA.fit`` on a Dask collection: validate the partitions on the workers,
    set ``n_features_in_``, initialize the topics (``init`` on the first non-empty partition,
    or the given array); returns (source, initial statistics, documents, tokens, wrap) where
    ``wrap(model)`` is the model to hand to the engine."""
    runner = _Runner(X, type(est)(), whom)
    est.n_features_in_ = runner.n_features
    if hasattr(est, "feature_names_in_"):
        del est.feature_names_in_
    if isinstance(est.init, str):
        init = est._init_stats(runner.first(), rng)
    else:
        init = est._init_stats(sp.csr_array((1, runner.n_features)), rng)
    source = DaskSource(runner)

    def wrap(model):
        return _DistributedModel(model, runner, _ship_lda)

    return source, init, source.n_samples, float(runner.tokens.sum()), wrap


# ---------------------------------------------------------------------------------------
# stochastic EM (StochasticEMLDA, algorithm='batch')


def _sem_init(part, offset, seed, K, n_threads):
    """Uniform initial assignments of one partition (document keys offset..offset+D-1, as
    in-process) and their word-topic counts; returns (z, counts, word totals)."""
    from ._kernels import _sampler
    from .topics._sem import _threads_for, _z_dtype, token_layout

    D, V = part.shape
    lay = token_layout(part)
    N = int(lay.tokptr[-1])
    keys = np.arange(offset, offset + D, dtype=np.uint64)
    z = np.empty(N, dtype=_z_dtype(K))
    nt = _threads_for(N, n_threads)
    _sampler.random_assign(lay.tokptr, z, keys, seed, K, nt)
    W = np.zeros((V, K), np.int32)
    _sampler.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W, nt)
    totals = np.bincount(lay.indices, weights=lay.cnt, minlength=V).astype(np.int64)
    return z, (sp.csr_array(W, dtype=np.int64), totals, N)


def _sem_sweep(part, z, offset, W, word_totals, sampler_args, beta, seed, sweep):
    """One stochastic-EM sweep of one partition reading the whole-data counts W: returns
    (new z, (new word-topic counts as sparse int64, log-likelihood of its documents, tokens
    that changed topic))."""
    from .topics._sem import _Sampler, token_layout

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
    in-process fit's exactly; the log joint equals it to floating-point rounding.
    """
    import time

    from sklearn.utils import check_random_state

    from .topics._sem import _seed, run_sweeps
    from .utils._threads import effective_n_threads

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
        return W, smp.set_weights_from_counts(W, beta, word_totals) + float(ll_docs), changed

    return run_sweeps(est, sweep, n_tokens=N, n_docs=D, rng=rng,
                      elapsed=time.perf_counter() - t_start, callback=callback)
