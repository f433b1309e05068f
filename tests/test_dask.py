"""Training on Dask collections (sparseclust._dask) on a local two-process cluster.

References: the in-process fit of the same estimator (batch SparseLDA, HDPTopicModel and
StochasticEMLDA must agree to rounding / exactly), an in-process memoized fit over a stream of
the same batches (HDPTopicModel with its merge / delete / sort moves: the same moves accepted,
the same topics), a sequence of partial_fit calls on the same minibatches, and the corpus
itself (tokens in the statistics after a worker is lost).
"""

import collections
import importlib
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

from sparseclust import HDPTopicModel, SparseLDA, StochasticEMLDA  # noqa: E402
from sparseclust._dask._core import SPLIT_EVERY  # noqa: E402
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


def _partial_fit_documented_minibatches(est, blocks, rng, passes=2, per=2):
    """partial_fit over the documented stochastic minibatches of the partitions ``blocks``:
    every pass permutes them with ``rng`` and takes ``per`` at a time."""
    for _ in range(passes):
        perm = rng.permutation(len(blocks))
        for s in range(0, len(blocks), per):
            est.partial_fit(sp.vstack([blocks[i] for i in perm[s:s + per]], format="csr"))

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


def test_init_estimator_fitted_on_the_first_partition(client, corpus):
    # init=StochasticEMLDA(...) on a Dask collection: the sampler is fitted on the first
    # non-empty partition (as the string inits seed from it), so the fit equals the in-process
    # fit from that sampler's counts
    X, blocks, _ = corpus
    kw = dict(n_components=K, algorithm="batch", max_iter=3, tol=0, random_state=0,
              doc_topic_prior=0.3, topic_word_prior=0.05)
    sem = StochasticEMLDA(n_components=K, max_iter=5, random_state=1, n_threads=1)
    counts = StochasticEMLDA(n_components=K, max_iter=5, random_state=1, n_threads=1,
                             doc_topic_prior=0.3, topic_word_prior=0.05).fit(blocks[0])
    ref = _fit(SparseLDA(init=counts.components_ - 0.05, **kw), X)
    got = _fit(SparseLDA(init=sem, **kw), _darray(blocks))
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-10, atol=1e-9)


def test_bag_of_rows_equals_in_process(client, corpus):
    # a bag of 1-D rows (one document per item: dense rows, lists, 1-D sparse rows) is the
    # matrix of its rows; an item of another width gets the partition message
    X, blocks, S0 = corpus
    kw = dict(n_components=K, init=S0, algorithm="batch", max_iter=3, tol=0, random_state=0)
    ref = _fit(SparseLDA(**kw), X)
    dense = X.toarray()
    rows = [dense[i] if i % 3 else dense[i].tolist() for i in range(N_DOCS)]
    sparse_rows = [sp.coo_array(dense[i]) for i in range(N_DOCS)]
    for items in (rows, sparse_rows):
        got = _fit(SparseLDA(**kw), db.from_sequence(items, npartitions=4))
        np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-10, atol=1e-9)
    bad = [dense[i] for i in range(N_DOCS)]
    bad[200] = dense[200][:-1]
    with pytest.raises(ValueError, match="every partition must have the"):
        _fit(SparseLDA(**kw), db.from_sequence(bad, npartitions=4))
    with pytest.raises(ValueError, match="2-D blocks .* or 1-D rows"):
        _fit(SparseLDA(**kw), db.from_sequence([dense[:2, :, None]], npartitions=1))


def test_old_parameters_released_before_the_global_step(client, corpus, monkeypatch):
    # the client holds one (V, K) table of parameters at a time, as in process: the engine
    # drops the old parameters, and so does the broadcast cache, before a global step
    import gc
    import weakref

    from sparseclust.topics._lda_model import _LDAModel

    X, blocks, S0 = corpus
    alive, previous = [], []
    original = _LDAModel.global_step

    def watched(self, stats):
        gc.collect()
        alive.append([ref() is not None for ref in previous])
        params = original(self, stats)
        previous.append(weakref.ref(params))
        return params

    monkeypatch.setattr(_LDAModel, "global_step", watched)
    kw = dict(n_components=K, init=S0, algorithm="batch", max_iter=4, tol=0, random_state=0,
              local_step="variational")
    for Xd in (X, _darray(blocks)):
        alive.clear()
        previous.clear()
        _fit(SparseLDA(**kw), Xd)
        assert len(alive) >= 4
        assert not any(any(a) for a in alive), alive


def test_memoized_equals_stream_of_same_batches(client, corpus):
    X, blocks, S0 = corpus
    kw = dict(n_components=K, init=S0, algorithm="memoized", n_batches=2, max_iter=5, tol=0,
              random_state=0, local_step="variational")
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
              max_iter=2, random_state=3, kappa=0.7, delta=2.0, total_samples=N_DOCS,
              local_step="variational")
    got = _fit(SparseLDA(**kw), _darray(blocks))
    # the documented minibatches: every pass permutes the 4 partitions (the engine's seed is
    # drawn from random_state) and takes them 2 at a time
    rng = np.random.RandomState(np.random.RandomState(3).randint(np.iinfo(np.int32).max))
    ref = SparseLDA(**kw)
    _partial_fit_documented_minibatches(ref, blocks, rng)
    assert got.n_batch_iter_ == ref.n_batch_iter_ == 4
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-9, atol=1e-8)
    np.testing.assert_allclose(got.lower_bound_, ref.lower_bound_, rtol=1e-11)


