"""What provisioning hands to the runners: where things landed on the device."""

from __future__ import annotations

from dataclasses import dataclass, field

# Backend pairs are written visual/llm, as the users say them: "qnn/cpu" = visual on QNN,
# LLM on CPU. Text-only models use the LLM backend alone: "qnn", "cpu".
VL_CONFIGS: dict[str, str] = {
    "qnn/qnn": "config_qnn.json",
    "qnn/cpu": "config_cpu_llm_qnn_visual.json",
    "cpu/qnn": "config_qnn_cpu_visual.json",
    "cpu/cpu": "config.json",
}
TEXT_CONFIGS: dict[str, str] = {"qnn": "config_qnn.json", "cpu": "config.json"}


def pair_uses_qnn(pair: str) -> bool:
    """A backend pair ("qnn/cpu", "qnn") runs something on QNN/HTP."""
    return "qnn" in pair.lower().split("/")


@dataclass(frozen=True)
class ProvisionedModel:
    device: str
    remote_dir: str  # the export as-is on the device (config*.json, llm.mnn*, qnn/...)
    kind: str  # "mnn" | "executorch"
    model_type: str  # from llm_config.json, never the folder name
    configs: dict[str, str] = field(default_factory=dict)  # backend pair -> config file name
    bytes_sent: int = 0
    files_sent: int = 0


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

    def env(self) -> dict[str, str]:
        """Environment for running the runner: both library paths point at the pushed runtime."""
        env = {}
        if self.lib_dirs:
            env["LD_LIBRARY_PATH"] = ":".join(self.lib_dirs)
        if self.adsp_dirs:
            # Qualcomm documents ADSP_LIBRARY_PATH as ';'-separated (docs/qnn-libraries.md#environment).
            env["ADSP_LIBRARY_PATH"] = ";".join(self.adsp_dirs)
        return env
