"""The one catalogue of known failure lines, this package's one face (docs/failure-catalogue.md).

`lines.yaml` holds each known line: its pattern, its class (a harness/outcomes.py FailureClass,
or `warning`), the scopes it applies to, its public source and its fix, and where it has one, its
shape kind and its QNN failure; load.py reads and checks it. The readers are views of it: the
runner's classifier (harness/runners/signatures.py: runner output and logcat), the shape check's
log scan (harness/checks/shapes/log.py: entries with a shape kind), QNN's log reader
(harness/qnn/log.py: entries with a QNN failure) and the export build's classifier
(harness/lab/exports/classify.py: export-build entries). Adding a known line is one entry.
exits.py reads how a process ended (its signal) for all of them. Second floor: imports only
errors and outcomes; the views check the kinds of their own rooms.
"""

from harness.catalogue.bounded import MAX_LINE_CHARS, capped
from harness.catalogue.exits import signal_name, signal_of
from harness.catalogue.load import (
    DEFAULT_PATH,
    RUNNER_SCOPES,
    SHAPE_SCOPES,
    Catalogue,
    Entry,
    Scope,
    load_catalogue,
)

__all__ = ["DEFAULT_PATH", "MAX_LINE_CHARS", "RUNNER_SCOPES", "SHAPE_SCOPES", "Catalogue", "Entry", "Scope", "capped",
           "load_catalogue", "signal_name", "signal_of"]
