"""Fold the notes under the summary: a note that says the same thing of many tests becomes one
line that counts them, so "baseline is from other hardware" for 19 tests is one line, not 19.

Notes are plain lines, most of them "<test id>: <what happened>", where what happened may name
the test's baseline file and its key. Two notes say the same thing when their words are equal
once every word naming the test (its key) or a file (a path) is set aside. A folded line keeps
the words all its notes share, shows differing paths as one pattern (dir/test_*.toml), drops a
differing location (the key in ["test_a"]:), and shows any other differing word as "...".
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

# "<file>.py::<rest>: <text>"; the id ends at the first ": " after its "::".
_ABOUT_A_TEST = re.compile(r"^(?P<id>\S+\.py::.+?): (?P<text>.+)$")
DIFFERS = "..."
SEE_ALL = "(-v lists each)"


def _is_variable(word: str, key: str) -> bool:
    """A word that names the test (its key, bare or quoted as in ["test_x"]) or a file: it
    differs from one test's note to the next."""
    bare = word.strip('[]"\':,.')
    quoted = f'"{key}"' in word
    return quoted or bare == key or "/" in word or bare.endswith((".toml", ".json"))


def _template(text: str, key: str) -> tuple[str | None, ...]:
    return tuple(None if _is_variable(word, key) else word for word in text.split(" "))


def _glob(paths: tuple[str, ...]) -> str:
    """Differing paths as one pattern: "baselines/cpu/test_a.toml", "baselines/cpu/test_b.toml"
    -> "baselines/cpu/test_*.toml"."""
    head = os.path.commonprefix(paths)
    tail = os.path.commonprefix([path[len(head):][::-1] for path in paths])[::-1]
    return f"{head}*{tail}"


def _folded(texts: list[str]) -> str:
    """The words every text shares; differing paths as a pattern; a differing location word
    ("["test_a"]:") is dropped; any other differing word becomes DIFFERS."""
    words = []
    for column in zip(*(text.split(" ") for text in texts)):
        if len(set(column)) == 1:
            words.append(column[0])
        elif all("/" in word for word in column):
            words.append(_glob(column))
        elif not column[0].endswith(":"):
            words.append(DIFFERS)
    return " ".join(words)


def fold(notes: Sequence[str]) -> list[str]:
    """Each distinct note once; notes that say the same of several tests as one line, at the
    place of the first of them."""
    groups: dict[object, list[str]] = {}
    texts: dict[object, list[str]] = {}
    for note in dict.fromkeys(notes):  # exact repeats (a warning per run) count once
        match = _ABOUT_A_TEST.match(note)
        if match is None:
            group: object = note
            text = note
        else:
            text = match["text"]
            group = _template(text, match["id"].split("::", 1)[1])
        groups.setdefault(group, []).append(note)
        texts.setdefault(group, []).append(text)
    lines = []
    for group, members in groups.items():
        if len(members) == 1:
            lines.append(members[0])
        else:
            lines.append(f"{len(members)} tests: {_folded(texts[group])} {SEE_ALL}")
    return lines
