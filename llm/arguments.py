"""Whether a tool call's arguments fit the tool's schema, checked before anything runs. A small model
now and then writes arguments cut off, under a garbled key, or of the wrong kind; the agent loop must
know that apart from a backend that failed, since only the caller can say the missing part again."""

from __future__ import annotations

import json

# The JSON types a schema's property may name, and the Python values that pass as each. A whole number
# passes as text: models often write an id such as 4217 without quotes, and a backend can read it.
_KINDS: dict[str, tuple[type, ...]] = {
    "string": (str, int),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def arguments_problem(arguments: str, parameters: dict) -> str | None:
    """What is wrong with `arguments` (JSON text, as the model wrote it) for a function whose parameters
    are the JSON schema `parameters`; None when they fit. Only the top level is checked: an object, its
    required properties present, each given property of its declared type."""
    try:
        given = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return "arguments are not valid JSON"
    if not isinstance(given, dict):
        return "arguments must be a JSON object"
    if missing := [k for k in parameters.get("required", []) if k not in given]:
        return "missing argument " + ", ".join(repr(k) for k in missing)
    for key, schema in parameters.get("properties", {}).items():
        kinds = _KINDS.get(schema.get("type") if isinstance(schema, dict) else None)
        value = given.get(key)
        if key in given and kinds and (not isinstance(value, kinds) or _bool_for_number(value, kinds)):
            return f"{key} must be of type {schema['type']}"
    return None


def _bool_for_number(value: object, kinds: tuple[type, ...]) -> bool:
    """JSON true/false is not a number, though Python's bool is an int."""
    return isinstance(value, bool) and bool not in kinds
