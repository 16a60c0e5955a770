"""Was the machine ours while a measurement ran? What else used it, and the rule that calls a
measurement DISTURBED: then its numbers say more about the neighbour (or the card's condition)
than about the engine, so it is no regression, never a baseline and never a reference.

CPU (machine/neighbours.py reads it from /proc): for an engine on this machine's CPU, processes
outside this test session that may run on the engine's cores (any core one of its threads may
use: its compute cores and the ones its API server and engine core were moved to) used at least
OTHER_CORES_LIMIT cores on average over the measurement, however busy the rest of the machine
was. The CPU engine runs at nice 19 on purpose, so a neighbour at nice 0 on its cores takes what
it wants; and with its compute threads waiting for each other at every step, a neighbour on one
of its cores stalls the step on all of them while the machine reads barely busy. For any other
engine (a GPU's, an endpoint's): processes outside the session used at least OTHER_CORES_LIMIT
cores while the machine was busy at least BUSY_SHARE_LIMIT of its capacity (neighbours on idle
cores take nothing from it). Either way, or the hypervisor stole at least STEAL_SHARE_LIMIT of
the CPU time.

GPU (read through NVML, the engine's cards only; machine/gpu_state.py), as NVIDIA's own
diagnostics judge a card (DCGM counts HW slowdown, SW and HW thermal slowdown and HW power brake
against a run; SW power cap is how a card stays inside its power limit under load, and its SM
clock falls with it by design): another process on one of the cards; one of DCGM's four
slowdowns active in any sample; a power limit below the card's default; application clocks
below their defaults, or a clock setting (locked clocks) holding the busy card under its default
application clock in at least HELD_SHARE_LIMIT of the busy samples; an XID error or a new
uncorrected ECC error during the window. SW power cap and a low SM clock are recorded
(machine/gpu_telemetry.py), never a disturbance by themselves.

How the limits were chosen, with the measured rows: docs/engine-faults.md, "Disturbed
measurements"; the GPU rule and the H200 readings behind it: docs/gpu-telemetry.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_llmperf.machine.gpu_telemetry import GpuTelemetry

__all__ = ["BUSY_SHARE_LIMIT", "CpuDisturbance", "DCGM_SLOWDOWNS", "Disturbance", "GpuState",
           "HELD_SHARE_LIMIT", "OTHER_CORES_LIMIT", "STEAL_SHARE_LIMIT", "ended_early"]

OTHER_CORES_LIMIT = 0.10
BUSY_SHARE_LIMIT = 0.85
STEAL_SHARE_LIMIT = 0.10
# The clocks-event reasons DCGM fails a diagnostic on (DcgmRecorder::CheckForClocksEvent's
# failureMask, https://github.com/NVIDIA/DCGM/blob/master/nvvs/src/DcgmRecorder.cpp), by bit.
DCGM_SLOWDOWNS = {
    0x8: "hw slowdown",
    0x20: "sw thermal slowdown",
    0x40: "hw thermal slowdown",
    0x80: "hw power brake slowdown",
}
# Locked clocks hold every busy sample; half of them keeps out a sample caught at a clock change.
HELD_SHARE_LIMIT = 0.5


@dataclass(frozen=True)
class CpuDisturbance:
    other_cores: float  # CPU used by processes outside the session, in cores (1.0: one core)
    machine_busy_share: float  # all CPUs' busy time over their capacity
    steal_share: float  # the hypervisor's steal over all CPU time
    cores: int
    top_name: str | None = None  # the busiest other process
    top_pid: int | None = None
    top_cores: float = 0.0
    # A CPU engine's cores (every core one of its threads may run on), and the CPU the other
    # processes allowed on one of them used, in cores; () where the engine computes elsewhere.
    engine_cores: tuple[int, ...] = ()
    on_engine_cores: float = 0.0

    @property
    def reasons(self) -> list[str]:
        pid = f" (pid {self.top_pid})" if self.top_pid is not None else ""  # format 1: none
        top = (f"; the busiest, {self.top_name}{pid}, {self.top_cores:.0%} of a core"
               if self.top_name else "")
        found = []
        if self.engine_cores and self.on_engine_cores >= OTHER_CORES_LIMIT:
            found.append(f"other processes used {self.on_engine_cores:.2f} cores on the CPU "
                         f"engine's cores ({_core_list(self.engine_cores)}), where it runs at "
                         f"nice 19{top}")
        elif (not self.engine_cores and self.other_cores >= OTHER_CORES_LIMIT
              and self.machine_busy_share >= BUSY_SHARE_LIMIT):
            found.append(f"other processes used {self.other_cores:.2f} cores while the machine "
                         f"was {self.machine_busy_share:.0%} busy{top}")
        if self.steal_share >= STEAL_SHARE_LIMIT:
            found.append(f"the hypervisor stole {self.steal_share:.0%} of the CPU time")
        return found

    def to_dict(self) -> dict[str, Any]:
        """As a run file holds it; the busiest process is "top" (files of format 1 name it so,
        without its pid and the machine's cores)."""
        return {"other_cores": self.other_cores, "machine_busy_share": self.machine_busy_share,
                "steal_share": self.steal_share, "cores": self.cores, "top": self.top_name,
                "top_pid": self.top_pid, "top_cores": self.top_cores,
                "engine_cores": list(self.engine_cores),
                "on_engine_cores": self.on_engine_cores}

    @classmethod
    def from_dict(cls, plain: Mapping[str, Any]) -> CpuDisturbance:
        """Inverse of to_dict; a format-1 file's lacks the cores (read as 0) and the pid, and
        files written before the engine's cores were read lack them (judged as then)."""
        return cls(plain["other_cores"], plain["machine_busy_share"], plain["steal_share"],
                   int(plain.get("cores") or 0), plain.get("top"), plain.get("top_pid"),
                   float(plain.get("top_cores") or 0.0),
                   tuple(int(core) for core in plain.get("engine_cores") or ()),
                   float(plain.get("on_engine_cores") or 0.0))


def _core_list(cores: Sequence[int]) -> str:
    """"core 0", "cores 0-1", "cores 0, 2"."""
    ordered = sorted(cores)
    if len(ordered) == 1:
        return f"core {ordered[0]}"
    if ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"cores {ordered[0]}-{ordered[-1]}"
    return "cores " + ", ".join(map(str, ordered))


@dataclass(frozen=True)
class GpuState:
    """One of the engine's cards over a measurement (NVML): the facts the rule reads, and the
    card's telemetry. A fact the card could not report is None (or empty) and is not judged."""

    index: str
    other_processes: tuple[str, ...] = ()  # "name (pid N)" of processes not the engine's
    # DCGM's slowdown reasons seen active, with the share of samples each was active in
    slowdowns: tuple[tuple[str, float], ...] = ()
    temperature_c: float | None = None  # the highest read
    power_limit_w: float | None = None  # enforced
    default_power_limit_w: float | None = None
    # (domain, application clock, its default) in MHz, where the two were read
    application_clocks: tuple[tuple[str, float, float], ...] = ()
    # Busy samples in which the clock setting (reason 0x2) held the SM clock under the card's
    # default application clock: their share, their mean SM clock, and that default
    held_share: float | None = None
    held_sm_mhz: float | None = None
    held_below_mhz: float | None = None
    # XID errors NVML reported during the window; None: the card offers no NVML events
    xids: tuple[int, ...] | None = ()
    new_uncorrected_ecc: int | None = None  # volatile uncorrected ECC errors, after - before
    telemetry: GpuTelemetry | None = field(default=None, compare=False)

    @property
    def reasons(self) -> list[str]:
        gpu = f"GPU {self.index}"
        found = []
        if self.other_processes:
            found.append(f"{gpu} was shared with {', '.join(self.other_processes)}")
        if self.slowdowns:
            shares = ", ".join(f"{name} in {share:.0%}" for name, share in self.slowdowns)
            heat = f" (up to {self.temperature_c:.0f} C)" if self.temperature_c else ""
            found.append(f"{gpu} throttled: {shares} of samples{heat}")
        limit, default = self.power_limit_w, self.default_power_limit_w
        if limit is not None and default is not None and limit < default:
            found.append(f"{gpu} ran under a power limit of {limit:.0f} W, below its default "
                         f"{default:.0f} W (nvidia-smi -pl {default:.0f} restores it)")
        if low := [c for c in self.application_clocks if c[1] < c[2]]:
            clocks = "; ".join(f"{domain} {now:.0f} MHz, default {default:.0f} MHz"
                               for domain, now, default in low)
            found.append(f"{gpu}'s application clocks were set below their defaults ({clocks}; "
                         "nvidia-smi -rac restores them)")
        if self.held_share is not None and self.held_share >= HELD_SHARE_LIMIT:
            # A format-1 run file did not keep the default it was held below.
            default = "" if self.held_below_mhz is None else f" {self.held_below_mhz:.0f} MHz"
            found.append(f"{gpu}'s clocks were held at {self.held_sm_mhz:.0f} MHz by a clock "
                         f"setting in {self.held_share:.0%} of busy samples, below its default"
                         f"{default} (nvidia-smi -rgc resets locked clocks)")
        if self.xids:
            plural = "s" if len(self.xids) > 1 else ""
            found.append(f"{gpu} reported XID{plural} {', '.join(map(str, self.xids))} during "
                         "the measurement")
        if self.new_uncorrected_ecc:
            found.append(f"{gpu} counted {self.new_uncorrected_ecc} new uncorrected ECC "
                         "error(s) during the measurement")
        return found

    def to_dict(self) -> dict[str, Any]:
        """The facts the rule judges, as a run file holds them; null where the card could not
        say. The telemetry is the result's own "gpu_telemetry"."""
        return {"index": self.index, "other_processes": list(self.other_processes),
                "slowdowns": dict(self.slowdowns), "temperature_c": self.temperature_c,
                "power_limit_w": self.power_limit_w,
                "default_power_limit_w": self.default_power_limit_w,
                "application_clocks": {domain: {"mhz": now, "default_mhz": default}
                                       for domain, now, default in self.application_clocks},
                "held_share": self.held_share, "held_sm_mhz": self.held_sm_mhz,
                "held_below_mhz": self.held_below_mhz,
                "xids": None if self.xids is None else list(self.xids),
                "new_uncorrected_ecc": self.new_uncorrected_ecc}

    @classmethod
    def from_dict(cls, plain: Mapping[str, Any],
                  telemetry: GpuTelemetry | None = None) -> GpuState:
        """Inverse of to_dict; a format-1 file's lacks held_below_mhz (None)."""
        clocks = plain.get("application_clocks") or {}
        xids = plain.get("xids", ())
        return cls(str(plain["index"]), tuple(plain.get("other_processes") or ()),
                   tuple((str(name), float(share))
                         for name, share in (plain.get("slowdowns") or {}).items()),
                   plain.get("temperature_c"), plain.get("power_limit_w"),
                   plain.get("default_power_limit_w"),
                   tuple((domain, pair["mhz"], pair["default_mhz"])
                         for domain, pair in clocks.items()),
                   plain.get("held_share"), plain.get("held_sm_mhz"),
                   plain.get("held_below_mhz"), None if xids is None else tuple(xids),
                   plain.get("new_uncorrected_ecc"), telemetry)


@dataclass(frozen=True)
class Disturbance:
    """Everything that was not the engine, over one measurement, and the engine's cards' own
    account. `judged` False (--llmperf-disturbance off): the cards were read for their telemetry
    and energy only, and nothing is judged."""

    cpu: CpuDisturbance | None = None
    gpus: tuple[GpuState, ...] = field(default=())
    judged: bool = True

    @property
    def telemetry(self) -> tuple[GpuTelemetry, ...]:
        """Each card's telemetry, where it was read."""
        return tuple(gpu.telemetry for gpu in self.gpus if gpu.telemetry is not None)

    @property
    def reasons(self) -> list[str]:
        if not self.judged:
            return []
        return [*(self.cpu.reasons if self.cpu else []),
                *(reason for gpu in self.gpus for reason in gpu.reasons)]

    @property
    def disturbed(self) -> bool:
        return bool(self.reasons)

    def to_dict(self) -> dict[str, Any] | None:
        """As a run file holds it, with whether it DISTURBED the run and why (for a reader's
        eye: read back, they are worked out again); None where nothing was judged."""
        if not self.judged:
            return None
        return {"disturbed": self.disturbed, "reasons": self.reasons,
                "cpu": None if self.cpu is None else self.cpu.to_dict(),
                "gpus": [gpu.to_dict() for gpu in self.gpus]}

    @classmethod
    def from_dict(cls, plain: Mapping[str, Any] | None,
                  telemetry: Sequence[GpuTelemetry] = ()) -> Disturbance | None:
        """Inverse of to_dict; `telemetry`: the result's cards, each joined to its state."""
        if plain is None:
            return None
        cards = {card.index: card for card in telemetry}
        cpu = plain.get("cpu")
        return cls(None if cpu is None else CpuDisturbance.from_dict(cpu),
                   tuple(GpuState.from_dict(gpu, cards.get(str(gpu["index"])))
                         for gpu in plain.get("gpus") or ()))

    def failure(self) -> str:
        """One line for the test: what disturbed it, and the fix."""
        return (f"disturbed measurement: not the engine's numbers ({'; '.join(self.reasons)}); "
                "rerun on a quiet machine (stop the other load, or give the suite a machine "
                "of its own); nothing from this run was written as a baseline")


def ended_early(reason: str) -> str:
    """The one line of a measurement ended early for a neighbour (machine/neighbour_watch.py)."""
    return (f"disturbed measurement, ended early: not the engine's numbers ({reason}); rerun on "
            "a quiet machine (stop the other load, or give the suite a machine of its own); "
            "what was measured before the end is in the run file, and nothing of it was "
            "written as a baseline")
