"""`python -m harness.checks.shapes`: see cli.py."""

import sys

from harness.checks.shapes.cli import main

sys.exit(main())
