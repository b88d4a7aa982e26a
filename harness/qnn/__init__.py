"""Real QNN on the host: the x86 QAIRT libraries (host.py: where, which version, whether the
installed ExecuTorch can drive them), ctx.py + layouts.py (context binaries read by libQnnSystem.so),
pte.py (the context binaries inside an ExecuTorch .pte). Facts in docs/host-qnn.md."""

from harness.qnn.host import (
    HOST_QNN_SWITCH,
    HostQnn,
    QnnAbiMismatch,
    QnnPairingUnverified,
    QnnUnavailable,
    auto_host_qnn,
    check_executorch_pairing,
    find_host_qnn,
    qairt_version_of,
)

__all__ = ["HOST_QNN_SWITCH", "HostQnn", "QnnAbiMismatch", "QnnPairingUnverified", "QnnUnavailable", "auto_host_qnn",
           "check_executorch_pairing", "find_host_qnn", "qairt_version_of"]
