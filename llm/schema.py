"""A JSON value checked against a JSON schema: the server's request body against what /openapi.json
publishes (so that it refuses what its own contract refuses; schemathesis sends every field in every
wrong type), and a tool call's arguments against the tool's parameters (llm/arguments.py). Only the
keywords those schemas use are read; a keyword they start using must be added here."""

from __future__ import annotations

TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _same(a, b) -> bool:
    """JSON equality: true is not 1."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def schema_problem(value, schema: dict, where: str = "body", types: dict = TYPES) -> str | None:
    """The first way `value` breaks `schema`, naming where (e.g. "messages[0].role"); None if it fits.
    `types`: what passes as each JSON type."""
    if "type" in schema:
        named = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        kinds = [k for k in named if k in types]
        if kinds and not any(types[k](value) for k in kinds):  # a type it does not know is not checked
            return f"{where} must be of type {' or '.join(kinds)}"
    if "const" in schema and not _same(value, schema["const"]):
        return f"{where} must be {schema['const']!r}"
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        return f"{where} must be one of {', '.join(map(repr, schema['enum']))}"
    if "oneOf" in schema:
        problems = [schema_problem(value, s, where, types) for s in schema["oneOf"]]
        if problems.count(None) != 1:
            return problems[0] or f"{where} fits none of its forms"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where} must be at least {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where} must be at most {schema['maximum']}"
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return f"{where} must be more than {schema['exclusiveMinimum']}"
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        return f"{where} must be at least {schema['minLength']} characters"
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{where} must have at least {schema['minItems']} items"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{where} takes at most {schema['maxItems']} items"
        for i, item in enumerate(value if "items" in schema else []):
            if problem := schema_problem(item, schema["items"], f"{where}[{i}]", types):
                return problem
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                return f"{where} lacks {key!r}"
        properties = schema.get("properties", {})
        for key, item in value.items():
            inner = key if where == "body" else f"{where}.{key}"
            if key in properties:
                if problem := schema_problem(item, properties[key], inner, types):
                    return problem
            elif schema.get("additionalProperties") is False:
                return f"{where} takes no {key!r}"
    return None
