"""Black-box mRoPE check: greedy output with `chunk_limits [B, 1]` must equal the output of one
chunk covering the whole prompt (docs/posdbg.md#chunked-prefill)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EquivalenceResult:
    equal: bool
    label: str
    reason: str
    first_diff: int | None = None  # character offset of the first difference
    chunked_excerpt: str = ""
    single_excerpt: str = ""
    compared_chars: int = 0
    extra: dict[str, object] = field(default_factory=dict)

    def explain(self) -> str:
        name = f" ({self.label})" if self.label else ""
        if self.equal:
            return f"chunked prefill matches single-chunk prefill{name} over {self.compared_chars} chars"
        text = f"chunked prefill differs from single-chunk prefill{name}: {self.reason}"
        if self.first_diff is not None:
            text += (
                f"\n    chunk_limits [B,1]: ...{self.chunked_excerpt!r}"
                f"\n    one chunk:          ...{self.single_excerpt!r}"
                "\n    what to do: greedy output must not depend on the chunk size; with an image "
                "this points at chunk-local mRoPE positions or deepstack rows split across chunks "
                "(docs/posdbg.md#known-failure-shapes); run an instrumented runtime and "
                "check_position_log()"
            )
        return text


def _normalize_output(text: str) -> str:
    return text.replace("\r\n", "\n").rstrip()


def chunked_equivalence(
    outputs_chunked: str,
    outputs_single: str,
    *,
    label: str = "",
    compare_chars: int | None = None,
) -> EquivalenceResult:
    """Compare greedy output produced with `chunk_limits [B, 1]` against one chunk covering the
    whole prompt. Trailing whitespace and CRLF are ignored; `compare_chars` limits the comparison
    to a prefix (late tokens may legitimately flip on fp16 rounding). Two empty outputs are a
    failure: there is nothing to compare."""
    a = _normalize_output(outputs_chunked)
    b = _normalize_output(outputs_single)
    if compare_chars is not None:
        a, b = a[:compare_chars], b[:compare_chars]
    if not a and not b:
        return EquivalenceResult(False, label, "both outputs are empty: nothing to compare "
                                 "(did both runs fail?)")
    if a == b:
        return EquivalenceResult(True, label, "", compared_chars=len(a))
    i = 0
    limit = min(len(a), len(b))
    while i < limit and a[i] == b[i]:
        i += 1
    lo = max(0, i - 30)
    if i == limit:
        reason = f"one output is a prefix of the other (lengths {len(a)} vs {len(b)})"
    else:
        reason = f"first difference at character {i}"
    return EquivalenceResult(
        False, label, reason, first_diff=i,
        chunked_excerpt=a[lo:i + 30], single_excerpt=b[lo:i + 30], compared_chars=limit,
    )


def assert_chunked_equivalent(result: EquivalenceResult) -> None:
    if not result.equal:
        raise AssertionError(result.explain())
