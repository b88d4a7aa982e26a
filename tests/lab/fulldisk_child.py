"""Two nights through `harness lab run` into a small disk (argv[2], a tmpfs the test mounted in
a private namespace); the second night's last test fills the disk so its reports cannot be
written. Prints what stayed whole as one JSON line (the disk goes with the namespace).
argv[1]: a folder for the inventory, plan and history (not on the small disk)."""

import json
import os
import sys
from pathlib import Path

from labkit import ShellJob, write_inventory, write_plan

import harness.lab.cli as lab_cli
from harness.cli import main

root, disk = Path(sys.argv[1]), Path(sys.argv[2])
root.mkdir(parents=True, exist_ok=True)
inv = write_inventory(root, 1)
plan = write_plan(root, repeats=3, history={"db": str(root / "history.sqlite"), "min_nights": 1})
out = disk / "night"
argv = ["--file", str(inv), "lab", "run", "--plan", str(plan), "--out", str(out)]
KEPT = ("junit.xml", "report.html", "junit/dev0.xml")


def fill(leave: int = 4096) -> None:
    """Fill the disk up to `leave` bytes: room for a record line, none for a report."""
    with open(disk / "filler", "ab") as fh:
        while (free := os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize) > leave:
            fh.write(b"\0" * min(free - leave, 1 << 16) or b"\0")
            fh.flush()
            os.fsync(fh.fileno())


lab_cli.plan_job = ShellJob()
first = main(argv)
before = {name: (out / name).read_bytes() for name in KEPT}
lab_cli.plan_job = ShellJob(before={("dev0", "tiny[cpu]", 1): fill})  # each repeat: the disk stays full
second = main(argv)
after = {name: (out / name).read_bytes() if (out / name).exists() else None for name in KEPT}
try:
    json.loads((out / "night.json").read_text())
    night_json_whole = True
except ValueError:
    night_json_whole = False
try:
    lines = (out / "records.jsonl").read_text().splitlines()
    records_whole = all(json.loads(line) for line in lines) and len(lines) == 12
except ValueError:
    records_whole = False
temp_files = sorted(str(p.relative_to(out)) for p in out.rglob(".*") if p.is_file())
print(json.dumps({"first": first, "second": second, "unchanged": {n: before[n] == after[n] for n in KEPT},
                  "temp_files": temp_files, "night_json_whole": night_json_whole, "records_whole": records_whole}),
      flush=True)
