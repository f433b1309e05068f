# SPDX-License-Identifier: BSD-3-Clause
import os
from pathlib import Path

# scikit-learn's estimator checks include check_array_api_input (numpy namespace), which is
# skipped unless SciPy's array-API mode is on; it must be set before scipy is first imported.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

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
