"""Disk full in the middle of a push: the message quotes the device's free space as it is
then, not the pre-check's figure from before the disk filled up."""

from __future__ import annotations

import pytest

from harness.errors import RemoteNoSpaceError
from harness.provision import HashCache, NullProgress, provision_model
from tests.provision.conftest import CountingTransport, local_device

STALE = 64 << 30  # what the pre-check saw: "64.0 GiB free"


class FillsUp(CountingTransport):
    """Plenty of room at the pre-check; then something else fills the disk mid-push."""

    def _push_file(self, local, remote, mode, progress):
        if self._pushes >= 1:
            self.free = 4096
            raise RemoteNoSpaceError(f"{self.device.name}: no space left on the device writing {remote} "
                                     "(write failed: No space left on device)")
        return super()._push_file(local, remote, mode, progress)


def test_disk_full_mid_push_quotes_the_free_space_now(device_dir, qwen3_export, tmp_path):
    t = FillsUp(local_device(device_dir))
    t.free = STALE
    with pytest.raises(RemoteNoSpaceError) as err:
        provision_model(t, qwen3_export, cache=HashCache(tmp_path / "h.json"), progress=NullProgress())
    msg = str(err.value)
    assert str(STALE) not in msg and "64.0 GiB" not in msg, msg
    assert "(4096 bytes) free now" in msg and "No space left on device" in msg
