"""harness: on-device test harness and lab orchestration for LLMs on Qualcomm QNN/HTP NPUs."""

__version__ = "0.1.0"
