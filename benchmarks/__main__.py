# SPDX-License-Identifier: BSD-3-Clause
import sys

from ._runner import main

sys.exit(main())
