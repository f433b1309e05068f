# SPDX-License-Identifier: BSD-3-Clause
"""sparseclust's benchmark suites: ``python -m benchmarks <suite> [--quick]``.

Each suite in :mod:`benchmarks.suites` measures one question on the real data in
``../shared/data`` against our own dense code and the peers, and writes one JSON file per
part in ``benchmarks/results`` with one schema (:mod:`benchmarks._runner`).
``python -m benchmarks page`` regenerates the results pages from those files.
"""
