"""SoC facts: soc_id, Hexagon HTP arch and VTCM size per Qualcomm SoC model.

Sources (docs/soc-table.md#sources): ExecuTorch `qc_schema.py` `_soc_info_table` (with VTCM MB)
and MNN's docs / MnnLlmChat `QnnModule.kt` soc_id -> arch map, which agrees with it on every
chip both list.
"""

from __future__ import annotations

from dataclasses import dataclass

HTP_ARCHES: tuple[str, ...] = ("v68", "v69", "v73", "v75", "v79", "v81")
# A `local` device that is the host itself (an x86 build of llm_demo): no Qualcomm SoC, no HTP.
HOST = "host"


@dataclass(frozen=True)
class SocInfo:
    model: str
    soc_id: int
    htp_arch: str  # "v79"
    vtcm_mb: int
    name: str = ""

    @property
    def arch_number(self) -> int:
        return int(self.htp_arch[1:])


_TABLE: tuple[SocInfo, ...] = (
    # V68
    SocInfo("SM8350", 30, "v68", 4, "Snapdragon 888"),
    SocInfo("SA8295", 39, "v68", 8, "SA8295P automotive"),
    SocInfo("QCM6490", 93, "v68", 2),
    # V69
    SocInfo("SM8450", 36, "v69", 8, "Snapdragon 8 Gen 1"),
    SocInfo("SM8475", 42, "v69", 8, "Snapdragon 8+ Gen 1"),
    SocInfo("SXR2230P", 53, "v69", 8),
    # V73
    SocInfo("SM8550", 43, "v73", 8, "Snapdragon 8 Gen 2"),
    SocInfo("SA8255", 52, "v73", 8, "SA8255P automotive"),
    SocInfo("QCS9100", 77, "v73", 8),
    SocInfo("SC8380XP", 60, "v73", 8),
    SocInfo("SSG2115P", 46, "v73", 2),
    SocInfo("SSG2125P", 58, "v73", 2),
    SocInfo("SXR1230P", 45, "v73", 2),
    # V75
    SocInfo("SM8650", 57, "v75", 8, "Snapdragon 8 Gen 3"),
    # V79
    SocInfo("SM8750", 69, "v79", 8, "Snapdragon 8 Elite"),
    SocInfo("SXR2330P", 75, "v79", 8),
    # V81
    SocInfo("SM8850", 87, "v81", 8),
    SocInfo("SM8845", 97, "v81", 8),
    SocInfo("SA8797", 72, "v81", 16),
    SocInfo("SAR2230P", 95, "v81", 4),
    SocInfo("SW6100", 96, "v81", 4),
)

_BY_MODEL: dict[str, SocInfo] = {s.model: s for s in _TABLE}
_BY_ID: dict[int, SocInfo] = {s.soc_id: s for s in _TABLE}


def normalize_model(model: str) -> str:
    """`sm8750`, `SM8750P` and `SM8750-AB` all mean the SM8750 row (suffixes are bins)."""
    m = model.strip().upper()
    if m in _BY_MODEL:
        return m
    for known in _BY_MODEL:
        if m.startswith(known):
            return known
    return m


def lookup(model: str) -> SocInfo | None:
    return _BY_MODEL.get(normalize_model(model))


def lookup_id(soc_id: int) -> SocInfo | None:
    return _BY_ID.get(soc_id)


def known_models() -> list[str]:
    return sorted(_BY_MODEL)


def normalize_arch(arch: str | int) -> str | None:
    """Accept `v79`, `V79`, `79` or 79; return `v79`, or None when it is no HTP arch."""
    text = str(arch).strip().lower()
    if not text.startswith("v"):
        text = "v" + text
    return text if text in HTP_ARCHES else None


def is_host(model: str | None) -> bool:
    """True for the host pseudo-SoC (`soc: host`, or no `soc:` on a local device)."""
    return model is None or model.strip().lower() == HOST
