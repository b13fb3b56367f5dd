"""The support domain's word lists, phrasing pools and policy live as data files in `data/` (TOML, and
the tool schemas as JSON); this reads them, once each."""

from __future__ import annotations

import functools
import json
import tomllib
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


@functools.cache
def load(name: str):
    path = DATA / name
    return json.loads(path.read_text()) if path.suffix == ".json" else tomllib.loads(path.read_text())
