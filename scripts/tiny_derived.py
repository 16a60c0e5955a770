"""What the scripts that derive a tiny model from suites/models/tiny-llama share
(make_tiny_embedding_model.py, make_tiny_llava_model.py): the `--out` folder, the files copied
as they are, and JSON written the same way every time (sorted keys, so a second run gives
byte-identical files)."""

from __future__ import annotations

import argparse
import json
import pathlib

MODELS = pathlib.Path(__file__).resolve().parent.parent / "suites" / "models"
SOURCE = MODELS / "tiny-llama"


def write_json(path: pathlib.Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def read_json(path: pathlib.Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def derived_folder(description: str, name: str, copied: tuple[str, ...]) -> pathlib.Path:
    """The folder the command line names (`--out`, default suites/models/<name>), made, with
    tiny-llama's files `copied` into it as they are."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=pathlib.Path, default=MODELS / name)
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    for file in copied:
        (out / file).write_bytes((SOURCE / file).read_bytes())
    return out
