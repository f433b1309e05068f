# SPDX-License-Identifier: BSD-3-Clause
"""Streamed corpora: the minibatches are the rows of the whole-file loaders, read in blocks,
and partial_fit over a stream equals partial_fit over the in-memory minibatches."""

import gzip
import re
import threading

import numpy as np
import pytest
import scipy.sparse as sp

from sparseclust import HDPTopicModel, SparseLDA
from sparseclust.datasets import (
    CorpusStream,
    _bow,
    _stream,
    load_kos,
    load_ldac,
    load_text_folder,
    load_uci_bow,
    save_uci_bow,
    stream_ldac,
    stream_npz,
    stream_text_folder,
    stream_uci_bow,
)


@pytest.fixture(params=["zlib"] + (["isal"] if _bow._fast_gzip is not None else []))
def gzip_impl(request, monkeypatch):
    """Each gzip decompressor the readers may use: the standard library's, and ISA-L's when
    it is installed (the ``fastgzip`` extra, part of the test requirements)."""
    if request.param == "zlib":
        monkeypatch.setattr(_bow, "_fast_gzip", None)
        monkeypatch.setattr(_bow, "_fast_zlib", None)
    assert (_bow._gzip() is gzip) == (request.param == "zlib")
    return request.param


@pytest.fixture
def small_blocks(monkeypatch):
    # tiny read blocks: documents and lines straddle block boundaries everywhere
    monkeypatch.setattr(_stream, "_BLOCK_BYTES", 97)


def _stack(stream):
    parts = list(stream)
    return sp.vstack(parts).tocsr() if parts else None, [p.shape[0] for p in parts]


def _same(A, B):
    A, B = sp.csr_matrix(A), sp.csr_matrix(B)
    assert A.shape == B.shape
    assert (A != B).nnz == 0


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("batch_size", [1, 7, 100])
def test_uci_stream_equals_load(tmp_path, small_blocks, compress, batch_size, gzip_impl):
    keep = np.ones(150)
    keep[[3, 42, 43, 44, 45, 46, 47, 48, 149]] = 0  # empty documents, also a whole minibatch
    X = sp.csr_matrix(sp.diags_array(keep) @ load_kos().data[:150])
    X.eliminate_zeros()
    path = tmp_path / ("docword.txt" + (".gz" if compress else ""))
    save_uci_bow(X, path)
    ref = load_uci_bow(path).data
    s = stream_uci_bow(path, batch_size=batch_size)
    assert isinstance(s, CorpusStream) and s.n_documents == 150 and s.n_features == X.shape[1]
    got, sizes = _stack(s)
    _same(got, ref)
    assert sizes[:-1] == [batch_size] * (len(sizes) - 1)
    # iterating again reads the file again
    _same(_stack(s)[0], ref)


def test_uci_stream_sums_duplicates_and_ignores_blank_lines(tmp_path):
    path = tmp_path / "d.txt"
    path.write_text("3\n4\n4\n1 2 1\n\n1 2 3\n3 4 2\n3 1 1\n\n")
    got, sizes = _stack(stream_uci_bow(path, batch_size=2))
    assert sizes == [2, 1]
    _same(got, load_uci_bow(path).data)


@pytest.mark.parametrize(
    "text, fragment, line",
    [
        ("2\n3\n2\n2 1 1\n1 2 1\n", "increasing docID", 5),
        ("2\n3\n2\n1 1 1\n1 x 1\n", "wordID", 5),
        ("2\n3\n2\n1 1 1\n", "NNZ=2", 5),
        ("2\n3\n1\n1 1 1\n2 1 1\n", "more entries than the NNZ=1 declared", 5),
        # the extra entry after the first minibatch's: the header's NNZ, not what is left
        ("2\n3\n5\n1 1 1\n1 2 1\n1 3 1\n2 1 1\n2 2 1\n2 3 1\n",
         "more entries than the NNZ=5 declared", 9),
        ("2\n3\n2\n1 1 1\n3 1 1\n", "out of range", 5),
        ("2\n3\n", "number of non-zeros", 3),
    ],
)
def test_uci_stream_errors_name_file_and_line(tmp_path, text, fragment, line):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=fragment) as info:
        list(stream_uci_bow(path, batch_size=1))
    assert f"bad.txt, line {line}:" in str(info.value)


