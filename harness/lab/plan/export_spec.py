"""A plan's `exports:` as data: the user's export commands, their targets, formats and inputs, and
the stage's settings (docs/exports.md). Parsing and validation live in `exports.py`; this module
only holds the types and the one place a command's placeholders are filled in.

```yaml
exports:
  parallel: 2                   # default: from the host's cores and memory (`default_parallel`)
  cache: {max_gb: 20}           # LRU bound of the export cache (beside the hash cache)
  builds:
    - model: tiny-decoder       # the model name the suites use
      kind: executorch
      command: [python, lower_decoder.py, --soc, "{soc}", --format, "{format}", --out, "{out}"]
      targets: [SM8650, SA8295] # or `lab`: every SoC the plan's devices have
      formats: [16a4w, 8a8w]
      inputs: [lower_decoder.py, debug_program.py, plant_fault.py]  # and what it imports from beside it
      timeout_s: 1800
      env: {PYTHONHASHSEED: "0"}
      qnn_host: true            # run with the host QNN's environment (harness/qnn/host.py)
      debug_args: [--debug-program]  # the exporter's arguments for its debug build (docs/exports.md#debug-builds)
      debug: true               # build it every night; else only when a suite of the model has `localize: true`
```
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness import soc

# A command's first word naming "the" Python: the interpreter the harness runs on (docs/exports.md),
# so a plan works from any environment (a venv's harness called by path, PATH without the venv).
PYTHON_WORDS = ("python", "python3")
# The placeholders a command may use, and nothing else.
PLACEHOLDERS = ("soc", "soc_id", "dsp_arch", "format", "out")
LAB_TARGETS = "lab"  # `targets: lab`: every SoC the plan's devices have
DEBUG_JOB = "debug"  # a debug build's testcase suffix (test_export[model-sm8650-16a8w-debug])
DEFAULT_TIMEOUT_S = 3600.0
# Where a plan's exported models point until the night's stage gives their folders a root.
UNBUILT_ROOT = Path("/exports-not-built-yet")
DEFAULT_CACHE_BYTES = 20 << 30
# Memory one export is given when the stage picks its parallelism: a tiny decoder takes ~0.5 GB to
# lower, a 0.6B model several; 4 GB a build keeps a lab host out of the OOM killer's way.
_BYTES_PER_BUILD = 4 << 30


@dataclass(frozen=True)
class Target:
    """One SoC an export is built for, with the facts its placeholders name."""

    soc: str  # SoC model, as the SoC table spells it (SM8650)
    soc_id: int
    dsp_arch: str  # v75

    @classmethod
    def of(cls, model: str) -> Target | None:
        info = soc.lookup(model)
        return None if info is None else cls(info.model, info.soc_id, info.htp_arch)

    @property
    def slug(self) -> str:
        return self.soc.lower()


@dataclass(frozen=True)
class ExportBuild:
    """One `exports.builds` entry: a command the user owns, run once per (target, format)."""

    model: str
    command: tuple[str, ...] | str  # argv, or one shell string when `shell`
    targets: tuple[str, ...]  # SoC models, or (LAB_TARGETS,)
    formats: tuple[str, ...]
    inputs: tuple[Path, ...] = ()
    kind: str = "executorch"
    timeout_s: float = DEFAULT_TIMEOUT_S
    env: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    shell: bool = False
    qnn_host: bool = False
    cwd: Path = Path(".")  # the plan's folder: relative paths in a command are taken from there
    label: str = ""  # where it came from in the plan ("exports.builds[0]"), for messages
    # The exporter's arguments for its debug build (docs/exports.md#debug-builds), appended to the
    # command; `debug`: the stage builds it (the plan's `debug: true`, or a suite of the model localizes).
    debug_args: tuple[str, ...] = ()
    debug: bool = False

    @property
    def lab_targets(self) -> bool:
        return self.targets == (LAB_TARGETS,)

    def argv(self, target: Target, fmt: str, out: Path, *, debug: bool = False) -> list[str]:
        """The command for one build (with `debug_args` appended for the debug build), placeholders
        filled in; a shell string's values are shlex-quoted, so no SoC, format or path is ever read
        as shell syntax."""
        values = {"soc": target.soc, "soc_id": str(target.soc_id), "dsp_arch": target.dsp_arch,
                  "format": fmt, "out": str(out)}
        extra = [arg.format(**values) for arg in self.debug_args] if debug else []
        if self.shell:
            assert isinstance(self.command, str)
            text = self.command.format(**{k: shlex.quote(v) for k, v in values.items()})
            text += "".join(" " + shlex.quote(arg) for arg in extra)
            first, sep, rest = text.lstrip().partition(" ")
            if first in PYTHON_WORDS:
                text = shlex.quote(sys.executable) + sep + rest
            return ["/bin/sh", "-c", text]
        argv = [part.format(**values) for part in self.command] + extra
        return [sys.executable, *argv[1:]] if argv and argv[0] in PYTHON_WORDS else argv

    def key_command(self) -> list[str] | str:
        """The command as the cache key sees it: the template, not one night's paths."""
        return self.command if isinstance(self.command, str) else list(self.command)


