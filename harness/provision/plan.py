"""What one sync does with each file, decided from the probe: keep it (this set already holds
it), link it (the content is elsewhere on the device), push it, add mode bits; and which of
the set's files go."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.hostfiles import FileKey
from harness.provision.hashcache import HashCache
from harness.provision.probe import Placed, Probe
from harness.provision.setfiles import ArtifactFile

if TYPE_CHECKING:  # concurrent.futures is imported only when something is hashed in the background
    from concurrent.futures import Future


@dataclass
class Item:
    file: ArtifactFile
    key: FileKey
    sha: str | None = None
    hash_future: Future[str] | None = None


@dataclass
class Plan:
    keep: dict[str, Placed] = field(default_factory=dict)  # rel -> this set's verified file
    link: list[tuple[Item, Placed]] = field(default_factory=list)  # content elsewhere on the device
    chmod: dict[str, int] = field(default_factory=dict)  # rel -> mode (bits are only ever added)
    push: list[Item] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    undecided: list[Item] = field(default_factory=list)  # being hashed: `decide` says keep, link or push


def make_plan(items: list[Item], probe: Probe, cache: HashCache, hash_later: Callable[[Path], Future[str]],
              set_dir: str) -> Plan:
    """Decide what the hash cache and the probe settle now. A file whose content is unknown
    here but whose size the device holds may be there already: `hash_later(path)` starts
    hashing it and it waits in `undecided` while the files sure to be pushed already travel;
    every other unknown content is pushed (and hashed as it is sent)."""
    plan = Plan()
    sizes_on_device = {p.size for p in probe.contents.values()}
    for it in items:
        it.sha = cache.lookup(it.key)
        if it.sha is not None:
            _decide(plan, probe, it)
        elif it.file.size in sizes_on_device:
            it.hash_future = hash_later(it.file.path)
            plan.undecided.append(it)
        else:
            plan.push.append(it)
    local = {it.file.rel for it in items}
    prefix = set_dir.rstrip("/") + "/"
    previously = set(probe.manifest.files) if probe.manifest is not None else set()
    previously |= set(probe.mine)
    plan.stale = sorted(rel for rel in previously if rel not in local and prefix + rel in probe.files)
    return plan


def decide(plan: Plan, probe: Probe) -> list[Item]:
    """Wait for the undecided files' hashes (in order) and decide each; the ones that must be
    pushed after all are added to plan.push (by _decide) and returned."""
    pushed = []
    for it in plan.undecided:
        if it.hash_future is not None:
            it.sha, it.hash_future = it.hash_future.result(), None
        if _decide(plan, probe, it):
            pushed.append(it)
    plan.undecided = []
    return pushed


def _decide(plan: Plan, probe: Probe, it: Item) -> bool:
    """Keep or link `it` (its sha known) where the device holds its content; True: push it."""
    rel = it.file.rel
    mine = probe.mine.get(rel)
    if mine is not None and mine.sha256 == it.sha:
        placed = plan.keep[rel] = mine
    elif it.sha in probe.contents:
        placed = probe.contents[it.sha]
        plan.link.append((it, placed))
    else:
        plan.push.append(it)
        return True
    # Hard links share one mode: add missing bits (e.g. +x), never take any away.
    if it.file.mode & ~placed.mode & 0o7777:
        plan.chmod[rel] = placed.mode | it.file.mode
    return False


def blocking_rels(plan: Plan, items: list[Item], on_device: Iterable[str] = ()) -> list[str]:
    """Names in the way of the new tree: a file where a folder must now be (`a` then `a/b`),
    or a folder where a file must now be (`a/b` then `a`). From this set's stale names and
    from `on_device` (every file the probe saw in the set folder, tracked or not: a stray file
    blocks the same). Cleared before anything is placed; never a name of the new tree."""
    new = {it.file.rel for it in items}
    new_dirs = {rel[:i] for rel in new for i, ch in enumerate(rel) if ch == "/"}
    out = set()
    for rel in {*plan.stale, *on_device} - new:
        if rel in new_dirs:
            out.add(rel)
        out.update(rel[:i] for i, ch in enumerate(rel) if ch == "/" and rel[:i] in new)
    return sorted(out)


def moved_sources(plan: Plan, set_dir: str, cleared: Sequence[str] = ()) -> list[str]:
    """Link sources of this set whose own name is about to get other content (a push placed
    over it, or another link) or to be cleared (blocking_rels): they must be saved before
    anything is placed, or the link would take the new content or nothing (a swap of two
    names; a content moving to a new name while its old name gets a new one; `a` moving
    to `a/b`)."""
    prefix = set_dir.rstrip("/") + "/"
    replaced = {prefix + it.file.rel for it in plan.push} | {prefix + it.file.rel for it, _ in plan.link}
    gone = tuple(prefix + rel for rel in cleared)
    under = tuple(g + "/" for g in gone)
    return sorted({placed.path for _, placed in plan.link
                   if placed.path in replaced or placed.path in gone or placed.path.startswith(under)})


__all__ = ["Item", "Plan", "blocking_rels", "decide", "make_plan", "moved_sources"]
