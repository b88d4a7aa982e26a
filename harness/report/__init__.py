"""Records and what is made of them: the record (records.py), JUnit, HTML, the history of
nights, tables and QNN profiles.
This `__init__` is the package's one face; names load on first use (PEP 562), so importing one
name imports only its module."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

_HOMES = {
    "console": ("failed_lines",),
    "details": ("Detail",),
    "history": ("History", "HistoryBusy", "HistoryError", "Regression", "aggregate", "disk_full_message", "is_disk_full"),
    "html": ("group_failures", "page_template", "render_html", "write_html"),
    "junit": ("extra_properties", "junit_document", "write_junit"),
    "qnn_profile": ("qnn_profiles",),
    "records": ("RecordWriter", "TestRecord", "read_records"),
    "table": ("text_table",),
}
if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would pass a misspelled name as Any
    __getattr__, __dir__, __all__ = lazy_names(__name__, _HOMES)

if TYPE_CHECKING:
    from harness.report.console import failed_lines as failed_lines
    from harness.report.details import Detail as Detail
    from harness.report.history import History as History
    from harness.report.history import HistoryBusy as HistoryBusy
    from harness.report.history import HistoryError as HistoryError
    from harness.report.history import Regression as Regression
    from harness.report.history import aggregate as aggregate
    from harness.report.history import disk_full_message as disk_full_message
    from harness.report.history import is_disk_full as is_disk_full
    from harness.report.html import group_failures as group_failures
    from harness.report.html import page_template as page_template
    from harness.report.html import render_html as render_html
    from harness.report.html import write_html as write_html
    from harness.report.junit import extra_properties as extra_properties
    from harness.report.junit import junit_document as junit_document
    from harness.report.junit import write_junit as write_junit
    from harness.report.qnn_profile import qnn_profiles as qnn_profiles
    from harness.report.records import RecordWriter as RecordWriter
    from harness.report.records import TestRecord as TestRecord
    from harness.report.records import read_records as read_records
    from harness.report.table import text_table as text_table
