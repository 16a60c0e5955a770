"""Cold start: the engine's time from launch to a healthy /health (engines/server.py), one sample
per start. A reused engine's tests carry the start that served them: the same sample again, not
a new one (docs/noise.md). Absent for --llmperf-endpoint's server, which this session did not
start.
"""

from __future__ import annotations

from pytest_llmperf.metrics.metric import LOWER, Metric

__all__ = ["ENGINE_START", "METRICS"]

ENGINE_START = "engine_start_s"
METRICS = (
    Metric(ENGINE_START, "s", LOWER, compute=lambda run: run.engine_start_s,
           noise="engine start", one_sample=True,
           absent="{name}: this session did not start the engine (--llmperf-endpoint): no "
                  "start time"),
)
