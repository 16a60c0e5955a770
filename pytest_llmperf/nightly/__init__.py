"""`llmperf nightly`: the one command every deploy file (deploy/) calls (docs/nightly.md).

It runs the suites for one marker as a pytest session of its own, with the results store and the
trend gate; writes the run file, Markdown, HTML, JUnit and a failures-only text into one folder;
publishes the history page as a static site; posts the failures to a webhook; keeps a time
budget; and says how the night went in its exit status.

- `outcomes`: what the night's JUnit XML says (failed tests and their lines, tests left out),
  the failures text and the exit status (pure).
- `webhook`: the Slack-compatible post, which never changes the night's verdict.
- `command`: the `llmperf nightly` subcommand: the pytest session, the store, the page.

May import reports (the history page), history (the store), session's pure deadline rule and
the layers below; never plugin/ or pytest: the suites run in a pytest subprocess.
"""
