# SPDX-License-Identifier: BSD-3-Clause
"""Compiled kernels (Cython / C++). Internal: use the public wrappers."""
