"""Speculative decoding at a pinned acceptance: what an engine's `speculative_config` pins, and
the check that the engine's own counters (metrics/spec_decode.py) measured it back.

vLLM's synthetic rejection sampling accepts each draft token by a coin, not by the target model,
so a random-weight model drafts at a stated acceptance and two engines compare on equal terms
(`rejection_sample_method="synthetic"` with `synthetic_acceptance_rates` or
`synthetic_acceptance_length`: vllm/config/speculative.py and vllm/v1/sample/rejection_sampler.py
in vLLM 0.32.0, https://github.com/vllm-project/vllm/blob/main/vllm/config/speculative.py):

- `synthetic_acceptance_rates[i]` is *unconditional*: the chance that the first i+1 draft tokens
  of a draft are all accepted (non-increasing, each in [0, 1], one per speculative token);
- `synthetic_acceptance_length` is the mean accepted length, bonus token included, in
  [1, num_speculative_tokens + 1]; vLLM turns it into rates by its minimum-variance schedule
  (`_acceptance_length_to_rates`): 2.5 of 3 is [1.0, 0.5, 0.0].

A draft accepts A tokens with P(A > i) = rates[i], so the counters should read, per draft:
mean accepted length 1 + sum(rates) and acceptance at position i rates[i]; and per draft token
sum(rates) / num_speculative_tokens, where every draft is full length (an n-gram drafter may
propose fewer near a short match). The check compares the mean accepted length, the number
InferenceX pins as a "golden" acceptance length per model and draft length
(https://github.com/SemiAnalysisAI/InferenceX/tree/main/golden_al_distribution).
A test can also pin a length itself, for a drafter without synthetic sampling whose acceptance
is known (`expect_acceptance(length=...)`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_llmperf.errors import InputError
from pytest_llmperf.numbers import is_real, is_whole

__all__ = ["DEFAULT_TOLERANCE", "Measured", "Pin", "acceptance_problem", "as_config", "expect",
           "length_to_rates", "note", "pin_line", "pin_of", "synthetic_problem"]

SYNTHETIC = "synthetic"
RATES = "synthetic_acceptance_rates"
LENGTH = "synthetic_acceptance_length"
# Tokens of mean accepted length either way. A pinned engine's counters land within a few
# hundredths of the pin over a few hundred drafts (the standard error of 2.5 of 3 over 400
# drafts is 0.025): 0.1 holds that with room and still fails a sampler that stopped applying it.
DEFAULT_TOLERANCE = 0.1
# The check needs its tolerance to be this many standard errors of the measured length, or it
# cannot tell a miss from chance: a failure then says to draft more.
STANDARD_ERRORS = 2.0


@dataclass(frozen=True)
class Pin:
    """A pinned acceptance: the mean accepted length per draft (bonus token included) and, where
    the engine samples synthetically, the unconditional rate per draft position. `what` names
    where it came from, for the lines."""

    length: float
    rates: tuple[float, ...] | None = None
    what: str = ""

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted per draft token when every draft is full length; None without rates."""
        return sum(self.rates) / len(self.rates) if self.rates else None


def length_to_rates(length: float, num_speculative_tokens: int) -> tuple[float, ...]:
    """vLLM's minimum-variance schedule (SpeculativeConfig._acceptance_length_to_rates): whole
    positions always accepted, one partly, the rest never."""
    drafts = length - 1
    full = int(drafts)
    rates = [1.0] * full + [drafts - full] + [0.0] * (num_speculative_tokens - full - 1)
    return tuple(rates[:num_speculative_tokens])


def as_config(config: Any) -> Mapping[str, Any] | None:
    """A `speculative_config` as a mapping: a dict, an Engine's frozen pairs, or its JSON
    string; None for none or for text that is not a JSON object (vLLM's parser says so)."""
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return None
    if isinstance(config, (tuple, list)) and all(
            isinstance(pair, tuple) and len(pair) == 2 for pair in config):
        config = dict(config)
    return config if isinstance(config, Mapping) else None


def synthetic_problem(config: Any, where: str = "Engine(speculative_config=...)") -> str | None:
    """One line where a synthetic pin cannot be served, as vLLM 0.32.0 would refuse it at start
    (SpeculativeConfig._resolve_synthetic_acceptance_rates), said where the Engine is written;
    None where it can (or where nothing synthetic is asked)."""
    found = as_config(config)
    if found is None:
        return None
    method, rates, length = (found.get("rejection_sample_method"), found.get(RATES),
                             found.get(LENGTH))
    if method != SYNTHETIC:
        if rates is None and length is None:
            return None
        return (f"{where}: {RATES if rates is not None else LENGTH} is only used with "
                f"rejection_sample_method='synthetic' (got {method!r}): add it, or drop the pin")
    if (rates is None) == (length is None):
        return (f"{where}: rejection_sample_method='synthetic' takes exactly one of {RATES} "
                f"(one rate per draft position) or {LENGTH} (a mean accepted length)")
    n = found.get("num_speculative_tokens")
    if not is_whole(n, 1):
        return (f"{where}: a synthetic pin needs num_speculative_tokens, a whole number >= 1 "
                f"(got {n!r}): the pin is checked against it")
    return _length_problem(where, length, n) if rates is None else _rates_problem(where, rates, n)


