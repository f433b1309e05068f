# SPDX-License-Identifier: BSD-3-Clause
"""``python -m sparseclust`` runs the command-line interface (see :mod:`sparseclust.cli`)."""

import sys

from sparseclust.cli import main

if __name__ == "__main__":
    sys.exit(main())
