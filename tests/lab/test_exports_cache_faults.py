"""The export cache under adversarial conditions (issue 36): host faults are never sealed, a live
run's entries are never evicted, a malformed entry anywhere is skipped and named, a symlinked
subfolder of an input is followed (cycles walked once), the bytes served are the bytes sealed,
and an entry whose failure lacks its fields is rebuilt (with or without --rebuild-exports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from exportkit import FAKE_ARGV, fake_env, run_stage, runs, write_exports_plan

from harness.lab.exports import ENTRY_FILE, USED_FILE
from harness.lab.plan import load_plan


def _plan(folder, **build):
    folder.mkdir(exist_ok=True)
    b = {"model": "tiny", "command": FAKE_ARGV, "targets": ["SM8650"], "formats": ["8a8w"],
         "inputs": ["recipe.txt"], "timeout_s": 60, **build}
    return load_plan(write_exports_plan(folder, builds=[b]))


@pytest.mark.parametrize("mode, words", [("nospace", "disk is full"), ("sigterm", "SIGTERM from outside")])
def test_host_faults_are_never_sealed(tmp_path, mode, words):
    plan = _plan(tmp_path)
    stage, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path, f"sm8650-8a8w={mode}"))
    rec = stage.records[0]
    assert (rec.status, rec.failure_class) == ("failed", "export-host-fault") and words in rec.message, rec.message
    assert not (tmp_path / "cache" / "entries").is_dir() or not any((tmp_path / "cache" / "entries").iterdir())
    stage, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path), out="o2")
    assert stage.results[0].ok and len(runs(tmp_path)) == 2, "the next night builds again"


def test_a_live_runs_entries_are_never_evicted(tmp_path):
    night = _plan(tmp_path / "a")
    live, _ = run_stage(night, tmp_path, env=fake_env(tmp_path), hold=True)  # this process: a night still running
    other = _plan(tmp_path / "b", targets=["SA8295"])
    object.__setattr__(other.exports, "cache_max_bytes", 1)
    run_stage(other, tmp_path, env=fake_env(tmp_path), out="o2")
    entries = tmp_path / "cache" / "entries"
    assert (entries / live.results[0].key).is_dir(), "the live night's entry stayed"
    # A lease of a process that is gone holds nothing.
    code = ("import sys; from pathlib import Path; from harness.lab.exports import Leases; "
            "Leases(Path(sys.argv[1])).hold([sys.argv[2]])")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "cache" / "leases"), live.results[0].key],
                   check=True, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    from harness.lab.exports import Leases

    Leases(tmp_path / "cache" / "leases").release([live.results[0].key])  # the night ended
    _, said = run_stage(other, tmp_path, env=fake_env(tmp_path), out="o3")
    assert not (entries / live.results[0].key).exists(), said
    assert not list((tmp_path / "cache" / "leases").iterdir()), "dead leases swept"


@pytest.mark.parametrize("junk", [{"bytes": "lots"}, ["a", "list"]])
def test_a_malformed_entry_anywhere_is_skipped_and_named(tmp_path, junk):
    plan = _plan(tmp_path)
    old = tmp_path / "cache" / "entries" / "0123456789abcdef0123456789abcdef"
    old.mkdir(parents=True)
    (old / ENTRY_FILE).write_text(json.dumps(junk))
    (old / USED_FILE).touch()
    object.__setattr__(plan.exports, "cache_max_bytes", 1)
    stage, said = run_stage(plan, tmp_path, env=fake_env(tmp_path))
    assert stage.results[0].ok
    assert any(str(old / ENTRY_FILE) in s and "skipped" in s for s in said), said


def test_a_symlinked_subfolder_of_an_input_is_followed_and_a_cycle_walked_once(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "layers.txt").write_text("12 layers\n")
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "shared").symlink_to(tmp_path / "real", target_is_directory=True)
    (recipes / "loop").symlink_to(recipes, target_is_directory=True)
    plan = _plan(tmp_path, inputs=["recipes"])
    run_stage(plan, tmp_path, env=fake_env(tmp_path))
    (tmp_path / "real" / "layers.txt").write_text("13 layers\n")
    stage, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path), out="o2")
    assert stage.results[0].ok and len(runs(tmp_path)) == 2, "a change under a linked folder rebuilds"


def test_the_bytes_served_are_the_bytes_sealed(tmp_path):
    plan = _plan(tmp_path)
    run_stage(plan, tmp_path, env=fake_env(tmp_path))
    first, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path), out="o1")  # a hit: its files' sha256 remembered
    pte = first.results[0].folder / "model.pte"
    st = pte.stat()
    data = bytearray(pte.read_bytes())
    data[-1] ^= 0xFF  # one byte flipped, size and mtime kept: the hash cache would not notice
    pte.write_bytes(bytes(data))
    os.utime(pte, ns=(st.st_atime_ns, st.st_mtime_ns))
    stage, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path), out="o2")
    r = stage.results[0]
    assert r.cache.value == "repaired" and "its files differ" in stage.records[0].message
    assert len(runs(tmp_path)) == 2


@pytest.mark.parametrize("rebuild", [False, True])
def test_an_entry_whose_failure_lacks_fields_is_rebuilt(tmp_path, rebuild):
    plan = _plan(tmp_path)
    first, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path, "sm8650-8a8w=traceback"))
    entry = tmp_path / "cache" / "entries" / first.results[0].key
    data = json.loads((entry / ENTRY_FILE).read_text())
    data["failure"] = {"message": "half an entry"}
    (entry / ENTRY_FILE).write_text(json.dumps(data))
    stage, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path), out="o2", rebuild=rebuild, stop=threading.Event())
    assert stage.results[0].ok and len(runs(tmp_path)) == 2


def test_an_invalid_export_is_named_as_the_command_wrote_it_not_by_its_gone_temp_folder(tmp_path):
    plan = _plan(tmp_path)
    stage, _ = run_stage(plan, tmp_path, env=fake_env(tmp_path, "sm8650-8a8w=random-pte"))
    rec = stage.records[0]
    assert (rec.status, rec.failure_class) == ("failed", "export-invalid"), rec.message
    assert "{out}/model.pte: not an ExecuTorch program" in rec.message, rec.message
    assert str(tmp_path / "cache") not in rec.message


def test_an_input_file_name_that_is_not_utf8_is_hashed_by_its_bytes(tmp_path):
    from harness.lab.exports import inputs_digest
    from harness.provision import HashCache

    recipes = tmp_path / "recipes"
    recipes.mkdir()
    with open(os.path.join(os.fsencode(recipes), b"caf\xe9.txt"), "w") as f:  # Latin-1, not UTF-8
        f.write("12 layers\n")
    first = inputs_digest([recipes], HashCache(None))
    os.rename(os.path.join(os.fsencode(recipes), b"caf\xe9.txt"), os.path.join(os.fsencode(recipes), b"caf\xe8.txt"))
    assert inputs_digest([recipes], HashCache(None)) != first, "a renamed input changes the key"


def test_concurrent_runs_of_one_key_build_it_once(tmp_path):
    plan = _plan(tmp_path)
    env = fake_env(tmp_path, "sm8650-8a8w=slow", FAKE_EXPORT_TIMES=str(tmp_path / "times.txt"))
    got = {}

    def night(out):
        got[out] = run_stage(plan, tmp_path, env=env, out=out)[0].results[0]

    threads = [threading.Thread(target=night, args=(f"o{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(runs(tmp_path)) == 1, "the second run waited for the first one's build"
    assert all(r.ok for r in got.values()) and {r.cache.value for r in got.values()} == {"miss", "hit"}