def test_uci_stream_vocabulary_and_arguments(tmp_path):
    path, vocab = tmp_path / "d.txt", tmp_path / "v.txt"
    save_uci_bow(sp.csr_matrix(np.array([[1.0, 0, 2]])), path, vocab, ["a", "b", "c"])
    s = stream_uci_bow(path, vocab, batch_size=5)
    assert list(s.feature_names) == ["a", "b", "c"]
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="batch_size"):
            stream_uci_bow(path, batch_size=bad)
    vocab.write_text("a\nb\n")
    with pytest.raises(ValueError, match="W=3"):
        stream_uci_bow(path, vocab)


def _write_ldac(path, X, trailing=""):
    lines = []
    for d in range(X.shape[0]):
        row = X[[d]]
        pairs = " ".join(f"{j}:{int(c)}" for j, c in zip(row.indices, row.data, strict=True))
        lines.append(f"{row.nnz} {pairs}".strip())
    text = "\n".join(lines) + "\n" + trailing
    if str(path).endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)


@pytest.mark.parametrize("name", ["c.ldac", "c.ldac.gz"])
@pytest.mark.parametrize("batch_size", [1, 9, 500])
def test_ldac_stream_equals_load(tmp_path, small_blocks, name, batch_size, gzip_impl):
    keep = np.ones(60)
    keep[[0, 17]] = 0
    X = sp.csr_matrix(sp.diags_array(keep) @ load_kos().data[:60])
    X.eliminate_zeros()
    path = tmp_path / name
    _write_ldac(path, X, trailing="\n\n")
    ref = load_ldac(path, n_features=X.shape[1]).data
    got, sizes = _stack(stream_ldac(path, n_features=X.shape[1], batch_size=batch_size))
    _same(got, ref)
    assert sum(sizes) == 60 and all(s == batch_size for s in sizes[:-1])


def test_ldac_stream_errors(tmp_path, small_blocks):
    path = tmp_path / "c.ldac"
    path.write_text("1 0:2\n2 1:1 3:1\n\n1 2:1\n")
    with pytest.raises(ValueError, match="n_features or vocab_path"):
        stream_ldac(path)
    with pytest.raises(ValueError, match=r"c.ldac, line 3: empty line"):
        list(stream_ldac(path, n_features=4, batch_size=1))
    path.write_text("1 0:2\n2 1:1 9:1\n")
    with pytest.raises(ValueError, match=r"c.ldac, line 2: word id 9 out of range"):
        list(stream_ldac(path, n_features=4))


def test_text_folder_stream_equals_load(tmp_path):
    rng = np.random.default_rng(0)
    words = ["topic", "model", "sparse", "memory", "stream", "disk", "batch", "word"]
    for i in range(23):
        sub = tmp_path / ("a" if i % 2 else "b")
        sub.mkdir(exist_ok=True)
        (sub / f"{i:03d}.txt").write_text(" ".join(rng.choice(words, size=rng.integers(0, 9))))
    ref = load_text_folder(tmp_path)
    s = stream_text_folder(tmp_path, ref.feature_names, batch_size=5)
    assert s.n_documents == 23 and list(s.feature_names) == list(ref.feature_names)
    got, sizes = _stack(s)
    assert sizes == [5, 5, 5, 5, 3]
    _same(got, ref.data)
    with pytest.raises(ValueError, match="[Vv]ocabulary"):
        stream_text_folder(tmp_path, {"x": 3})
    with pytest.raises(ValueError, match="'input'"):
        stream_text_folder(tmp_path, ref.feature_names, input="filename")


@pytest.mark.parametrize("cls, params", [
    (SparseLDA, dict(n_components=5, L=3)),
    (HDPTopicModel, dict(max_components=8, L=3)),
])
def test_partial_fit_over_a_stream_equals_in_memory_minibatches(tmp_path, cls, params):
    X = sp.csr_matrix(load_kos().data[:300])
    path = tmp_path / "docword.kos.txt.gz"
    save_uci_bow(X, path)
    streamed = cls(random_state=0, total_samples=300, **params)
    for Xb in stream_uci_bow(path, batch_size=64):
        streamed.partial_fit(Xb)
    ref = cls(random_state=0, total_samples=300, **params)
    for lo in range(0, 300, 64):
        ref.partial_fit(X[lo:lo + 64])
    np.testing.assert_array_equal(streamed.components_, ref.components_)
    assert streamed.n_batch_iter_ == 5


