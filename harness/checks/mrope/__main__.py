"""`python -m harness.checks.mrope STDOUT [--json]` (see cli.py)."""

import sys

from harness.checks.mrope.cli import main

sys.exit(main())
