"""What runs a tool call: a Python callable, a SQLite query, or a JSON fixture. Each is built once, when
the agent file is read (so a callable that cannot be imported or SQL that cannot run fails before any
audio is processed), and called with the model's arguments, already parsed into a dict, in a worker
thread (`llm/agentfile/tools.py` bounds it with the tool's timeout)."""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

MAX_ROWS = 20  # rows a SQLite tool returns to the model at most


def resolve(ref: str, base: Path) -> object:
    """``module:attribute`` -> the object; modules next to the agent file (``base``) are found too."""
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"{ref!r} is not module:attribute")
    if str(base) not in sys.path:
        sys.path.append(str(base))
    try:
        obj = importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - any import failure is the file's mistake
        raise ValueError(f"cannot import {module!r} ({type(e).__name__}: {e})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


class PythonBackend:
    """``function(arguments)`` or ``function(arguments, messages)`` (the conversation so far, e.g. to
    check that the caller said what the model passes); returns anything JSON can carry."""

    def __init__(self, ref: str, base: Path):
        self.function = resolve(ref, base)
        if not callable(self.function):
            raise ValueError(f"{ref!r} is not callable")
        try:
            params = inspect.signature(self.function).parameters
        except (TypeError, ValueError):
            params = {}
        self.takes_messages = len(params) >= 2 or "messages" in params

    def __call__(self, arguments: dict, messages: list[dict]) -> object:
        return self.function(arguments, messages) if self.takes_messages else self.function(arguments)


class SqliteBackend:
    """A read-only query over a database file, the arguments bound as named parameters (``:room``),
    never formatted into the SQL. Returns ``{"found": bool, "rows": [...]}``, at most ``MAX_ROWS``."""

    def __init__(self, database: Path, query: str, parameters: set[str]):
        if not database.is_file():
            raise ValueError(f"no database file {database}")
        self.database, self.query = database, query
        unquoted = re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", "", query)
        self.needed = set(re.findall(r"[:@$]([A-Za-z_]\w*)", unquoted))
        if missing := self.needed - parameters:
            raise ValueError(f"the query binds {sorted(missing)}, which the tool's parameters do not have")
        con = self._connect()
        try:
            con.execute("EXPLAIN " + query, dict.fromkeys(self.needed))
        except sqlite3.Error as e:
            raise ValueError(f"the query does not run on {database.name}: {e}") from None
        finally:
            con.close()

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(f"file:{self.database}?mode=ro", uri=True, check_same_thread=False)
        con.row_factory = sqlite3.Row
        return con

    def __call__(self, arguments: dict, messages: list[dict]) -> dict:
        if missing := sorted(self.needed - set(arguments)):
            return {"error": f"missing argument {missing[0]!r}"}
        con = self._connect()
        try:
            rows = con.execute(self.query, {k: arguments[k] for k in self.needed}).fetchmany(MAX_ROWS)
        finally:
            con.close()
        return {"found": bool(rows), "rows": [dict(r) for r in rows]}


class FixtureBackend:
    """A JSON list of ``{"arguments": {...}, "result": ...}``: the result of the first entry whose
    arguments equal the call's (strings compared without case and outer spaces); an entry without
    ``arguments`` answers any call no other entry matches; otherwise ``{"found": false}``."""

    def __init__(self, path: Path):
        try:
            entries = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"cannot read the fixture {path}: {e}") from None
        if not isinstance(entries, list) or not all(isinstance(e, dict) and "result" in e for e in entries):
            raise ValueError(f"{path}: a fixture is a JSON list of objects with a 'result'")
        self.entries = [(e.get("arguments"), e["result"]) for e in entries]

    @staticmethod
    def _key(value: object) -> object:
        if isinstance(value, str):
            return value.strip().casefold()
        if isinstance(value, dict):
            return {k: FixtureBackend._key(v) for k, v in value.items()}
        return value

    def __call__(self, arguments: dict, messages: list[dict]) -> object:
        wanted = self._key(arguments)
        fallback = None
        for args, result in self.entries:
            if args is None:
                fallback = fallback or result
            elif self._key(args) == wanted:
                return result
        return fallback if fallback is not None else {"found": False}


Backend = Callable[[dict, list[dict]], object]
