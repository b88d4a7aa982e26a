"""Fixtures for the harness's own tests: the virtual lab (real adb server, emulated adbd
devices, real sshd), started on free 127.0.0.1 ports and stopped at the end."""

from hypothesis import HealthCheck, settings

from virtual_lab.pytest_plugin import vlab, vlab_factory, vlab_transport  # noqa: F401

# Property tests: the same examples on every run by default, so a CI verdict is the tree's,
# not the dice's (a random run once failed CI on a bug it had just found; that example is now
# pinned with @example). Hunting for new ones is deliberate:
#   pytest --hypothesis-profile=fuzz --timeout=0 tests/provision/test_sync_names.py
for _name, _examples, _fixed in (("ci", 25, True), ("fuzz", 1500, False)):
    settings.register_profile(_name, max_examples=_examples, derandomize=_fixed, deadline=None, database=None,
                              suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")
