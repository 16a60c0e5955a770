"""A run file, as a document, for the results store's tests: one result with fifty metrics."""

from __future__ import annotations

DOCUMENT = {
    "datetime": "2026-11-20T03:00:00+00:00",
    "commit_info": {"id": "1a2b3c4d5e6f7a8b9c0d"},
    "llmperf": {
        "format": 2,
        "fingerprint": {"hardware_class": "cpu", "device_name": "AMD EPYC", "device_count": 0,
                        "cpu_cores": 2, "cpu_signature": "AuthenticAMD family 26 model 2",
                        "vllm": "0.32.0", "torch": "2.13.0+cpu", "python": "3.11.7"},
        "results": [{
            "key": "test_a", "test_id": "suites/test_cpu.py::test_a", "verdict": "pass",
            "engine": {"model": "suites/models/tiny-llama", "env": {"HF_TOKEN": "<hidden>"}},
            "engine_label": "tiny-llama", "workload": {"name": "a", "num_requests": 48},
            "workload_label": "a x48", "gate": {"tolerance": 1.5, "metrics": ["tpot_s.p50"]},
            "metrics": {f"m{i:02d}": {"value": 1.0 + i, "spread": 0.01 * i, "n": 3,
                                      "direction": "lower"} for i in range(50)}
            | {"tpot_s.p50": {"value": 0.0022, "spread": None, "n": 1, "direction": "lower"}},
            "failures": {"overloaded": 2}, "client": {"workers": 1},
        }],
    },
}
