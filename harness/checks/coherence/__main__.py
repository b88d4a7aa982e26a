"""`python -m harness.checks.coherence FILE.jsonl [--json]` (see cli.py)."""

import sys

from harness.checks.coherence.cli import run

sys.exit(run())
