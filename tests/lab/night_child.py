"""Run a local night in its own process (for the Ctrl-C / SIGTERM tests): argv[1] is the
folder, argv[2] the number of devices (default 4). The transport's kill is slow (as adb's is on a busy device), so a scheduler that
stops waiting too early leaves device processes and holder records behind. Its last line,
printed by the first exit handler registered (so the last to run), says how many objects the
collector had frozen as the exit began (harness/lab/process_end.py)."""

import atexit
import gc
import json
import sys
import time
from pathlib import Path

atexit.register(lambda: print(json.dumps({"frozen_at_exit": gc.get_freeze_count()}), flush=True))

from labkit import FaultyLocal, ShellJob, Switch, write_inventory, write_plan  # noqa: E402

from harness.inventory import load_inventory  # noqa: E402
from harness.lab import for_night, run_night  # noqa: E402
from harness.lab.plan import load_plan  # noqa: E402
from harness.transport import NO_RETRY  # noqa: E402

KILL_DELAY_S = 1.5


class SlowKill(FaultyLocal):
    def kill(self, pid: int, sig: int = 9, wait_s: float = 5.0) -> bool:
        time.sleep(KILL_DELAY_S)
        return super().kill(pid, sig, wait_s)


def slow_factory(device):
    t = SlowKill(device, retry=NO_RETRY)
    t.switch = Switch()
    return t


root = Path(sys.argv[1])
n = int(sys.argv[2]) if len(sys.argv) > 2 else 4
inv = load_inventory(write_inventory(root, n))
plan = load_plan(write_plan(root))
pids = root / "pids"
job = ShellJob(scripts={(f"dev{i}", "cpu"): f"echo $$ >> {pids}; exec sleep 300" for i in range(n)})
night = run_night(plan, inv, root / "out", job, transport_factory=slow_factory)
print(json.dumps({"interrupted": night.interrupted, "statuses": {k: v.status for k, v in night.devices.items()},
                  "reports": {k: str(v) for k, v in night.reports.items()}}), flush=True)
sys.exit(for_night(night))