# ------------------------------------------------------------------------ saved streams


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_saved_stream_yields_the_source_minibatches(tmp_path, dtype):
    keep = np.ones(130)
    keep[[0, 61, 62]] = 0  # empty documents
    X = sp.csr_matrix(sp.diags_array(keep) @ load_kos().data[:130])
    X.eliminate_zeros()
    save_uci_bow(X, tmp_path / "docword.txt.gz")
    src = stream_uci_bow(tmp_path / "docword.txt.gz", batch_size=40, dtype=dtype)
    saved = src.save(tmp_path / "saved")
    assert isinstance(saved, CorpusStream)
    assert (saved.n_features, saved.n_documents, saved.batch_size) == (X.shape[1], 130, 40)
    assert saved.source == str(tmp_path / "saved")
    for _ in range(2):  # iterating again reads the files again
        got = list(saved)
        ref = list(src)
        assert [g.shape for g in got] == [(40, X.shape[1])] * 3 + [(10, X.shape[1])]
        for g, r in zip(got, ref, strict=True):
            assert sp.issparse(g) and g.format == "csr" and g.dtype == dtype
            _same(g, r)
    # reopened later, with no stream of the source at hand
    again = stream_npz(tmp_path / "saved")
    _same(sp.vstack(list(again)), X)
    # the source files are no longer read
    (tmp_path / "docword.txt.gz").unlink()
    _same(sp.vstack(list(again)), X)


def test_saved_stream_keeps_the_vocabulary(tmp_path):
    words = ["disk", "memory", "sparse", "stream", "topic"]
    rng = np.random.default_rng(1)
    for i in range(9):
        (tmp_path / f"{i}.txt").write_text(" ".join(rng.choice(words, size=6)))
    src = stream_text_folder(tmp_path, words, batch_size=4)
    saved = src.save(tmp_path / "saved" / "vocabulary")  # parents are created
    assert list(saved.feature_names) == words
    _same(sp.vstack(list(saved)), sp.vstack(list(src)))
    # a stream without a vocabulary keeps none
    X = sp.csr_matrix(np.arange(12.0).reshape(4, 3))
    plain = CorpusStream(lambda: iter([X[:3], X[3:]]), n_features=3, n_documents=None,
                         batch_size=3, feature_names=None, source="memory")
    again = plain.save(tmp_path / "plain")
    assert again.feature_names is None and again.n_documents == 4


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_memoized_fit_on_a_saved_stream_equals_the_fit_on_its_source(tmp_path):
    X = sp.csr_matrix(load_kos().data[:200])
    save_uci_bow(X, tmp_path / "docword.txt.gz")
    src = stream_uci_bow(tmp_path / "docword.txt.gz", batch_size=50)
    saved = src.save(tmp_path / "saved")
    for make in (lambda: SparseLDA(n_components=5, max_iter=3, tol=0, random_state=0),
                 lambda: HDPTopicModel(max_components=8, max_iter=3, tol=0, random_state=0)):
        fits = [make().fit(s) for s in (src, saved)]
        np.testing.assert_array_equal(fits[0].components_, fits[1].components_)
        np.testing.assert_array_equal(fits[0].lower_bounds_, fits[1].lower_bounds_)


