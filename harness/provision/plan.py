"""What one sync does with each file, decided from the probe: keep it (this set already holds
it), link it (the content is elsewhere on the device), push it, add mode bits; and which of
the set's files go."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from harness.provision.artifacts import ArtifactFile
from harness.provision.hashcache import FileKey, HashCache
from harness.provision.probe import Placed, Probe


@dataclass
class Item:
    file: ArtifactFile
    key: FileKey
    sha: str | None = None
    hash_future: Future | None = None


@dataclass
class Plan:
    keep: dict[str, Placed] = field(default_factory=dict)  # rel -> this set's verified file
    link: list[tuple[Item, Placed]] = field(default_factory=list)  # content elsewhere on the device
    chmod: dict[str, int] = field(default_factory=dict)  # rel -> mode (bits are only ever added)
    push: list[Item] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)


def make_plan(items: list[Item], probe: Probe, cache: HashCache, hasher: ThreadPoolExecutor, set_dir: str) -> Plan:
    plan = Plan()
    sizes_on_device = {p.size for p in probe.contents.values()}
    # Hash first only where the device may already hold the content; otherwise push at once
    # and hash in the background while the bytes travel.
    need_hash = []
    for it in items:
        it.sha = cache.lookup(it.key)
        if it.sha is None and it.file.size in sizes_on_device:
            need_hash.append(it)
    for it, sha in zip(need_hash, hasher.map(lambda i: cache.digest(i.file.path), need_hash)):
        it.sha = sha
    for it in items:
        rel = it.file.rel
        if it.sha is None:
            plan.push.append(it)
            continue
        mine = probe.mine.get(rel)
        if mine is not None and mine.sha256 == it.sha:
            placed = plan.keep[rel] = mine
        elif it.sha in probe.contents:
            placed = probe.contents[it.sha]
            plan.link.append((it, placed))
        else:
            plan.push.append(it)
            continue
        # Hard links share one mode: add missing bits (e.g. +x), never take any away.
        if it.file.mode & ~placed.mode & 0o7777:
            plan.chmod[rel] = placed.mode | it.file.mode
    local = {it.file.rel for it in items}
    prefix = set_dir.rstrip("/") + "/"
    previously = set(probe.manifest.files) if probe.manifest is not None else set()
    previously |= set(probe.mine)
    plan.stale = sorted(rel for rel in previously if rel not in local and prefix + rel in probe.files)
    return plan


def moved_sources(plan: Plan, set_dir: str) -> list[str]:
    """Link sources of this set whose own name is about to get other content (a push placed
    over it, or another link): they must be saved before anything is placed, or the link
    would take the new content (a swap of two names, or a content moving to a new name while
    its old name gets a new one)."""
    prefix = set_dir.rstrip("/") + "/"
    replaced = {prefix + it.file.rel for it in plan.push} | {prefix + it.file.rel for it, _ in plan.link}
    return sorted({placed.path for _, placed in plan.link if placed.path in replaced})


__all__ = ["Item", "Plan", "make_plan", "moved_sources"]
