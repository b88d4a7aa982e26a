"""Derived llm_demo configs: the export's config plus the harness's run settings.

The derived file is written next to the original (paths in the config are relative to
its folder, `base_dir`) under a name that carries a hash of the changes, so the same
settings reuse the same file and the original is never edited.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError
from harness.transport import MovesFiles


@dataclass(frozen=True)
class Overlay:
    """Run settings. `greedy` sets `sampler_type: greedy` (argmax on the device, deterministic).
    `thread_num` is applied to the LLM and, when the config has one, the `mllm` block."""

    greedy: bool = True
    max_new_tokens: int | None = None
    chunk_limits: tuple[int, ...] | None = None
    thread_num: int | None = None
    extra: dict[str, object] = field(default_factory=dict)  # any other top-level keys

    def __post_init__(self) -> None:
        if self.max_new_tokens is not None and (not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1):
            raise HarnessError(f"overlay max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        if self.thread_num is not None and (not isinstance(self.thread_num, int) or self.thread_num < 1):
            raise HarnessError(f"overlay thread_num must be a positive integer, got {self.thread_num!r}")
        if self.chunk_limits is not None:
            cl = self.chunk_limits
            # MNN: "size_limit must be array larger than 1, eg: [128, 1]"
            if (not isinstance(cl, (list, tuple)) or len(cl) < 2
                    or not all(isinstance(x, int) and x > 0 for x in cl)):
                raise HarnessError(f"overlay chunk_limits must list at least two positive sizes like [128, 1], got {cl!r}")

    def changes(self, config: Mapping[str, object]) -> dict[str, object]:
        out: dict[str, object] = {}
        if self.greedy:
            out["sampler_type"] = "greedy"
        if self.max_new_tokens is not None:
            out["max_new_tokens"] = self.max_new_tokens
        if self.chunk_limits is not None:
            out["chunk_limits"] = list(self.chunk_limits)
        if self.thread_num is not None:
            out["thread_num"] = self.thread_num
            mllm = config.get("mllm")
            if isinstance(mllm, dict):
                out["mllm"] = {**mllm, "thread_num": self.thread_num}
        out.update(self.extra)
        return out

    def apply(self, config: Mapping[str, object]) -> dict[str, object]:
        return {**config, **self.changes(config)}


def derived_name(config_name: str, changes: Mapping[str, object]) -> str:
    stem = config_name[:-5] if config_name.endswith(".json") else config_name
    digest = hashlib.sha256(json.dumps(changes, sort_keys=True).encode()).hexdigest()[:10]
    # Must end in .json: llm_demo picks the config reader by extension.
    return f"{stem}.harness-{digest}.json"


def read_remote_config(transport: MovesFiles, remote_path: str) -> dict[str, object]:
    raw = transport.read_small_files([remote_path])[remote_path]
    if raw is None:
        raise HarnessError(f"{transport.device.name}: config {remote_path} does not exist; "
                           "provision the model first (harness push)")
    return _parse_config(transport, remote_path, raw)


def _parse_config(transport: MovesFiles, remote_path: str, raw: bytes) -> dict[str, object]:
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise HarnessError(f"{transport.device.name}: {remote_path} is not valid JSON ({exc}); "
                           "fix the export's config") from None
    if not isinstance(data, dict):
        raise HarnessError(f"{transport.device.name}: {remote_path} is not a JSON object; fix the export's config")
    return data


def write_overlay(transport: MovesFiles, model_dir: str, config_name: str, overlay: Overlay) -> str:
    """Device path of the derived config (written when missing or stale); the original when
    the overlay changes nothing. The original is read, never written."""
    original = posixpath.join(model_dir, config_name)
    config = read_remote_config(transport, original)
    changes = overlay.changes(config)
    if not changes:
        return original
    name = derived_name(config_name, changes)
    remote = posixpath.join(model_dir, name)
    if remote == original:  # cannot happen with the suffix, but the original is sacred
        raise HarnessError(f"refusing to overwrite {original}")
    text = json.dumps({**config, **changes}, indent=2, ensure_ascii=False) + "\n"
    if transport.read_small_files([remote])[remote] == text.encode("utf-8"):
        return remote  # written by an earlier run from the same original
    with tempfile.TemporaryDirectory(prefix="harness-cfg-") as tmp:
        local = Path(tmp) / name
        local.write_text(text, encoding="utf-8")
        # Write under a temporary name and rename: a concurrent run never reads half a file.
        partial = f"{remote}.{uuid.uuid4().hex[:8]}.partial"
        transport.push(local, partial, mode=0o644)
        transport.rename(partial, remote)
    return remote