def _length_problem(where: str, length: Any, n: int) -> str | None:
    if is_real(length, 1, n + 1):
        return None
    return (f"{where}: {LENGTH}={length!r} is outside [1, {n + 1}]: a draft of "
            f"num_speculative_tokens={n} accepts 1 to {n + 1} tokens, the bonus token included")


def _rates_problem(where: str, rates: Any, n: int) -> str | None:
    if not isinstance(rates, (list, tuple)) or len(rates) != n:
        return (f"{where}: {RATES}={rates!r} needs one rate per draft position, "
                f"{n} for num_speculative_tokens={n}")
    if not all(is_real(rate, 0, 1) for rate in rates):
        return (f"{where}: {RATES}={list(rates)!r} has a rate outside [0, 1]: each is the chance "
                "that the draft's tokens up to that position are all accepted")
    if any(later > earlier for earlier, later in zip(rates, rates[1:])):
        return (f"{where}: {RATES}={list(rates)!r} rises: each rate is unconditional (the first "
                "i+1 tokens all accepted), so it can only stay or fall from one position to the "
                "next")
    return None


def pin_of(config: Any) -> Pin | None:
    """The acceptance a `speculative_config` pins (synthetic rejection sampling); None where it
    pins none or cannot be served (synthetic_problem says why)."""
    found = as_config(config)
    if found is None or found.get("rejection_sample_method") != SYNTHETIC \
            or synthetic_problem(found):
        return None
    n = found["num_speculative_tokens"]
    if found.get(RATES) is not None:
        rates = tuple(float(rate) for rate in found[RATES])
        what = f"{RATES} {list(rates)}"
    else:
        rates = length_to_rates(float(found[LENGTH]), n)
        what = f"{LENGTH} {found[LENGTH]:g}"
    return Pin(1 + sum(rates), rates, f"{what} of {n}")


@dataclass(frozen=True)
class Measured:
    """The acceptance the engine's counters measured, pooled over runs: drafts, accepted and
    draft tokens summed, each position's acceptance weighted by its run's drafts."""

    drafts: float
    draft_tokens: float
    accepted_tokens: float
    positions: tuple[float, ...] = ()

    @property
    def length(self) -> float:
        return 1 + self.accepted_tokens / self.drafts if self.drafts > 0 else math.nan

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens > 0 else math.nan

    @property
    def spread(self) -> float | None:
        """The standard deviation of one draft's accepted tokens A, from the positions
        (P(A > i) = acceptance at i, so E[A] = sum, E[A^2] = sum of (2i + 1) x acceptance at
        i); None without them."""
        if not self.positions:
            return None
        mean = sum(self.positions)
        square = sum((2 * i + 1) * p for i, p in enumerate(self.positions))
        return math.sqrt(max(square - mean * mean, 0.0))

    @property
    def standard_error(self) -> float | None:
        spread = self.spread
        return None if spread is None or self.drafts <= 0 else spread / math.sqrt(self.drafts)

    @classmethod
    def of(cls, runs: Iterable[Mapping[str, float]]) -> "Measured | None":
        """From runs' flat metrics ("server:spec_decode_drafts", ...); None where no run has
        the counters (no speculative decoding, or a server without them)."""
        key = "server:spec_decode_"
        totals = {"drafts": 0.0, "draft_tokens": 0.0, "accepted_tokens": 0.0}
        accepted_at: dict[int, float] = {}
        seen = False
        for run in runs:
            if not is_real(run.get(key + "drafts"), 0, finite=True):
                continue
            seen = True
            for name in totals:
                totals[name] += float(run.get(key + name) or 0.0)
            for name, value in run.items():
                position = name.removeprefix(key + "acceptance_pos_")
                if position != name and position.isdigit() and is_real(value, 0, finite=True):
                    accepted_at[int(position)] = (accepted_at.get(int(position), 0.0)
                                                  + value * run[key + "drafts"])
        if not seen:
            return None
        drafts = totals["drafts"]
        positions = tuple(accepted_at[i] / drafts for i in sorted(accepted_at)) if drafts else ()
        return cls(drafts, totals["draft_tokens"], totals["accepted_tokens"], positions)


