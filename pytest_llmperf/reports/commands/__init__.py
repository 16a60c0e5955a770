"""The `llmperf` commands that read run files and the results store: `compare`, `plot`,
`history` and `ack`, one module each, each with `add_command` (its subparser) and `run`.
pytest_llmperf/cli.py only wires them (and `bisect`, `nightly`, `bootstrap-baselines`, which live
in their own packages) into one parser and dispatches.
"""
