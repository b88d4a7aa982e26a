"""Repro bundles of failed cells and their replay (docs/bisect.md#repro-bundles): cell.py one cell
as data and run again through the night's door, bundle.py the bundle a night writes for each
failed cell, night.py what a night leaves for replay and bisection, rerun.py `harness replay`,
cli.py the command. Names load on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {
    "bundle": ("slug", "write_bundle", "write_bundles"),
    "cell": ("Cell", "cell_of", "run_cell"),
    "cli": ("add_parser", "run_from_cli"),
    "night": ("after_night",),
    "rerun": ("BundleRefused", "replay"),
})

if TYPE_CHECKING:
    from harness.replay.bundle import slug as slug
    from harness.replay.bundle import write_bundle as write_bundle
    from harness.replay.bundle import write_bundles as write_bundles
    from harness.replay.cell import Cell as Cell
    from harness.replay.cell import cell_of as cell_of
    from harness.replay.cell import run_cell as run_cell
    from harness.replay.cli import add_parser as add_parser
    from harness.replay.cli import run_from_cli as run_from_cli
    from harness.replay.night import after_night as after_night
    from harness.replay.rerun import BundleRefused as BundleRefused
    from harness.replay.rerun import replay as replay
