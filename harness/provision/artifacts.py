"""What an exported model folder is, and whether it is complete and fits a device.

Everything here is checked on the host, before a single byte moves:
- MNN export (`llmexport.py` + `npu/generate_llm_qnn.py`): every `config*.json` is read (through
  harness.export, which also says each config's backend pair from its content) and the files it
  needs resolved (model, weight, tokenizer, embeddings, visual model, and for
  a QNN config its `qnn/graph*.bin` context binaries);
- ExecuTorch export: `.pte` program(s) and a tokenizer;
- the model type comes from `llm_config.json` (or the sidecar manifest), never the folder name;
- the export's target (soc_id / HTP arch) comes from the context binaries themselves: read by
  the host's QAIRT library when found (libQnnSystem.so in-process, harness.qnn.compiled_io.qnnlib:
  every qnn/graph*.bin, the QNN delegates of the .pte that will run), else by the QNN SDK's
  `qnn-context-binary-utility` when an SDK is given; then `export_args.json`, the optional
  sidecar `qnn/export_manifest.json` / `export_manifest.json`, or MNN2QNNModel-style file names
  (`visual_qnn_69_v79.mnn`); it is compared with the device's. Without a reader of the binaries
  or a sidecar the target is unknown. The QAIRT build that compiled the binaries is kept too:
  a binary newer than the QNN runtime libraries being pushed is refused (check_qairt).

One rule for what leaves the export, the same for config keys and for listed files: nothing
outside the export folder is pushed. A config key naming a path outside (`../x`, `/abs`) is
refused; a symlink (file or folder) that resolves outside the export is refused too, unless the
caller opts in with `follow_external_links=True` (then its target's content is pushed under the
link's name). Links that stay inside are followed; a folder link back to its own ancestor is
refused (a loop). Every file a config names must be non-empty.

Each job has its module; every name is importable from here too:
- setfiles.py: ArtifactFile, list_files (the files of a folder and the rule above for names and links);
- artifact_types.py: ExportTarget, ModelArtifact (what a validated export is);
- target.py: read_target, check_target, check_qairt (the export's target, and whether it fits);
- loaders.py: the MNN and ExecuTorch loaders load_export picks between.
"""

from __future__ import annotations

from pathlib import Path

from harness.errors import ArtifactError
from harness.export import LLM_CONFIG, ExportFolder
from harness.provision.artifact_types import ModelArtifact
from harness.provision.loaders import load_executorch, load_mnn
from harness.provision.setfiles import list_files


def load_export(model_dir: Path | str, *, qnn_sdk: Path | str | None = None,
                follow_external_links: bool = False) -> ModelArtifact:
    """Read and validate an export folder (MNN or ExecuTorch). Raises ArtifactError.
    qnn_sdk: a QNN SDK root; the MNN export's context binaries then tell its soc_id/dsp_arch.
    Symlinks leaving the folder are refused unless follow_external_links (module docstring)."""
    root = Path(model_dir).expanduser()
    if not root.is_dir():
        raise ArtifactError(f"{root}: not a folder; pass the export's output folder (the one with config.json "
                            "or the .pte)")
    root = root.resolve()
    files = list_files(root, follow_external_links=follow_external_links)
    if not files:
        raise ArtifactError(f"{root}: the folder is empty; pass the export's output folder")
    names = {f.rel for f in files}
    export = ExportFolder(root)
    if LLM_CONFIG in names or any(n in names for n in export.config_names):
        return load_mnn(export, files, qnn_sdk)
    if any(n.endswith(".pte") for n in names):
        return load_executorch(export, files)
    raise ArtifactError(f"{root}: neither an MNN export (llm_config.json, config.json, llm.mnn...) nor an "
                        "ExecuTorch export (*.pte); pass the export's output folder")


__all__ = ["load_export"]
