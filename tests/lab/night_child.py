"""Run a 4-device local night in its own process (for the Ctrl-C test): argv[1] is the folder."""

import json
import sys
from pathlib import Path

from harness.inventory import load_inventory
from harness.lab.plan import load_plan
from harness.lab.scheduler import run_night
from labkit import ShellJob, Switch, faulty_factory, write_inventory, write_plan

root = Path(sys.argv[1])
inv = load_inventory(write_inventory(root, 4))
plan = load_plan(write_plan(root))
pids = root / "pids"
job = ShellJob(scripts={(f"dev{i}", "cpu"): f"echo $$ >> {pids}; exec sleep 300" for i in range(4)})
night = run_night(plan, inv, root / "out", job, transport_factory=faulty_factory(Switch()))
print(json.dumps({"interrupted": night.interrupted, "statuses": {k: v.status for k, v in night.devices.items()},
                  "reports": {k: str(v) for k, v in night.reports.items()}}), flush=True)
sys.exit(130 if night.interrupted else 0)
