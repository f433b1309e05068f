# SPDX-License-Identifier: BSD-3-Clause
"""Checkpoints of long fits (sparseclust.utils.Checkpoint): what is saved, and resuming."""

import os

import numpy as np
import pytest

from sparseclust import HDPTopicModel, SparseGaussianMixture, SparseLDA
from sparseclust.utils import Checkpoint

# short fits on purpose: what is saved after a pass, not convergence, is under test
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _interrupted(ckpt, stop_at):
    """A callback that saves through ``ckpt`` and stops the fit after pass ``stop_at``, as
    an interruption would."""

    def cb(info):
        ckpt(info)
        return info["pass"] >= stop_at

    return cb


@pytest.fixture
def counts():
    rng = np.random.RandomState(0)
    topics = rng.dirichlet(np.full(40, 0.1), size=4)
    theta = rng.dirichlet(np.full(4, 0.3), size=120)
    return np.vstack([rng.multinomial(60, t @ topics) for t in theta]).astype(np.float64)


@pytest.fixture
def blobs():
    rng = np.random.RandomState(1)
    centres = rng.normal(scale=6.0, size=(4, 3))
    return np.vstack([c + rng.normal(size=(80, 3)) for c in centres])


def test_topic_checkpoint_holds_the_topics_of_its_pass(tmp_path, counts):
    ckpt = Checkpoint(tmp_path / "lda.npz", every=2)
    stopped = SparseLDA(n_components=4, local_step="variational", max_iter=20, tol=0,
                        random_state=0)
    stopped.fit(counts, callback=_interrupted(ckpt, 5))  # saved after passes 2 and 4
    saved = ckpt.load()
    assert saved["kind"] == "topics" and saved["pass"] == 4
    assert saved["elbo"] == pytest.approx(stopped.lower_bounds_[3], rel=1e-12)
    # the same fit stopped at pass 4 ends with those topics
    at4 = SparseLDA(n_components=4, local_step="variational", max_iter=4, tol=0,
                    random_state=0).fit(counts)
    np.testing.assert_allclose(saved["components"], at4.components_, rtol=1e-12)


def test_resumed_topic_model_starts_from_the_checkpoint(tmp_path, counts):
    ckpt = Checkpoint(tmp_path / "lda.npz", every=3)
    params = dict(n_components=4, local_step="variational", max_iter=12, tol=0, random_state=0)
    SparseLDA(**params).fit(counts, callback=_interrupted(ckpt, 7))
    saved = ckpt.load()
    assert saved["pass"] == 6
    resumed = ckpt.resume(SparseLDA(**params))
    assert resumed.max_iter == 12 - 6
    np.testing.assert_allclose(resumed.init, saved["components"] - 0.1)
    resumed.fit(counts)
    # memoized training from the saved topics: its first pass is a full local step under
    # them followed by a global step, so the ELBO cannot fall below the checkpoint's
    assert resumed.lower_bounds_[0] >= saved["elbo"] - 1e-9 * abs(saved["elbo"])
    assert np.all(np.diff(resumed.lower_bounds_) >= -1e-9 * abs(saved["elbo"]))
    assert resumed.n_iter_ == 6


def test_mixture_checkpoint_and_resume(tmp_path, blobs):
    ckpt = Checkpoint(tmp_path / "gm.npz")
    params = dict(n_components=4, max_iter=30, random_state=0)
    stopped = SparseGaussianMixture(**params).fit(blobs, callback=_interrupted(ckpt, 3))
    saved = ckpt.load()
    assert saved["kind"] == "mixture" and saved["pass"] == 3
    np.testing.assert_allclose(saved["weights"], stopped.weights_, rtol=1e-12)
    np.testing.assert_allclose(saved["means"], stopped.means_, rtol=1e-12)
    np.testing.assert_allclose(saved["precisions_cholesky"], stopped.precisions_cholesky_,
                               rtol=1e-12)
    resumed = ckpt.resume(SparseGaussianMixture(**params))
    assert resumed.max_iter == 27 and resumed.n_init == 1
    np.testing.assert_allclose(resumed.precisions_init, stopped.precisions_, rtol=1e-10)
    resumed.fit(blobs)
    # the resumed fit continues from the saved model: its objective ends above the
    # checkpoint's, where the uninterrupted fit ends
    whole = SparseGaussianMixture(**params).fit(blobs)
    assert resumed.lower_bound_ >= saved["elbo"]
    assert resumed.lower_bound_ == pytest.approx(whole.lower_bound_, rel=1e-4)
    assert resumed.score(blobs) == pytest.approx(whole.score(blobs), rel=1e-4)


@pytest.mark.parametrize("covariance_type", ["diag", "spherical"])
def test_mixture_resume_squares_the_factors(tmp_path, blobs, covariance_type):
    ckpt = Checkpoint(tmp_path / "gm.npz")
    params = dict(n_components=3, covariance_type=covariance_type, zero_mean=False,
                  max_iter=4, tol=0, random_state=0)
    fitted = SparseGaussianMixture(**params).fit(blobs, callback=ckpt)
    resumed = ckpt.resume(SparseGaussianMixture(**params))
    np.testing.assert_allclose(resumed.precisions_init, fitted.precisions_, rtol=1e-10)
    assert ckpt.load()["pass"] == 4  # the last pass of max_iter is always saved
    assert resumed.max_iter == 1


def test_mixture_resume_without_means_when_zero_mean(tmp_path, blobs):
    ckpt = Checkpoint(tmp_path / "gm.npz")
    params = dict(n_components=3, zero_mean=True, max_iter=3, tol=0, random_state=0)
    SparseGaussianMixture(**params).fit(blobs - blobs.mean(axis=0), callback=ckpt)
    resumed = ckpt.resume(SparseGaussianMixture(**params))
    assert resumed.means_init is None
    resumed.fit(blobs - blobs.mean(axis=0))
    assert np.isfinite(resumed.score(blobs - blobs.mean(axis=0)))


def test_checkpoint_errors(tmp_path, counts, blobs):
    with pytest.raises(ValueError, match="every must be a positive integer"):
        Checkpoint(tmp_path / "x.npz", every=0)
    ckpt = Checkpoint(tmp_path / "lda.npz")
    with pytest.raises(FileNotFoundError):
        ckpt.resume(SparseLDA(n_components=4))
    SparseLDA(n_components=4, max_iter=2, tol=0, random_state=0).fit(counts, callback=ckpt)
    with pytest.raises(TypeError, match="resumed by a SparseLDA"):
        ckpt.resume(SparseGaussianMixture(n_components=4))
    with pytest.raises(ValueError, match="holds 4 topics"):
        ckpt.resume(SparseLDA(n_components=5))
    # the HDP's callback reports its topics too, but it has no start from them
    with pytest.raises(TypeError, match="resumed by a SparseLDA"):
        ckpt.resume(HDPTopicModel(max_components=4))
    with pytest.raises(ValueError, match="Checkpoint saves the callback"):
        Checkpoint(tmp_path / "y.npz")({"pass": 1, "elbo": 0.0})
    assert not os.path.exists(tmp_path / "y.npz")
    # no temporary file is left next to the checkpoint
    assert sorted(os.listdir(tmp_path)) == ["lda.npz"]

