# SPDX-License-Identifier: BSD-3-Clause
import os
from pathlib import Path

# scikit-learn's estimator checks include check_array_api_input (numpy namespace), which is
# skipped unless SciPy's array-API mode is on; it must be set before scipy is first imported.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

SHARED_DATA = Path(
    os.environ.get(
        "SPARSECLUST_SHARED_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    )
).resolve()


def pytest_addoption(parser):
    parser.addoption(
        "--runslow", action="store_true", default=False, help="run slow tests on real corpora"
    )


_NO_DATA = (
    "--runslow needs the real corpora (kos/, 20newsgroups/, imdb/, bsds500/), looked for in "
    "{path}. Set SPARSECLUST_SHARED_DATA to the folder that holds them, e.g. "
    "SPARSECLUST_SHARED_DATA=/path/to/shared/data pytest --runslow, or clone the repository "
    "next to that folder (as ../shared/data)."
)


def pytest_collection_modifyitems(config, items):
    """Slow tests (real corpora in ../shared/data) are deselected unless --runslow is given."""
    if config.getoption("--runslow"):
        if any("slow" in item.keywords for item in items) and not SHARED_DATA.is_dir():
            raise pytest.UsageError(_NO_DATA.format(path=SHARED_DATA))
        return
    slow = [item for item in items if "slow" in item.keywords]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if "slow" not in item.keywords]


@pytest.fixture(scope="session")
def shared_data():
    """Path to ../shared/data (real corpora and images); slow tests only."""
    if not SHARED_DATA.is_dir():
        pytest.fail(_NO_DATA.format(path=SHARED_DATA))
    return SHARED_DATA


def _check_search(base, grid, X, n_splits):
    """Fit ``GridSearchCV(base, grid, cv=KFold(n_splits))`` on X and check it against the same
    search done by hand: a clone of ``base`` with each candidate's parameters, fitted on each
    training fold and scored (its ``score``) on the test fold. The search's candidates, mean
    test scores and choice must be those, and the choice must not be a tie. Returns the
    search."""
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV, KFold, ParameterGrid

    search = GridSearchCV(base, grid, cv=KFold(n_splits=n_splits)).fit(X)
    candidates = list(ParameterGrid(grid))
    means = np.array([np.mean([clone(base).set_params(**params).fit(X[tr]).score(X[te])
                               for tr, te in KFold(n_splits=n_splits).split(X)])
                      for params in candidates])
    assert search.cv_results_["params"] == candidates
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], means, rtol=1e-12)
    assert search.best_params_ == candidates[int(np.argmax(means))]
    assert np.sort(means)[-1] - np.sort(means)[-2] > 1e-6, means  # the choice is not a tie
    return search


@pytest.fixture
def check_search():
    """The grid-search check of :func:`_check_search`."""
    return _check_search
