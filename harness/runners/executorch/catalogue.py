"""What an ExecuTorch suite's `--model-dir` holds, per quant format (docs/executorch-runner.md#model-folders):

* one export (a folder with a .pte and its tokenizer): a CPU export (`cpu`) or a QNN one, its format
  named by its records (export_args.json `ptq`, build.json `recipe`), else `qnn` (format unrecorded);
* a folder of exports, one subfolder per format (`16a4w/`, `8a8w/`, `xnnpack/` ...);
* host QNN material (`pte/`, `llm/`, `etdump/` holding `<name>.build.json` beside each .pte,
  as ../shared/models/et-qnn-host is laid out): for the device's SoC, each build's recipe is a
  format: `llm/` builds are runner-ready KV-cache programs (TextLLMRunner, tokenizer.json,
  `<name>.greedy_ref.json`), `pte/` builds forward programs (`<name>.input.npy`,
  `<name>.ref_fakequant.npy`), `etdump/` builds with `profile_level` >= 2 the profiled program.

The folder is only read. A format the folder lacks is simply absent (the check skips it with
the reason); a format the arch cannot build is quant_matrix's skip.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from harness.errors import ArtifactError, HarnessError
from harness.export import folder_contents
from harness.provision import load_export
from harness.runners.quant_matrix import QUANT_FORMATS

TOKENIZERS = ("tokenizer.json", "tokenizer.model", "tokenizer.bin")
UNRECORDED_QNN = "qnn"  # a single QNN export whose quant format no record names: its own testcase
# Where an export states its quant format: llama.py's `--ptq`, a build record's `recipe`.
_FORMAT_KEYS = ("recipe", "ptq", "quant", "quant_format", "quantization")


class ArtifactKind(enum.StrEnum):
    EXPORT = "export"  # an export folder: provisioned, run by the LLM runner with the suite's prompt
    LLM = "llm"  # a runner-ready KV program with its tokenizer and eager greedy tokens
    FORWARD = "forward"  # a forward program with its sample input and fake-quant reference


@dataclass(frozen=True)
class EtArtifact:
    name: str  # the format ("16a4w") or the export's folder name ("xnnpack")
    kind: ArtifactKind
    folder: Path
    pte: Path | None = None
    tokenizer: Path | None = None
    greedy_ref: Path | None = None
    inputs: tuple[Path, ...] = ()
    reference: Path | None = None
    etrecord: Path | None = None
    build: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @cached_property
    def _loaded(self) -> tuple[bool, str]:
        """(uses QNN, the loader's error or "") read once."""
        try:
            if self.kind is not ArtifactKind.EXPORT:  # host QNN material is lowered for QNN (build.json says);
                return True, ""  # QNN itself judges a damaged one (corrupt-pte, tests/suites/...emulator_faults)
            return load_export(self.folder).uses_qnn, ""
        except HarnessError as exc:
            return False, str(exc)

    @property
    def uses_qnn(self) -> bool:
        return self._loaded[0]

    @property
    def problem(self) -> str:
        """Why its program cannot be run (a truncated or corrupt .pte: the loader's own words), or ""."""
        return self._loaded[1]


@dataclass(frozen=True)
class EtCatalogue:
    source: Path
    formats: dict[str, EtArtifact]  # QNN formats and CPU exports, by name
    profiled: EtArtifact | None = None  # a program compiled with profiling, for the ETDump
    soc: str | None = None  # the SoC host material was chosen for

    def declaring(self, fmt: str | None) -> EtCatalogue:
        """A lone QNN export whose records name no format (`qnn`) taken as format `fmt`, the user's
        declaration (--export-format; docs/executorch-reference.md#a-foreign-exports-format)."""
        art = self.formats.get(UNRECORDED_QNN)
        if fmt is None or art is None:
            return self
        others = {n: a for n, a in self.formats.items() if n != UNRECORDED_QNN}
        return replace(self, formats={**others, fmt: replace(art, name=fmt)})

    def qnn(self, fmt: str) -> EtArtifact | None:
        found = self.formats.get(fmt)
        return found if found is not None and found.uses_qnn else None

    def cpu_exports(self) -> dict[str, EtArtifact]:
        return {n: a for n, a in self.formats.items()
                if a.kind is ArtifactKind.EXPORT and n not in QUANT_FORMATS and not a.uses_qnn and not a.problem}

    def broken(self, names: Iterable[str] | None = None) -> dict[str, str]:
        """The formats (of `names`, else all) whose program does not load: name -> the loader's error."""
        wanted = self.formats if names is None else {n: self.formats[n] for n in names if n in self.formats}
        return {n: a.problem for n, a in wanted.items() if a.problem}

    @property
    def empty(self) -> bool:
        """Nothing the suite can run: no program of any format, no CPU export, no profiled build."""
        return not self.formats and self.profiled is None

    def nothing_to_run(self) -> str:
        where = f"{self.source}" + (f" for {self.soc}" if self.soc else "")
        return (f"--model-dir {where}: no program the ExecuTorch suite can run "
                f"(it holds {folder_contents(self.source)}); "
                "pass one export (a .pte and its tokenizer), a folder with one export per quant format, or host "
                "QNN material with builds for the device's SoC (docs/executorch-runner.md#model-folders)")

    def missing_reason(self, fmt: str) -> str:
        where = f"{self.source}" + (f" for {self.soc}" if self.soc else "")
        have = ", ".join(sorted(self.formats)) or "none"
        return f"no {fmt} program in {where} (have: {have})"


def _builds(folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for meta in sorted(folder.glob("*.build.json")):
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ArtifactError(f"{meta}: not readable as JSON ({exc}); regenerate it or remove the build") from None
        pte = meta.with_name(meta.name.removesuffix(".build.json") + ".pte")
        if isinstance(data, dict) and pte.is_file():
            out.append((pte, data))
    return out


def is_host_material(folder: Path) -> bool:
    return any((folder / sub).is_dir() and any((folder / sub).glob("*.build.json")) for sub in ("pte", "llm"))


def _sibling(pte: Path, suffix: str) -> Path | None:
    p = pte.with_name(pte.name.removesuffix(".pte") + suffix)
    return p if p.is_file() else None


def _host_material(folder: Path, soc: str) -> EtCatalogue:
    formats: dict[str, EtArtifact] = {}
    forward = [(p, b) for p, b in _builds(folder / "pte") if str(b.get("soc", "")).upper() == soc]
    for pte, b in forward:
        fmt, ref, inp = str(b.get("recipe", "")), _sibling(pte, ".ref_fakequant.npy"), _sibling(pte, ".input.npy")
        if fmt in QUANT_FORMATS and fmt not in formats and ref is not None and inp is not None:
            formats[fmt] = EtArtifact(fmt, ArtifactKind.FORWARD, pte.parent, pte, inputs=(inp,), reference=ref, build=b)
    tokenizer = folder / "llm" / "tokenizer.json"
    for pte, b in _builds(folder / "llm"):
        fmt, ref = str(b.get("recipe", "")), _sibling(pte, ".greedy_ref.json")
        if str(b.get("soc", "")).upper() == soc and fmt in QUANT_FORMATS and ref is not None and tokenizer.is_file():
            # The runner-ready program is the fuller test of a format: it takes the place of a forward one.
            formats[fmt] = EtArtifact(fmt, ArtifactKind.LLM, pte.parent, pte, tokenizer=tokenizer, greedy_ref=ref,
                                      build=b)
    return EtCatalogue(folder, formats, _profiled(folder, soc, forward), soc)


def _profiled(folder: Path, soc: str, forward: list[tuple[Path, dict[str, Any]]]) -> EtArtifact | None:
    """A profiled build for `soc`, with the input of the forward build of the same model."""
    same = ("model", "recipe", "soc", "dim", "layers", "seq", "vocab")
    for pte, b in _builds(folder / "etdump"):
        if str(b.get("soc", "")).upper() != soc or int(b.get("profile_level") or 0) < 2:
            continue
        twin = next((p for p, fb in forward if all(fb.get(k) == b.get(k) for k in same)), None)
        inp = _sibling(twin, ".input.npy") if twin is not None else None
        if inp is not None:
            return EtArtifact(str(b.get("recipe", "")), ArtifactKind.FORWARD, pte.parent, pte, inputs=(inp,),
                              reference=_sibling(twin, ".ref_fakequant.npy") if twin else None,
                              etrecord=_sibling(pte, ".etrecord"), build=b)
    return None


def _export(name: str, folder: Path) -> EtArtifact:
    tok = next((folder / t for t in TOKENIZERS if (folder / t).is_file()), None)
    return EtArtifact(name, ArtifactKind.EXPORT, folder, next(iter(sorted(folder.glob("*.pte"))), None), tokenizer=tok,
                      etrecord=next(iter(sorted(folder.glob("*etrecord*"))), None))


def recorded_format(folder: Path, pte: Path | None) -> str | None:
    """The quant format the export's own records name (export_args.json, build.json, the program's
    `<name>.build.json`), normalized; None when none does."""
    records = [folder / "export_args.json", folder / "build.json"]
    if pte is not None:
        records.append(pte.with_name(pte.name.removesuffix(".pte") + ".build.json"))
    for meta in records:
        if not meta.is_file():
            continue
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ArtifactError(f"{meta}: not readable as JSON ({exc}); fix or remove it") from None
        for scope in (data, data.get("qnn") if isinstance(data, dict) else None):
            if not isinstance(scope, dict):
                continue
            for key in _FORMAT_KEYS:
                value = scope.get(key)
                if isinstance(value, str) and value.strip().lower().removeprefix("use_") in QUANT_FORMATS:
                    return value.strip().lower().removeprefix("use_")
    return None


def holds_programs(folder: Path) -> bool:
    """Any program the suite could run, for any SoC: a .pte at the top, in a format subfolder, or
    in host material's pte/, llm/, etdump/ (the plan's check, before a device is known)."""
    return any(folder.glob("*.pte")) or any(folder.glob("*/*.pte"))


def read_catalogue(folder: Path, soc: str | None) -> EtCatalogue:
    """The formats `folder` holds (for `soc`, when it is host QNN material). ArtifactError when
    it is not a folder."""
    if not folder.is_dir():
        raise ArtifactError(f"{folder}: not a folder; pass --model-dir a folder of ExecuTorch exports")
    if is_host_material(folder):
        return _host_material(folder, (soc or "").upper())
    if any(folder.glob("*.pte")):
        one = _export(folder.name, folder)
        name = (recorded_format(folder, one.pte) or UNRECORDED_QNN) if one.uses_qnn else "cpu"
        return EtCatalogue(folder, {name: EtArtifact(name, one.kind, folder, one.pte, one.tokenizer,
                                                     etrecord=one.etrecord)})
    subs = {f.name: _export(f.name, f) for f in sorted(folder.iterdir()) if f.is_dir() and any(f.glob("*.pte"))}
    return EtCatalogue(folder, subs)


__all__ = ["TOKENIZERS", "UNRECORDED_QNN", "ArtifactKind", "EtArtifact", "EtCatalogue", "holds_programs",
           "is_host_material", "read_catalogue", "recorded_format"]
