"""Property test: the device scripts carry any file name an export may hold (blanks at both
ends, quotes, `$()`, backticks, a leading dash, non-ASCII) through push, re-push, chmod,
rename and remove, under Android's shell (mksh + toybox, see tests/provision/conftest.py)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from harness.provision import HashCache, NullProgress, list_files, sync_set
from tests.provision.conftest import CountingTransport, local_device

# Pieces a hostile or unlucky name is made of; never "/" (a folder) or a control character
# (refused by the export reader).
PIECES = [" ", "  ", "'", '"', "$(touch pwned)", "`touch pwned`", "$HOME", "-", "--", "\\", "\\n", ";", "*", "?",
          "[a]", "&", "|", "<", ">", "#", "~", "%s", "=", "ü", "✓", "名前", "\u2028", "\u00a0", "\u0085", "x", "y.bin"]
NAMES = st.lists(st.sampled_from(PIECES), min_size=1, max_size=4).map("".join).filter(
    lambda n: n not in (".", "..") and n.strip(" ") != "")
# Every name also exists once with blanks at both ends and once with a leading dash.
NAME = st.one_of(NAMES, NAMES.map(lambda n: f"  {n} "), NAMES.map(lambda n: f"-{n}")).filter(
    lambda n: not n.endswith(".d"))
# Folder names mostly end in ".d" so hostile names stay files; a small alphabet of plain
# names makes a path a file in one state and a folder in the next ("a" then "a/b").
REL = st.one_of(NAME, st.tuples(NAME, NAME).map(lambda p: f"{p[0]}.d/{p[1]}"),
                st.sampled_from(["a", "b", "a/b", "b/a", "a/c", "a/b/c", "-a", "-a/ b "]))
# One state of the export: name -> (content id, executable?). Contents repeat on purpose:
# equal contents are hard-linked on the device, and a rename is a link plus a removal.
STATE = st.dictionaries(REL, st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=5)


def _write_state(root: Path, state: dict[str, tuple[int, bool]]) -> None:
    for p in sorted(root.rglob("*"), reverse=True):
        p.unlink() if not p.is_dir() else p.rmdir()
    for rel, (content, exe) in state.items():
        p = root / rel
        if p.parent.exists() and not p.parent.is_dir():
            continue  # "a" and "a/b" in one state: the folder wins
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.is_dir():
            continue
        p.write_bytes(f"content {content}\n".encode() * (content + 1))
        p.chmod(0o755 if exe else 0o644)


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _executables(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.stat().st_mode & 0o100}


@given(states=st.lists(STATE, min_size=2, max_size=4))
# Found by this test in CI: a content moves to a new name while its old name gets a new
# content (the push was placed over the link's source before the link was made).
@example(states=[{"'": (1, False)}, {"'": (0, False), '"': (1, False)}])
# Two names swap contents: each link's source is the other link's target.
@example(states=[{"a": (0, False), "b": (1, True)}, {"a": (1, False), "b": (0, False)}])
# A three-way rotation, one of them also pushed anew.
@example(states=[{"a": (0, False), "b": (1, False), "c": (2, False)},
                 {"a": (1, False), "b": (2, False), "c": (3, False), "d": (0, False)}])
# A file becomes a folder (its content moving inside it), and back; then a new content there.
@example(states=[{"a": (0, False)}, {"a/b": (0, False)}, {"a": (0, True)}, {"a/b/c": (1, False)}])
@example(states=[{"-a/ b ": (2, False), "b": (1, False)}, {"-a": (2, False), "b/a": (1, False)}])
# Found by the fuzz profile: a/b/c goes, leaving folders a/b and a behind (find's
# `-exec rmdir {} +` removed only the innermost), then a file a cannot be placed.
@example(states=[{"'": (0, False), "a/b/c": (0, False)}, {"'": (0, False)}, {"a": (1, False)}])
def test_hostile_names_survive_push_repush_chmod_rename_remove(states):
    with tempfile.TemporaryDirectory(prefix="harness-names-") as d:
        local, device = Path(d, "export"), Path(d, "device")
        local.mkdir()
        device.mkdir()
        t = CountingTransport(local_device(device))
        cache = HashCache(Path(d, "hashes.json"))
        for state in states:
            _write_state(local, state)
            res = sync_set(t, list_files(local), kind="model", name="names", cache=cache, progress=NullProgress())
            remote = Path(res.remote_dir)
            assert _tree(remote) == _tree(local)
            # Equal contents share one inode, so bits are only ever added (+x), never taken.
            assert _executables(local) <= _executables(remote)
            # Pushing the same state again moves nothing and still succeeds.
            again = sync_set(t, list_files(local), kind="model", name="names", cache=cache, progress=NullProgress())
            assert again.unchanged and again.bytes_sent == 0
            assert _tree(remote) == _tree(local)
        assert not any("pwned" in name for name in os.listdir(d)), "a name was run as a command"
        assert not Path(device, "pwned").exists() and not Path("pwned").exists()