# a lambda, so that it is sent by value to the workers (this module is not importable there)
_holds_sweep_sampler = (  # noqa: E731
    lambda: importlib.import_module("sparseclust.topics._sem_sampler")
    ._SWEEP_SAMPLER["sampler"] is not None)


def test_sem_workers_share_and_release_the_sweep_tables(client, corpus):
    # each worker builds the sampler of a sweep's counts once for its partitions and keeps
    # it between the sweep and the next; the fit's end drops it on every worker
    _, blocks, _ = corpus
    seen = []

    def callback(info):
        seen.append(client.run(_holds_sweep_sampler))

    with distributed.get_task_stream(client) as ts:
        _fit(StochasticEMLDA(n_components=K, max_iter=3, tol=0, random_state=0),
             _darray(blocks), callback=callback)
    assert len(seen) == 3 and all(all(s.values()) for s in seen)
    assert not any(client.run(_holds_sweep_sampler).values())
    # every worker adds up its own copy of each round's counts (the initial round and three
    # sweeps), and the copies they pooled are dropped at the end
    dense = collections.Counter(t["worker"] for t in ts.data
                                if str(t["key"]).startswith("_dense_counts"))
    assert dense == dict.fromkeys(client.scheduler_info()["workers"], 4)
    assert not any(client.run(_pooled_counts).values())


_pooled_counts = (  # noqa: E731
    lambda: len(importlib.import_module("sparseclust.topics._dask_sem")._COUNTS_POOL))


def test_sem_settings_are_checked_before_any_round(client, corpus):
    # a sampler setting that fit refuses is refused before the first round runs on the
    # workers, and leaves nothing pooled there
    _, blocks, _ = corpus
    with distributed.get_task_stream(client) as ts:
        with pytest.raises(ValueError, match="needs doc_counts='live'"):
            _fit(StochasticEMLDA(n_components=K, sampler="metropolis", doc_counts="frozen"),
                 _darray(blocks))
    assert not any(str(t["key"]).startswith("init_partition") for t in ts.data)
    assert not any(client.run(_pooled_counts).values())


def test_release_on_the_workers_never_replaces_the_fit_outcome(monkeypatch):
    # the workers' cleanup at the end of a fit warns when a worker cannot be reached, and
    # still releases this process's sampler and pool
    from sparseclust.topics import _dask_sem, _sem_sampler

    class Unreachable:
        def run(self, fn):
            raise OSError("worker gone")

    class Runner:
        client = Unreachable()

    _dask_sem._zero_counts(3, 2)
    _sem_sampler._SWEEP_SAMPLER["sampler"] = object()
    with pytest.warns(RuntimeWarning, match="could not release.*worker gone"):
        _dask_sem._release(Runner())
    assert not _dask_sem._COUNTS_POOL
    assert _sem_sampler._SWEEP_SAMPLER["sampler"] is None


def test_count_arrays_are_reused_only_when_nothing_refers_to_them():
    from sparseclust.topics import _dask_sem

    _dask_sem.release_counts_pool()
    try:
        a = _dask_sem._zero_counts(5, 3)
        a[:] = 7
        # a referenced array is never handed out again, nor one a view refers to
        b = _dask_sem._zero_counts(5, 3)
        assert b is not a
        view = b[1:]
        del b
        c = _dask_sem._zero_counts(5, 3)
        assert c is not a and c.base is None and view.base is not c
        del view
        # a free one is, zeroed; another shape is not
        a_id = id(a)
        del a
        d = _dask_sem._zero_counts(5, 3)
        assert id(d) == a_id and not d.any() and d.dtype == np.int32
        assert _dask_sem._zero_counts(4, 3).shape == (4, 3)
        # the pool keeps the latest arrays only
        assert len(_dask_sem._COUNTS_POOL) == _dask_sem._POOL_SIZE
    finally:
        _dask_sem.release_counts_pool()


def test_partitions_spread_over_the_workers(client, corpus):
    # a collection persisted on one worker: each partition gets a home worker balancing the
    # tokens (the rounds' tasks of a partition run there), so both workers sweep; the fit is
    # the in-process one
    X, blocks, _ = corpus
    w0, w1 = sorted(client.scheduler_info()["workers"])
    Xd = client.persist(_darray(blocks), workers=[w0])
    distributed.wait(Xd)
    assert all(set(v) == {w0} for v in client.who_has(Xd).values())
    kw = dict(n_components=K, max_iter=2, tol=0, random_state=5, init="random",
              topic_estimate="sample")
    with distributed.get_task_stream(client) as ts:
        got = _fit(StochasticEMLDA(**kw), Xd)
    ran = collections.Counter(t["worker"] for t in ts.data
                              if str(t["key"]).startswith("sweep_partition"))
    tokens = [float(b.sum()) for b in blocks]
    assert max(tokens) < 1.2 * min(tokens)  # (so 2 of the 4 partitions each)
    assert ran == {w0: 4, w1: 4}
    np.testing.assert_array_equal(got.components_, StochasticEMLDA(**kw).fit(X).components_)


