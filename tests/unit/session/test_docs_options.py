"""docs/options.md's table names every option the plugin registers, and no option it does not."""

from __future__ import annotations

import re

from pytest_llmperf.session.settings import OPTIONS
from tests.conftest import REPO


def test_the_options_page_names_every_option_and_only_those():
    text = (REPO / "docs" / "options.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| `--llmperf-")]
    named = {flag for row in rows for flag in re.findall(r"--llmperf-[a-z-]+", row.split(" | ")[0])}
    declared = {option.flag for option in OPTIONS}
    assert sorted(declared - named) == [], "add a row for each to docs/options.md"
    assert sorted(named - declared) == [], "docs/options.md names options that do not exist"
