"""../shared is found in one place (tests/shared.py): HARNESS_SHARED_DIR names it, HARNESS_SHARED is
the deprecated alias read for one more release, and no other file reads either name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.shared import ENV, OLD_ENV, shared_dir

REPO = Path(__file__).resolve().parents[2]


def test_the_new_name_wins(tmp_path: Path) -> None:
    assert shared_dir({ENV: str(tmp_path / "new"), OLD_ENV: str(tmp_path / "old")}, tmp_path) == tmp_path / "new"


def test_the_old_name_is_read_with_a_warning(tmp_path: Path) -> None:
    with pytest.warns(FutureWarning, match=f"{OLD_ENV} is deprecated: set {ENV}"):
        assert shared_dir({OLD_ENV: str(tmp_path / "old")}, tmp_path) == tmp_path / "old"


def test_without_either_it_is_beside_the_checkout_or_its_worktrees(tmp_path: Path) -> None:
    repo = tmp_path / "worktrees" / "checkout"
    repo.mkdir(parents=True)
    assert shared_dir({}, repo) == tmp_path / "worktrees" / "shared"  # absent: where it should be
    (tmp_path / "shared").mkdir()
    assert shared_dir({}, repo) == tmp_path / "shared"
    (tmp_path / "worktrees" / "shared").mkdir()
    assert shared_dir({}, repo) == tmp_path / "worktrees" / "shared"


def test_no_other_file_reads_the_names() -> None:
    own = {REPO / "tests" / "shared.py", Path(__file__).resolve()}
    pattern = re.compile(r"environ\b[^\n]*HARNESS_SHARED|getenv\([^\n]*HARNESS_SHARED")
    found = [str(p.relative_to(REPO)) for folder in ("harness", "tests", "benchmarks", "fixtures", "suites", "tools",
                                                     "virtual_lab") for p in sorted((REPO / folder).rglob("*.py"))
             if p not in own and pattern.search(p.read_text(encoding="utf-8"))]
    assert not found, f"read ../shared's place through tests/shared.py: {found}"


def test_the_suites_find_shared_through_the_one_place() -> None:
    """The suites' doors honour $HARNESS_SHARED_DIR: none builds ../shared's path itself."""
    spelled = re.compile(r"""["']shared["']\s*/|/\s*["']shared["']""")
    found = [str(p.relative_to(REPO)) for p in sorted((REPO / "suites").rglob("*.py"))
             if spelled.search(p.read_text(encoding="utf-8"))]
    assert found == [], f"{found} build ../shared's path themselves; import tests.shared's SHARED"
