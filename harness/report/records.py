"""One record per test outcome, written as the run goes (Mobly's records.py shape).

Both front doors produce these: the pytest plugin (suites/) and the lab scheduler. The
reporters (JUnit, SQLite history, HTML) consume only records, never runner internals.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from harness.errors import TransportError
from harness.hostfiles import append_whole, write_error
from harness.outcomes import Status

STATUSES = tuple(s.value for s in Status)


@dataclass
class TestRecord:
    name: str  # test id, e.g. "qwen3_vl::matrix[qnn/qnn]::cat-prompt"
    suite: str
    device: str
    status: str = "passed"  # passed | failed | error | skipped
    soc_model: str = ""
    htp_arch: str = ""
    model: str = ""
    backend_pair: str = ""
    failure_class: str = ""  # runner class (crash, init-error, ...) or check class (garbled, drift, ...)
    signature: str = ""  # id of the known-failure signature that matched, for grouping
    message: str = ""
    log_excerpt: str = ""
    text: str = ""  # generated text, when the test produced one
    verdict: str = ""  # coherence verdict, when judged
    duration_s: float = 0.0
    prefill_tps: float | None = None
    decode_tps: float | None = None
    load_s: float | None = None
    flaky: bool = False  # passed only on a retry after a transport fault
    attempts: int = 1
    started_at: float = field(default_factory=time.time)
    extras: dict[str, Any] = field(default_factory=dict)
    # In memory only, never in the JSON line: the link fault a runner caught when this record's
    # class is transport-error, as the transport raised it (device, argv, exit code, output),
    # for the lab's worker to act on (harness/lab/worker.py).
    link_fault: TransportError | None = field(default=None, compare=False, repr=False)

    __test__ = False  # not a pytest test class

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {STATUSES}")

    def to_json(self) -> str:
        def clean(v: Any) -> Any:
            return None if isinstance(v, float) and not math.isfinite(v) else v

        data = asdict(replace(self, link_fault=None))
        del data["link_fault"]
        return json.dumps({k: clean(v) for k, v in data.items()}, ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestRecord:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


class RecordWriter:
    """Appends records as JSON lines, each in one write straight to the file, so an
    interrupted night keeps every result that arrived. A line goes in whole or not at all
    (a full disk cuts the file back and raises HostWriteError); fsync'd on close. Safe to
    share between worker threads."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise write_error(self.path, exc) from None

    def write(self, record: TestRecord) -> None:
        line = (record.to_json() + "\n").encode("utf-8")
        with self._lock:
            if self._fd is None:
                raise ValueError(f"{self.path}: record writer is closed")
            append_whole(self._fd, line, self.path)

    def close(self) -> None:
        with self._lock:
            if self._fd is None:
                return
            fd, self._fd = self._fd, None
            try:
                os.fsync(fd)
            except OSError:
                pass  # every line is already in the file; durability is all fsync adds
            finally:
                os.close(fd)

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_records(path: Path) -> list[TestRecord]:
    return list(iter_records(path))


def iter_records(path: Path) -> Iterator[TestRecord]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                yield TestRecord.from_dict(json.loads(line))


def teacher_forced_of(rec: TestRecord) -> dict[str, Any] | None:
    """The teacher-forced comparison a matrix record carries (harness.runners.logits_diff
    DiffResult.record_extras), or None."""
    tf = rec.extras.get("teacher_forced")
    return tf if isinstance(tf, dict) and tf.get("verdict") else None


def export_verdict_of(rec: TestRecord) -> dict[str, Any] | None:
    """The export's verdict an export record carries (harness.pipeline.export_verdict_record:
    `verdict` and one line per instrument), or None."""
    ev = rec.extras.get("export_verdict")
    return ev if isinstance(ev, dict) and ev.get("verdict") else None


def _export_teacher_forced(ev: dict[str, Any]) -> dict[str, Any] | None:
    """The export's teacher-forced line that tells most (the largest median KL among its pairs)."""
    lines = [ln for ln in ev.get("lines") or [] if isinstance(ln, dict) and ln.get("instrument") == "teacher-forced"
             and isinstance(ln.get("figures"), dict) and ln["figures"].get("compared")]
    return max((ln["figures"] for ln in lines), key=lambda f: f.get("median_kl") or 0.0, default=None)


def teacher_forced_metrics(rec: TestRecord) -> dict[str, float | None]:
    """Numbers the history tracks per night: mean KL (None when it was not usable: it
    included an uncounted step), NLL gap B-A (same), and the share of counted steps whose
    argmax differs. All None without a comparison or when it compared nothing. An export's
    record gives its medians over all prompts, and its worst mean KL."""
    none: dict[str, float | None] = {"tf_mean_kl": None, "tf_nll_gap": None, "tf_disagree_rate": None,
                                     "tf_worst_kl": None}
    ev = export_verdict_of(rec)
    if ev is not None:
        fig = _export_teacher_forced(ev)
        return none if fig is None else {"tf_mean_kl": fig.get("median_kl"), "tf_nll_gap": fig.get("median_nll_gap"),
                                         "tf_disagree_rate": fig.get("median_flip_share"),
                                         "tf_worst_kl": fig.get("worst_kl")}
    tf = teacher_forced_of(rec)
    if tf is None or tf.get("verdict") == "error" or not tf.get("counted_steps"):
        return none
    usable = bool(tf.get("kl_used"))
    return {"tf_mean_kl": tf.get("mean_kl") if usable else None, "tf_nll_gap": tf.get("nll_gap") if usable else None,
            "tf_disagree_rate": tf["disagreements"] / tf["counted_steps"],
            "tf_worst_kl": tf.get("mean_kl") if usable else None}


def by_device(records: Iterable[TestRecord]) -> dict[str, list[TestRecord]]:
    out: dict[str, list[TestRecord]] = {}
    for r in records:
        out.setdefault(r.device, []).append(r)
    return out
