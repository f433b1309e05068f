# SPDX-License-Identifier: BSD-3-Clause
"""The shared progress display (sparseclust.utils._progress.Progress)."""

import io
import re

import pytest

from sparseclust.mixture import SparseGaussianMixture
from sparseclust.topics import HDPTopicModel, SparseLDA, StochasticEMLDA
from sparseclust.utils._progress import Progress


def test_line_shows_the_fields_a_step_reports():
    p = Progress("SparseLDA", 50)
    line = p.line({"pass": 3, "elbo": -2.5e5, "elbo_change": 0.0101, "n_live": 12,
                   "heldout": -7.5, "elapsed": 0.74})
    assert line == ("[SparseLDA] pass  3/50  ELBO -2.500000e+05  change 1.01e-02  K 12  "
                    "held-out -7.50000  0.74 s")
    sem = Progress("StochasticEMLDA", 100).line(
        {"sweep": 7, "log_joint": -3.5e5, "log_joint_change": float("inf"), "elapsed": 1.5})
    assert sem == "[StochasticEMLDA] sweep   7/100  log joint -3.500000e+05  1.50 s"
    # n_passes in the step overrides the budget given at construction
    assert Progress("X", 10).line({"pass": 1, "n_passes": 4}) == "[X] pass 1/4"


def test_every_and_first_step_and_plain_stream():
    out = io.StringIO()
    p = Progress("SparseGaussianMixture", 30, stream=out, every=10, bar=True)
    assert not p.bar  # a StringIO is not a terminal: one line per shown step
    for i in range(1, 31):
        assert p({"pass": i, "elbo": float(-i)}) is False
    p.close()
    lines = out.getvalue().splitlines()
    assert [ln.split()[2] for ln in lines] == ["1/30", "10/30", "20/30", "30/30"]


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_bar_redraws_one_line_on_a_terminal():
    out = _Tty()
    p = Progress("HDPTopicModel", 4, stream=out, bar=True, width=8)
    for i in (1, 2):
        p({"pass": i, "elbo": -1.0})
    p.close()
    text = out.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n") and text.count("\n") == 1
    assert "[####----] [HDPTopicModel] pass 2/4" in text


def _counts(seed=0, n_docs=40, n_words=30):
    import numpy as np
    import scipy.sparse as sp

    rng = np.random.RandomState(seed)
    return sp.csr_matrix(rng.poisson(1.0, size=(n_docs, n_words)).astype(np.float64))


@pytest.mark.parametrize("make", [
    lambda: SparseLDA(n_components=3, max_iter=2, tol=0, random_state=0, verbose=1),
    lambda: HDPTopicModel(max_components=4, max_iter=2, tol=0, random_state=0, verbose=1),
    lambda: StochasticEMLDA(n_components=3, max_iter=2, tol=0, random_state=0, verbose=1),
    lambda: StochasticEMLDA(n_components=3, max_iter=2, tol=0, random_state=0, verbose=1,
                            algorithm="online", batch_size=16),
    lambda: SparseGaussianMixture(n_components=3, max_iter=2, tol=0, random_state=0,
                                  verbose=1, verbose_interval=1),
], ids=["SparseLDA", "HDPTopicModel", "StochasticEMLDA", "StochasticEMLDA-online",
        "SparseGaussianMixture"])
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_every_estimator_prints_the_same_line_format(make, capsys):
    import numpy as np

    est = make()
    X = _counts()
    if isinstance(est, SparseGaussianMixture):
        X = np.random.RandomState(0).randn(60, 2)
    est.fit(X)
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    name = type(est).__name__
    pattern = re.compile(rf"\[{name}\] (pass|sweep) ([12])/2  \S")
    assert len(lines) == 2
    assert [int(pattern.match(ln).group(2)) for ln in lines] == [1, 2], lines
