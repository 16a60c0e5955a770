"""The results store: every run's results appended, and what is read back (docs/history.md).

- `location`: what `--llmperf-history PATH|URL|off` names, as a SQLAlchemy URL.
- `schema`: the tables and their forward migrations (a `schema_version` table).
- `store`: `HistoryStore`, the one interface (append a run, read a series); `sqlite` and
  `postgres` hold what differs between the two backends (connection set-up, error lines).
- `record`: a run file document (reports/runfile.py) as the rows a run appends.
- `identity`: which series a result belongs to (hardware family, engine spec, workload).
- `changepoints`: where a series' level changed (ruptures, and the rule that keeps a change).
- `series`: a test's points and what else changed at a run.
- `trend`: the trend gate, a reference-like check for verdict/references.py's `judge`.
- `from_history`: baseline values from the runs since the last change point.

Pure of pytest: the plugin opens the store at the start of a session and records at its end.
"""
