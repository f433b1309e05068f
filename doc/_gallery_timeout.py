# SPDX-License-Identifier: BSD-3-Clause
"""A time cap per gallery example, for the documentation build.

``SPARSECLUST_EXAMPLE_TIMEOUT`` (seconds, unset or 0: no cap) stops an example that runs longer
with ``TimeoutError``, which sphinx-gallery reports as a failed example (so ``sphinx-build -W``
fails). CI sets it; the examples are written to take well under a minute on one core.
``reset`` is registered in ``sphinx_gallery_conf["reset_modules"]`` and runs before and after
each example.
"""

import os
import signal


def _expired(signum, frame):
    raise TimeoutError(
        f"the example ran longer than SPARSECLUST_EXAMPLE_TIMEOUT="
        f"{os.environ['SPARSECLUST_EXAMPLE_TIMEOUT']} s"
    )


def reset(gallery_conf, fname, when):
    """Arm the timer before an example, disarm it after."""
    cap = float(os.environ.get("SPARSECLUST_EXAMPLE_TIMEOUT", "0") or 0)
    if cap <= 0 or not hasattr(signal, "setitimer"):
        return
    if when == "before":
        signal.signal(signal.SIGALRM, _expired)
        signal.setitimer(signal.ITIMER_REAL, cap)
    else:
        signal.setitimer(signal.ITIMER_REAL, 0)
