"""What is provisioned on a device (`harness status`), each set checked against its manifest
without re-hashing, and removing a set."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.errors import ProvisionError, TransportError
from harness.provision.layout import DeviceLayout, safe_name
from harness.provision.progress import human_bytes
from harness.provision.scripts import STATUS_SCRIPT, parse_manifest_lines, parse_stat_lines, script_argv, split_sections
from harness.transport import RunsAndMovesFiles


@dataclass
class SetStatus:
    kind: str
    name: str
    remote_dir: str
    files: int
    bytes: int
    meta: dict[str, object] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def state(self) -> str:
        return "ok" if not self.problems else "damaged"


@dataclass
class StatusReport:
    device: str
    work_dir: str
    sets: list[SetStatus] = field(default_factory=list)
    stored_bytes: int = 0  # distinct contents (hard-linked files count once)
    unfinished: list[str] = field(default_factory=list)  # sets with a resume journal
    leftover_files: int = 0  # partial pushes under .incoming
    leftover_bytes: int = 0
    free_bytes: int | None = None

    @property
    def ok(self) -> bool:
        return all(not s.problems for s in self.sets)

    def __str__(self) -> str:
        free = human_bytes(self.free_bytes) if self.free_bytes is not None else "unknown"
        n = len(self.sets)
        lines = [f"{self.device}: {self.work_dir}: {n} set{'' if n == 1 else 's'}, "
                 f"{human_bytes(self.stored_bytes)} stored, {free} free"]
        if not self.sets:
            lines.append("  nothing provisioned")
        for st in self.sets:
            what = " ".join(str(x) for x in (st.meta.get("model_type") or st.meta.get("runner"),
                                             st.meta.get("htp_arch"), _qairt(st.meta)) if x)
            lines.append(f"  {st.kind:<8} {st.name:<32} {st.state:<8} {st.files:>4} files {human_bytes(st.bytes):>10}"
                         f"  {what}".rstrip())
            lines.extend(f"      ! {p}" for p in st.problems)
        if self.unfinished:
            lines.append(f"  unfinished pushes (provision again to resume): {', '.join(self.unfinished)}")
        if self.leftover_files:
            lines.append(f"  {self.leftover_files} partial files ({human_bytes(self.leftover_bytes)}) under "
                         f"{self.work_dir}/.incoming (removed by the next push after 2 hours)")
        return "\n".join(lines)


def _qairt(meta: Mapping[str, object]) -> str:
    """A runtime's QAIRT as its manifest records it (provision/runtime.py), for the status line."""
    from harness.qnn import qairt_version_of

    build = meta.get("qairt_build")
    return f"QAIRT {qairt_version_of(build)}" if isinstance(build, str) and build else ""


def device_status(transport: RunsAndMovesFiles) -> StatusReport:
    """What is provisioned on a device, each set checked against its manifest (no re-hashing)."""
    device = transport.device
    res = transport.shell(script_argv(STATUS_SCRIPT, [device.work_dir]))
    sec = split_sections(res.stdout)
    report = StatusReport(device=device.name, work_dir=device.work_dir)
    files = {st.path: st for st in parse_stat_lines(sec.get("files", []))}
    for path, m in parse_manifest_lines(sec.get("manifests", []), device.name):
        if isinstance(m, ProvisionError):
            report.sets.append(SetStatus("?", posixpath.basename(path), "", 0, 0, problems=[str(m)]))
            continue
        st = SetStatus(m.kind, m.name, m.remote_dir, len(m.files), m.total_bytes, meta=dict(m.meta))
        for rel, entry in sorted(m.files.items()):
            got = files.get(posixpath.join(m.remote_dir, rel))
            stamp = m.device.get(rel)
            if got is None:
                st.problems.append(f"{rel}: missing")
            elif got.size != entry.size:
                st.problems.append(f"{rel}: {got.size} bytes, manifest says {entry.size}")
            elif stamp is not None and (got.inode, got.mtime) != (stamp.inode, stamp.mtime):
                st.problems.append(f"{rel}: changed on the device since it was provisioned")
        report.sets.append(st)
    report.stored_bytes = sum({st.inode: st.size for st in files.values()}.values())
    report.unfinished = sorted(posixpath.basename(p)[: -len(".journal")] for p in sec.get("journals", [])
                               if p.endswith(".journal"))
    leftovers = parse_stat_lines(sec.get("incoming", []))
    report.leftover_files, report.leftover_bytes = len(leftovers), sum(x.size for x in leftovers)
    try:
        report.free_bytes = transport.free_bytes(device.work_dir)
    except TransportError:
        report.free_bytes = None
    report.sets.sort(key=lambda s: (s.kind, s.name))
    return report


def remove_set(transport: RunsAndMovesFiles, kind: str, name: str) -> None:
    """Remove a provisioned set (its manifest first, so a half-removed set is never trusted).
    Contents other sets share stay: they are hard links."""
    layout = DeviceLayout(transport.device.work_dir, kind, safe_name(name))
    transport.remove(layout.manifest, layout.journal)
    transport.remove(layout.set_dir, recursive=True)



__all__ = ["SetStatus", "StatusReport", "device_status", "remove_set"]
