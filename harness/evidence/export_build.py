"""What the export stage did for one export (harness/lab/exports/): its cache key and whether the
cache served it, its target and format, what building took, where its folder and log are, QNN's
facts when it failed. The export cell of the page says "built in 103 s" or "from the export
cache", never the QNN log's tail."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import ClassVar, Self

from harness.evidence.base import Cell, Column, JsonObject, Row, Tone, fmt3, json_number, json_object


class CacheUse(enum.StrEnum):
    HIT = "hit"  # the folder (or the failure) came from the cache
    MISS = "miss"  # built now (nothing cached)
    REBUILT = "rebuilt"  # built now although cached: --rebuild-exports
    REPAIRED = "repaired"  # built now: the cached entry was partial or corrupt
    NOT_KEPT = "not-kept"  # built now; its host-dependent failure is not cached

    @property
    def built_now(self) -> bool:
        return self is not CacheUse.HIT


@dataclass(frozen=True)
class ExportBuild:
    KEY: ClassVar[str] = "export"
    COLUMNS: ClassVar[tuple[Column, ...]] = (Column("export_cache", "TEXT"), Column("export_build_s", "REAL"))

    key: str
    cache: CacheUse
    target: str  # the SoC
    format: str
    soc_id: int | None
    dsp_arch: str
    argv: tuple[str, ...]
    folder: str | None  # the export (a cache entry's out/) when it passed
    log: str | None  # the night's copy of its log
    build_s: float | None  # what building it took (a cache hit's: when it was built)
    debug: bool = False
    facts: JsonObject = field(default_factory=dict)  # QNN's facts of a failure (ops, arch, needed arch)

    def built(self, failed: bool) -> str:
        """One line: what this night did for the export."""
        took = f" in {self.build_s:.0f} s" if self.build_s is not None else ""
        if self.cache is CacheUse.HIT:
            return ("the export cache's failure (these inputs failed the same way before)" if failed
                    else f"from the export cache (built{took} then)")
        verb = {CacheUse.REBUILT: "rebuilt (--rebuild-exports)", CacheUse.REPAIRED: "rebuilt (the cached entry was damaged)",
                CacheUse.NOT_KEPT: "built", CacheUse.MISS: "built"}[self.cache]
        return f"{verb}{took}" + (", failed" if failed else "")

    def junit(self) -> dict[str, str | None]:
        return {"export_cache": self.cache.value, "export_key": self.key, "export_target": f"{self.target} ({self.dsp_arch})",
                "export_format": self.format, "export_build_s": fmt3(self.build_s), "export_log": self.log}

    def rows(self) -> tuple[Row, ...]:
        failed = self.folder is None
        return (Row("export", self.built(failed), Tone.PLAIN if not failed else Tone.FAIL),)

    def views(self) -> tuple[object, ...]:
        return ()

    def columns(self) -> dict[str, Cell]:
        return {"export_cache": self.cache.value, "export_build_s": self.build_s}

    def to_json(self) -> JsonObject:
        return {"key": self.key, "cache": self.cache.value, "target": self.target, "format": self.format,
                "soc_id": self.soc_id, "dsp_arch": self.dsp_arch, "argv": list(self.argv), "folder": self.folder,
                "log": self.log, "build_s": self.build_s, "facts": dict(self.facts), "debug": self.debug}

    @classmethod
    def of_json(cls, raw: object) -> Self:
        raw = json_object(raw, "an export's build")
        soc_id, folder, log, facts = raw.get("soc_id"), raw.get("folder"), raw.get("log"), raw.get("facts")
        return cls(str(raw["key"]), CacheUse(raw["cache"]), str(raw.get("target") or ""), str(raw.get("format") or ""),
                   soc_id if isinstance(soc_id, int) and not isinstance(soc_id, bool) else None,
                   str(raw.get("dsp_arch") or ""), tuple(str(a) for a in raw.get("argv") or []),
                   folder if isinstance(folder, str) else None, log if isinstance(log, str) else None,
                   json_number(raw.get("build_s")), bool(raw.get("debug")), dict(facts) if isinstance(facts, dict) else {})