def test_saved_stream_errors(tmp_path):
    X = sp.csr_matrix(load_kos().data[:30])
    save_uci_bow(X, tmp_path / "docword.txt")
    src = stream_uci_bow(tmp_path / "docword.txt", batch_size=10)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not an empty directory"):
        src.save(tmp_path / "full")
    (tmp_path / "empty").mkdir()
    assert src.save(tmp_path / "empty").n_documents == 30  # an empty directory is used
    with pytest.raises(ValueError, match="no saved corpus here"):
        stream_npz(tmp_path / "full")
    (tmp_path / "full" / "corpus.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a corpus saved by"):
        stream_npz(tmp_path / "full")

    saved = src.save(tmp_path / "saved")
    (tmp_path / "saved" / "batch-000002.npz").unlink()
    with pytest.raises(ValueError, match=r"1 of 3 minibatch files are missing.*batch-000002"):
        stream_npz(tmp_path / "saved")
    (tmp_path / "saved" / "batch-000002.npz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match=r"batch-000002.npz: cannot read the saved minibatch"):
        list(saved)
    sp.save_npz(tmp_path / "saved" / "batch-000002.npz", X[:4], compressed=False)
    with pytest.raises(ValueError, match=r"holds a 4 x \d+ float64 matrix of \d+ entries, "
                                         r"the manifest declares 10 x \d+ float64"):
        list(saved)
    # the right shape with other entries (a file replaced by another minibatch)
    sp.save_npz(tmp_path / "saved" / "batch-000002.npz", X[:10], compressed=False)
    with pytest.raises(ValueError, match=r"batch-000002.npz: holds a 10 x"):
        list(saved)
    (tmp_path / "saved" / "corpus.json").write_text(
        '{"format": "sparseclust.CorpusStream", "version": 1, "n_features": 3}')
    with pytest.raises(ValueError, match="incomplete manifest .missing 'n_documents'"):
        stream_npz(tmp_path / "saved")

    # a source that fails part-way leaves nothing behind
    def failing():
        yield X[:10]
        raise ValueError("docword.txt, line 9: broken")

    bad = CorpusStream(failing, n_features=X.shape[1], n_documents=30, batch_size=10,
                       feature_names=None, source="docword.txt")
    with pytest.raises(ValueError, match="line 9: broken"):
        bad.save(tmp_path / "partial")
    assert not (tmp_path / "partial").exists()
    assert not list(tmp_path.glob(".*.partial"))
    for batch, shape in ((X[:10, :5], r"\(10, 5\)"), (np.ones(X.shape[1]), r"\(\d+,\)")):
        wrong = CorpusStream(lambda b=batch: iter([b]), n_features=X.shape[1],
                             n_documents=None, batch_size=10, feature_names=None,
                             source="cut")
        with pytest.raises(ValueError, match=rf"cut: minibatch 0 has shape {shape}"):
            wrong.save(tmp_path / "wrong")
        assert not (tmp_path / "wrong").exists()
    assert not list(tmp_path.glob(".*.partial"))
    # a file, or a symbolic link, is not a directory to write
    (tmp_path / "afile").write_text("x")
    with pytest.raises(FileExistsError, match="not an empty directory"):
        src.save(tmp_path / "afile")
    (tmp_path / "link").symlink_to(tmp_path / "empty-target", target_is_directory=True)
    with pytest.raises(FileExistsError, match="symbolic link"):
        src.save(tmp_path / "link")


def test_saves_to_one_directory_never_mix(tmp_path):
    # two saves race for one directory: one wins whole, the other fails and leaves nothing
    first = sp.csr_matrix(np.ones((4, 3)))
    second = sp.csr_matrix(2 * np.ones((4, 3)))
    gate = threading.Barrier(2)

    def source(X):
        def batches():
            for lo in range(0, 4, 2):
                gate.wait(timeout=10)  # both saves are under way before either finishes
                yield X[lo:lo + 2]
        return CorpusStream(batches, n_features=3, n_documents=4, batch_size=2,
                            feature_names=None, source="race")

    outcome = {}

    def run(key, X):
        try:
            outcome[key] = source(X).save(tmp_path / "same")
        except FileExistsError as exc:
            outcome[key] = exc

    threads = [threading.Thread(target=run, args=(k, X))
               for k, X in (("first", first), ("second", second))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    errors = [v for v in outcome.values() if isinstance(v, FileExistsError)]
    assert len(outcome) == 2 and len(errors) == 1
    assert "created by another save" in str(errors[0])
    got = sp.vstack(list(stream_npz(tmp_path / "same"))).toarray()
    assert np.all(got == 1) or np.all(got == 2)  # one source's minibatches, whole
    assert not list(tmp_path.glob(".*.partial"))


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_saved_stream_of_empty_and_zero_row_minibatches(tmp_path, dtype):
    X = sp.csr_matrix(np.arange(12, dtype=dtype).reshape(4, 3))
    parts = [X[:0], X[:3], X[3:3], X[3:]]
    s = CorpusStream(lambda: iter(parts), n_features=3, n_documents=None, batch_size=3,
                     feature_names=None, source="memory")
    got = list(s.save(tmp_path / "rows"))
    assert [g.shape[0] for g in got] == [0, 3, 0, 1]
    assert all(g.dtype == dtype for g in got)
    _same(sp.vstack(got), X)
    empty = CorpusStream(lambda: iter([]), n_features=3, n_documents=None, batch_size=3,
                         feature_names=None, source="nothing")
    saved = empty.save(tmp_path / "none")
    assert saved.n_documents == 0 and list(saved) == []


# ------------------------------------------------------------------ memoized from disk


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_memoized_fit_on_a_stream_equals_the_dense_memoized_loop(tmp_path):
    from sparseclust._engine import SuffStats
    from sparseclust.topics._lda_model import _LDAModel

    X = sp.csr_matrix(load_kos().data[:250])
    path = tmp_path / "docword.txt.gz"
    save_uci_bow(X, path)
    K, B = 6, 60
    S0 = np.random.default_rng(0).gamma(100.0, 0.01, (K, X.shape[1]))
    m = SparseLDA(n_components=K, L=3, local_step="variational", init=S0, max_iter=3, tol=0,
                  random_state=0)
    m.fit(stream_uci_bow(path, batch_size=B))
    # reference: memoized training over the minibatches in file order, dense statistics
    ref = _LDAModel(0.5 / K, 0.1, 3, dict(max_iter=100, tol=0.05, restarts=0), None)

    def local_step(b, params):
        s = ref.local_step(b, params)
        s["S"] = s["S"].toarray()
        return s

    batches = [X[lo:lo + B] for lo in range(0, 250, B)]
    params = ref.global_step(SuffStats(S=S0, elbo_local=0.0))
    cache = [local_step(b, params) for b in batches]
    total = cache[0]
    for s in cache[1:]:
        total = total + s
    params = ref.global_step(total)
    for _ in range(2):
        for i, b in enumerate(batches):
            s = local_step(b, params)
            total = total - cache[i] + s
            cache[i] = s
            params = ref.global_step(total)
    np.testing.assert_array_equal(m.components_, params.lam)
    assert m.n_features_in_ == X.shape[1] and m._n_samples_fit == 250
    lb = np.asarray(m.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:]))
    # the fitted model transforms in-memory documents as usual
    assert m.transform(X[:5]).shape == (5, K)


