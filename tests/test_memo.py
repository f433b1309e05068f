# SPDX-License-Identifier: BSD-3-Clause
"""Memoized training with the batches' statistics in files (``memo_dir``): the same fit as
with them in memory, bit for bit, and no files left behind."""

import os
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from sparseclust import SparseLDA
from sparseclust._engine import SuffStats, VariationalModel, fit_engine
from sparseclust._memo import SpilledStats
from sparseclust.datasets import CorpusStream, load_kos


def _kos(n=120):
    return sp.csr_array(load_kos().data[:n])


def _stream(X, batch_size=25):
    def batches():
        for a in range(0, X.shape[0], batch_size):
            yield X[a:a + batch_size]
    return CorpusStream(batches, n_features=X.shape[1], n_documents=X.shape[0],
                        batch_size=batch_size, feature_names=None, source="memory")


def _same_fit(a, b):
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.lower_bounds_ == b.lower_bounds_
    assert a.n_iter_ == b.n_iter_


def test_spilled_stats_behave_as_the_list_they_replace(tmp_path):
    s = SuffStats(S=sp.csr_array(np.arange(6.0).reshape(2, 3)), elbo_local=-1.5)
    with SpilledStats(tmp_path, 2) as store:
        folder = store._tmp.name
        assert os.path.dirname(folder) == str(tmp_path)
        assert len(store) == 2 and store[0] is None and store[-1] is None
        store[1] = s
        store.append(2.0 * s)
        assert len(store) == 3
        got = list(store)
        assert got[0] is None
        assert (got[1]["S"] != s["S"]).nnz == 0 and got[1]["elbo_local"] == -1.5
        np.testing.assert_array_equal(got[2]["S"].toarray(), 2.0 * s["S"].toarray())
        with pytest.raises(IndexError):
            store[3]
        with pytest.raises(IndexError):
            store[3] = s
        # a read is a new object: editing it does not change what is stored
        store[1]["S"].data[:] = 0.0
        assert store[1]["S"].data.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
        assert pickle.loads(pickle.dumps(store[2]))["elbo_local"] == -3.0
    assert not os.path.exists(folder)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("local_step", ["gibbs", "variational"])
@pytest.mark.parametrize("algorithm", ["memoized", "batch"])
def test_memo_dir_gives_the_same_fit_on_a_matrix(tmp_path, local_step, algorithm):
    X = _kos()
    kw = dict(n_components=6, n_batches=4, max_iter=4, tol=0, random_state=0,
              local_step=local_step, algorithm=algorithm)
    ref = SparseLDA(**kw).fit(X)
    got = SparseLDA(memo_dir=tmp_path, **kw).fit(X)
    _same_fit(got, ref)
    assert os.listdir(tmp_path) == []


def test_memo_dir_gives_the_same_fit_on_a_stream_and_keeps_one_file_per_batch(tmp_path):
    X = _kos(130)
    seen = []

    def look(info):
        folders = os.listdir(tmp_path)
        assert len(folders) == 1
        seen.append(sorted(os.listdir(tmp_path / folders[0])))

    ref = SparseLDA(n_components=5, max_iter=3, tol=0, random_state=1).fit(_stream(X))
    got = SparseLDA(n_components=5, max_iter=3, tol=0, random_state=1,
                    memo_dir=str(tmp_path)).fit(_stream(X), callback=look)
    _same_fit(got, ref)
    # six minibatches (the last of 5 documents): six files, the same after every pass
    assert seen == [[f"batch-{b:06d}.pkl" for b in range(6)]] * 3
    assert os.listdir(tmp_path) == []


def test_memo_dir_is_removed_when_the_fit_fails(tmp_path):
    def stop(info):
        raise RuntimeError("interrupted")

    est = SparseLDA(n_components=4, max_iter=3, tol=0, random_state=0, memo_dir=tmp_path)
    with pytest.raises(RuntimeError, match="interrupted"):
        est.fit(_kos(60), callback=stop)
    assert os.listdir(tmp_path) == []


def test_memo_dir_must_be_an_existing_directory(tmp_path):
    X = _kos(40)
    for bad in (tmp_path / "missing", tmp_path / "file"):
        if bad.name == "file":
            bad.write_text("x")
        with pytest.raises(ValueError, match="memo_dir=.*not an existing directory"):
            SparseLDA(n_components=3, memo_dir=bad).fit(X)
    with pytest.raises(ValueError, match="memo_dir"):
        SparseLDA(n_components=3, memo_dir=3).fit(X)
    # stochastic training caches no batch statistics: memo_dir is neither used nor checked
    est = SparseLDA(n_components=3, algorithm="stochastic", max_iter=2, tol=0,
                    memo_dir=tmp_path / "missing", random_state=0).fit(X)
    assert est.n_iter_ == 2 and os.listdir(tmp_path) == ["file"]


def test_memo_dir_is_removed_when_the_first_step_fails(tmp_path):
    class Failing(VariationalModel):
        def initial_params(self, init_stats):
            raise RuntimeError("no parameters")

    X = np.ones((4, 2))
    with pytest.raises(RuntimeError, match="no parameters"):
        fit_engine(Failing(), X, None, algorithm="memoized", n_batches=2, memo_dir=tmp_path)
    assert os.listdir(tmp_path) == []


def test_models_that_edit_cached_statistics_refuse_memo_dir(tmp_path):
    class Editing:
        edits_batch_stats = True

    with pytest.raises(ValueError, match="Editing edits the cached batch statistics"):
        fit_engine(Editing(), np.ones((4, 2)), None, memo_dir=tmp_path)
    assert os.listdir(tmp_path) == []


def test_a_fitted_model_with_memo_dir_fits_again_the_same(tmp_path):
    X = _kos(80)
    est = SparseLDA(n_components=4, n_batches=3, max_iter=3, tol=0, random_state=2,
                    memo_dir=tmp_path)
    first = est.fit(X).components_.copy()
    np.testing.assert_array_equal(est.fit(X).components_, first)
    again = pickle.loads(pickle.dumps(est))
    assert again.memo_dir == tmp_path
    np.testing.assert_array_equal(again.fit(X).components_, first)
    assert os.listdir(tmp_path) == []
