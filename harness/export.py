"""The one reader of an export folder's records (docs/mnn-export-layout.md,
docs/qnn-export-artifacts.md): its runtime configs and the backend pair each runs (from the
config's content), the model type (from `llm_config.json`, never the folder name) and the
optional sidecar `qnn/export_manifest.json`.

Provisioning (`harness.provision.artifacts`) validates on top of it and raises; the shape checks
(`harness.checks.shapes`) turn the same `ExportFileError`s into findings; the compiled QNN IO
(`harness.qnn.compiled_io.read_compiled_io`) takes its sidecar from here; the pytest plugin and the
suites read pairs and model type through provisioning's `ModelArtifact`, which is built here.
Reading is lazy and cached per `ExportFolder`, so a caller pays only for what it asks.
"""

from __future__ import annotations

import enum
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ArtifactError
from harness.pairs import BackendPair

LLM_CONFIG = "llm_config.json"
# The sidecar's home is qnn/ (docs/qnn-export-artifacts.md#the-sidecar-qnnexport_manifestjson--source-sidecar);
# an export without a qnn/ folder (ExecuTorch) may keep it at the top.
SIDECAR_PATH = "qnn/export_manifest.json"
SIDECAR_NAMES = (SIDECAR_PATH, "export_manifest.json")
SIDECAR_FORMAT = "harness.qnn_export_manifest/1"
CONFIG_GLOB = "config*.json"  # a runtime config, as llm_demo takes it


class FileProblem(str, enum.Enum):
    MISSING = "missing"
    UNREADABLE = "unreadable"
    INVALID = "invalid"  # not JSON
    NOT_OBJECT = "not-object"


class ExportFileError(ArtifactError):
    """One of the export's JSON records cannot be used. `problem` says how, `detail` what the
    parser said, so a checker can report it as a finding instead of raising."""

    def __init__(self, message: str, path: Path, problem: FileProblem, detail: str) -> None:
        super().__init__(message)
        self.path = path
        self.problem = problem
        self.detail = detail


# A system turn written out literally in a chat template (ChatML, Llama 3): only plain text is
# taken, never anything built from template variables.
_SYSTEM_TURNS = (re.compile(r"<\|im_start\|>system\s*\n(.*?)<\|im_end\|>", re.S),
                 re.compile(r"<\|start_header_id\|>system<\|end_header_id\|>\s*(.*?)<\|eot_id\|>", re.S))


