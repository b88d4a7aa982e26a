"""`python -m harness.qnn.compiled_io PTE|BIN|EXPORT_DIR [--json] [--qnn-sdk DIR]` prints what the
compiled QNN artifacts say: per context binary its `soc_model`, `htp_arch`, `qairt_build` and
graphs with their tensors (name, dims, datatype, encoding where the reader gives them), and which
source read them (`libQnnSystem`: the host's QAIRT library; else the SDK tool, the stub, the
sidecar). Exit 0 when everything named was read, 4 for bad input (a missing, truncated or
corrupt file, one no reader here can read), with a message naming the file (pytest's usage-error
code, as harness/lab/exitcodes.py decides for the harness's commands).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import soc
from harness.errors import ArtifactError
from harness.export import folder_contents
from harness.qnn.compat import loads_on
from harness.qnn.compiled_io.binaries import open_reader
from harness.qnn.compiled_io.qnnlib import binary_from_info, read_program
from harness.qnn.compiled_io.read import read_compiled_io
from harness.qnn.compiled_io.sdk import dump_context_binary, parse_context_dump, sdk_tool
from harness.qnn.compiled_io.types import ContextBinary, StubIO
from harness.qnn.host import auto_host_qnn, qairt_version_of
from harness.qnn.pte import is_pte

EXIT_OK = 0
EXIT_BAD_INPUT = 4


def binary_report(b: ContextBinary) -> dict[str, object]:
    """One binary as the CLI prints it (QNN's full view when libQnnSystem read it)."""
    info = soc.lookup_id(b.soc_id) if b.soc_id is not None else None
    out: dict[str, object] = {"path": b.path, "source": b.source, "soc_model": b.soc_id,
                           "soc": info.model if info else None, "htp_arch": b.dsp_arch, "qairt_build": b.qairt_build}
    if b.detail is not None:
        d = b.detail.to_json()
        out.update(context_blob_version=d["context_blob_version"], bytes=d["bytes"], graphs=d["graphs"])
        return out
    out["graphs"] = [{"name": g.name, "inputs": [{"name": k, "dims": list(v) if v is not None else None}
                                                 for k, v in g.inputs.items()],
                      "outputs": [{"name": k, "dims": list(v)} for k, v in g.outputs.items()]} for g in b.graphs]
    return out


def _single(path: Path, qnn_sdk: str | None) -> tuple[list[ContextBinary], str, list[str]]:
    """A .pte or a raw context binary: its binaries, the reader, the problems."""
    lib, reader = open_reader(qnn_sdk)
    problems: list[str] = []
    if lib is not None:
        if is_pte(path):
            prog: StubIO = read_program(path.parent, path.name, lib, problems)
            if not prog.binaries:
                problems.append(f"{path}: an ExecuTorch program without a QnnBackend delegate (nothing for QNN)")
            return list(prog.binaries), reader, problems
        return [binary_from_info(lib.read_file(path, str(path)), str(path), None, problems)], reader, problems
    tool = sdk_tool(qnn_sdk)
    if tool is None or is_pte(path):
        raise ArtifactError(f"{path}: nothing here can read it: {reader}, and "
                            f"{'no --qnn-sdk given' if not qnn_sdk else f'no qnn-context-binary-utility in {qnn_sdk}'}"
                            "; pip install 'harness[qnn]' (the host's QAIRT libraries) or pass --qnn-sdk DIR")
    return [parse_context_dump(dump_context_binary(tool, path), str(path), None)], f"{tool}", problems


def build_report(target: Path, qnn_sdk: str | None) -> dict[str, Any]:
    """The whole report for one input; ArtifactError for input nothing can read."""
    if not target.exists():
        raise ArtifactError(f"{target}: no such file or folder; pass a .pte, a context binary or an export folder")
    if target.is_dir():
        io = read_compiled_io(target, qnn_sdk=qnn_sdk)
        bins = [b for s in (*io.stubs.values(), *io.direct.values()) for b in s.binaries]
        report: dict[str, Any] = {"input": str(target), "kind": "export", "source": io.source, "reader": io.reader,
                                  "soc_model": io.target.soc_id, "htp_arch": io.target.dsp_arch,
                                  "target_source": io.target.source, "binaries": [binary_report(b) for b in bins],
                                  "problems": io.to_json()["problems"], "unread": dict(io.unread)}
    else:
        found, reader, problems = _single(target, qnn_sdk)
        socs = {b.soc_id for b in found}
        archs = {b.dsp_arch for b in found}
        report = {"input": str(target), "kind": "pte" if is_pte(target) else "binary",
                  "source": "+".join(dict.fromkeys(b.source for b in found)) or "none", "reader": reader,
                  "soc_model": socs.pop() if len(socs) == 1 else None,
                  "htp_arch": archs.pop() if len(archs) == 1 else None,
                  "binaries": [binary_report(b) for b in found], "problems": problems, "unread": {}}
    builds = sorted({b["qairt_build"] for b in report["binaries"] if b["qairt_build"]})
    report["qairt_build"] = builds[0] if len(builds) == 1 else (builds or None)
    report["problems"] += newer_than_reader(report["binaries"], reader_qairt(qnn_sdk))
    if target.is_dir():
        report["problems"] += folder_problems(target, report["binaries"])
    return report


def reader_qairt(qnn_sdk: str | None) -> str | None:
    """The QAIRT build of the host library that read the binaries (None without one)."""
    host, _why = auto_host_qnn(qnn_sdk)
    return host.qairt_build if host is not None else None


def newer_than_reader(binaries: list[dict[str, Any]], reader: str | None) -> list[str]:
    """Binaries a newer QAIRT built than the reader's: this QAIRT reads their header but will not
    load them (docs/qnn-compat.md: a binary loads iff its QAIRT is not newer than the runtime's)."""
    out = []
    for b in binaries:
        if loads_on(b.get("qairt_build"), reader) is False:
            out.append(f"{b['path']}: built by QAIRT {qairt_version_of(b['qairt_build'])} ({b['qairt_build']}), "
                       f"newer than this reader's QAIRT {qairt_version_of(reader or '')}: a QAIRT "
                       f"{qairt_version_of(reader or '')} runtime will not load it (`Using newer context binary on "
                       f"old SDK`); it needs a runtime of QAIRT {qairt_version_of(b['qairt_build'])} or newer")
    return out


def folder_problems(target: Path, binaries: list[dict[str, Any]]) -> list[str]:
    """A folder: the binaries its records name that are not there, or nothing read at all."""
    named = [b["path"] for b in binaries]
    missing = [p for p in named if not (target / p).is_file() and "#" not in p]
    out = []
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        out.append(f"{target}: {len(missing)} of the {len(named)} context binaries its stub names are missing "
                   f"({shown}); only their names and shapes were read from the stub. Copy the export's qnn/ folder "
                   "whole (MNN's --generate_for_npu writes qnn/graph*.bin beside llm.mnn)")
    if not named:
        subs = sorted(f"{p.name}/" for p in target.iterdir()
                      if p.is_dir() and (any(p.glob("*.pte")) or any(p.glob("*.bin"))))
        where = f"; its programs and binaries are in {', '.join(subs)}: pass one of those files" if subs else ""
        out.append(f"{target}: read nothing: no export here (no .pte at its top, no qnn/graph*.bin, no llm.mnn "
                   f"stub); it holds {folder_contents(target)}{where}")
    return out


def _tensor_line(direction: str, t: dict[str, Any]) -> str:
    enc = t.get("encoding") or {}
    pairs = enc.get("scale_offset") or []
    quant = ""
    if enc.get("kind") not in (None, "none"):
        shown = ", ".join(f"{p['scale']:.6g}/{p['offset']}" for p in pairs[:2]) + (" ..." if len(pairs) > 2 else "")
        quant = f" {enc['kind']}" + (f" axis {enc['axis']}" if enc.get("axis") is not None else "") + f" ({shown})"
    return f"    {direction} {t['name']} {t['dims']} {t.get('dtype', '')}{quant}".rstrip()


def print_text(report: dict[str, Any]) -> None:
    print(f"{report['input']}: {report['kind']}, read by {report['source']} ({report['reader']}); target socModel "
          f"{report['soc_model']} HTP {report['htp_arch']}, QAIRT {report['qairt_build']}")
    for b in report["binaries"]:
        where = f"{b['soc']}, " if b.get("soc") else ""
        blob = f", context blob {b['context_blob_version']}" if b.get("context_blob_version") else ""
        print(f"  {b['path']}: socModel {b['soc_model']} ({where}HTP {b['htp_arch']}), QAIRT {b['qairt_build']}"
              f"{blob} [{b['source']}]")
        for g in b["graphs"]:
            print(f"   graph {g['name']}")
            for t in g["inputs"]:
                print(_tensor_line("in ", t))
            for t in g["outputs"]:
                print(_tensor_line("out", t))
    for kind, why in report["unread"].items():
        print(f"  not read ({kind}): {why}")
    for p in report["problems"]:
        print(f"  problem: {p}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.qnn.compiled_io",
                                     description="Print what compiled QNN artifacts say: target, QAIRT build, graphs.")
    parser.add_argument("input", type=Path, help="a .pte, a QNN context binary, or an export folder")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--qnn-sdk", default=None, help="QNN SDK root (its x86 libraries or its SDK tool)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_OK if exc.code == 0 else EXIT_BAD_INPUT
    try:
        report = build_report(args.input, args.qnn_sdk)
    except ArtifactError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_text(report)
    for p in report["problems"]:
        print(f"error: {p}", file=sys.stderr)
    return EXIT_BAD_INPUT if report["problems"] else EXIT_OK
