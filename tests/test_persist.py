# SPDX-License-Identifier: BSD-3-Clause
"""sparseclust.save / sparseclust.load: round trips and refusals."""

import json
import os
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import sparseclust
from sparseclust import (
    HDPTopicModel,
    SparseGaussianMixture,
    SparseLDA,
    StochasticEMLDA,
)
from sparseclust._persist import FORMAT_VERSION, read_header

pytestmark = pytest.mark.contract


def _counts(seed=0, D=40, V=30):
    rng = np.random.default_rng(seed)
    return sp.csr_array(rng.poisson(0.4, size=(D, V)).astype(np.float64))


@pytest.mark.parametrize(
    "make",
    [
        lambda: SparseLDA(4, max_iter=3, random_state=0),
        lambda: HDPTopicModel(max_components=6, max_iter=3, random_state=0),
        lambda: StochasticEMLDA(4, max_iter=3, random_state=0),
    ],
    ids=["SparseLDA", "HDPTopicModel", "StochasticEMLDA"],
)
def test_topic_models_round_trip(tmp_path, make):
    X = _counts()
    model = make().fit(X)
    path = tmp_path / "m.model"
    header = sparseclust.save(model, path)
    assert header["format_version"] == FORMAT_VERSION
    assert read_header(path)["class"].endswith(type(model).__name__)
    assert read_header(path)["n_features_in_"] == X.shape[1]
    back = sparseclust.load(path, expected=type(model))
    np.testing.assert_array_equal(back.components_, model.components_)
    np.testing.assert_array_equal(back.transform(X), model.transform(X))


def test_mixture_round_trip_and_unfitted(tmp_path):
    X = np.random.default_rng(1).normal(size=(60, 3))
    gm = SparseGaussianMixture(3, max_iter=5, random_state=0).fit(X)
    sparseclust.save(gm, tmp_path / "g")
    back = sparseclust.load(tmp_path / "g")
    np.testing.assert_array_equal(back.predict_proba(X), gm.predict_proba(X))
    sparseclust.save(SparseLDA(5), tmp_path / "u")
    assert sparseclust.load(tmp_path / "u").get_params() == SparseLDA(5).get_params()


def test_refusals(tmp_path):
    X = _counts()
    model = SparseLDA(3, max_iter=2, random_state=0).fit(X)
    good = tmp_path / "good"
    sparseclust.save(model, good)
    raw = good.read_bytes()
    magic, header, payload = raw.split(b"\n", 2)
    # a plain pickle is not a model file
    plain = tmp_path / "plain.pkl"
    plain.write_bytes(pickle.dumps(model))
    with pytest.raises(ValueError, match="not a sparseclust model file"):
        sparseclust.load(plain)
    # another format version: refused before unpickling, naming the writer's version
    h = json.loads(header)
    h.update(format_version=FORMAT_VERSION + 1, sparseclust_version="9.9.9")
    newer = tmp_path / "newer"
    newer.write_bytes(magic + b"\n" + json.dumps(h).encode() + b"\n" + b"not a pickle")
    with pytest.raises(ValueError, match=r"sparseclust 9\.9\.9 in model format"):
        sparseclust.load(newer)
    # damaged header, truncated payload
    bad = tmp_path / "bad"
    bad.write_bytes(magic + b"\n{oops\n" + payload)
    with pytest.raises(ValueError, match="header .* damaged"):
        sparseclust.load(bad)
    cut = tmp_path / "cut"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="truncated or damaged"):
        sparseclust.load(cut)
    # the wrong estimator
    with pytest.raises(TypeError, match="not the expected"):
        sparseclust.load(good, expected=HDPTopicModel)


