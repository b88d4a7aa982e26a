"""`python -m harness.checks.localize DIR [--json]` (see cli.py)."""

import sys

from harness.checks.localize.cli import main

sys.exit(main())
