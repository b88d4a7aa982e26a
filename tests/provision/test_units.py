"""Hash cache, manifests and progress output."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from harness.errors import ProvisionError
from harness.provision import (
    DeviceStamp,
    FileEntry,
    HashCache,
    LogProgress,
    Manifest,
    TerminalProgress,
    make_progress,
    parse_stat_lines,
    sha256_file,
    split_sections,
)


def test_hash_cache_hits_until_size_or_mtime_change(tmp_path: Path):
    f = tmp_path / "w.bin"
    f.write_bytes(b"a" * 1000)
    c = HashCache(tmp_path / "c.json")
    first = c.digest(f)
    assert first == sha256_file(f) and c.hashed_bytes == 1000
    assert c.digest(f) == first and c.hashed_bytes == 1000
    c.save()
    c2 = HashCache(tmp_path / "c.json")
    assert c2.digest(f) == first and c2.hashed_bytes == 0
    f.write_bytes(b"b" * 1000)
    os.utime(f, ns=(1, 2))
    assert c2.digest(f) != first and c2.hashed_bytes == 1000


def test_hash_cache_survives_corruption_and_merges_writers(tmp_path: Path):
    path = tmp_path / "c.json"
    path.write_text("{not json")
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("a")
    b.write_text("b")
    c1, c2 = HashCache(path), HashCache(path)
    c1.digest(a)
    c2.digest(b)
    c1.save()
    c2.save()
    c3 = HashCache(path)
    c3.digest(a)
    c3.digest(b)
    assert c3.hashed_bytes == 0


@pytest.mark.parametrize("where", ["a folder", "under a file"])
def test_a_hash_cache_that_cannot_be_saved_costs_only_rehashing(tmp_path: Path, where: str, caplog):
    f = tmp_path / "w.bin"
    f.write_bytes(b"a" * 10)
    if where == "a folder":
        (path := tmp_path / "hashes.json").mkdir()
    else:
        (tmp_path / "home").write_text("a file where the cache folder would be")
        path = tmp_path / "home" / "hashes.json"
    c = HashCache(path)
    c.digest(f)
    c.save()  # said, never raised: the push it served has already succeeded
    assert "was not saved" in caplog.text and "HARNESS_CACHE_DIR" in caplog.text
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


def test_manifest_round_trip_and_digest():
    m = Manifest(kind="model", name="q", remote_dir="/w/models/q", meta={"model_type": "qwen3"},
                 files={"a": FileEntry("a", "0" * 64, 3, 0o644), "b/c": FileEntry("b/c", "1" * 64, 5, 0o755)},
                 device={"a": DeviceStamp(7, 100)})
    text = m.to_json()
    assert "\n" not in text
    back = Manifest.from_json(text, "x")
    assert back.files == m.files and back.device == m.device and back.meta == m.meta
    assert back.content_digest() == m.content_digest()
    changed = Manifest(kind="model", name="q", files={**m.files, "a": FileEntry("a", "0" * 64, 3, 0o755)})
    assert changed.content_digest() != m.content_digest()


def test_bad_manifest_is_a_clear_error():
    with pytest.raises(ProvisionError, match="dev:/w/m.json: unreadable provisioning manifest.*delete it"):
        Manifest.from_json('{"format": "other"}', "dev:/w/m.json")


def test_stat_and_section_parsing():
    out = "@@files\n12 345 1700000000 755 /w/models/q/a b.txt\ngarbage\n@@end\n"
    sec = split_sections(out)
    [st] = parse_stat_lines(sec["files"])
    assert (st.inode, st.size, st.mtime, st.mode, st.path) == (12, 345, 1700000000, 0o755, "/w/models/q/a b.txt")


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_terminal_progress_shows_bytes_rate_and_eta():
    out, clock = io.StringIO(), _Clock()
    p = TerminalProgress(out, clock=clock)
    p.start("dev: model q", 100 << 20, 2)
    clock.t = 1.0
    p.advance(50 << 20)
    p.file_done("a")
    text = out.getvalue()
    assert "\r[" in text and "50.0 MiB/100.0 MiB" in text and "50.0 MiB/s" in text and "ETA 0:01" in text
    p.finish("done")
    assert out.getvalue().endswith("done\x1b[K\n")


def test_log_progress_is_quiet_lines():
    out, clock = io.StringIO(), _Clock()
    p = LogProgress(out, every_s=10, clock=clock)
    p.start("dev: model q", 1000, 3)
    for i in range(100):
        clock.t = i * 0.5
        p.advance(10)
    p.finish("dev: 3 files pushed")
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert lines[0] == "dev: model q: pushing 3 files, 1000 B" and lines[-1] == "dev: 3 files pushed"
    assert 3 <= len(lines) <= 8  # a line every 10 s over 50 s, not one per chunk


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_make_progress_picks_by_tty_and_ci():
    assert isinstance(make_progress(_Tty(), env={}), TerminalProgress)
    assert isinstance(make_progress(_Tty(), env={"CI": "true"}), LogProgress)
    assert isinstance(make_progress(io.StringIO(), env={}), LogProgress)
    assert isinstance(make_progress(_Tty(), env={"CI": "false"}), TerminalProgress)
