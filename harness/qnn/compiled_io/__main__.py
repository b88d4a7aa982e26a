"""`python -m harness.qnn.compiled_io PTE|BIN|EXPORT_DIR [--json]` (harness/qnn/compiled_io/cli.py)."""

from harness.qnn.compiled_io.cli import main

raise SystemExit(main())
