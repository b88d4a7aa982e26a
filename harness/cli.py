"""`harness` console script: thin argument parsing over the library modules.

Every HarnessError becomes one line on stderr and exit code 2; no tracebacks for bad input.
"""

from __future__ import annotations

import argparse
import os
import posixpath
import sys
from pathlib import Path
from typing import Callable, Sequence

from harness.errors import HarnessError
from harness.inventory import Inventory, load_inventory

DEFAULT_DEVICES_FILE = "devices.yaml"


def _inventory(args: argparse.Namespace) -> Inventory:
    path = args.file or os.environ.get("HARNESS_DEVICES") or DEFAULT_DEVICES_FILE
    return load_inventory(path)


def cmd_devices(args: argparse.Namespace) -> int:
    inv = _inventory(args)
    rows = [("NAME", "TRANSPORT", "ADDRESS", "SOC", "SOC_ID", "ARCH", "VTCM", "WORK_DIR", "TAGS")]
    for d in inv.devices.values():
        if d.transport == "adb":
            address = f"{d.serial} @ {d.adb_server}" if d.adb_server else str(d.serial)
        elif d.transport == "ssh" and d.ssh:
            address = f"{d.ssh.user}@{d.ssh.host}:{d.ssh.port}"
        else:
            address = "-"
        rows.append((d.name, d.transport, address, d.soc_model, str(d.soc_id), d.htp_arch, f"{d.vtcm_mb}MB",
                     d.work_dir, ",".join(d.tags)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    from harness.provision import provision_model, provision_runtime
    from harness.transport import open_transport

    if not args.model_dir and not args.runtime:
        raise HarnessError("harness push: nothing to push; give a model folder and/or --runtime DIR")
    if args.qnn_sdk and not args.runtime:
        raise HarnessError("harness push: --qnn-sdk goes with --runtime DIR (the QNN libraries are pushed beside "
                           "the runner)")
    device = _inventory(args).get(args.device)
    if args.qnn_sdk and not device.has_htp:
        raise HarnessError(f"harness push: {device.name} is the host (soc: host), it has no HTP; drop --qnn-sdk")
    with open_transport(device) as transport:
        if args.runtime:
            # QNN libraries are required when asked for (--qnn-sdk), taken when the folder has them.
            rt = provision_runtime(transport, Path(args.runtime), qnn_sdk=Path(args.qnn_sdk) if args.qnn_sdk else None,
                                   need_qnn=bool(args.qnn_sdk), qnn_sdk_option="harness push --qnn-sdk")
            what = f"QNN {rt.htp_arch}" if rt.qnn else "CPU only: no QNN libraries (harness push --qnn-sdk SDK adds them)"
            print(f"{device.name}: {rt.remote_dir}: {rt.files_sent} files, {rt.bytes_sent} bytes sent "
                  f"({posixpath.basename(rt.runner)}, {what})")
        if args.model_dir:
            result = provision_model(transport, Path(args.model_dir))
            print(f"{device.name}: {result.remote_dir}: {result.files_sent} files, {result.bytes_sent} bytes sent")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from harness.provision import device_status
    from harness.transport import open_transport

    device = _inventory(args).get(args.device)
    with open_transport(device) as transport:
        print(device_status(transport))
    return 0


def cmd_lab_run(args: argparse.Namespace) -> int:
    from harness.lab.cli import run_from_cli

    return run_from_cli(_inventory(args), Path(args.plan), Path(args.out), lock_dir=args.lock_dir)


def cmd_lab_status(args: argparse.Namespace) -> int:
    from harness.lab.status import lab_status

    print(lab_status(_inventory(args), Path(args.lock_dir)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness", description="On-device LLM test harness for QNN/HTP NPUs")
    parser.add_argument("--file", "--devices-file", dest="file", help="inventory file (default: ./devices.yaml "
                        "or $HARNESS_DEVICES)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("devices", help="list the inventory with resolved SoC facts")
    p.add_argument("--file", "--devices-file", dest="file", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("push", help="provision an exported model and/or a runtime on a device (incremental)")
    p.add_argument("--device", required=True)
    p.add_argument("--file", "--devices-file", dest="file", default=argparse.SUPPRESS)
    p.add_argument("--runtime", metavar="DIR", help="runtime folder (llm_demo or qnn_llama_runner and its libraries; "
                   "a build tree is fine: libraries are found by the runner's ELF NEEDED entries)")
    p.add_argument("--qnn-sdk", metavar="SDK", help="QNN SDK root: push the QNN libraries for the device's HTP arch "
                   "(needed only for QNN backends)")
    p.add_argument("model_dir", nargs="?", help="exported model folder")
    p.set_defaults(func=cmd_push)

    p = sub.add_parser("status", help="what is provisioned on a device, from its manifest")
    p.add_argument("--device", required=True)
    p.add_argument("--file", "--devices-file", dest="file", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_status)

    lab = sub.add_parser("lab", help="nightly lab runs")
    lab_sub = lab.add_subparsers(dest="lab_command", required=True)
    p = lab_sub.add_parser("run", help="run a plan over every matching device in parallel")
    p.add_argument("--plan", required=True)
    p.add_argument("--out", default="lab-out", help="folder for records, JUnit, history and HTML")
    p.add_argument("--lock-dir", default=os.environ.get("HARNESS_LOCK_DIR", ".harness-locks"))
    p.add_argument("--file", "--devices-file", dest="file", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_lab_run)
    p = lab_sub.add_parser("status", help="devices, health and who holds which lock")
    p.add_argument("--lock-dir", default=os.environ.get("HARNESS_LOCK_DIR", ".harness-locks"))
    p.add_argument("--file", "--devices-file", dest="file", default=argparse.SUPPRESS)
    p.set_defaults(func=cmd_lab_status)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except HarnessError as exc:
        print(f"harness: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