def test_sem_equals_in_process(client, corpus):
    X, blocks, _ = corpus
    # (a fit on a Dask collection starts from uniform assignments: init='random' in-process)
    kw = dict(n_components=K, max_iter=4, tol=0, random_state=5, init="random")
    ref = StochasticEMLDA(**kw, topic_estimate="sample").fit(X)
    got = StochasticEMLDA(**kw, topic_estimate="sample").fit(_darray(blocks))
    # the same random streams per document: identical assignments and counts
    np.testing.assert_array_equal(got.components_, ref.components_)
    # also with the Metropolis-Hastings sampler, whose proposals stay within a document
    mh = dict(kw, topic_estimate="sample", sampler="metropolis")
    np.testing.assert_array_equal(StochasticEMLDA(**mh).fit(_darray(blocks)).components_,
                                  StochasticEMLDA(**mh).fit(X).components_)
    # and with the sweeps taken in blocks of documents that span partitions (one round of
    # the partitions per block), with the same log joint
    bl = dict(kw, topic_estimate="sample", sweep_blocks=3)
    got_b, ref_b = StochasticEMLDA(**bl).fit(_darray(blocks)), StochasticEMLDA(**bl).fit(X)
    np.testing.assert_array_equal(got_b.components_, ref_b.components_)
    assert got_b.lower_bound_ == pytest.approx(ref_b.lower_bound_, rel=1e-12)
    assert not np.array_equal(ref_b.components_, ref.components_)
    # the Rao-Blackwellized counts are summed over the partitions: equal up to the rounding
    # of float32 sums in another order
    rb_ref = StochasticEMLDA(**kw).fit(X)
    rb_got = StochasticEMLDA(**kw).fit(_darray(blocks))
    np.testing.assert_allclose(rb_got.components_, rb_ref.components_, rtol=1e-5, atol=1e-4)
    # the callback's topic_estimate is valid during fit only, as in process: after fit it
    # raises instead of computing on the partitions it would otherwise keep referenced
    for mode in ("rao_blackwell", "sample"):
        for data in (X, _darray(blocks)):
            keep = {}
            StochasticEMLDA(**kw, topic_estimate=mode).fit(
                data, callback=lambda i, keep=keep: keep.update(f=i["topic_estimate"]))
            with pytest.raises(RuntimeError, match="during fit"):
                keep["f"]()
    assert np.abs(rb_ref.components_ - ref.components_).max() > 0.1
    # more partitions than one task of the reduction tree sums (a tree of two levels), and
    # the callback's counts of every sweep
    seen = {"ref": [], "got": []}
    many = [X[i:i + 40] for i in range(0, N_DOCS, 40)]
    assert len(many) > SPLIT_EVERY
    for name, data in (("ref", X), ("got", _darray(many))):
        StochasticEMLDA(**kw, topic_estimate="sample").fit(
            data, callback=lambda i, name=name: seen[name].append(
                i["word_topic_counts"].copy()))
    assert len(seen["got"]) == kw["max_iter"]
    for a, b in zip(seen["got"], seen["ref"], strict=True):
        assert a.dtype == b.dtype == np.int32
        np.testing.assert_array_equal(a, b)
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
    semkw = dict(n_components=K, max_iter=3, tol=0, random_state=1, topic_estimate="sample",
                 init="random")
    sref = StochasticEMLDA(**semkw).fit(X)

    def kill_after_sweep(info):
        if info["sweep"] == 1:
            _kill_one_worker(client)

    sgot = StochasticEMLDA(**semkw).fit(_darray(blocks), callback=kill_after_sweep)
    np.testing.assert_array_equal(sgot.components_, sref.components_)
    W = sgot.components_ - sgot.topic_word_prior_
    assert W.sum() == pytest.approx(X.sum())


# ---------------------------------------------------------------------------------------
# SparseLDA with the sampled local step: the chains of memoized training stay on the workers


def _gibbs_kw(**kw):
    return dict(n_components=K, local_step="gibbs", n_burnin=2, tol=0, random_state=4, **kw)


def test_gibbs_batch_equals_in_process(client, corpus):
    X, blocks, S0 = corpus
    kw = _gibbs_kw(init=S0, algorithm="batch", max_iter=3)
    ref = _fit(SparseLDA(**kw), X)
    got = _fit(SparseLDA(**kw), _darray(blocks))
    # every document draws from the stream of its place in the batch, as in process: the
    # same draws, the statistics summed over the partitions in another order
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.lower_bounds_, ref.lower_bounds_, rtol=1e-12)
    assert [e["local_iters"] for e in got.trace_] == [e["local_iters"] for e in ref.trace_]
    np.testing.assert_allclose(got.transform(X), ref.transform(X), rtol=1e-9, atol=1e-12)


