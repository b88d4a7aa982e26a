"""`harness` console script: thin argument parsing over the library modules.

Every HarnessError becomes one line on stderr, no traceback for bad input. Exit codes follow
pytest's convention and are decided in one place, harness/lab/exitcodes.py: 0 ok, 1 tests or
the command's work failed, 2 interrupted, 3 internal error, 4 usage/plan/inventory error,
5 nothing ran. argparse's usage errors exit 4 too (not argparse's 2: 2 means interrupted).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import posixpath
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from harness.errors import HarnessError
from harness.inventory import Inventory, load_inventory
from harness.lab import ExitCode, for_error

DEFAULT_DEVICES_FILE = "devices.yaml"
DEFAULT_LOCK_TIMEOUT_S = 600.0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(int(ExitCode.USAGE_ERROR), f"{self.prog}: error: {message}\n")


def _say(message: str) -> None:
    print(f"harness: {message}", file=sys.stderr, flush=True)


def _inventory(args: argparse.Namespace) -> Inventory:
    path = args.file or os.environ.get("HARNESS_DEVICES") or DEFAULT_DEVICES_FILE
    return load_inventory(path)


def cmd_devices(args: argparse.Namespace) -> int:
    inv = _inventory(args)
    rows = [("NAME", "TRANSPORT", "ADDRESS", "SOC", "SOC_ID", "ARCH", "VTCM", "WORK_DIR", "TAGS")]
    for d in inv.devices.values():
        address = d.transport.address(d)
        if d.has_htp:
            facts = (str(d.soc_id), d.htp_arch, f"{d.vtcm_mb}MB")
        else:
            facts = ("-", "-", "-")  # the host: no Qualcomm SoC
        rows.append((d.name, d.transport.name, address, d.soc_model, *facts, d.work_dir, ",".join(d.tags)))
    from harness.report import text_table

    print(text_table(rows))
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    from harness.lab import UsageError, claim_dir, open_claim
    from harness.provision import provision_model
    from harness.transport import open_transport

    if not args.model_dir and not args.runtime:
        raise UsageError("harness push: nothing to push; give a model folder and/or --runtime DIR")
    if args.qnn_sdk and not args.runtime:
        raise UsageError("harness push: --qnn-sdk goes with --runtime DIR (the QNN libraries are pushed beside "
                           "the runner)")
    inventory = _inventory(args)
    device = inventory.get(args.device)
    if args.qnn_sdk and not device.has_htp:
        raise UsageError(f"harness push: {device.name} is the host (soc: host), it has no HTP; drop --qnn-sdk")
    # A push swaps files under whatever runs on the device: it waits for a night (or a pytest
    # session) that holds the device, and holds it while pushing.
    claim = open_claim(device, lock_dir=claim_dir(inventory, None, args.lock_dir),
                       run_id=f"push-{os.urandom(4).hex()}", purpose="push")
    try:
        spec = claim.acquire(args.lock_timeout, say=_say)
        with open_transport(spec) as transport:
            rt = None
            if args.runtime:
                from harness.provision import provision_runtime  # pyelftools: only when asked for

                # QNN libraries are required when asked for (--qnn-sdk), taken when the folder has them.
                rt = provision_runtime(transport, Path(args.runtime),
                                       qnn_sdk=Path(args.qnn_sdk) if args.qnn_sdk else None,
                                       need_qnn=bool(args.qnn_sdk), qnn_sdk_option="harness push --qnn-sdk")
                what = (f"QNN {rt.htp_arch}" if rt.qnn else "CPU only: the host has no HTP" if not device.has_htp
                        else "CPU only: no QNN libraries (harness push --qnn-sdk SDK adds them)")
                print(f"{device.name}: {rt.remote_dir}: {rt.files_sent} files, {rt.bytes_sent} bytes sent "
                      f"({posixpath.basename(rt.runner)}, {what})")
            if args.model_dir:
                result = provision_model(transport, Path(args.model_dir), qnn_sdk=args.qnn_sdk,
                                         runtime_qairt_build=rt.qairt_build if rt else None)
                print(f"{device.name}: {result.remote_dir}: {result.files_sent} files, {result.bytes_sent} bytes sent")
    finally:
        claim.release()
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from harness.provision import device_status
    from harness.transport import open_transport

    device = _inventory(args).get(args.device)
    with open_transport(device) as transport:
        print(device_status(transport))
    return 0


def cmd_lab_run(args: argparse.Namespace) -> int:
    from harness.bisect import night_hook
    from harness.lab import run_from_cli

    inventory = _inventory(args)
    return run_from_cli(inventory, Path(args.plan), Path(args.out), lock_dir=args.lock_dir,
                        fail_on_regression=args.fail_on_regression, rebuild_exports=args.rebuild_exports,
                        after=night_hook(inventory, bundle_files=args.bundle_files, say=_say))


def cmd_export(args: argparse.Namespace) -> int:
    from harness.lab.exports import export_from_cli

    # The inventory only matters for `targets: lab`; a workstation may have none.
    path = args.file or os.environ.get("HARNESS_DEVICES") or DEFAULT_DEVICES_FILE
    inventory = load_inventory(path) if Path(path).is_file() else None
    return export_from_cli(Path(args.plan), Path(args.out), inventory=inventory, target=args.target,
                           fmt=args.format, rebuild=args.rebuild_exports)


def cmd_lab_status(args: argparse.Namespace) -> int:
    from harness.lab import claim_dir, lab_status
    from harness.lab.plan import load_plan

    inventory = _inventory(args)
    plan = load_plan(args.plan) if args.plan else None
    lock_dir = claim_dir(inventory, plan.locks.dir if plan else None, args.lock_dir)
    print(f"claims in {lock_dir}")
    # The plan's pool bounds the health probes too (harness/lab/pool.py).
    print(lab_status(inventory, lock_dir, workers=plan.concurrency.workers if plan else None))
    return 0


def cmd_bisect(args: argparse.Namespace) -> int:
    from harness.bisect import run_from_cli

    return run_from_cli(args, _inventory(args))


def cmd_replay(args: argparse.Namespace) -> int:
    from harness.replay import run_from_cli

    return run_from_cli(args, _inventory(args))


def _lock_dir_option(p: argparse.ArgumentParser) -> None:
    # Default None: an unset option must not shadow the plan's `locks.dir` (harness/lab/claims.py).
    p.add_argument("--lock-dir", default=None, help="device claim folder (default: $HARNESS_LOCK_DIR, else the "
                   "plan's locks.dir, else locks/ beside devices.yaml)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="harness", description="On-device LLM test harness for QNN/HTP NPUs",
                     epilog="exit codes: 0 ok, 1 failed, 2 interrupted, 3 internal error, "
                            "4 usage/plan/inventory error, 5 nothing ran")
    parser.add_argument("--file", "--devices-file", dest="file", help="inventory file (default: ./devices.yaml "
                        "or $HARNESS_DEVICES)")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("devices", help="list the inventory with resolved SoC facts")
    p.add_argument("--file", "--devices-file", dest="file", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("push", help="provision an exported model and/or a runtime on a device (incremental)")
    p.add_argument("--device", required=True)
    _lock_dir_option(p)
    p.add_argument("--lock-timeout", type=float, default=DEFAULT_LOCK_TIMEOUT_S, metavar="SECONDS",
                   help="wait this long for a run holding the device, then give up with exit 1 (default 600)")
    p.add_argument("--file", "--devices-file", dest="file", default=argparse.SUPPRESS)
    p.add_argument("--runtime", metavar="DIR", help="runtime folder (llm_demo or qnn_llama_runner and its libraries; "
                   "a build tree is fine: libraries are found by the runner's ELF NEEDED entries)")
    p.add_argument("--qnn-sdk", metavar="SDK", help="QNN SDK root: push the QNN libraries for the device's HTP arch "
                   "(needed only for QNN backends), and read the export's compiled soc_id/arch from its "
                   "context binaries (qnn-context-binary-utility)")
    p.add_argument("model_dir", nargs="?", help="exported model folder")
    p.set_defaults(func=cmd_push)

    p = sub.add_parser("status", help="what is provisioned on a device, from its manifest")
    p.add_argument("--device", required=True)
    p.add_argument("--file", "--devices-file", dest="file", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("export", help="run only a plan's exports (the night's first stage), on this host")
    p.add_argument("--plan", required=True)
    p.add_argument("--target", metavar="SOC", help="only this SoC's exports")
    p.add_argument("--format", metavar="F", help="only this format's exports")
    p.add_argument("--out", default="export-out", help="folder for records, JUnit and the exports' logs")
    p.add_argument("--rebuild-exports", action="store_true", help="build even when the export cache has it")
    p.add_argument("--file", "--devices-file", dest="file", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_export)

    from harness.bisect import add_parser as add_bisect
    from harness.replay import add_parser as add_replay

    add_bisect(sub).set_defaults(func=cmd_bisect)
    add_replay(sub).set_defaults(func=cmd_replay)

    lab = sub.add_parser("lab", help="nightly lab runs")
    lab_sub = lab.add_subparsers(dest="lab_command", required=True, parser_class=_Parser)
    p = lab_sub.add_parser("run", help="run a plan over every matching device in parallel")
    p.add_argument("--plan", required=True)
    p.add_argument("--out", default="lab-out", help="folder for records, JUnit, history and HTML")
    _lock_dir_option(p)
    p.add_argument("--no-fail-on-regression", dest="fail_on_regression", action="store_false",
                   help="a flagged regression is reported but does not make the exit code 1")
    p.add_argument("--rebuild-exports", action="store_true",
                   help="build the plan's exports even when the export cache has them")
    p.add_argument("--bundle-files", action="store_true",
                   help="copy the pushed files into each failed cell's repro bundle (default: their sha256 only)")
    p.add_argument("--file", "--devices-file", dest="file", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_lab_run)
    p = lab_sub.add_parser("status", help="devices, health and who holds which lock")
    p.add_argument("--plan", default=None, help="read the claim folder from this plan's locks.dir")
    _lock_dir_option(p)
    p.add_argument("--file", "--devices-file", dest="file", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_lab_status)
    return parser


def _raise_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _stdout_lost(exc: OSError) -> bool:
    """Whether `exc` is the command's own output failing (`| head` closed the pipe, `> /dev/full`):
    the host's doing, not a bug. stdout is pointed at /dev/null so the exit flush cannot fail too."""
    if exc.filename is not None or exc.errno not in (errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):
        return False
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if exc.errno != errno.EPIPE:  # a reader that stopped reading wanted no more: nothing to say
        print(f"harness: the command's output (stdout) could not be written: {exc.strerror}", file=sys.stderr)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    # SIGTERM (a CI job cancelled) ends a command as Ctrl-C does: claims released in
    # `finally`, exit 2. A night handles both signals itself while it runs.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        code = int(func(args))
        sys.stdout.flush()  # here, not at exit: a full disk or a closed pipe is said, not ignored
        return code
    except HarnessError as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return int(for_error(exc))
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except Exception as exc:  # a harness bug: say so, keep the traceback for the report
        if isinstance(exc, OSError) and _stdout_lost(exc):
            return int(ExitCode.TESTS_FAILED)
        import traceback  # only on this path: ~9 ms of start-up otherwise

        traceback.print_exc()
        print(f"harness: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return int(for_error(exc))
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
