"""`python -m harness.runners.executorch STDOUT [--stderr F] [--exit-code N] [--json]` (cli.py)."""

import sys

from harness.runners.executorch.cli import main

sys.exit(main())