def test_gibbs_memoized_with_memo_dir_is_the_same_fit(client, corpus, tmp_path):
    """The client's cache of the batches' statistics in files (``memo_dir``), which the
    continued chains read for their exclusion, gives the fit of the cache in memory."""
    X, blocks, S0 = corpus
    kw = _gibbs_kw(init=S0, algorithm="memoized", n_batches=len(blocks), max_iter=3)
    ref = _fit(SparseLDA(**kw), _darray(blocks))
    got = _fit(SparseLDA(memo_dir=tmp_path, **kw), _darray(blocks))
    np.testing.assert_array_equal(got.components_, ref.components_)
    assert got.lower_bounds_ == ref.lower_bounds_
    assert os.listdir(tmp_path) == []


def _fixed_count_before_pass(n_fixed):
    """The Gibbs model's ``before_pass`` with the number of fixed batches known from the
    first pass on (a stream's is known after its first pass): the reference fits below."""
    def before_pass(self, stats, params, state):
        self.n_fixed = n_fixed
        self._memo = state["batch_stats"]
    return before_pass


def test_gibbs_memoized_chains_stay_on_the_workers(client, corpus, monkeypatch):
    X, blocks, S0 = corpus
    kw = _gibbs_kw(init=S0, algorithm="memoized", n_batches=len(blocks), max_iter=4)
    got = _fit(SparseLDA(**kw), _darray(blocks))
    # the reference: the same batches (one partition each) as a stream whose fit keeps the
    # chains as a matrix's fit does (a stream's does not, to save memory) from the first
    # pass (a stream's batch count is known after one pass)
    from sparseclust.topics._lda_model import _GibbsLDAModel

    stream = CorpusStream(lambda: iter(blocks), n_features=X.shape[1], n_documents=N_DOCS,
                          batch_size=PART, feature_names=None, source="blocks")
    monkeypatch.setattr(SparseLDA, "_keeps_chains", lambda self, *a, **k: True)
    monkeypatch.setattr(_GibbsLDAModel, "before_pass", _fixed_count_before_pass(len(blocks)))
    ref = _fit(SparseLDA(**kw), stream)
    np.testing.assert_array_equal(got.components_, ref.components_)
    np.testing.assert_allclose(got.lower_bounds_, ref.lower_bounds_, rtol=1e-13)
    # a revisit continues its partition's chain: no initialising sweep, no burn-in, and the
    # saved sweeps of a kept chain (20)
    n_tok_sweeps = [e["local_iters"] for e in got.trace_]
    assert n_tok_sweeps[0] == (1 + 2 + 20) * N_DOCS
    assert all(n == 20 * N_DOCS for n in n_tok_sweeps[1:]), n_tok_sweeps
    # ... and they are the chains: restarting them every visit gives other topics
    monkeypatch.setattr(SparseLDA, "_keeps_chains", lambda self, *a, **k: False)
    fresh = _fit(SparseLDA(**kw), _darray(blocks))
    assert np.abs(fresh.components_ - got.components_).max() > 1.0

    def kill_after_first(info):
        if info["pass"] == 2:
            _kill_one_worker(client)

    monkeypatch.undo()
    again = _fit(SparseLDA(**kw), _darray(blocks), callback=kill_after_first)
    np.testing.assert_array_equal(again.components_, got.components_)
    # tol > 0: the Monte Carlo objective's stopping rule (windows of passes) as in process
    monkeypatch.setattr(SparseLDA, "_keeps_chains", lambda self, *a, **k: True)
    monkeypatch.setattr(_GibbsLDAModel, "before_pass", _fixed_count_before_pass(len(blocks)))
    kw.update(tol=0.1, max_iter=12)
    ref = _fit(SparseLDA(**kw), stream)
    got = _fit(SparseLDA(**kw), _darray(blocks))
    assert 6 <= got.n_iter_ == ref.n_iter_ < 12 and got.converged_ and ref.converged_
    np.testing.assert_array_equal(got.components_, ref.components_)


def test_gibbs_stochastic_equals_partial_fit_on_same_minibatches(client, corpus):
    X, blocks, S0 = corpus
    kw = _gibbs_kw(init=S0, algorithm="stochastic", batch_size=2 * PART, max_iter=2,
                   kappa=0.7, delta=2.0, total_samples=N_DOCS)
    got = _fit(SparseLDA(**kw), _darray(blocks))
    # the engine's seed follows the sampler's (two draws) in random_state's sequence
    seq = np.random.RandomState(4)
    seq.randint(2**31, size=2)
    rng = np.random.RandomState(seq.randint(np.iinfo(np.int32).max))
    ref = SparseLDA(**kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _partial_fit_documented_minibatches(ref, blocks, rng)
    assert got.n_batch_iter_ == ref.n_batch_iter_ == 4
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-12, atol=1e-12)


