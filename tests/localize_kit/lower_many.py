"""The child that makes several lowerings of the example exporter in one process (tests/localize_kit):
each job runs its script as `python SCRIPT ARGS...` would (runpy, as __main__), so torch and ExecuTorch
are imported once for all of them. A job's output folder is written under its temp name and renamed
when the exporter exits 0; a failed job leaves `<tmp>.err` with its exit and traceback, and the next
job runs.

usage: python lower_many.py '[{"script": ..., "args": [...], "tmp": ..., "out": ...}, ...]'
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import sys
import traceback
from pathlib import Path


def run_job(job: dict) -> bool:
    tmp, out = Path(job["tmp"]), Path(job["out"])
    shutil.rmtree(tmp, ignore_errors=True)
    err = tmp.with_name(tmp.name + ".err")
    err.unlink(missing_ok=True)
    argv, cwd = sys.argv, os.getcwd()
    sys.argv = [job["script"], *job["args"]]
    try:
        runpy.run_path(job["script"], run_name="__main__")
        code: object = 0
    except SystemExit as exc:  # the exporters end with sys.exit(main())
        code = exc.code or 0
    except Exception:  # one failed lowering must not stop the others
        code = traceback.format_exc()
    finally:
        sys.argv = argv
        os.chdir(cwd)  # lower_decoder.py works in its output folder
    if code != 0:
        err.write_text(f"{Path(job['script']).name} exited {code}")
        return False
    tmp.rename(out)
    print(f"lower_many: {out.name}", flush=True)
    return True


def main(argv: list[str]) -> int:
    results = [run_job(job) for job in json.loads(argv[0])]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
