"""Training on Dask collections (sparseclust._dask) on a local two-process cluster.

References: the in-process fit of the same estimator (batch SparseLDA and StochasticEMLDA
must agree to rounding / exactly), an in-process memoized fit over a stream of the same
batches, a sequence of partial_fit calls on the same minibatches, and the corpus itself
(tokens in the statistics after a worker is lost).
"""

import os
import signal
import subprocess
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

dask = pytest.importorskip("dask")  # in the [test] extra: never skipped in CI
da = pytest.importorskip("dask.array")
db = pytest.importorskip("dask.bag")
distributed = pytest.importorskip("distributed")

from sparseclust import SparseLDA, StochasticEMLDA  # noqa: E402
from sparseclust.datasets import CorpusStream, load_kos  # noqa: E402

K = 6
N_DOCS, PART = 480, 120


@pytest.fixture(scope="module")
def client():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = distributed.LocalCluster(
            processes=True, n_workers=2, threads_per_worker=1, host="127.0.0.1",
            dashboard_address=None, env={"OMP_NUM_THREADS": "1"},
        )
        c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def corpus():
    X = sp.csr_array(load_kos().data[:N_DOCS], dtype=np.float64)
    blocks = [X[i:i + PART] for i in range(0, N_DOCS, PART)]
    S0 = np.random.RandomState(0).gamma(100.0, 0.01, (K, X.shape[1]))
    return X, blocks, S0


def _darray(blocks):
    return da.concatenate([da.from_array(b, chunks=b.shape, asarray=False) for b in blocks],
                          axis=0)


def _fit(est, X, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, **kw)


def _kill_one_worker(client):
    """SIGKILL one worker process (its nanny starts a new one)."""
    pids = client.run(os.getpid)
    addr = sorted(pids)[0]
    os.kill(pids[addr], signal.SIGKILL)


def test_import_and_fit_do_not_import_dask(tmp_path):
    # run outside the source tree, so that the subprocess imports the package under test
    # (the installed one) rather than an unbuilt checkout on the current directory
    code = (
        "import sys, numpy as np\n"
        "import sparseclust\n"
        "from sparseclust import SparseLDA, StochasticEMLDA\n"
        "X = np.random.RandomState(0).poisson(1.0, (30, 20))\n"
        "SparseLDA(3, max_iter=2, random_state=0).fit(X)\n"
        "StochasticEMLDA(3, max_iter=2, random_state=0).fit(X)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=os.environ.copy(),
                   cwd=tmp_path)


def test_batch_equals_in_process(client, corpus):
    X, blocks, S0 = corpus
    kw = dict(n_components=K, init=S0, algorithm="batch", max_iter=4, tol=0, random_state=0)
    ref = _fit(SparseLDA(**kw), X)
    # CSR chunks, dense chunks and a bag of CSR blocks (two per bag partition)
    dense = da.from_array(X.toarray(), chunks=(PART, X.shape[1]))
    bag = db.from_sequence(blocks, npartitions=2)
    for Xd in (_darray(blocks), dense, bag):
        got = _fit(SparseLDA(**kw), Xd)
        np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-10, atol=1e-9)
        np.testing.assert_allclose(got.lower_bounds_, ref.lower_bounds_, rtol=1e-12)
        assert got.n_features_in_ == X.shape[1]
        assert [e["local_iters"] for e in got.trace_] == [e["local_iters"] for e in ref.trace_]
    # the fitted model is the in-process one: transform agrees
    np.testing.assert_allclose(got.transform(X[:20]), ref.transform(X[:20]), rtol=1e-8)


def test_memoized_equals_stream_of_same_batches(client, corpus):
    X, blocks, S0 = corpus
    kw = dict(n_components=K, init=S0, algorithm="memoized", n_batches=2, max_iter=5, tol=0,
              random_state=0)
    got = _fit(SparseLDA(**kw), _darray(blocks))
    # memoized batches = consecutive groups of partitions: blocks 0-1 and 2-3
    groups = [sp.vstack(blocks[:2], format="csr"), sp.vstack(blocks[2:], format="csr")]
    stream = CorpusStream(lambda: iter(groups), n_features=X.shape[1], n_documents=N_DOCS,
                          batch_size=2 * PART, feature_names=None, source="groups")
    ref = _fit(SparseLDA(**kw), stream)
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-9, atol=1e-8)
    np.testing.assert_allclose(got.lower_bounds_, ref.lower_bounds_, rtol=1e-11)
    lb = np.asarray(got.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:])), lb


def test_stochastic_equals_partial_fit_on_same_minibatches(client, corpus):
    X, blocks, S0 = corpus
    kw = dict(n_components=K, init=S0, algorithm="stochastic", batch_size=2 * PART,
              max_iter=2, random_state=3, kappa=0.7, delta=2.0, total_samples=N_DOCS)
    got = _fit(SparseLDA(**kw), _darray(blocks))
    # the documented minibatches: every pass permutes the 4 partitions (the engine's seed is
    # drawn from random_state) and takes them 2 at a time
    rng = np.random.RandomState(np.random.RandomState(3).randint(np.iinfo(np.int32).max))
    ref = SparseLDA(**kw)
    for _ in range(2):
        perm = rng.permutation(len(blocks))
        for s in range(0, len(blocks), 2):
            ref.partial_fit(sp.vstack([blocks[i] for i in perm[s:s + 2]], format="csr"))
    assert got.n_batch_iter_ == ref.n_batch_iter_ == 4
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-9, atol=1e-8)
    np.testing.assert_allclose(got.lower_bound_, ref.lower_bound_, rtol=1e-11)