def test_damaged_payload_is_refused_before_unpickling(tmp_path):
    X = _counts()
    model = SparseLDA(3, max_iter=2, random_state=0).fit(X)
    good = tmp_path / "good"
    header = sparseclust.save(model, good)
    raw = good.read_bytes()
    magic, head, payload = raw.split(b"\n", 2)
    assert header["payload_bytes"] == len(payload)
    # one bit flipped inside the pickled topics: unpickling would succeed with other numbers
    i = payload.find(model.components_.tobytes()[:64]) + 24
    assert i >= 24
    flipped = bytearray(payload)
    flipped[i] ^= 0x01
    bad = tmp_path / "flipped"
    bad.write_bytes(magic + b"\n" + head + b"\n" + bytes(flipped))
    with pytest.raises(ValueError, match="truncated or damaged .*digest"):
        sparseclust.load(bad)
    # trailing bytes after the payload
    extra = tmp_path / "extra"
    extra.write_bytes(raw + b"\0")
    with pytest.raises(ValueError, match="truncated or damaged"):
        sparseclust.load(extra)
    # a format version that is not an integer
    h = json.loads(head)
    h["format_version"] = 1.9
    odd = tmp_path / "odd"
    odd.write_bytes(magic + b"\n" + json.dumps(h).encode() + b"\n" + payload)
    with pytest.raises(ValueError, match="header .* damaged"):
        sparseclust.load(odd)
    # a file written before the digest was recorded still loads (without that check)
    for key in ("payload_bytes", "payload_sha256"):
        del h[key]
    h["format_version"] = FORMAT_VERSION
    legacy = tmp_path / "legacy"
    legacy.write_bytes(magic + b"\n" + json.dumps(h).encode() + b"\n" + payload)
    np.testing.assert_array_equal(sparseclust.load(legacy).components_, model.components_)
    # and damage it does not detect by digest still gives the ValueError, not a pickle error
    short = tmp_path / "short"
    short.write_bytes(magic + b"\n" + json.dumps(h).encode() + b"\n" + payload[:-40])
    with pytest.raises(ValueError, match="truncated or damaged"):
        sparseclust.load(short)


def test_failed_save_leaves_the_existing_file(tmp_path):
    X = _counts()
    model = SparseLDA(3, max_iter=2, random_state=0).fit(X)
    path = tmp_path / "model"
    sparseclust.save(model, path)
    before = path.read_bytes()
    bad = SparseLDA(3, max_iter=2, random_state=0).fit(X)
    bad.unpicklable_ = lambda: None  # pickle cannot store a lambda
    with pytest.raises((pickle.PicklingError, AttributeError)):
        sparseclust.save(bad, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # no temporary file left
    np.testing.assert_array_equal(sparseclust.load(path).components_, model.components_)


class _RefusesToLoad:
    """Pickles fine; raises when unpickled (as a class changed by another release might)."""

    def __setstate__(self, state):
        raise RuntimeError("this state is from another release")


def test_intact_file_that_cannot_be_unpickled_is_not_called_damaged(tmp_path):
    obj = _RefusesToLoad()
    obj.x = 1
    path = tmp_path / "m"
    sparseclust.save(obj, path)
    with pytest.raises(ValueError, match="could not be unpickled .*another release") as exc:
        sparseclust.load(path)
    assert "damaged" not in str(exc.value)


@pytest.mark.skipif(os.name == "nt", reason="POSIX permissions and symbolic links")
def test_save_writes_through_links_and_keeps_permissions(tmp_path):
    X = _counts()
    model = SparseLDA(3, max_iter=2, random_state=0).fit(X)
    # a new file gets the mode open() would give it
    umask = os.umask(0o022)
    os.umask(umask)
    fresh = tmp_path / "fresh"
    sparseclust.save(model, fresh)
    assert fresh.stat().st_mode & 0o777 == 0o666 & ~umask
    # an existing file keeps its mode
    kept = tmp_path / "kept"
    sparseclust.save(model, kept)
    kept.chmod(0o640)
    sparseclust.save(model, kept)
    assert kept.stat().st_mode & 0o777 == 0o640
    # a symbolic link stays a link; the file it names gets the new model
    link = tmp_path / "link"
    link.symlink_to(kept)
    other = SparseLDA(4, max_iter=2, random_state=1).fit(X)
    sparseclust.save(other, link)
    assert link.is_symlink()
    np.testing.assert_array_equal(sparseclust.load(kept).components_, other.components_)
    # a bytes path works as for open()
    sparseclust.save(model, os.fsencode(tmp_path / "bytes"))
    assert sparseclust.load(tmp_path / "bytes").n_components == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bytes", "fresh", "kept", "link"]
