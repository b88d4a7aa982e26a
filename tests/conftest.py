"""Fixtures for the harness's own tests: the virtual lab (real adb server, emulated adbd
devices, real sshd), started on free 127.0.0.1 ports and stopped at the end."""

from virtual_lab.pytest_plugin import vlab, vlab_factory, vlab_transport  # noqa: F401
