# SPDX-License-Identifier: BSD-3-Clause
"""The suites, in the order the results pages show them.

A suite module defines ``NAME``, ``TITLE``, ``MEASURES`` and ``METHOD`` (markdown for the
results page), ``FULL`` and ``QUICK`` (part name -> parameters), ``run(part, params, log)``
(returns ``{"records": [...], ...}``), ``table(results)`` (markdown from every result file
of the suite) and ``headline(results)`` (rows of the README's results table).
"""

import importlib

NAMES = ("kernels", "quality", "throughput", "learned_k", "mixtures", "scale")


def load(name):
    if name not in NAMES:
        raise ValueError(f"unknown suite {name!r}; suites: {', '.join(NAMES)}")
    return importlib.import_module(f"{__name__}.{name}")
