"""Other libraries' log lines and warnings go to the night's log file, not the console (issue 43):
a library's root warning (ExecuTorch's `WARNING:root:Number of QNN output ...`), a logger's own
console handler (torch's), a Python warning and a late `basicConfig()`; the harness's own warning
stays on the console; the process's logging is put back after."""

from __future__ import annotations

import logging
import sys
import warnings

from harness.lab.night_log import night_log


def test_library_lines_go_to_the_file_and_the_harness_keeps_the_console(tmp_path, capfd, monkeypatch) -> None:
    monkeypatch.setattr("harness.lab.night_log._preload_torch", lambda: None)  # torch's import: the real night shows it
    lib = logging.getLogger("some_library")
    own_console = logging.StreamHandler(sys.stderr)
    lib.addHandler(own_console)  # as torch gives its loggers
    lib.propagate = False
    root_before = list(logging.getLogger().handlers)
    try:
        with night_log(tmp_path / "out") as path:
            logging.basicConfig(level=logging.INFO)  # ExecuTorch's debugger does this at import
            logging.warning("Number of QNN output 1 mismatched with number of output for edge module 3")
            lib.warning("Failed to load _C_mxfp8.so")
            warnings.warn("read_text is deprecated", DeprecationWarning, stacklevel=1)
            logging.getLogger("harness.lab").warning("emu-sm8650: device offline")
        captured = capfd.readouterr()
        text = path.read_text(encoding="utf-8")
    finally:
        lib.removeHandler(own_console)
    for line in ("Number of QNN output", "Failed to load", "read_text is deprecated"):
        assert line in text and line not in captured.err + captured.out, line
    assert "harness: emu-sm8650: device offline" in captured.err and "device offline" in text
    assert logging.getLogger().handlers == root_before and own_console not in lib.handlers