def test_gibbs_fractional_counts_in_a_partition(client, corpus):
    X, blocks, S0 = corpus
    frac = [b.copy() for b in blocks]
    frac[1].data = frac[1].data / 7.0  # most entries round to no token
    with pytest.raises(ValueError, match="needs whole-number counts"):
        SparseLDA(**_gibbs_kw(max_iter=1)).fit(_darray(frac))
    # the variational step takes fractional weights
    _fit(SparseLDA(K, max_iter=1, random_state=0, local_step="variational"), _darray(frac))


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
    lda = _fit(SparseLDA(K, max_iter=2, random_state=0), X)
    with pytest.raises(TypeError, match="does not take a Dask collection"):
        lda.partial_fit(_darray(blocks))
    with pytest.raises(TypeError, match="does not take a Dask collection"):
        lda.transform(_darray(blocks))
    hdp = HDPTopicModel(max_components=K, max_iter=2, random_state=0).fit(X)
    with pytest.raises(TypeError, match="does not take a Dask collection"):
        hdp.transform(_darray(blocks))
    with pytest.raises(TypeError, match="does not take a Dask collection"):
        hdp.partial_fit(_darray(blocks))


def test_default_scheduler_without_client(corpus, monkeypatch):
    import sparseclust._dask._core as sd

    X, blocks, S0 = corpus
    monkeypatch.setattr(sd, "_active_client", lambda: None)
    kw = dict(n_components=K, init=S0, algorithm="batch", max_iter=2, tol=0, random_state=0)
    with dask.config.set(scheduler="threads", num_workers=2):
        got = _fit(SparseLDA(**kw), _darray(blocks))
        sem = StochasticEMLDA(K, max_iter=2, random_state=0).fit(_darray(blocks))
    ref = _fit(SparseLDA(**kw), X)
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(
        sem.components_,
        StochasticEMLDA(K, max_iter=2, random_state=0, init="random").fit(X).components_,
        rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------------------
# HDPTopicModel: the moves' side results reduce with the statistics, deletes re-infer their
# documents on the workers


def _hdp_corpus(seed=0, K=8, V=80, D=200, length=40):
    """Documents of K planted block topics with stick-breaking weights (the moves of a
    truncation at 20 topics merge and delete down to about K)."""
    rng = np.random.RandomState(seed)
    u = rng.beta(1.0, 3.0, size=K)
    beta = u * np.concatenate([[1.0], np.cumprod(1 - u)[:-1]])
    beta /= beta.sum()
    phi = np.full((K, V), 0.02 / V)
    block = V // K
    for k in range(K):
        phi[k, k * block:(k + 1) * block] += 0.98 / block
    phi /= phi.sum(axis=1, keepdims=True)
    rows = []
    for _ in range(D):
        z = rng.choice(K, size=length, p=rng.dirichlet(2.0 * beta + 1e-3))
        rows.append(np.bincount([rng.choice(V, p=phi[k]) for k in z], minlength=V))
    X = sp.csr_array(np.asarray(rows, dtype=np.float64))
    return X, [X[i:i + 50] for i in range(0, D, 50)]


HDP_KW = dict(max_components=20, L=4, init="random", max_iter=6, tol=0, random_state=0,
              local_tol=1e-4)


def _moves(est):
    return [(e["merges_accepted"], e["deletes_accepted"], e["deletes_tried"], e["sorted"])
            for e in est.trace_]


def _same_hdp(got, ref, rtol=1e-6):
    # the partitions' statistics add in another order than one batch's, so they differ by
    # rounding; a birth's refinement iterates the local step of its documents to
    # ``local_tol``, which can turn that into differences of about 1e-8 in the topics (seen
    # on a CPU without AVX-512, where numpy and OpenBLAS take other vector paths)
    assert got.n_components_ == ref.n_components_
    assert got.n_topics_model_ == ref.n_topics_model_
    assert _moves(got) == _moves(ref)
    assert [e["local_iters"] for e in got.trace_] == [e["local_iters"] for e in ref.trace_]
    np.testing.assert_allclose(got.components_, ref.components_, rtol=rtol, atol=1e-8)
    np.testing.assert_allclose(got.topic_weights_, ref.topic_weights_, rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(got.lower_bounds_, ref.lower_bounds_, rtol=1e-11)


def test_hdp_batch_with_moves_equals_in_process(client, monkeypatch):
    import sparseclust._dask._core as sd
    from sparseclust.topics._hdp_model import HDPModel

    X, blocks = _hdp_corpus()
    calls = []
    map_rows = sd._Batches.map_rows

    def spy(self, fn, rows, args, row_args=None):
        calls.append(sum(len(r) for r in rows.values()))
        return map_rows(self, fn, rows, args, row_args)

    monkeypatch.setattr(sd._Batches, "map_rows", spy)
    kw = dict(HDP_KW, algorithm="batch")
    got = _fit(HDPTopicModel(**kw), _darray(blocks))
    ref = _fit(HDPTopicModel(**kw), X)
    _same_hdp(got, ref)
    moves = np.array(_moves(ref))
    assert moves[:, 0].sum() > 0 and moves[:, 1].sum() > 0  # merges and deletes accepted
    assert got.n_components_ < 20
    # the delete and birth proposals fetched and re-inferred their documents through the
    # partitions' map (a topic no document uses has none to re-infer; a birth fetches its
    # documents once and re-infers them birth_refine times)
    births = sum(e["births_tried"] for e in ref.trace_)
    per_birth = 1 + HDPModel(1, 1, 1, None, {}, 1).move_opts["birth_refine"]
    assert 0 < len(calls) <= moves[:, 2].sum() + per_birth * births
    assert all(n > 0 for n in calls)
    np.testing.assert_allclose(got.transform(X[:10]), ref.transform(X[:10]), rtol=1e-7)


def test_hdp_memoized_with_moves_equals_stream_of_same_batches(client):
    X, blocks = _hdp_corpus()
    kw = dict(HDP_KW, algorithm="memoized", n_batches=2)
    got = _fit(HDPTopicModel(**kw), _darray(blocks))
    groups = [sp.vstack(blocks[:2], format="csr"), sp.vstack(blocks[2:], format="csr")]
    stream = CorpusStream(lambda: iter(groups), n_features=X.shape[1],
                          n_documents=X.shape[0], batch_size=100, feature_names=None,
                          source="groups")
    ref = _fit(HDPTopicModel(**kw), stream)
    _same_hdp(got, ref)
    moves = np.array(_moves(got))
    assert moves[:, 0].sum() > 0 and moves[:, 1].sum() > 0
    lb = np.asarray(got.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:])), lb


