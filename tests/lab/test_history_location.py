"""The night's history sits in --out, as `harness lab run --help` says; a history an older harness
kept beside --out is copied in once, with a message, and the old file is left as it was."""

from __future__ import annotations

from harness.lab.scheduler import default_history
from harness.report import History


def test_the_history_is_in_out_and_an_old_one_beside_it_is_carried_over(tmp_path) -> None:
    out = tmp_path / "lab-out"
    out.mkdir()
    said: list[str] = []
    assert default_history(out, said.append) == out / "history.sqlite" and not said  # nothing old: nothing said
    with History(tmp_path / "history.sqlite") as old:
        old.add_night("before", [], started_at=1.0)
    before = (tmp_path / "history.sqlite").read_bytes()
    path = default_history(out, said.append)
    assert path == out / "history.sqlite" and len(said) == 1 and "copied to" in said[0] and str(out) in said[0]
    with History(path) as h:
        assert h.nights() == [("before", 1.0)]
    assert (tmp_path / "history.sqlite").read_bytes() == before
    assert default_history(out, said.append) == path and len(said) == 1  # once
