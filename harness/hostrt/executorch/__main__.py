"""`python -m harness.hostrt.executorch --model_path M.pte ...` (runner.py)."""

import sys

from harness.hostrt.executorch.runner import main

sys.exit(main())