def test_hdp_worker_killed_mid_fit(client):
    # the side results of a visit and the delete's re-inference run on partitions that a
    # lost worker held: Dask recomputes them, and the fit (moves included) is unchanged
    X, blocks = _hdp_corpus()
    kw = dict(HDP_KW, algorithm="memoized", n_batches=2, max_iter=4)
    ref = _fit(HDPTopicModel(**kw), _darray(blocks))

    def kill_after_second(info):
        if info["pass"] == 2:
            _kill_one_worker(client)

    got = _fit(HDPTopicModel(**kw), _darray(blocks), callback=kill_after_second)
    _same_hdp(got, ref, rtol=1e-12)
    assert sum(e["deletes_accepted"] for e in got.trace_[2:]) > 0
    # nothing dropped: the topic-word statistics of the whole truncation hold every token
    lam = got._params.lam
    assert (lam - got.topic_word_prior_).sum() == pytest.approx(X.sum(), rel=1e-9)


def test_hdp_stochastic_equals_partial_fit_on_same_minibatches(client):
    X, blocks = _hdp_corpus()
    kw = dict(HDP_KW, algorithm="stochastic", batch_size=100, max_iter=2, kappa=0.7,
              delta=2.0, total_samples=X.shape[0], random_state=3)
    got = _fit(HDPTopicModel(**kw), _darray(blocks))
    # the documented minibatches: every pass permutes the 4 partitions and takes them 2 at a
    # time; the engine's seed is drawn from random_state after the random initial topics
    r0 = np.random.RandomState(3)
    r0.gamma(100.0, 0.01, (20, X.shape[1]))
    rng = np.random.RandomState(r0.randint(np.iinfo(np.int32).max))
    ref = HDPTopicModel(**kw)
    _partial_fit_documented_minibatches(ref, blocks, rng)
    assert got.n_batch_iter_ == ref.n_batch_iter_ == 4
    np.testing.assert_allclose(got.components_, ref.components_, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("bad", [-1.0, np.inf])
def test_hdp_bad_value_in_one_partition(client, bad):
    X, blocks = _hdp_corpus()
    blocks = [b.copy() for b in blocks]
    blocks[3].data[7] = bad
    est = HDPTopicModel(max_components=5, max_iter=2)
    with pytest.raises(ValueError) as local:
        est.fit(sp.vstack(blocks, format="csr"))
    with pytest.raises(ValueError) as dist:
        est.fit(_darray(blocks))
    assert str(dist.value) == str(local.value)
    assert blocks[3].data[7] == bad


# ---------------------------------------------------------------------------------------
# SparseGaussianMixture on a dask.array of dense rows


def _blobs(seed=0, n_per=100, D=4, k=6):
    rng = np.random.RandomState(seed)
    C = rng.normal(0.0, 5.0, (k, D))
    X = np.vstack([rng.normal(C[j], 1.0, (n_per, D)) for j in range(k)])
    return X[rng.permutation(X.shape[0])]


class _InMemoryParts:
    """The same partitions in this process, with DaskSource's documented batches: memoized
    batches are consecutive groups of partitions, a stochastic pass permutes the partitions
    and takes ``round(batch_size / partition rows)`` at a time."""

    def __init__(self, X, part):
        self.blocks = [X[i:i + part] for i in range(0, X.shape[0], part)]
        self.n_samples = X.shape[0]

    def fixed_batches(self, algorithm, n_batches):
        if algorithm == "batch":
            return [np.vstack(self.blocks)]
        groups = np.array_split(np.arange(len(self.blocks)), n_batches)
        return [np.vstack([self.blocks[i] for i in g]) for g in groups]

    def minibatches(self, rng, batch_size):
        P = len(self.blocks)
        m = max(1, round(batch_size / (self.n_samples / P)))
        perm = rng.permutation(P)
        for s in range(0, P, m):
            yield np.vstack([self.blocks[i] for i in perm[s:s + m]])


def _dask_and_in_process(monkeypatch, X, **kw):
    """The mixture fit on a dask.array of 150-row partitions, and the in-process estimator
    with the engine given the same partitions as batches."""
    import sparseclust.mixture._gmm_fit as gf
    import sparseclust.mixture._sparse_gmm as sg

    got = _fit(sg.SparseGaussianMixture(**kw), da.from_array(X, chunks=(150, X.shape[1])))
    engine = gf.fit_engine

    def same_batches(model, X_, *a, **k):
        return engine(model, _InMemoryParts(X_, 150), *a, **k)

    monkeypatch.setattr(gf, "fit_engine", same_batches)
    return got, _fit(sg.SparseGaussianMixture(**kw), X)


@pytest.mark.parametrize("covariance_type,algorithm",
                         [("full", "batch"), ("full", "memoized"), ("diag", "stochastic")])
def test_gmm_equals_in_process(client, monkeypatch, algorithm, covariance_type):
    X = _blobs()
    labels = np.random.RandomState(1).randint(0, 8, X.shape[0])
    got, ref = _dask_and_in_process(
        monkeypatch, X, n_components=8, L=3, covariance_type=covariance_type,
        algorithm=algorithm, n_batches=2, batch_size=300, max_iter=6, tol=0,
        init_params=labels, random_state=0, n_candidates=None)
    for attr in ("mean_prior_", "covariance_prior_", "weights_", "means_", "covariances_"):
        np.testing.assert_allclose(getattr(got, attr), getattr(ref, attr), rtol=1e-9,
                                   atol=1e-11, err_msg=attr)
    np.testing.assert_allclose(got.lower_bounds_, ref.lower_bounds_, rtol=1e-12)
    if algorithm != "stochastic":
        lb = np.asarray(got.lower_bounds_)
        assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:])), lb
    # the local step ran on the workers and its timings came back
    assert sum(e["time_weights"] for e in got.trace_) > 0
    np.testing.assert_allclose(got.predict_proba(X[:20]), ref.predict_proba(X[:20]),
                               rtol=1e-7, atol=1e-12)