def acceptance_problem(pin: Pin, measured: Measured | None,
                       tolerance: float = DEFAULT_TOLERANCE) -> str | None:
    """One line where the measured mean accepted length is not the pinned one within
    `tolerance` tokens, or where too few drafts were measured to tell; None where it holds."""
    return _judge(pin, measured, tolerance)[1]


def _judge(pin: Pin, measured: Measured | None, tolerance: float) -> tuple[str, str | None]:
    """(the -v line's word, the failure line or None)."""
    head = f"speculative decoding: pinned acceptance length {pin.length:.2f}"
    source = f" ({pin.what})" if pin.what else ""
    if measured is None or measured.drafts <= 0:
        return "no drafts", (
            f"{head}{source}, measured none: the engine drafted nothing in the measured runs (no "
            "speculative decoding, no spec_decode counters on its /metrics, or a drafter that "
            "found nothing to propose)")
    error = measured.standard_error
    if error is not None and tolerance < STANDARD_ERRORS * error:
        needed = math.ceil((STANDARD_ERRORS * measured.spread / tolerance) ** 2)
        return "too few drafts to check", (
            f"{head}{source} cannot be checked within ±{tolerance:g}: {measured.drafts:.0f} "
            f"drafts give a standard error of {error:.3f}; send more output tokens (about "
            f"{needed} drafts) or widen the tolerance")
    if abs(measured.length - pin.length) > tolerance:
        return "outside", (f"{head}, measured {measured.length:.2f} over "
                           f"{measured.drafts:.0f} drafts: outside ±{tolerance:g}{source}")
    return "within", None


def pin_line(pin: Pin, measured: Measured | None, tolerance: float = DEFAULT_TOLERANCE) -> str:
    """The -v line: pinned against measured, length, rate and positions."""
    head = f"speculative decoding pinned ({pin.what}): acceptance length {pin.length:.2f}"
    if measured is None or measured.drafts <= 0:
        return f"{head}, measured none (no drafts)"
    error = measured.standard_error
    spread = "" if error is None else f", s.e. {error:.3f}"
    parts = [f"{head}, measured {measured.length:.2f} over {measured.drafts:.0f} drafts "
             f"({_judge(pin, measured, tolerance)[0]} ±{tolerance:g}{spread})"]
    if pin.acceptance_rate is not None:
        parts.append(f"acceptance rate {measured.acceptance_rate:.1%}, pinned "
                     f"{pin.acceptance_rate:.1%}")
    if pin.rates and measured.positions:
        parts.append(f"by position {_slashed(measured.positions)}, pinned {_slashed(pin.rates)}")
    return "; ".join(parts)


def _slashed(values: Sequence[float]) -> str:
    return "/".join(f"{value:.2f}" for value in values)


def note(config: Any, runs: Iterable[Mapping[str, float]]) -> str | None:
    """The -v line of a run whose engine pins an acceptance; None for any other."""
    pin = pin_of(config)
    return None if pin is None else pin_line(pin, Measured.of(runs))


def expect(config: Any, runs: Iterable[Mapping[str, float]], length: float | None = None,
           tolerance: float = DEFAULT_TOLERANCE) -> float:
    """Result.expect_acceptance: the measured mean accepted length, pooled over `runs`, held to
    the pin of `config` (the engine's speculative_config) or to `length` (a golden length the
    test states); AssertionError with one line where it misses, InputError for what cannot be
    checked at all. Returns the measured length."""
    call = "result.expect_acceptance()"
    if not is_real(tolerance, finite=True, above=0):
        raise InputError(f"{call}: tolerance={tolerance!r}: a number of tokens above 0 (the "
                         f"default is {DEFAULT_TOLERANCE})")
    found = as_config(config) or {}
    most = found.get("num_speculative_tokens")
    most = most + 1 if is_whole(most, 1) else None
    if length is not None and not is_real(length, 1, most, finite=True):
        raise InputError(f"{call}: length={length!r}: a mean accepted length counts the bonus "
                         f"token, so it lies in [1, {most or 'num_speculative_tokens + 1'}]")
    pin = Pin(float(length), what=f"golden {length:g}") if length is not None else pin_of(config)
    if pin is None:
        raise InputError(f"{call}: the engine pins no acceptance (its speculative_config has no "
                         "rejection_sample_method='synthetic'): pin one with speculative_config="
                         "pinned_acceptance(...) or state the length to hold: "
                         "expect_acceptance(length=...)")
    measured = Measured.of(runs)
    problem = acceptance_problem(pin, measured, tolerance)
    if problem:
        raise AssertionError(problem)
    return measured.length if measured else math.nan  # (None only where a problem was found)
