"""What provisioning hands to the runners: where things landed on the device."""

from __future__ import annotations

from dataclasses import dataclass, field

# The pair -> config file table lives with the pair type; named here for older imports.
from harness.pairs import BackendPair


@dataclass(frozen=True)
class ProvisionedModel:
    device: str
    remote_dir: str  # the export as-is on the device (config*.json, llm.mnn*, qnn/...)
    kind: str  # "mnn" | "executorch"
    model_type: str  # from llm_config.json, never the folder name
    configs: dict[BackendPair, str] = field(default_factory=dict)  # backend pair -> config file name (harness.pairs)
    bytes_sent: int = 0
    files_sent: int = 0
    visual: bool = False  # llm_config.json's is_visual (harness.export.ExportFolder.is_visual)
    system_prompt: str = ""  # what answers are generated under (ExportFolder.system_prompt)


@dataclass(frozen=True)
class ProvisionedRuntime:
    device: str
    remote_dir: str  # folder holding the runner binary and its libraries
    runner: str  # absolute device path of the runner (llm_demo, qnn_llama_runner)
    lib_dirs: tuple[str, ...] = ()  # LD_LIBRARY_PATH
    adsp_dirs: tuple[str, ...] = ()  # ADSP_LIBRARY_PATH (Skel libraries)
    htp_arch: str = ""  # "" for a CPU-only runtime
    bytes_sent: int = 0
    files_sent: int = 0
    qnn: bool = True  # the QNN libraries for htp_arch were pushed (False: CPU backend only)
    qairt_build: str | None = None  # the QAIRT build the pushed libQnnHtp.so names, if it does
    # More environment for the runner's process: on an emulated HTP the host's x86 QAIRT
    # libraries (QNN_SDK_ROOT, LD_LIBRARY_PATH) take the place of the pushed Android ones.
    env_extra: tuple[tuple[str, str], ...] = ()

    def env(self) -> dict[str, str]:
        """Environment for running the runner: both library paths point at the pushed runtime."""
        env = {}
        if self.lib_dirs:
            env["LD_LIBRARY_PATH"] = ":".join(self.lib_dirs)
        if self.adsp_dirs:
            # Qualcomm documents ADSP_LIBRARY_PATH as ';'-separated (docs/qnn-libraries.md#environment).
            env["ADSP_LIBRARY_PATH"] = ";".join(self.adsp_dirs)
        env.update(self.env_extra)
        return env


__all__ = ["ProvisionedModel", "ProvisionedRuntime"]
