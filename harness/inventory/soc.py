"""A device's SoC and HTP facts in devices.yaml (harness/inventory/load.py): filled from the SoC
table (harness/soc.py), where a written fact must agree with it, and `htp: emulator` for a
local device whose QNN cells run on the host's QAIRT HTP emulator."""

from __future__ import annotations

from collections.abc import Mapping

from harness import soc
from harness.inventory.context import Ctx, want
from harness.inventory.model import HTP_EMULATOR, HTP_MODES, TransportKind


def parse_htp(ctx: Ctx, raw: Mapping[str, object], transport: TransportKind, *, on_host: bool) -> str:
    """`htp: emulator` only on a device that is this host; such a device with an HTP SoC needs
    it (this host has no Hexagon DSP: its QNN cells can only run on QAIRT's x86 emulator)."""
    htp = want(ctx, raw, "htp", str)
    if htp is None:
        if on_host:
            raise ctx.fail("soc", f"{raw.get('soc')!r} on a local device: this host has no Hexagon HTP",
                           "add `htp: emulator` to run its QNN cells on the host's QAIRT HTP emulator "
                           "(pip install 'harness[qnn]'), or use `soc: host` for the CPU only")
        return ""
    if htp not in HTP_MODES:
        raise ctx.fail("htp", f"{htp!r} is not an HTP mode", f"use `htp: {HTP_EMULATOR}` (the only one)")
    if not on_host:
        raise ctx.fail("htp", f"`htp: {htp}` is set on a {transport} device",
                       "remove it: an adb or ssh device runs its own HTP; the emulator is for `transport: local`")
    return str(htp)


def soc_facts(ctx: Ctx, raw: Mapping[str, object], soc_model: str) -> tuple[str, int, str, int]:
    """(model, soc_id, HTP arch, VTCM MB): from the SoC table, where a written fact must agree
    with it, or all written out for an SoC the table lacks."""
    info = soc.lookup(soc_model)
    soc_id = want(ctx, raw, "soc_id", int)
    arch_raw = want(ctx, raw, "htp_arch", (str, int))
    vtcm = want(ctx, raw, "vtcm_mb", int)
    arch = None
    if arch_raw is not None:
        arch = soc.normalize_arch(arch_raw)
        if arch is None:
            raise ctx.fail("htp_arch", f"{arch_raw!r} is not an HTP arch",
                           f"use one of {', '.join(soc.HTP_ARCHES)}")
    if info is None:
        # An SoC outside the table is allowed when the facts are spelled out.
        missing = [k for k, v in (("soc_id", soc_id), ("htp_arch", arch), ("vtcm_mb", vtcm)) if v is None]
        if missing:
            raise ctx.fail("soc", f"{soc_model!r} is not in the SoC table (known: {', '.join(soc.known_models())})",
                           f"fix the model name or give {', '.join(missing)} explicitly")
        assert soc_id is not None and arch is not None and vtcm is not None
    else:
        soc_model = info.model
        if soc_id is not None and soc_id != info.soc_id:
            raise ctx.fail("soc_id", f"{soc_id} contradicts {info.model} (soc_id {info.soc_id})",
                           "remove soc_id (it is filled from the SoC table) or fix `soc`")
        if arch is not None and arch != info.htp_arch:
            raise ctx.fail("htp_arch", f"{arch} contradicts {info.model} (HTP {info.htp_arch})",
                           "remove htp_arch (it is filled from the SoC table) or fix `soc`")
        if vtcm is not None and vtcm != info.vtcm_mb:
            raise ctx.fail("vtcm_mb", f"{vtcm} contradicts {info.model} (VTCM {info.vtcm_mb} MB)",
                           "remove vtcm_mb (it is filled from the SoC table) or fix `soc`")
        soc_id, arch, vtcm = info.soc_id, info.htp_arch, info.vtcm_mb
    if vtcm <= 0:
        raise ctx.fail("vtcm_mb", f"{vtcm} is not a size", "give the VTCM size in MB, e.g. 8")
    return soc_model, soc_id, arch, vtcm