def default_system_turn(template: str) -> str:
    """The literal system prompt a chat template inserts when the conversation has none, or ""."""
    for pattern in _SYSTEM_TURNS:
        for m in pattern.finditer(template):
            text = m.group(1).strip()
            if text and not any(mark in text for mark in ("{{", "{%", "}}", "%}", "' +", "+ '")):
                return text
    return ""


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """A JSON object from the export, or ExportFileError naming the file and what to do."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ExportFileError(f"{path}: {what} is missing; re-export the model or copy the file in",
                              path, FileProblem.MISSING, "missing") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ExportFileError(f"{path}: cannot read {what} ({exc}); check the file's permissions",
                              path, FileProblem.UNREADABLE, str(exc)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExportFileError(f"{path}: {what} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                              f"{exc.msg}); fix or re-export it", path, FileProblem.INVALID, str(exc)) from None
    if not isinstance(data, dict):
        raise ExportFileError(f"{path}: {what} must be a JSON object, got {type(data).__name__}; re-export it",
                              path, FileProblem.NOT_OBJECT, type(data).__name__)
    return data


@dataclass(frozen=True)
class ExportConfig:
    """One runtime config (`config*.json`) and the pair its content runs."""

    name: str  # relative to the export root, as llm_demo is given it
    path: Path
    data: dict[str, object]
    pair: BackendPair


@dataclass(frozen=True)
class Sidecar:
    rel: str  # one of SIDECAR_NAMES
    path: Path
    data: dict[str, object]


@dataclass(frozen=True, eq=False)
class ExportFolder:
    """An export folder's records, read on first use. Raises ExportFileError for a record that
    is asked for and unusable; `root` must be a folder (`open_export` checks)."""

    root: Path

    @functools.cached_property
    def llm_config(self) -> dict[str, Any]:
        return read_json_object(self.root / LLM_CONFIG, LLM_CONFIG)

    @property
    def has_llm_config(self) -> bool:
        return (self.root / LLM_CONFIG).is_file()

    @property
    def model_type(self) -> str:
        """From llm_config.json's `model_type`, never the folder name."""
        value = self.llm_config.get("model_type")
        if not isinstance(value, str) or not value.strip():
            raise ArtifactError(f"{self.root / LLM_CONFIG}: key 'model_type' is missing or empty; the model type "
                                "is read from here (never from the folder name), re-export or add it")
        return value.strip()

    @property
    def program_model_type(self) -> str:
        """An ExecuTorch export's model type: the sidecar's `model_type` (or
        `decoder_model_version`), else llm_config.json's; "" when nothing records it."""
        sidecar = self.sidecar.data if self.sidecar is not None else {}
        found = sidecar.get("model_type") or sidecar.get("decoder_model_version") or ""
        if not found and self.has_llm_config:
            found = self.llm_config.get("model_type") or ""
        return str(found)

    @property
    def is_visual(self) -> bool:
        return bool(self.llm_config.get("is_visual"))

    @property
    def system_prompt(self) -> str:
        """The system prompt every answer is generated under, "" when none: the runtime key
        `system_prompt` (config.json, else llm_config.json), else the literal system turn the
        chat template adds when a conversation has none (SmolLM2's "You are a helpful AI
        assistant named SmolLM, ..."; docs/mnn-export-layout.md#system-prompt). The coherence
        check uses it to see an answer reading back its own context."""
        if not self.has_llm_config:
            return ""
        primary = self.root / "config.json"
        for data in ((read_json_object(primary, primary.name) if primary.is_file() else {}), self.llm_config):
            if isinstance(data.get("system_prompt"), str) and data["system_prompt"].strip():
                return str(data["system_prompt"]).strip()
        jinja = self.llm_config.get("jinja")
        template = jinja.get("chat_template") if isinstance(jinja, dict) else None
        return default_system_turn(template) if isinstance(template, str) else ""

    @functools.cached_property
    def config_names(self) -> tuple[str, ...]:
        """Every runtime config at the top of the export, sorted."""
        return tuple(sorted(p.name for p in self.root.glob(CONFIG_GLOB) if p.is_file()))

    @functools.cached_property
    def _read_configs(self) -> dict[str, ExportConfig]:
        return {}

    def config(self, name: str) -> ExportConfig:
        """One config by name (it need not match CONFIG_GLOB); its pair needs llm_config.json."""
        if name not in self._read_configs:
            path = self.root / name
            data = read_json_object(path, name)
            self._read_configs[name] = ExportConfig(name, path, data,
                                                    BackendPair.of_config(data, visual=self.is_visual))
        return self._read_configs[name]

    def configs(self) -> tuple[ExportConfig, ...]:
        return tuple(self.config(n) for n in self.config_names)

    @functools.cached_property
    def pairs(self) -> dict[BackendPair, str]:
        """Backend pair -> config file name, from each config's content, in the exporter's
        pair order. Two configs running the same pair: the one the exporter names so wins,
        else the first by name."""
        found: dict[BackendPair, str] = {}
        for cfg in self.configs():
            if cfg.pair not in found or cfg.name == cfg.pair.config_name:
                found[cfg.pair] = cfg.name
        return {p: found[p] for p in BackendPair.all(visual=self.is_visual) if p in found}

    @functools.cached_property
    def sidecars(self) -> tuple[Sidecar, ...]:
        """The sidecar records present (SIDECAR_NAMES order); ExportFileError for an unusable one."""
        out = []
        for rel in SIDECAR_NAMES:
            p = self.root / rel
            if p.is_file():
                out.append(Sidecar(rel, p, read_json_object(p, "the export manifest")))
        return tuple(out)

    @property
    def sidecar(self) -> Sidecar | None:
        return self.sidecars[0] if self.sidecars else None


def open_export(export_dir: Path | str) -> ExportFolder:
    """The export at export_dir; ArtifactError when it is not a folder."""
    root = Path(export_dir).expanduser()
    if not root.is_dir():
        raise ArtifactError(f"{root}: not a folder; pass the export's output folder (the one with config.json "
                            "or the .pte)")
    return ExportFolder(root)


def folder_contents(folder: Path, shown: int = 8) -> str:
    """What a folder holds, in a few words, for the message of a folder with nothing to read or run."""
    try:
        names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if not names:
        return "nothing (an empty folder)"
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


__all__ = [
    "CONFIG_GLOB",
    "LLM_CONFIG",
    "SIDECAR_FORMAT",
    "SIDECAR_NAMES",
    "SIDECAR_PATH",
    "ExportConfig",
    "ExportFileError",
    "ExportFolder",
    "FileProblem",
    "Sidecar",
    "open_export",
    "read_json_object",
    "folder_contents",
]
