# SPDX-License-Identifier: BSD-3-Clause
"""Streamed image patches (stream_image_patches) and training over a stream of minibatches:
SparseGaussianMixture.fit (memoized) and partial_fit; resuming stochastic training from a
saved model."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import sparseclust
from sparseclust import HDPTopicModel, SparseGaussianMixture, SparseLDA, StochasticEMLDA
from sparseclust.datasets import (
    ArrayStream,
    PatchStream,
    extract_patches,
    load_image_patches,
    stream_image_patches,
    stream_npy,
)

Image = pytest.importorskip("PIL.Image")
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _write_images(folder, shapes, seed=0):
    """Random uint8 images (RGB for (h, w, 3), grayscale for (h, w)) saved as PNG, returned
    in file-name order."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    images = []
    for i, shape in enumerate(shapes):
        image = rng.integers(0, 256, size=shape, dtype=np.uint8)
        # smooth the noise a little so that the mixture has structure to find
        image = ((image.astype(np.int32) + np.roll(image, 1, axis=0)) // 2).astype(np.uint8)
        Image.fromarray(image).save(folder / f"img{i:02d}.png")
        images.append(image)
    return images


@pytest.fixture
def image_folder(tmp_path):
    shapes = [(23, 31, 3), (18, 17), (30, 22, 3), (16, 40, 3), (25, 25)]
    images = _write_images(tmp_path / "images", shapes)
    return tmp_path / "images", images


# ---------------------------------------------------------------------- the reader


@pytest.mark.parametrize("batch_size", [1, 7, 64, 1000])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_stream_equals_extract_patches(image_folder, batch_size, dtype):
    folder, images = image_folder
    ref = extract_patches(images, patch_size=6, stride=3, dtype=dtype)
    stream = stream_image_patches(folder, batch_size=batch_size, patch_size=6, stride=3,
                                  dtype=dtype)
    assert isinstance(stream, PatchStream)
    assert stream.n_samples == ref.shape[0] and stream.n_features == 36
    assert len(stream) == -(-ref.shape[0] // batch_size)
    batches = list(stream)
    assert len(batches) == len(stream)
    assert all(b.shape[0] == batch_size for b in batches[:-1])
    assert all(b.dtype == dtype and b.flags.c_contiguous for b in batches)
    np.testing.assert_array_equal(np.vstack(batches), ref)
    # iterating again reads the same minibatches
    for a, b in zip(batches, stream, strict=True):
        np.testing.assert_array_equal(a, b)
    # the counts come from the image headers, one image at a time
    assert stream.patches_per_image.tolist() == [
        ((im.shape[0] - 6) // 3 + 1) * ((im.shape[1] - 6) // 3 + 1) for im in images]


def test_stream_options_match_load_image_patches(image_folder):
    folder, images = image_folder
    kw = dict(patch_size=5, stride=4, remove_mean=False, grayscale=True)
    ref = load_image_patches(folder, max_images=3, **kw).data
    got = np.vstack(list(stream_image_patches(folder, batch_size=10, max_images=3, **kw)))
    np.testing.assert_array_equal(got, ref)
    # a list of files, in the order given
    files = sorted(folder.iterdir())[::-1]
    got = np.vstack(list(stream_image_patches(files, batch_size=50, **kw)))
    np.testing.assert_array_equal(got, extract_patches(images[::-1], **kw))
    # RGB patches of RGB images
    rgb = [f for f in files if Image.open(f).mode == "RGB"]
    got = np.vstack(list(stream_image_patches(rgb, batch_size=9, grayscale=False,
                                              patch_size=4)))
    imgs = [np.asarray(Image.open(f)) for f in rgb]
    np.testing.assert_array_equal(got, extract_patches(imgs, patch_size=4, grayscale=False))


def test_shuffled_stream_is_a_fixed_permutation(image_folder):
    folder, images = image_folder
    ref = extract_patches(images, patch_size=6, stride=3)
    kw = dict(batch_size=13, patch_size=6, stride=3, shuffle=True, shuffle_images=2)
    stream = stream_image_patches(folder, random_state=0, **kw)
    first = [b.copy() for b in stream]
    got = np.vstack(first)
    assert got.shape == ref.shape and not np.array_equal(got, ref)
    # the same rows, in another order
    order = np.lexsort(got.T[::-1])
    np.testing.assert_array_equal(got[order], ref[np.lexsort(ref.T[::-1])])
    # every iteration yields the same minibatches; the same seed gives the same stream
    for a, b in zip(first, stream, strict=True):
        np.testing.assert_array_equal(a, b)
    again = np.vstack(list(stream_image_patches(folder, random_state=0, **kw)))
    np.testing.assert_array_equal(again, got)
    other = np.vstack(list(stream_image_patches(folder, random_state=1, **kw)))
    assert not np.array_equal(other, got)
    assert all(b.shape[0] == 13 for b in first[:-1])


@pytest.mark.parametrize("batch_size", [5, 13, 60, 1000])
def test_shuffled_stream_order_and_buffers(image_folder, batch_size):
    # the documented order: the images in a random order, in groups of shuffle_images, and
    # each group's patches permuted (numpy reference from the stream's own seed draw)
    folder, images = image_folder
    kw = dict(patch_size=6, stride=3)
    stream = stream_image_patches(folder, batch_size=batch_size, shuffle=True,
                                  shuffle_images=2, random_state=4, **kw)
    seed = np.random.RandomState(4).randint(np.iinfo(np.int32).max)
    rng = np.random.RandomState(seed)
    order = rng.permutation(len(images))
    groups = []
    for lo in range(0, len(images), 2):
        block = extract_patches([images[i] for i in order[lo : lo + 2]], **kw)
        groups.append(block[rng.permutation(block.shape[0])])
    batches = list(stream)
    np.testing.assert_array_equal(np.vstack(batches), np.vstack(groups))
    # a minibatch keeps no more memory alive than its own rows, or the one group it lies in
    largest_group = max(g.nbytes for g in groups)
    for b in batches:
        owner = b if b.base is None else b.base
        assert owner.nbytes <= max(b.nbytes, largest_group)


def test_stream_bad_input(tmp_path, image_folder):
    folder, _ = image_folder
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("not an image")
    with pytest.raises(ValueError, match="no .jpg, .jpeg or .png images"):
        stream_image_patches(tmp_path / "empty")
    with pytest.raises(ValueError, match="is not a directory"):
        stream_image_patches(tmp_path / "missing")
    with pytest.raises(ValueError, match="no image files given"):
        stream_image_patches([])
    with pytest.raises(ValueError,
                       match="patch_size=18 is larger than image .*img01.png of size 18 x 17"):
        stream_image_patches(folder, patch_size=18)
    for bad in (0, -3, 2.5, True, "8"):
        with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
            stream_image_patches(folder, batch_size=bad)
    with pytest.raises(ValueError, match="stride must be"):
        stream_image_patches(folder, stride=0)
    with pytest.raises(ValueError, match="max_images must be"):
        stream_image_patches(folder, max_images=0)
    with pytest.raises(ValueError, match="shuffle_images must be"):
        stream_image_patches(folder, shuffle=True, shuffle_images=0)
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        stream_image_patches(folder, dtype=np.int32)
    with pytest.raises(ValueError, match="channel"):
        stream_image_patches(folder, grayscale=False)
    (tmp_path / "broken.png").write_bytes(b"not a png")
    with pytest.raises(ValueError, match="broken.png: cannot read the image"):
        stream_image_patches([tmp_path / "broken.png"])


# ----------------------------------------------------------- training over a stream


# ---------------------------------------------------------------------- saved patches


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shuffle", [False, True])
def test_saved_patches_yield_the_source_minibatches(image_folder, tmp_path, dtype, shuffle):
    folder, images = image_folder
    src = stream_image_patches(folder, batch_size=37, patch_size=5, stride=2, dtype=dtype,
                               shuffle=shuffle, shuffle_images=2, random_state=3)
    saved = src.save(tmp_path / "saved" / "patches")  # parents are created
    assert isinstance(saved, ArrayStream)
    assert (saved.n_samples, saved.n_features, saved.batch_size, saved.dtype, len(saved)) == (
        src.n_samples, 25, 37, np.dtype(dtype), len(src))
    assert (saved.patch_size, saved.stride, saved.shuffle) == (5, 2, shuffle)
    assert saved.source == str(tmp_path / "saved" / "patches")
    if not shuffle:
        ref = extract_patches(images, patch_size=5, stride=2, dtype=dtype)
        np.testing.assert_array_equal(np.vstack(list(saved)), ref)
    for prefetch in (True, False):
        saved.prefetch = prefetch
        got = list(saved)
        want = list(src)
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype and a.flags.c_contiguous
            np.testing.assert_array_equal(a, b)
    again = stream_npy(tmp_path / "saved" / "patches")
    np.testing.assert_array_equal(np.vstack(list(again)), np.vstack(list(src)))


def test_memoized_fit_on_saved_patches_equals_the_fit_on_their_source(image_folder, tmp_path):
    folder, _ = image_folder
    src = stream_image_patches(folder, batch_size=60, patch_size=4, stride=2)
    saved = src.save(tmp_path / "saved")
    kw = dict(_KW, n_components=8, L=2, max_iter=5)
    a = SparseGaussianMixture(**kw).fit(src)
    b = SparseGaussianMixture(**kw).fit(saved)
    assert [t["elbo"] for t in a.trace_] == [t["elbo"] for t in b.trace_]
    for name in ("weights_", "covariances_", "precisions_cholesky_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_saved_patches_errors(image_folder, tmp_path):
    folder, _ = image_folder
    src = stream_image_patches(folder, batch_size=100, patch_size=4, stride=2)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not an empty directory; PatchStream.save"):
        src.save(tmp_path / "full")
    with pytest.raises(ValueError, match="no saved patch stream here .no patches.json."):
        stream_npy(tmp_path / "full")
    (tmp_path / "full" / "patches.json").write_text('{"format": "sparseclust.CorpusStream"}')
    with pytest.raises(ValueError, match="not a patch stream saved by this version"):
        stream_npy(tmp_path / "full")
    # a save that fails while reading leaves nothing behind
    bad = stream_image_patches(folder, batch_size=100, patch_size=4, stride=2)
    (folder / "img01.png").write_bytes(b"not an image")  # after the headers were read
    with pytest.raises(ValueError, match="img01.png: cannot read the image"):
        bad.save(tmp_path / "failed")
    assert not (tmp_path / "failed").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".failed")] == []

    _write_images(folder, [(23, 31, 3), (18, 17), (30, 22, 3), (16, 40, 3), (25, 25)])
    saved = stream_image_patches(folder, batch_size=100, patch_size=4, stride=2).save(
        tmp_path / "saved")
    n = len(saved)
    (tmp_path / "saved" / "batch-000001.npy").unlink()
    with pytest.raises(ValueError, match=rf"1 of {n} minibatch files are missing"):
        stream_npy(tmp_path / "saved")
    (tmp_path / "saved" / "batch-000001.npy").write_bytes(b"not an array")
    with pytest.raises(ValueError, match="batch-000001.npy: cannot read the saved minibatch"):
        list(saved)
    np.save(tmp_path / "saved" / "batch-000001.npy", np.zeros((3, 16)))
    with pytest.raises(ValueError, match=r"holds a 3 x 16 float64 array, the manifest "
                                         r"declares 100 x 16 float64"):
        list(saved)
    np.save(tmp_path / "saved" / "batch-000001.npy", np.zeros((100, 16), np.float32))
    with pytest.raises(ValueError, match="holds a 100 x 16 float32 array"):
        list(saved)
    (tmp_path / "saved" / "patches.json").write_text(
        '{"format": "sparseclust.PatchStream", "version": 1, "n_features": 16}')
    with pytest.raises(ValueError, match="incomplete manifest .missing 'n_samples'"):
        stream_npy(tmp_path / "saved")


def _patches(image_folder, batch_size):
    folder, _ = image_folder
    stream = stream_image_patches(folder, batch_size=batch_size, patch_size=4, stride=2)
    return stream, np.vstack(list(stream))


_KW = dict(n_components=6, covariance_type="full", zero_mean=True, tol=0, random_state=0,
           n_threads=1)


def test_memoized_fit_of_one_minibatch_equals_the_array_fit(image_folder):
    # one minibatch is the one fixed batch of n_batches=1: the same data, moments, k-means++
    # seeds and candidate sets (C = 16 < K = 20, kept across passes per batch), so the same
    # fit to the last bit
    stream, X = _patches(image_folder, 10**6)
    kw = dict(_KW, n_components=20, L=2, max_iter=6)
    a = SparseGaussianMixture(n_batches=1, **kw).fit(X)
    b = SparseGaussianMixture(**kw).fit(stream)
    assert b.n_iter_ == 6 and b.n_features_in_ == 16
    assert [t["elbo"] for t in a.trace_] == [t["elbo"] for t in b.trace_]
    for name in ("weights_", "covariances_", "precisions_cholesky_", "covariance_prior_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_memoized_fit_over_minibatches(image_folder):
    stream, X = _patches(image_folder, 97)
    assert len(stream) > 3
    labels = np.random.default_rng(0).integers(6, size=X.shape[0])
    P = X.T @ X / X.shape[0] + 1e-3 * np.eye(X.shape[1])
    kw = dict(_KW, init_params=labels, covariance_prior=P)
    # the first memoized pass is one batch iteration: equal up to the order of the sums
    # of the statistics (minibatch by minibatch against all rows at once)
    one = SparseGaussianMixture(algorithm="batch", max_iter=1, **kw).fit(X)
    got = SparseGaussianMixture(max_iter=1, **kw).fit(stream)
    np.testing.assert_allclose(got.covariances_, one.covariances_, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(got.lower_bound_, one.lower_bound_, rtol=1e-12)
    # memoized training never lowers the ELBO; the minibatches are the fixed batches
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SparseGaussianMixture(max_iter=8, **dict(kw, L=1)).fit(stream)
    elbo = np.array(model.lower_bounds_)
    assert np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[1:]))
    assert model.trace_[-1]["step"] == 1 + 7 * len(stream)
    # the default priors come from the moments of all minibatches
    dflt = SparseGaussianMixture(max_iter=1, **dict(_KW, L=1)).fit(stream)
    ref = SparseGaussianMixture(max_iter=1, **dict(_KW, L=1)).fit(X)
    np.testing.assert_allclose(dflt.covariance_prior_, ref.covariance_prior_, rtol=1e-12,
                               atol=1e-6)  # (+ reg_covar I on a singular second moment)
    assert np.isfinite(model.score(X))


def test_fit_of_a_generic_stream_and_its_errors(image_folder):
    stream, X = _patches(image_folder, 50)

    class Chunks:  # any re-iterable of arrays
        def __iter__(self):
            return iter(np.array_split(X, 4))

    a = SparseGaussianMixture(max_iter=2, **{**_KW, "random_state": 1}).fit(Chunks())
    assert a.n_iter_ == 2 and np.isfinite(a.score(X))
    gm = SparseGaussianMixture(max_iter=2, **_KW)
    with pytest.raises(TypeError, match="must be re-iterable"):
        gm.fit(iter(np.array_split(X, 4)))
    with pytest.raises(ValueError, match="needs algorithm='memoized'.*partial_fit"):
        SparseGaussianMixture(algorithm="stochastic", **_KW).fit(stream)
    with pytest.raises(ValueError, match="moves='none'"):
        SparseGaussianMixture(weight_concentration_prior_type="dirichlet_process",
                              **_KW).fit(stream)
    with pytest.raises(TypeError, match="dense arrays"):
        gm.fit(_Seq([sp.csr_array(X)]))
    with pytest.raises(ValueError, match="empty dataset"):
        gm.fit(_Seq([]))
    with pytest.raises(ValueError, match="features"):
        gm.fit(_Seq([X, X[:, :3]]))

    class Growing:  # yields other minibatches at the second read
        calls = 0

        def __iter__(self):
            Growing.calls += 1
            return iter([X] if Growing.calls == 1 else [X, X])

    with pytest.raises(ValueError, match="same minibatches"):
        gm.fit(Growing())


class _Seq:
    """A re-iterable of the given minibatches."""

    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)


def test_partial_fit_over_a_stream(image_folder):
    # stochastic training: partial_fit on each minibatch, scaled to the stream's size; the
    # same steps as on the same rows cut from the array
    stream, X = _patches(image_folder, 64)
    kw = dict(_KW, algorithm="stochastic", total_samples=stream.n_samples)
    a, b = SparseGaussianMixture(**kw), SparseGaussianMixture(**kw)
    for _ in range(2):
        for lo, Xb in zip(range(0, X.shape[0], 64), stream, strict=True):
            a.partial_fit(Xb)
            b.partial_fit(X[lo:lo + 64])
    np.testing.assert_array_equal(a.covariances_, b.covariances_)
    assert a.n_batch_iter_ == 2 * len(stream)
    assert np.isfinite(a.score(X))
    with pytest.raises(TypeError, match="one minibatch.*for X_batch in stream"):
        SparseGaussianMixture(**kw).partial_fit(stream)


# ------------------------------------------------------- resuming stochastic training


def _resume(make, batches, split, tmp_path):
    """partial_fit over ``batches`` in one go, and saved after ``split`` of them, loaded and
    continued: the two models."""
    straight = make()
    for Xb in batches:
        straight.partial_fit(Xb)
    first = make()
    for Xb in batches[:split]:
        first.partial_fit(Xb)
    sparseclust.save(first, tmp_path / "checkpoint.model")
    del first
    resumed = sparseclust.load(tmp_path / "checkpoint.model")
    for Xb in batches[split:]:
        resumed.partial_fit(Xb)
    return straight, resumed


def test_resume_mixture_partial_fit_from_a_saved_model(image_folder, tmp_path):
    stream, X = _patches(image_folder, 80)
    batches = list(stream) * 2
    straight, resumed = _resume(
        lambda: SparseGaussianMixture(**dict(_KW, algorithm="stochastic",
                                             total_samples=stream.n_samples)),
        batches, 5, tmp_path)
    for name in ("weights_", "covariances_", "degrees_of_freedom_"):
        np.testing.assert_array_equal(getattr(resumed, name), getattr(straight, name))
    assert resumed.n_batch_iter_ == straight.n_batch_iter_ == len(batches)
    assert resumed.lower_bounds_ == straight.lower_bounds_


@pytest.mark.parametrize("make", [
    lambda: SparseLDA(n_components=4, algorithm="stochastic", total_samples=60,
                      random_state=0, n_threads=1),
    lambda: StochasticEMLDA(n_components=4, total_samples=60, random_state=0, n_threads=1),
    lambda: HDPTopicModel(max_components=6, total_samples=60, random_state=0, n_threads=1),
], ids=["SparseLDA", "StochasticEMLDA", "HDPTopicModel"])
def test_resume_topic_model_partial_fit_from_a_saved_model(make, tmp_path):
    rng = np.random.default_rng(3)
    X = sp.csr_array(rng.poisson(0.5, size=(60, 25)).astype(np.float64))
    batches = [X[i:i + 15] for i in range(0, 60, 15)] * 2
    straight, resumed = _resume(make, batches, 3, tmp_path)
    np.testing.assert_array_equal(resumed.components_, straight.components_)


def test_candidate_sets_are_kept_per_minibatch(image_folder, monkeypatch):
    # a stream's minibatches are new arrays at every pass: their candidate sets are kept
    # per batch number, one cache per minibatch however many passes
    import sparseclust.mixture._gmm_model as gmm

    made = []

    class Counted(gmm._CandidateCache):
        __slots__ = ()

        def __init__(self, key):
            made.append(key)
            super().__init__(key)

    monkeypatch.setattr(gmm, "_CandidateCache", Counted)
    stream, X = _patches(image_folder, 150)
    model = SparseGaussianMixture(max_iter=4, **dict(_KW, n_components=20, L=1)).fit(stream)
    assert model.n_iter_ == 4
    assert len(made) == len(stream)
    assert not any(isinstance(k, np.ndarray) for k in made)  # no data kept alive