def test_dp_mixture_moves_equal_in_process(client, monkeypatch):
    # the Dirichlet-process mixture with its moves: the pair entropies, co-usage and kept rows
    # gathered on the workers reduce to what the in-process visits gather, so the same merges
    # are accepted and the fits agree
    X = _blobs(seed=2)
    labels = np.random.RandomState(3).randint(0, 14, X.shape[0])
    got, ref = _dask_and_in_process(
        monkeypatch, X, n_components=14, L=3,
        weight_concentration_prior_type="dirichlet_process", weight_concentration_prior=1.0,
        n_batches=2, max_iter=8, tol=0, init_params=labels, random_state=0, n_candidates=None)
    moves = [(e["n_components"], e["merges_accepted"], e["deletes_accepted"])
             for e in ref.trace_]
    assert sum(m[1] for m in moves) > 0  # merges happened
    assert [(e["n_components"], e["merges_accepted"], e["deletes_accepted"])
            for e in got.trace_] == moves
    assert got.n_components_ == ref.n_components_
    for attr in ("weights_", "means_", "covariances_"):
        np.testing.assert_allclose(getattr(got, attr), getattr(ref, attr), rtol=1e-8,
                                   atol=1e-10, err_msg=attr)
    np.testing.assert_allclose(got.lower_bounds_, ref.lower_bounds_, rtol=1e-10)


def test_gmm_inits_float32_and_dp_prior(client):
    from sparseclust import SparseGaussianMixture

    X = _blobs(2).astype(np.float32)
    Xd = da.from_array(X, chunks=(100, 4))
    # means_init: the initial responsibilities are the posterior of the point mixture (its
    # other parts from the statistics of init_params), in every partition as in-process
    means = X[:6].astype(np.float64)
    kw = dict(n_components=6, means_init=means, init_params=np.arange(X.shape[0]) % 6,
              algorithm="batch", max_iter=4, tol=0, n_candidates=None, random_state=0)
    got = _fit(SparseGaussianMixture(**kw), Xd)
    ref = _fit(SparseGaussianMixture(**kw), X)
    assert got.means_.dtype == np.float32
    np.testing.assert_allclose(got.means_, ref.means_, rtol=1e-4, atol=1e-4)
    # k-means++ (seeded from the first partitions) and random initializations fit the blobs
    for init in ("kmeans++", "random"):
        est = _fit(SparseGaussianMixture(6, init_params=init, random_state=0, max_iter=15), Xd)
        assert est.score(X) > ref.score(X) - 1.0, init