@dataclass(frozen=True)
class ExportJob:
    """One (build, target, format), plain or its debug build: one testcase, one cache entry."""

    build: ExportBuild
    target: Target
    format: str
    debug: bool = False  # the exporter's debug build (`debug_args` appended), beside the plain one

    @property
    def id(self) -> str:
        return f"{self.target.slug}-{self.format}" + (f"-{DEBUG_JOB}" if self.debug else "")

    def argv(self, out: Path) -> list[str]:
        return self.build.argv(self.target, self.format, out, debug=self.debug)

    @property
    def testcase(self) -> str:
        """Unique in a night: two builds (models) for one target and format are two testcases."""
        return f"test_export[{self.build.model}-{self.id}]"


@dataclass(frozen=True)
class ExportsSpec:
    """The plan's whole `exports:` section."""

    builds: tuple[ExportBuild, ...]
    parallel: int | None = None  # None: `default_parallel()`
    cache_max_bytes: int = DEFAULT_CACHE_BYTES

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(b.model for b in self.builds)

    def model_folders(self, root: Path = UNBUILT_ROOT) -> dict[str, tuple[Path, str]]:
        """Each exported model's folder template under `root` and its kind: one folder per SoC,
        each holding one folder per format; an MNN build of one format is that format's folder
        (llm_demo runs one export)."""
        def folder(b: ExportBuild) -> Path:
            one = b.kind == "mnn" and len(b.formats) == 1
            return root / b.model / "{soc}" / b.formats[0] if one else root / b.model / "{soc}"

        return {b.model: (folder(b), b.kind) for b in self.builds}

    def build_of(self, model: str) -> ExportBuild | None:
        return next((b for b in self.builds if b.model == model), None)

    def jobs(self, lab_socs: tuple[str, ...], *, only_target: str | None = None,
             only_format: str | None = None) -> list[ExportJob]:
        """Every (build, target, format), `lab` targets taken from the devices' SoCs."""
        out: list[ExportJob] = []
        for b in self.builds:
            socs = lab_socs if b.lab_targets else b.targets
            for model in socs:
                target = Target.of(model)
                if target is None or (only_target and target.soc != soc.normalize_model(only_target)):
                    continue
                for f in b.formats if not only_format else [f for f in b.formats if f == only_format]:
                    out.append(ExportJob(b, target, f))
                    if b.debug:
                        out.append(ExportJob(b, target, f, debug=True))
        return out

    def with_debug(self, models: set[str]) -> ExportsSpec:
        """The spec with the debug build asked of `models`' builds (their suites localize)."""
        return replace(self, builds=tuple(replace(b, debug=True) if b.model in models else b for b in self.builds))


def default_parallel(cpus: int | None = None, mem_bytes: int | None = None) -> int:
    """How many exports at once: one a core, as many as memory gives `_BYTES_PER_BUILD` each."""
    cpus = cpus or os.cpu_count() or 1
    if mem_bytes is None:
        try:
            mem_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        except (ValueError, OSError):
            mem_bytes = _BYTES_PER_BUILD
    return max(1, min(cpus, mem_bytes // _BYTES_PER_BUILD))
