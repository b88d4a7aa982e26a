"""What a runner binary needs from the dynamic linker, read from its ELF headers (pyelftools).

Only the facts provisioning uses: the `DT_NEEDED` sonames, the interpreter (`PT_INTERP`:
`/system/bin/linker64` on Android, `/lib64/ld-linux-x86-64.so.2` for glibc) and the machine,
so the system library folders of the device can be named (docs/runtimes.md), and whether the
file runs on the device's CPU at all: its ABI (`abi_of`) against the ABIs the device says it
runs (`device_abis`: Android's `ro.product.cpu.abilist`, else `uname -m`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.segments import InterpSegment

from harness.errors import ArtifactError

ELF_MAGIC = b"\x7fELF"
# Debian multiarch triplets by e_machine, for the glibc system folders.
_MULTIARCH = {"EM_X86_64": "x86_64-linux-gnu", "EM_AARCH64": "aarch64-linux-gnu", "EM_386": "i386-linux-gnu",
              "EM_ARM": "arm-linux-gnueabihf"}
# (e_machine, ELF class) -> the ABI name Android uses in ro.product.cpu.abilist.
_ABIS = {("EM_AARCH64", 64): "arm64-v8a", ("EM_ARM", 32): "armeabi-v7a", ("EM_X86_64", 64): "x86_64",
         ("EM_386", 32): "x86", ("EM_RISCV", 64): "riscv64"}
# Code for another processor than the CPU: Hexagon DSP skeletons (libQnnHtpV79Skel.so).
OFF_CPU_MACHINES = frozenset({"EM_QDSP6"})
# `uname -m` -> the ABIs that machine's Linux runs (a 64-bit ARM or x86 kernel usually runs
# the 32-bit ABI too: only what surely cannot run is refused).
_UNAME_ABIS = {"aarch64": ("arm64-v8a", "armeabi-v7a"), "arm64": ("arm64-v8a", "armeabi-v7a"),
               "armv8l": ("armeabi-v7a",), "armv7l": ("armeabi-v7a",), "armv6l": ("armeabi-v7a",),
               "x86_64": ("x86_64", "x86"), "amd64": ("x86_64", "x86"), "i686": ("x86",), "i586": ("x86",),
               "i386": ("x86",), "riscv64": ("riscv64",)}


@dataclass(frozen=True)
class ElfInfo:
    path: Path
    machine: str  # e_machine, e.g. "EM_AARCH64"
    elf_class: int  # 32 | 64
    interpreter: str | None  # None for a shared library
    needed: tuple[str, ...]

    @property
    def is_android(self) -> bool:
        """Linked against bionic: its interpreter is Android's linker."""
        return bool(self.interpreter and self.interpreter.startswith("/system/bin/linker"))


def is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == ELF_MAGIC
    except OSError:
        return False


def read_elf(path: Path) -> ElfInfo:
    """The dynamic-linking facts of one ELF file. ArtifactError for a damaged file."""
    try:
        with open(path, "rb") as fh:
            elf = ELFFile(fh)
            interp = None
            for seg in elf.iter_segments():
                if isinstance(seg, InterpSegment):   # what iter_segments yields for PT_INTERP
                    interp = seg.get_interp_name()
            needed: list[str] = []
            for sec in elf.iter_sections():
                if isinstance(sec, DynamicSection):
                    # pyelftools sets `needed` on DT_NEEDED tags with setattr; its stubs miss it.
                    needed += [t.needed for t in sec.iter_tags()  # type: ignore[attr-defined]  # pyelftools' DynamicTag attributes are set at run time
                               if t.entry.d_tag == "DT_NEEDED"]
            return ElfInfo(path, str(elf["e_machine"]), elf.elfclass, interp, tuple(needed))
    except (ELFError, OSError, ValueError) as exc:
        raise ArtifactError(f"{path}: cannot read its ELF headers ({exc}); is the file truncated? "
                            "copy it again from the build output") from None


def read_machine(path: Path) -> tuple[str, int]:
    """(e_machine, ELF class) from the file header alone. ArtifactError for a damaged file."""
    try:
        with open(path, "rb") as fh:
            elf = ELFFile(fh)
            return str(elf["e_machine"]), elf.elfclass
    except (ELFError, OSError, ValueError) as exc:
        raise ArtifactError(f"{path}: cannot read its ELF header ({exc}); is the file truncated? "
                            "copy it again from the build output") from None


def abi_of(machine: str, elf_class: int) -> str:
    """The ABI an ELF file needs, in Android's spelling (`arm64-v8a`), else its e_machine."""
    return _ABIS.get((machine, elf_class), f"{machine} ({elf_class}-bit)")


def device_abis(abilist: str, abi: str, uname_m: str) -> tuple[str, ...]:
    """The ABIs a device runs: Android's ro.product.cpu.abilist (ro.product.cpu.abi when the
    list is empty), else what its `uname -m` runs. Empty: the device did not say."""
    listed = [a.strip() for a in (abilist or abi).split(",") if a.strip()]
    if listed:
        return tuple(dict.fromkeys("armeabi-v7a" if a == "armeabi" else a for a in listed))
    return _UNAME_ABIS.get(uname_m.strip(), (uname_m.strip(),) if uname_m.strip() else ())


def system_lib_dirs(info: ElfInfo) -> tuple[str, ...]:
    """Where the device's dynamic linker finds system libraries for this binary (after
    LD_LIBRARY_PATH): bionic's default paths on Android, the multiarch folders for glibc."""
    bits = "64" if info.elf_class == 64 else ""
    if info.is_android:
        return (f"/system/lib{bits}", f"/vendor/lib{bits}", f"/apex/com.android.runtime/lib{bits}/bionic",
                f"/apex/com.android.runtime/lib{bits}", f"/system/apex/com.android.runtime/lib{bits}/bionic")
    triplet = _MULTIARCH.get(info.machine)
    dirs = [f"/lib/{triplet}", f"/usr/lib/{triplet}"] if triplet else []
    return tuple(dict.fromkeys(dirs + [f"/lib{bits}", f"/usr/lib{bits}", "/lib", "/usr/lib", "/usr/local/lib"]))


__all__ = ["ELF_MAGIC", "ElfInfo", "OFF_CPU_MACHINES", "abi_of", "device_abis", "is_elf", "read_elf", "read_machine",
           "system_lib_dirs"]
