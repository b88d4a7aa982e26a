"""Host children import this checkout's harness: the PYTHONPATH they are given starts at the
folder that holds the `harness` package, wherever the module that builds it sits (a package
move once pointed it at harness/ itself, which an editable install elsewhere hid)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from harness.hostfiles import checkout_root, child_pythonpath
from harness.hostrt import executorch as het
from harness.suite.executorch import host_python_env

REPO = Path(__file__).resolve().parents[2]


def test_checkout_root_holds_this_harness() -> None:
    assert checkout_root() == REPO and (checkout_root() / "harness" / "__init__.py").is_file()
    assert child_pythonpath(None) == str(REPO)
    assert child_pythonpath(os.pathsep.join(["/a", "", "/b"])) == os.pathsep.join([str(REPO), "/a", "/b"])


def test_runtime_scripts_and_host_lane_put_the_checkout_first(tmp_path: Path) -> None:
    folder = het.make_runtime_dir(tmp_path / "rt")
    for script in ("qnn_llama_runner", "pte_runner"):
        assert f"PYTHONPATH={shlex.quote(str(REPO))}$" in (folder / script).read_text(), script
    assert host_python_env()["PYTHONPATH"].split(os.pathsep)[0] == str(REPO)