@pytest.mark.parametrize("algorithm", ["memoized", "batch"])
def test_gmm_dp_moves_equal_in_process(client, monkeypatch, algorithm):
    import sparseclust.mixture._gmm_fit as gf
    import sparseclust.mixture._sparse_gmm as sg

    X = _blobs(3)
    kw = dict(n_components=14, L=3, weight_concentration_prior_type="dirichlet_process",
              algorithm=algorithm, n_batches=2, max_iter=11, tol=0, n_candidates=None,
              init_params=np.random.RandomState(2).randint(0, 14, X.shape[0]))
    got = _fit(sg.SparseGaussianMixture(**kw), da.from_array(X, chunks=(150, 4)))
    engine = gf.fit_engine
    monkeypatch.setattr(gf, "fit_engine", lambda model, X_, *a, **k: engine(
        model, _InMemoryParts(X_, 150), *a, **k))
    ref = _fit(sg.SparseGaussianMixture(**kw), X)
    keys = ("merges_accepted", "deletes_tried", "deletes_accepted", "sorted", "n_components")
    assert [[e[k] for k in keys] for e in got.trace_] == [[e[k] for k in keys]
                                                          for e in ref.trace_]
    assert sum(e["merges_accepted"] for e in got.trace_) > 0
    assert sum(e["deletes_accepted"] for e in got.trace_) > 0
    assert got.n_components_ == ref.n_components_ < 14
    for attr in ("weights_", "means_", "covariances_"):
        np.testing.assert_allclose(getattr(got, attr), getattr(ref, attr), rtol=1e-8,
                                   atol=1e-10, err_msg=attr)
    lb = np.asarray(got.lower_bounds_)
    np.testing.assert_allclose(lb, ref.lower_bounds_, rtol=1e-11)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:])), lb


def test_gmm_dp_kmeanspp_start_on_dask_holds_the_capped_number_of_clusters(client):
    # the start of at most n // (4 nu0) clusters holds on a Dask collection as in-process
    import sparseclust.mixture._sparse_gmm as sg

    X = _blobs(0)
    kw = dict(n_components=40, weight_concentration_prior_type="dirichlet_process",
              max_iter=2, tol=0, random_state=0)
    got = _fit(sg.SparseGaussianMixture(**kw), da.from_array(X, chunks=(150, 4)))
    ref = _fit(sg.SparseGaussianMixture(**kw), X)
    cap = int(X.shape[0] // (4 * ref.degrees_of_freedom_prior_))
    assert got.trace_[0]["n_components"] == ref.trace_[0]["n_components"] == cap < 40


def test_gmm_dp_birth_equals_in_process(client, monkeypatch):
    # a birth fits fresh clusters to its target's rows fetched from the partitions that
    # hold them: the same births, clusters and objective as in-process on the same batches
    import sparseclust.mixture._gmm_fit as gf
    import sparseclust.mixture._sparse_gmm as sg

    from .test_sparse_gmm import _merged_away

    X, _, labels = _merged_away(0)
    kw = dict(n_components=2, init_params=labels, max_iter=12, tol=0, n_batches=3,
              weight_concentration_prior_type="dirichlet_process", moves="all",
              random_state=0)
    got = _fit(sg.SparseGaussianMixture(**kw), da.from_array(X, chunks=(150, 3)))
    engine = gf.fit_engine
    monkeypatch.setattr(gf, "fit_engine", lambda model, X_, *a, **k: engine(
        model, _InMemoryParts(X_, 150), *a, **k))
    ref = _fit(sg.SparseGaussianMixture(**kw), X)
    assert sum(e["births_accepted"] for e in got.trace_) >= 1
    assert [e["births_accepted"] for e in got.trace_] == [e["births_accepted"]
                                                          for e in ref.trace_]
    assert got.n_components_ == ref.n_components_ == 3
    np.testing.assert_allclose(got.means_, ref.means_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got.lower_bounds_, ref.lower_bounds_, rtol=1e-11)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_gmm_bad_value_in_one_partition(client, bad):
    from sparseclust import SparseGaussianMixture

    X = _blobs()
    X[400, 2] = bad
    est = SparseGaussianMixture(4, max_iter=2)
    with pytest.raises(ValueError) as local:
        est.fit(X)
    with pytest.raises(ValueError) as dist:
        est.fit(da.from_array(X, chunks=(150, 4)))
    assert str(dist.value) == str(local.value)
    fitted = _fit(SparseGaussianMixture(4, max_iter=2), _blobs())
    with pytest.raises(TypeError, match="does not take a Dask collection"):
        fitted.predict(da.from_array(X, chunks=(150, 4)))
    with pytest.raises(TypeError, match="does not take a Dask collection"):
        fitted.partial_fit(da.from_array(X, chunks=(150, 4)))
