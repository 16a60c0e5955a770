"""A baseline's provenance table: what was measured (engine, workload), on what (fingerprint,
the server's own versions), when and at which commit."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

__all__ = ["make_provenance"]


def make_provenance(
    fingerprint: Mapping[str, Any],
    engine: Mapping[str, Any],
    workload: Mapping[str, Any],
    commit: str | None = None,
    now: datetime | None = None,
    server: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The provenance table: what was measured, on what, when, at which commit. `server`: which
    vLLM served it, as the server said (client/server_info.py); the fingerprint names the
    client's own packages, which an engine run with another interpreter does not share."""
    when = (now or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    provenance = {
        "commit": commit or "unknown",
        "date": when,
        "engine": dict(engine),
        "fingerprint": dict(fingerprint),
        "workload": dict(workload),
    }
    if server:
        provenance["server"] = dict(server)
    return provenance