def test_sem_equals_in_process(client, corpus):
    X, blocks, _ = corpus
    kw = dict(n_components=K, max_iter=4, tol=0, random_state=5)
    ref = StochasticEMLDA(**kw).fit(X)
    got = StochasticEMLDA(**kw).fit(_darray(blocks))
    # the same random streams per document: identical assignments and counts
    np.testing.assert_array_equal(got.components_, ref.components_)
    np.testing.assert_allclose([e["log_joint"] for e in got.trace_],
                               [e["log_joint"] for e in ref.trace_], rtol=1e-12)
    assert [e["changed"] for e in got.trace_] == [e["changed"] for e in ref.trace_]
    with pytest.raises(ValueError, match="algorithm='batch' only"):
        StochasticEMLDA(algorithm="online").fit(_darray(blocks))


def test_worker_killed_mid_fit(client, corpus):
    X, blocks, S0 = corpus
    kw = dict(n_components=K, init=S0, algorithm="batch", max_iter=3, tol=0, random_state=0)
    ref = _fit(SparseLDA(**kw), _darray(blocks))

    def kill_after_first(info):
        if info["pass"] == 1:
            _kill_one_worker(client)

    got = _fit(SparseLDA(**kw), _darray(blocks), callback=kill_after_first)
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-12, atol=1e-10)
    assert got.lower_bounds_ == pytest.approx(ref.lower_bounds_, rel=1e-13)
    # nothing dropped: the topic-word statistics hold every token of the corpus
    S = got.components_ - got.topic_word_prior_
    assert S.sum() == pytest.approx(X.sum(), rel=1e-9)

    # stochastic EM keeps the token assignments on the workers: lost ones are recomputed
    semkw = dict(n_components=K, max_iter=3, tol=0, random_state=1)
    sref = StochasticEMLDA(**semkw).fit(X)

    def kill_after_sweep(info):
        if info["sweep"] == 1:
            _kill_one_worker(client)

    sgot = StochasticEMLDA(**semkw).fit(_darray(blocks), callback=kill_after_sweep)
    np.testing.assert_array_equal(sgot.components_, sref.components_)
    W = sgot.components_ - sgot.topic_word_prior_
    assert W.sum() == pytest.approx(X.sum())


@pytest.mark.parametrize("bad", [-1.0, np.nan])
def test_bad_value_in_one_partition(client, corpus, bad):
    X, blocks, _ = corpus
    blocks = [b.copy() for b in blocks]
    blocks[2].data[5] = bad
    full = sp.vstack(blocks, format="csr")
    for est in (SparseLDA(K, max_iter=2), StochasticEMLDA(K, max_iter=2)):
        with pytest.raises(ValueError) as local:
            est.fit(full)
        with pytest.raises(ValueError) as dist:
            est.fit(_darray(blocks))
        assert str(dist.value) == str(local.value)
        assert ("Negative" in str(dist.value)) == (bad == -1.0)
    # the caller's blocks are not modified
    assert blocks[2].data[5] == bad or np.isnan(blocks[2].data[5])


def test_column_chunks_rejected(client, corpus):
    X, blocks, _ = corpus
    Xd = da.from_array(X.toarray(), chunks=(PART, 1000))
    with pytest.raises(ValueError, match="chunks along the columns"):
        SparseLDA(K).fit(Xd)
    # the methods that do not distribute refuse a collection instead of computing it
    from sparseclust import HDPTopicModel

    lda = _fit(SparseLDA(K, max_iter=2, random_state=0), X)
    with pytest.raises(TypeError, match="does not take a Dask collection"):
        lda.partial_fit(_darray(blocks))
    with pytest.raises(TypeError, match="does not take a Dask collection"):
        lda.transform(_darray(blocks))
    with pytest.raises(TypeError, match="does not take a Dask collection"):
        HDPTopicModel(max_components=K).fit(_darray(blocks))


def test_default_scheduler_without_client(corpus, monkeypatch):
    import sparseclust._dask as sd

    X, blocks, S0 = corpus
    monkeypatch.setattr(sd, "_active_client", lambda: None)
    kw = dict(n_components=K, init=S0, algorithm="batch", max_iter=2, tol=0, random_state=0)
    with dask.config.set(scheduler="threads", num_workers=2):
        got = _fit(SparseLDA(**kw), _darray(blocks))
        sem = StochasticEMLDA(K, max_iter=2, random_state=0).fit(_darray(blocks))
    ref = _fit(SparseLDA(**kw), X)
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-10, atol=1e-9)
    np.testing.assert_array_equal(
        sem.components_, StochasticEMLDA(K, max_iter=2, random_state=0).fit(X).components_)
