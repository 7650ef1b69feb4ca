"""The rows of the issue's target table, gathered from every benchmark of a run.

Each benchmark module adds its headline comparisons with :func:`add`; ``python -m benchmarks``
prints them all at the end (:func:`table`), so one command gives the whole table.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Row", "add", "rows", "table"]


@dataclass(frozen=True, slots=True)
class Row:
    what: str
    klog: str                # what klog measured, with units
    peer: str                # the peer and what it measured
    ratio: float             # klog against the peer
    ratio_means: str         # "throughput" (higher is better) or "time" (lower is better)
    target: float | None     # the target for ratio, if it has one
    peak_rss: int | None = None  # bytes, where measured
    ratio_label: str | None = None  # how to say the ratio, where "its throughput/time" does not fit
    target_label: str | None = None  # how to say the target, where it is not a ratio (e.g. "≤ 1 s")

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        return self.ratio >= self.target if self.ratio_means == "throughput" else self.ratio <= self.target


_ROWS: list[Row] = []


def add(row: Row) -> None:
    _ROWS.append(row)


def rows() -> list[Row]:
    return list(_ROWS)


def table(items: list[Row] | None = None) -> str:
    items = rows() if items is None else items
    head = "| what | klog | peer in the same run | ratio | target | met | peak RSS |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for r in items:
        sign = "≥" if r.ratio_means == "throughput" else "≤"
        ratio = r.ratio_label or f"{r.ratio:.3g}× {'its throughput' if r.ratio_means == 'throughput' else 'its time'}"
        target = "report" if r.target is None else r.target_label or f"{sign} {r.target:g}×"
        met = "—" if r.met is None else ("yes" if r.met else "**no**")
        rss = "—" if r.peak_rss is None else f"{r.peak_rss / (1 << 20):.0f} MiB"
        lines.append(f"| {r.what} | {r.klog} | {r.peer} | {ratio} | {target} | {met} | {rss} |")
    return "\n".join(lines)
