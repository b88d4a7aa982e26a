"""`python -m harness ...`: the same command line as the `harness` console script, for an
environment whose scripts folder is not on PATH."""

import sys

from harness.cli import main

sys.exit(main())
