"""One record per test outcome, written as the run goes (Mobly's records.py shape).

Both front doors produce these: the pytest plugin (suites/) and the lab scheduler. The
reporters (JUnit, SQLite history, HTML) consume only records, never runner internals.

A record's status, failure class and backend pair are typed (`Status`, `FailureClass`,
`BackendPair`); they become text only where the record leaves as bytes (`to_json`, JUnit,
SQLite) and are read back from text only in `from_dict`: the JSON line keeps its old shape
(`"failure_class": ""` and `"backend_pair": ""` for none). Its verdict (status, class,
message, warning) is written by `set_verdict` alone.
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
from harness.evidence import KINDS, Evidence, EvidenceSet, LabRun
from harness.hostfiles import append_whole, write_error
from harness.outcomes import FailureClass, RecordWarning, Status
from harness.pairs import BackendPair
from harness.report.details import Detail
from harness.verdict import Verdict, cause, is_bad

# Fields that are typed in memory and text in a JSON line.
_TYPED = {"status": Status, "failure_class": FailureClass, "backend_pair": BackendPair}
# The verdict's fields: set when a record is made (or read back), then by set_verdict alone.
_VERDICT = frozenset({"status", "failure_class", "message"})


@dataclass
class TestRecord:
    name: str  # test id, e.g. "qwen3_vl::matrix[qnn/qnn]::cat-prompt"
    suite: str
    device: str
    status: Status = Status.PASSED
    soc_model: str = ""
    htp_arch: str = ""
    model: str = ""
    backend_pair: BackendPair | None = None
    failure_class: FailureClass | None = None  # runner class (crash, init-error, ...) or check class (garbled, ...)
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
    extras: dict[str, Any] = field(default_factory=dict)  # free-form detail; typed evidence is `evidence`
    # What the checks measured, typed per family (harness.evidence); JSON only in to_dict, where
    # each family sits under its key in `extras`, as the JSON line has always held it.
    evidence: EvidenceSet = field(default_factory=EvidenceSet, compare=False, repr=False)
    # In memory only, never in the JSON line: the link fault a runner caught when this record's
    # class is transport-error, as the transport raised it (device, argv, exit code, output),
    # for the lab's worker to act on (harness/lab/worker.py).
    link_fault: TransportError | None = field(default=None, compare=False, repr=False)

    __test__ = False  # not a pytest test class

    def __post_init__(self) -> None:
        for name, kind in _TYPED.items():
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise TypeError(f"TestRecord.{name} is a {kind.__name__}, not {value!r} "
                                "(text is read only by TestRecord.from_dict)")
        if any(key in KINDS for key in self.extras):  # a producer handed a family's JSON: typed here
            found, self.extras = EvidenceSet.split(self.extras, KINDS)
            for ev in found:
                self.evidence.put(ev)
        object.__setattr__(self, "_made", True)

    def __setattr__(self, name: str, value: object) -> None:
        if name in _VERDICT and self.__dict__.get("_made"):
            raise AttributeError(f"TestRecord.{name} is written by set_verdict(Verdict) alone")
        object.__setattr__(self, name, value)

    @property
    def is_bad(self) -> bool:
        """Failed or error (harness.verdict.is_bad)."""
        return is_bad(self.status)

    @property
    def cause(self) -> str:
        """Its class, else its status, as a word ("crash", "failed"; harness.verdict.cause)."""
        return cause(self)

    def set_verdict(self, verdict: Verdict) -> None:
        """THE writer of a record's status, failure class, message and warning."""
        object.__setattr__(self, "status", verdict.status)
        object.__setattr__(self, "failure_class", verdict.failure_class)
        object.__setattr__(self, "message", verdict.message)
        if verdict.warning is not None:
            self.keep(Detail.WARNING, verdict.warning.value)
        else:
            self.extras.pop(Detail.WARNING, None)
        if verdict.deferred is not None:
            self.keep(Detail.CHECKED_ELSEWHERE, verdict.deferred.value)

    def keep(self, detail: Detail, value: object) -> None:
        """Keeps one free-form detail in the record's JSON line (report/details.py lists each key and
        why it is not a typed family: no report shows it)."""
        if not isinstance(detail, Detail):
            raise TypeError(f"{detail!r} is not a Detail: what a report shows is a typed family (harness.evidence)")
        self.extras[detail.value] = value

    def detail(self, detail: Detail) -> Any:
        """A kept detail's value (None when not kept)."""
        return self.extras.get(detail.value)

    @property
    def instrument(self) -> str | None:
        """Which export instrument this record is (the static quant check's record: "static-quant")."""
        raw = self.extras.get(Detail.INSTRUMENT)
        return raw if isinstance(raw, str) else None

    @property
    def lab_run(self) -> LabRun:
        """Where this record sits in its run (harness.evidence.LabRun; empty where none was stamped)."""
        return self.evidence.get(LabRun) or LabRun()

    def stamp(self, **values: Any) -> None:
        """Stamps the run's bookkeeping (LabRun's fields) where this record has none yet; a None
        value stamps nothing."""
        given = {k: v for k, v in values.items() if v is not None}
        if given:
            self.evidence.put(self.lab_run.filled(**given))

    @property
    def run_id(self) -> str | None:
        """The night (or pytest session) that wrote this record."""
        return self.lab_run.run_id

    @property
    def plan_entry(self) -> str | None:
        """The plan entry (lab job) this record belongs to."""
        return self.lab_run.plan_entry

    @property
    def warning(self) -> RecordWarning | None:
        raw = self.extras.get(Detail.WARNING)
        return RecordWarning(raw) if raw else None

    def to_dict(self) -> dict[str, Any]:
        """The record as its JSON line holds it: typed fields as their text, "" for none."""
        def clean(v: object) -> object:
            return None if isinstance(v, float) and not math.isfinite(v) else v

        bare = replace(self, link_fault=None, evidence=EvidenceSet())
        data = {k: clean(v) for k, v in asdict(bare).items() if k not in ("link_fault", "evidence")}
        extras = data["extras"]  # asdict's deep copy of the free-form details
        data["extras"] = {**(extras if isinstance(extras, dict) else {}), **self.evidence.to_json()}
        data["status"] = self.status.value
        data["failure_class"] = self.failure_class.value if self.failure_class is not None else ""
        data["backend_pair"] = self.backend_pair.name if self.backend_pair is not None else ""
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TestRecord:
        """A record from its JSON line (or any dict of its fields' text)."""
        names = {f.name for f in fields(cls)}
        kept = {k: v for k, v in data.items() if k in names}
        if "status" in kept:
            kept["status"] = Status(kept["status"])
        kept["failure_class"] = failure_class_of(kept.get("failure_class"))
        pair = kept.get("backend_pair")
        kept["backend_pair"] = (pair if isinstance(pair, BackendPair)
                                else BackendPair.try_parse(pair) if pair else None)
        if isinstance(kept.get("extras"), dict):
            kept["evidence"], kept["extras"] = EvidenceSet.split(kept["extras"], KINDS)
        return cls(**kept)

    def put(self, evidence: Evidence) -> None:
        """Adds (or replaces) one family's evidence."""
        self.evidence.put(evidence)


def failure_class_of(text: str | FailureClass | None) -> FailureClass | None:
    """A class read back from text. An older night named a lab entry's setup fault by its
    exception's type ("ArtifactError"): that is a setup error (its signature keeps the name)."""
    if not text:
        return None
    try:
        return FailureClass(text)
    except ValueError:
        return FailureClass.SETUP_ERROR


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


def by_device(records: Iterable[TestRecord]) -> dict[str, list[TestRecord]]:
    out: dict[str, list[TestRecord]] = {}
    for r in records:
        out.setdefault(r.device, []).append(r)
    return out
