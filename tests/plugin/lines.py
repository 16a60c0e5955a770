"""Matching a pytester run's output lines the way the plugin tests state them."""

from __future__ import annotations

import re


def assert_lines(result, *patterns: str) -> None:
    """Each pattern must match a whole output line; `*` is the only wildcard (brackets in
    messages like ["test_a"] are literal, unlike fnmatch)."""
    regexes = ["^" + ".*".join(map(re.escape, p.split("*"))) + "$" for p in patterns]
    result.stdout.re_match_lines(regexes)
