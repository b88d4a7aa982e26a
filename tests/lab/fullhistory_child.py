"""Two nights through `harness lab run` with the history database on a small disk (argv[2], a
tmpfs the test mounted in a private namespace): the first starts with that disk full and no
history yet; the second starts with room, and its test fills the disk before the history is
written. Prints both exit codes as one JSON line; stderr carries each night's messages after a
`=== night N` line. argv[1]: a folder for the inventory, plan and outputs (not on the small disk)."""

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
plan = write_plan(root, history={"db": str(disk / "history.sqlite"), "min_nights": 1})


def fill() -> None:
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError:  # ENOSPC: full
        pass
    finally:
        os.close(fd)


def night(n: int) -> int:
    print(f"=== night {n}", file=sys.stderr, flush=True)
    return main(["--file", str(inv), "lab", "run", "--plan", str(plan), "--out", str(root / f"out{n}")])


fill()
lab_cli.plan_job = ShellJob()
first = night(1)
(disk / "filler").unlink()
lab_cli.plan_job = ShellJob(before={("dev0", "tiny[cpu]", 1): fill})
second = night(2)
print(json.dumps({"first": first, "second": second}), flush=True)
