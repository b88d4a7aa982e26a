"""`python -m harness.runners.logits_diff STDOUT [...]` (see cli.py)."""

import sys

from harness.runners.logits_diff.cli import main

sys.exit(main())
