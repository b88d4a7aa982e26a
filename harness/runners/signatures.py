"""Failure classification of a runner's process, a view of the failure catalogue
(harness/catalogue/lines.yaml: its runner-output and logcat entries).

A run's class is decided from facts the runner knows (transport fault, timeout, signal,
exit code, summary present) plus the signatures matched on every output line. The
signature ids are stable, so reports can group failures by cause across nights.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from harness.catalogue import RUNNER_SCOPES, Catalogue, Entry, Scope, capped, load_catalogue, signal_name, signal_of
from harness.outcomes import SIGNATURE_WARNING, FailureClass

WARNING = SIGNATURE_WARNING
OK = FailureClass.OK.value


@dataclass(frozen=True)
class SignatureMatch:
    signature: Entry
    line: str
    source: str  # stdout | stderr | logcat
    groups: tuple[str, ...] = ()  # the regex's groups: {1}, {2}... in description and hint

    def _fill(self, text: str) -> str:
        try:
            return text.format(self.line, *(g or "" for g in self.groups))
        except (IndexError, KeyError, ValueError):
            return text

    @property
    def description(self) -> str:
        return self._fill(self.signature.description)

    @property
    def hint(self) -> str:
        return self._fill(self.signature.hint)

    def to_json(self) -> dict[str, str]:
        return {"id": self.signature.id, "class": self.signature.cls, "line": self.line, "source": self.source}


@dataclass
class Classification:
    cls: str
    reason: str = ""
    matches: list[SignatureMatch] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # failure lines, in output order

    @property
    def ok(self) -> bool:
        return self.cls == OK

    @property
    def signature_ids(self) -> list[str]:
        """Ids of matched failure signatures, in order, without repeats."""
        seen: list[str] = []
        for m in self.matches:
            if m.signature.cls != WARNING and m.signature.id not in seen:
                seen.append(m.signature.id)
        return seen

    @property
    def primary(self) -> SignatureMatch | None:
        """The first match whose class decided the run (the cause to report)."""
        for m in self.matches:
            if m.signature.cls == self.cls:
                return m
        return None

    @property
    def hint(self) -> str:
        p = self.primary
        return p.hint if p else ""

    def to_json(self) -> dict[str, object]:
        p = self.primary
        return {
            "class": self.cls,
            "reason": self.reason,
            "signature": p.signature.id if p else None,
            "signatures": self.signature_ids,
            "hint": self.hint,
            "errors": list(self.errors),
            "warnings": [m.line for m in self.matches if m.signature.cls == WARNING],
        }


class SignatureSet:
    def __init__(self, classes: tuple[str, ...], signatures: list[Entry], source: Path):
        self.classes = classes
        self.signatures = signatures
        self.source = source
        self._rank = {c: i for i, c in enumerate(classes)}

    def match_line(self, line: str, source: str, exit_code: int | None = None) -> SignatureMatch | None:
        """First signature (file order) matching the line."""
        scope = Scope.LOGCAT if source == "logcat" else Scope.RUNNER_OUTPUT
        line = capped(line)
        for sig in self.signatures:
            m = sig.regex.search(line) if sig.applies(exit_code) and scope in sig.scopes else None
            if m:
                return SignatureMatch(sig, line, source, tuple(m.groups()))
        return None

    def match_text(self, text: str, source: str, exit_code: int | None = None) -> list[SignatureMatch]:
        out = []
        for line in text.splitlines():
            m = self.match_line(line.rstrip("\r"), source, exit_code)
            if m:
                out.append(m)
        return out

    def worst(self, classes: Iterable[str]) -> str:
        ranked = [c for c in classes if c in self._rank]
        return min(ranked, key=self._rank.__getitem__) if ranked else OK

    def classify(
        self,
        *,
        stdout: str = "",
        stderr: str = "",
        logcat: Iterable[str] = (),
        exit_code: int | None = 0,
        timed_out: bool = False,
        transport_error: str | None = None,
        expect_summary: bool = False,
        summary_found: bool = True,
    ) -> Classification:
        """Class of one process run. `logcat` holds message texts (see `logcat_messages`)."""
        matches = (self.match_text(stdout, "stdout", exit_code) + self.match_text(stderr, "stderr", exit_code)
                   + [m for m in (self.match_line(x, "logcat", exit_code) for x in logcat) if m])
        errors = [m.line for m in matches if m.signature.cls != WARNING]
        found = {m.signature.cls for m in matches} - {WARNING}

        if transport_error:
            return Classification(FailureClass.TRANSPORT_ERROR.value, transport_error, matches, [transport_error] + errors)
        if timed_out:
            return Classification(FailureClass.TIMEOUT.value, "the run exceeded its timeout and was killed on the device",
                                  matches, errors)
        sig = signal_of(exit_code)
        if sig is not None:
            name = signal_name(sig)
            return Classification(FailureClass.CRASH.value, f"killed by {name}", matches, errors + [f"process killed by {name}"])
        if found:
            cls = self.worst(found)
            first = next(m for m in matches if m.signature.cls == cls)
            return Classification(cls, f"{first.signature.id}: {first.description}", matches, errors)
        if exit_code not in (0, None):
            return Classification(FailureClass.RUNTIME_ERROR.value, f"exit code {exit_code} and no known error line",
                                  matches, errors + [f"exit code {exit_code}"])
        if expect_summary and not summary_found:
            msg = ("no summary block in stdout or logcat (a logcat-only build with no logcat captured, "
                   "or the run stopped early)")
            return Classification(FailureClass.RUNTIME_ERROR.value, msg, matches, errors + [msg])
        return Classification(OK, "", matches, errors)


# ---- logcat -------------------------------------------------------------------------------
# threadtime: "12-02 13:16:00.123  1234  1234 E MNNJNI  : message"
_THREADTIME = re.compile(r"^\d\d-\d\d \d\d:\d\d:\d\d\.\d+\s+\d+\s+\d+\s+[VDIWEFA]\s+(?P<tag>[^:]*?)\s*: ?(?P<msg>.*)$")
# brief: "E/MNNJNI( 1234): message"
_BRIEF = re.compile(r"^[VDIWEFA]/(?P<tag>[^(]*?)\(\s*\d+\): ?(?P<msg>.*)$")
_HEADER = re.compile(r"^--------- beginning of ")


def logcat_entries(text: str) -> list[tuple[str, str]]:
    """(tag, message) per logcat line in threadtime or brief format; other lines are kept
    whole with an empty tag, so nothing is lost when a device prints another format."""
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        line = line.rstrip("\r")
        if not line.strip() or _HEADER.match(line):
            continue
        m = _THREADTIME.match(line) or _BRIEF.match(line)
        out.append((m.group("tag").strip(), m.group("msg")) if m else ("", line))
    return out


def logcat_messages(text: str, tags: Iterable[str] | None = None) -> list[str]:
    want = set(tags) if tags else None
    return [msg for tag, msg in logcat_entries(text) if want is None or not tag or tag in want]


# ---- loading -------------------------------------------------------------------------------
def load_signatures(path: Path | str | None = None) -> SignatureSet:
    """The runner's view of the failure catalogue (harness/catalogue/lines.yaml by default):
    its entries for runner output and logcat, ranked by the catalogue's `classes`."""
    cat = load_catalogue(path)
    return _view(cat)


@lru_cache(maxsize=8)
def _view(cat: Catalogue) -> SignatureSet:
    return SignatureSet(cat.classes, list(cat.in_scope(*RUNNER_SCOPES)), cat.source)
