"""`python -m harness.runners.llm_demo STDOUT_FILE [...]` (see cli.py)."""

import sys

from harness.runners.llm_demo.cli import main

sys.exit(main())
