"""How a measurement is named. Every id is spelled and read here, nowhere else.

A measurement id is the suite file, "::", and the measurement's key. The key is the test's node
id after the file ("test_x[64]", "TestA::test_x"), then at most one of:

- "#n": the n-th run inside one test (n >= 2; the first run has no suffix);
- "@point": a sweep or capacity-search point, named by the point's workload ("@fixed-rate4");
- " (A)" / " (B)": one side of a paired A/B run.

The key names the test's table in its suite's baseline file; the id names the measurement in the
summary, the run file and JUnit. Under `--dist loadgroup` pytest-xdist appends "@<group>" to node
ids, and the plugin names its groups XDIST_GROUP_PREFIX + the engine's digest; that suffix is
never part of an id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MeasurementId", "SIDES", "XDIST_GROUP_PREFIX", "belongs_to", "side_key", "side_of",
           "test_key", "user_nodeid", "without_side", "xdist_group"]

XDIST_GROUP_PREFIX = "llmperf-"
SIDES = ("A", "B")
_XDIST_SUFFIX = re.compile("@" + re.escape(XDIST_GROUP_PREFIX) + r"[0-9a-f]+$")
_SIDE_SUFFIX = re.compile(r" \(([AB])\)$")
_RUN_SUFFIX = re.compile(r"#([0-9]+)$")


@dataclass(frozen=True)
class MeasurementId:
    """One measurement: its test's node id (as a user types it) and what sets it apart from the
    test's other measurements."""

    nodeid: str  # "suites/test_cpu.py::test_x[64]"
    run: int = 1
    point: str | None = None
    side: str | None = None

    @property
    def key(self) -> str:
        key = test_key(self.nodeid)
        if self.point is not None:
            return f"{key}@{self.point}"
        if self.side is not None:
            return side_key(key, self.side)
        return key if self.run == 1 else f"{key}#{self.run}"

    def format(self) -> str:
        return self.nodeid.split("::", 1)[0] + "::" + self.key

    @classmethod
    def parse(cls, text: str) -> MeasurementId:
        """The id `format` wrote ("suites/x.py::test_y#2" -> run 2)."""
        side = side_of(text)
        if side is not None:
            return cls(without_side(text), side=side)
        base, at, point = text.partition("@")
        if at:
            return cls(base, point=point)
        run = _RUN_SUFFIX.search(text)
        if run:
            return cls(text[:run.start()], run=int(run.group(1)))
        return cls(text)


def user_nodeid(nodeid: str) -> str:
    """The node id a user would type: without pytest-xdist's group suffix."""
    return _XDIST_SUFFIX.sub("", nodeid)


def xdist_group(digest: str) -> str:
    """The pytest-xdist group of the tests that share the engine with this digest."""
    return XDIST_GROUP_PREFIX + digest


def test_key(nodeid: str) -> str:
    """The node id after its file: "test_x[64]", "TestA::test_x"."""
    return user_nodeid(nodeid).split("::", 1)[-1]


def result_id(nodeid: str, key: str) -> str:
    """The id of the measurement `key` of the test `nodeid`: its suite file plus the key."""
    return nodeid.split("::", 1)[0] + "::" + key


def key_of(test_id: str) -> str:
    return test_id.split("::", 1)[-1]


def side_key(key: str, side: str) -> str:
    return f"{key} ({side})"


def side_of(key: str) -> str | None:
    """"A" or "B" for a side of an A/B run, else None."""
    found = _SIDE_SUFFIX.search(key)
    return found.group(1) if found else None


def without_side(key: str) -> str:
    return _SIDE_SUFFIX.sub("", key)


def point_of(test_id: str) -> tuple[str, str] | None:
    """("suites/x.py::test_sweep", "fixed-rate4") for a sweep or search point's id, else None."""
    base, at, point = test_id.partition("@")
    return (base, point) if at else None


def belongs_to(test_id: str, nodeid: str) -> bool:
    """Whether the measurement `test_id` was made by the test `nodeid` (itself, "#n" or
    "@point")."""
    return test_id == nodeid or test_id.startswith((nodeid + "#", nodeid + "@"))
