"""`llmperf bisect`: from "it regressed" to "this release did it" (docs/bisect.md).

Owns the search over ordered candidates (package specs, interpreters, a range of releases), the
environment built for each, one paired A/B step per pair measured in a pytest session of its
own, and the verdict. Each step is kept in the results store (history/), so an interrupted
bisect resumes.

- `candidates`: what is searched over, and a range of releases read from the package index.
- `environments`: a venv per spec in a cache, named by its resolved versions.
- `search`: which pair to measure next and what the steps found (pure).
- `step`: one A/B step as a pytest session, and its outcome from the run file.
- `report`: the progress lines and the verdict.
- `run`: the search from start to verdict, with its time budget and the store.
- `command`: the `llmperf bisect` subcommand.

May import reports (run files), history (the store), verdict (the A/B defaults), metrics and
the layers below; never session/, plugin/ or pytest: a step runs pytest as a subprocess.
"""