def test_fit_on_a_stream_errors(tmp_path):
    path = tmp_path / "d.txt"
    save_uci_bow(sp.csr_matrix(load_kos().data[:30]), path)
    s = stream_uci_bow(path, batch_size=10)
    with pytest.raises(ValueError, match="algorithm='memoized'"):
        SparseLDA(n_components=3, algorithm="batch").fit(s)
    empty = tmp_path / "e.txt"
    empty.write_text("0\n5\n0\n")
    with pytest.raises(ValueError, match="empty"):
        SparseLDA(n_components=3).fit(stream_uci_bow(empty))
    # a minibatch with another number of columns than the first: the clear sklearn error
    from sparseclust.datasets import CorpusStream

    bad = CorpusStream(lambda: iter([sp.csr_matrix(np.ones((4, 5))),
                                     sp.csr_matrix(np.ones((4, 6)))]),
                       n_features=5, n_documents=8, batch_size=4, feature_names=None,
                       source="mem")
    with pytest.raises(ValueError, match="features"):
        SparseLDA(n_components=2).fit(bad)
    neg = CorpusStream(lambda: iter([sp.csr_matrix(-np.ones((4, 5)))]), n_features=5,
                       n_documents=4, batch_size=4, feature_names=None, source="mem")
    with pytest.raises(ValueError, match="[Nn]egative"):
        SparseLDA(n_components=2).fit(neg)
    # the other methods take matrices: a stream gets a message that says what to do
    good = CorpusStream(lambda: iter([sp.csr_matrix(np.ones((4, 5)))]), n_features=5,
                        n_documents=4, batch_size=4, feature_names=None, source="mem")
    lda = SparseLDA(n_components=2, max_iter=2, random_state=0)
    with pytest.raises(TypeError, match="pass each minibatch"):
        lda.partial_fit(good)
    lda.fit(good)
    for method in (lda.partial_fit, lda.transform, lda.score):
        with pytest.raises(TypeError, match="not a CorpusStream"):
            method(good)


def test_hdp_memoized_fit_on_a_stream_with_moves(tmp_path):
    from .test_hdp import hdp_corpus

    X, _, _ = hdp_corpus(0, K=8, V=80, D=200, length=40)
    X = sp.csr_matrix(X)
    path = tmp_path / "docword.txt"
    save_uci_bow(X, path)
    params = dict(max_components=20, L=4, max_iter=8, tol=0, random_state=0,
                  local_tol=1e-4)
    m = HDPTopicModel(**params).fit(stream_uci_bow(path, batch_size=50))
    tr = m.trace_
    # merges and deletes ran on statistics of minibatches read from disk
    assert sum(e["merges_accepted"] for e in tr) > 0
    assert sum(e["deletes_accepted"] for e in tr) > 0
    lb = np.asarray(m.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:]))
    # the same minibatches held in memory give the same fit
    parts = [X[lo:lo + 50] for lo in range(0, 200, 50)]
    mem = CorpusStream(lambda: iter(parts), n_features=X.shape[1], n_documents=200,
                       batch_size=50, feature_names=None, source="memory")
    ref = HDPTopicModel(**params).fit(mem)
    np.testing.assert_array_equal(m.components_, ref.components_)


