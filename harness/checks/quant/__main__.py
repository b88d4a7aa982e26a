"""`python -m harness.checks.quant FILE [--json] [--baseline FILE]` (see cli.py)."""

import sys

from harness.checks.quant.cli import main

sys.exit(main())
