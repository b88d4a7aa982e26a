"""`python -m virtual_lab.exports ...` (see virtual_lab.exports.cli)."""

import sys

from virtual_lab.exports.cli import main

sys.exit(main())