def test_broken_gzip_is_named_as_by_the_loaders(tmp_path, gzip_impl):
    # a broken archive: the stream readers' message names the file and says what is wrong,
    # as load_uci_bow / load_ldac do, whether the header or the body cannot be read
    path = tmp_path / "docword.bad.txt.gz"
    path.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(ValueError, match="not a valid gzip file"):
        load_uci_bow(path)
    with pytest.raises(ValueError, match=re.escape(f"{path}: not a valid gzip file")):
        stream_uci_bow(path, batch_size=2)
    # a header that decompresses, then a truncated archive
    good = gzip.compress(b"3\n4\n3\n1 1 2\n2 2 1\n3 4 5\n" * 200)
    cut = tmp_path / "docword.cut.txt.gz"
    cut.write_bytes(good[: len(good) // 2])
    with pytest.raises(ValueError, match="not a valid gzip file|read failed"):
        for _ in stream_uci_bow(cut, batch_size=2):
            pass
    # damage inside the compressed data (zlib's own error, not an OSError)
    bad = bytearray(good)
    bad[20:60] = bytes(40)
    (tmp_path / "docword.inner.txt.gz").write_bytes(bytes(bad))
    with pytest.raises(ValueError, match="not a valid gzip file"):
        load_uci_bow(tmp_path / "docword.inner.txt.gz")
    with pytest.raises(ValueError, match="not a valid gzip file"):
        for _ in stream_uci_bow(tmp_path / "docword.inner.txt.gz", batch_size=2):
            pass
    ldac = tmp_path / "c.ldac"
    ldac.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(ValueError, match=re.escape(f"{ldac}: not a valid gzip file")):
        for _ in stream_ldac(ldac, n_features=4, batch_size=2):
            pass


def _readers():
    return [t for t in threading.enumerate() if t.name == "sparseclust-read-ahead"]


def test_read_ahead_gives_the_same_minibatches_and_errors(tmp_path, small_blocks):
    X = load_kos().data[:300]
    path = tmp_path / "docword.txt.gz"
    save_uci_bow(X, path)
    ahead, plain = stream_uci_bow(path, batch_size=40), stream_uci_bow(path, batch_size=40)
    plain.prefetch = False
    assert ahead.prefetch
    got, want = list(ahead), list(plain)
    assert len(got) == len(want) == 8
    for a, b in zip(got, want, strict=True):
        _same(a, b)
    # a file that breaks part-way: the minibatches before the error arrive, then the same
    # error as without read-ahead
    lines = [f"{d} 1 1" for d in range(1, 41)]
    lines[34] = "35 1 x"
    bad = tmp_path / "bad.txt"
    bad.write_text("40\n3\n40\n" + "\n".join(lines) + "\n")
    seen = {}
    for prefetch in (True, False):
        s = stream_uci_bow(bad, batch_size=4)
        s.prefetch = prefetch
        seen[prefetch] = []
        with pytest.raises(ValueError, match=r"bad\.txt, line 38:"):
            for Xb in s:
                seen[prefetch].append(Xb.shape[0])
    assert seen[True] == seen[False] and seen[True]
    assert not _readers()


def test_read_ahead_stops_its_reader_when_the_caller_stops(tmp_path, monkeypatch):
    path = tmp_path / "docword.txt"
    save_uci_bow(load_kos().data[:200], path)
    closed = []
    real_open = _stream._open

    def tracked(p):
        fh = real_open(p)
        real_close = fh.close

        def close():
            closed.append(p)
            real_close()

        fh.close = close
        return fh

    monkeypatch.setattr(_stream, "_open", tracked)
    s = stream_uci_bow(path, batch_size=10)
    n = len(closed)  # (the header was read when the stream was made)
    first = next(iter(s))  # the iterator is dropped at once, as `init` reads one minibatch
    assert first.shape[0] == 10
    assert not _readers() and len(closed) == n + 1
    for i, _ in enumerate(s):
        if i == 3:
            break
    assert not _readers() and len(closed) == n + 2


def test_read_ahead_forwards_an_error_of_the_source():
    from sparseclust.datasets._read_ahead import read_ahead

    def source():
        yield 1
        raise KeyError("broken")

    it = read_ahead(source)
    assert next(it) == 1
    with pytest.raises(KeyError, match="broken"):
        next(it)
    assert list(read_ahead(lambda: iter(range(5)), depth=2)) == [0, 1, 2, 3, 4]
    assert not _readers()
