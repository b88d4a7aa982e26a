"""`python -m harness.compiled_io PTE|BIN|EXPORT_DIR [--json]` (harness/compiled_io/cli.py)."""

from harness.compiled_io.cli import main

raise SystemExit(main())
