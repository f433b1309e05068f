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

Modules
    The layer knows no model and imports none: :mod:`._core`, the validated partitions and
    the rounds (:class:`._core._Runner`), the partitioned source of the engine
    (:class:`._core.DaskSource`) and the model whose local step runs on the workers
    (:class:`._core._DistributedModel`, which calls the model's own local step, visit and
    hooks); :mod:`._rows`, collections of dense rows (SparseGaussianMixture: the pooled data
    moments, sums over the partitions). The topic models' integrations live beside their
    models and use the layer: :mod:`sparseclust.topics._dask_lda` (SparseLDA and
    HDPTopicModel: count partitions, the initial topics) and
    :mod:`sparseclust.topics._dask_sem` (StochasticEMLDA: the model's partition sweeps).

Nothing here is imported by ``import sparseclust``: an estimator imports its integration only
when ``fit`` receives a Dask collection, and the modules import Dask only inside functions.
The layer imports only :mod:`sparseclust._engine`: no import reaches up to a model package,
so there is no cycle, not even through a package's ``__init__``.
"""
