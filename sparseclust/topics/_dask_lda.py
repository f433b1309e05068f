# SPDX-License-Identifier: BSD-3-Clause
"""SparseLDA and HDPTopicModel on a Dask collection of counts, through the Dask layer
(:mod:`sparseclust._dask`): the partitions validated on the workers as ``fit`` validates a
matrix (:func:`sparseclust.topics._local.check_counts`), the initial topics, and what each
model's local step reads shipped to the workers. The estimators import this module only when
``fit`` receives a Dask collection."""

import copy
import numbers
import types

import numpy as np
import scipy.sparse as sp

from .._dask._core import DaskSource, _bag_item, _DistributedModel, _Runner, _set_n_features
from ._local import TopicTables, check_counts, check_whole_counts

__all__ = ["partition_template", "prepare_lda"]


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
    X = check_counts(est, block, reset=True, whom=whom)
    rule = est._whole_counts_rule()
    if rule is not None and X.nnz:  # a sampled step: whole tokens, as fit checks a matrix
        check_whole_counts(X, whom, fitting=True, why=rule[0], instead=rule[1])
    return X


def partition_template(est):
    """The estimator the partitions are validated with on the workers: ``est``'s scalar
    parameters (those that decide the checks, e.g. ``local_step``), not its ``init``
    array or estimator."""
    scalars = (str, numbers.Number, bool, type(None))
    return type(est)(**{k: v for k, v in est.get_params(deep=False).items()
                        if isinstance(v, scalars)})


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
    runner = _Runner(X, partition_template(est), whom, _check_part)
    _set_n_features(est, runner.n_features)
    if isinstance(est.init, str) or hasattr(est.init, "fit"):  # an estimator is fitted on it
        init = est._init_stats(runner.first(), rng)
    else:
        init = est._init_stats(sp.csr_array((1, runner.n_features)), rng)
    source = DaskSource(runner)

    def wrap(model):
        return _DistributedModel(model, runner, ship)

    return source, init, source.n_samples, float(runner.tokens.sum()), wrap
