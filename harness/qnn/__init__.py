"""Real QNN on the host: the x86 QAIRT libraries (host.py: where, which version, whether the
installed ExecuTorch can drive them). Facts in docs/host-qnn.md."""

from harness.qnn.host import (
    HostQnn,
    QnnAbiMismatch,
    QnnPairingUnverified,
    QnnUnavailable,
    check_executorch_pairing,
    find_host_qnn,
    qairt_version_of,
)

__all__ = ["HostQnn", "QnnAbiMismatch", "QnnPairingUnverified", "QnnUnavailable", "check_executorch_pairing",
           "find_host_qnn", "qairt_version_of"]
