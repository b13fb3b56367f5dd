"""Whether a tool call's arguments fit the tool's schema, checked before anything runs. A small model
now and then writes arguments cut off, under a garbled key, or of the wrong kind; the agent loop must
know that apart from a backend that failed, since only the caller can say the missing part again."""

from __future__ import annotations

import json

from llm.schema import TYPES, schema_problem

# A whole number passes as text: models often write an id such as 4217 without quotes, and a backend can
# read it.
ARGUMENT_TYPES = {**TYPES, "string": lambda v: isinstance(v, str) or TYPES["integer"](v)}


def arguments_problem(arguments: str, parameters: dict) -> str | None:
    """What is wrong with `arguments` (JSON text, as the model wrote it) for a function whose parameters
    are the JSON schema `parameters`; None when they fit: an object, its required properties present,
    each given property as its schema says."""
    try:
        given = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return "arguments are not valid JSON"
    if not isinstance(given, dict):
        return "arguments must be a JSON object"
    if missing := [k for k in parameters.get("required", []) if k not in given]:
        return "missing argument " + ", ".join(repr(k) for k in missing)
    for key, schema in parameters.get("properties", {}).items():
        if (
            key in given
            and isinstance(schema, dict)
            and (problem := schema_problem(given[key], schema, key, ARGUMENT_TYPES))
        ):
            return problem
    return None
