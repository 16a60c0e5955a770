"""Fold the notes under the summary: a note that says the same thing of many tests becomes one
line that counts them, so "baseline is from other hardware" for 19 tests is one line, not 19.

A note is data until this module renders it: the test it is about (or none, for the session) and
what happened, which may name the test's baseline file and its key. Two notes say the same thing
when their words are equal once every word naming the test (its key) or a file (a path) is set
aside. A folded line keeps
the words all its notes share, shows differing paths as one pattern (dir/test_*.toml), drops a
differing location (the key in ["test_a"]:), and shows any other differing word as "...".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_llmperf.ids import key_of

__all__ = ["Note", "fold"]

DIFFERS = "..."
SEE_ALL = "(-v lists each)"


@dataclass(frozen=True)
class Note:
    """One line under the summary: about the measurement `test_id` (an id, ids.py), or about
    the session when it is None."""

    test_id: str | None
    text: str

    def render(self) -> str:
        return f"{self.test_id}: {self.text}" if self.test_id else self.text

    def to_plain(self) -> list[str | None]:
        """As a pytest-xdist worker sends it to the controller (plain data only)."""
        return [self.test_id, self.text]

    @classmethod
    def from_plain(cls, plain: Sequence[str | None]) -> Note:
        return cls(plain[0], str(plain[1]))

    @classmethod
    def about_session(cls, lines: Iterable[str]) -> list[Note]:
        return [cls(None, line) for line in lines]


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


def fold(notes: Sequence[Note]) -> list[str]:
    """Each distinct note once; notes that say the same of several tests as one line, at the
    place of the first of them."""
    groups: dict[object, list[Note]] = {}
    for note in dict.fromkeys(notes):  # exact repeats (a warning per run) count once
        group = note.text if note.test_id is None else _template(note.text, key_of(note.test_id))
        groups.setdefault(group, []).append(note)
    lines = []
    for members in groups.values():
        if len(members) == 1:
            lines.append(members[0].render())
        else:
            lines.append(f"{len(members)} tests: {_folded([m.text for m in members])} {SEE_ALL}")
    return lines
