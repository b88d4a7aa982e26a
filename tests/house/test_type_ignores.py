"""Every `# type: ignore` in the project names its error code (ruff's PGH003 also says so) and
the reason the checker is wrong there, so an ignore is a decision someone can read, not a mute."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("harness", "virtual_lab", "suites", "tests", "tools", "benchmarks")
IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)$")


def test_every_type_ignore_names_its_code_and_reason() -> None:
    bad = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                m = IGNORE.search(line)
                if m is None or path == Path(__file__).resolve():
                    continue
                if not m["codes"] or not re.match(r"\s+#\s*\S", m["rest"]):
                    bad.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, "a `# type: ignore[code]  # reason` each:\n" + "\n".join(bad)
