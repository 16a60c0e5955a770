"""What a run file keeps of one test's paired A/B judgement (side B's "ab" entry): per gated
metric the B/A ratios in measuring order, each side's back-to-back ratios (the noise estimate
beside the pairs', so a verdict can be judged again from the file), their median and interval,
and the verdict. Built by paired_ratios.ab_entry; read by the reports, `llmperf compare` and
bisect. Reading is lenient: a field an older or hand-edited file lacks reads as unknown (None,
empty), never as an error, as the run file's other descriptive parts do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pytest_llmperf.numbers import finite_or_none, is_real, number_or_nan

__all__ = ["AbJudgement", "PairedMetric"]


def _number(value: object) -> float | None:
    """A finite number as a float; anything else (None, NaN, a string) as None."""
    return finite_or_none(number_or_nan(value))


def _numbers(values: object) -> tuple[float | None, ...]:
    return tuple(_number(v) for v in values) if isinstance(values, list | tuple) else ()


@dataclass(frozen=True)
class PairedMetric:
    """One gated metric's paired ratios and verdict. A ratio that was NaN is None."""

    ratios: tuple[float | None, ...] = ()
    # None: a file written before one side's back-to-back ratios were kept
    nulls: tuple[float | None, ...] | None = None
    median: float | None = None
    interval: tuple[float | None, float | None] = (None, None)
    confidence: float | None = None
    status: str | None = None  # a Status value ("regression"); None: judged by the test
    message: str = ""

    def to_plain(self) -> dict[str, object]:
        plain: dict[str, object] = {"ratios": list(self.ratios)}
        if self.nulls is not None:
            plain["nulls"] = list(self.nulls)
        return {**plain, "median": self.median, "interval": list(self.interval),
                "confidence": self.confidence, "status": self.status, "message": self.message}

    @classmethod
    def from_plain(cls, plain: object) -> PairedMetric:
        if not isinstance(plain, Mapping):
            return cls()
        interval = _numbers(plain.get("interval"))
        status = plain.get("status")
        nulls = plain.get("nulls")
        return cls(_numbers(plain.get("ratios")), _numbers(nulls) if nulls is not None else None,
                   _number(plain.get("median")),
                   (interval + (None, None))[:2] if interval else (None, None),
                   _number(plain.get("confidence")),
                   status if isinstance(status, str) and status else None,
                   str(plain.get("message") or ""))


@dataclass(frozen=True)
class AbJudgement:
    """Side B's paired judgement: the tolerance it was judged at (None: llmperf.ab(), whose
    test judges the ratios itself), the pairs measured, and each gated metric's ratios."""

    tolerance: float | None = None
    pairs: int = 0
    metrics: dict[str, PairedMetric] = field(default_factory=dict)

    def to_plain(self) -> dict[str, object]:
        return {"tolerance": self.tolerance, "pairs": self.pairs,
                "metrics": {name: metric.to_plain() for name, metric in self.metrics.items()}}

    @classmethod
    def from_plain(cls, plain: Mapping[str, object]) -> AbJudgement:
        metrics = plain.get("metrics")
        pairs = plain.get("pairs")
        return cls(_number(plain.get("tolerance")),
                   int(pairs) if is_real(pairs) and float(pairs).is_integer() else 0,
                   {str(name): PairedMetric.from_plain(metric)
                    for name, metric in metrics.items()} if isinstance(metrics, Mapping) else {})
