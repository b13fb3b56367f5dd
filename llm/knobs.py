"""The decoding knobs, declared once. GenerationParams' checks, the server's request fields and their
OpenAPI schema, /health's defaults, the agent file's `[decoding]` keys and the flags of every command
that decodes are all read from `KNOBS`, so a new knob is one entry here (and its GenerationParams field).

Every knob but the model's own (`opening_floor`) may be set per request, and so is a flag of every
decoding command: in-process (`generate`, `ask`) it goes into GenerationParams, over HTTP (`replay`,
`talk`, `bench-llm`) into each request's body, under its name or the OpenAI field that carries it
(`gen_length` is OpenAI's `max_tokens`). Torch-free and outside llm.engine: the voice process reads it."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

CACHE_MODES = ("none", "prefix", "dual", "block")
SCHEDULES = ("even", "timesteps")
CONFIDENCES = ("probability", "margin", "entropy")
MAX_INT = 2**31 - 1  # the largest integer knob (a seed, a step count) a request may give
JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}
WORDS = {int: "a whole number", float: "a number", str: "a string", bool: "true or false", dict: "a table"}


@dataclass(frozen=True)
class Knob:
    name: str  # GenerationParams' field and the agent file's key
    kind: type  # int, float (an int passes too), str, bool or dict
    help: str  # the flag's help and the OpenAPI description, the same for every command
    default: object = None  # GenerationParams' default; None: `unset` says what then
    unset: str = "the model's"
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None  # an exclusive minimum
    sent_as: str | None = None  # the request body's field, where OpenAI already has one for it
    alias: str | None = None  # a second flag, the name the HTTP commands had for it
    per_request: bool = True  # False: only the model sets it, no request or flag does

    @property
    def field(self) -> str | None:
        """The request body's field that carries it; None: no request may set it."""
        return (self.sent_as or self.name) if self.per_request else None

    @property
    def flags(self) -> list[str]:
        """Its command-line flags: a true-by-default switch is turned off by `--no-NAME`."""
        flag = "--" + ("no-" if self.default is True else "") + self.name.replace("_", "-")
        return [flag] + ([self.alias] if self.alias else [])

    def describe(self) -> str:
        """The flag's help and the OpenAPI description: what it does, and its default (a switch says what
        it does when turned from its default)."""
        if self.kind is bool:
            return self.help
        return f"{self.help} (default: {self.unset if self.default is None else self.default})"

    def problem(self, value: object) -> str | None:
        """What is wrong with `value` for this knob, to follow its name; None if it is fine."""
        number = self.kind in (int, float)
        if isinstance(value, bool) != (self.kind is bool) or not isinstance(
            value, (int, float) if self.kind is float else self.kind
        ):
            return f"must be {WORDS[self.kind]}, not {value!r}"
        if isinstance(value, float) and not math.isfinite(value):  # an int of any size is finite
            return f"must be a finite number, not {value}"
        if self.choices and value not in self.choices:
            return f"must be one of {', '.join(self.choices)}, not {value!r}"
        if number and self.minimum is not None and value < self.minimum:
            return f"must be at least {self.minimum}, not {value}"
        if number and self.maximum is not None and value > self.maximum:
            return f"must be at most {self.maximum}, not {value}"
        if number and self.above is not None and value <= self.above:
            return f"must be more than {self.above}, not {value}"
        return None

    def parse(self, text: str) -> object:
        """A flag's value (argparse's `type`), checked as a request's would be."""
        try:
            value = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {WORDS[self.kind]}, not {text!r}") from None
        if problem := self.problem(value):
            raise argparse.ArgumentTypeError(problem)
        return value

    def schema(self) -> dict:
        """Its request field's JSON schema (null: the server's default)."""
        said = f"{str(not self.default).lower()}: {self.help}" if self.kind is bool else self.describe()
        out = {"type": [JSON_TYPES[self.kind], "null"], "description": said}
        bounds = {
            "enum": [*self.choices, None] if self.choices else None,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "exclusiveMinimum": self.above,
        }
        return out | {k: v for k, v in bounds.items() if v is not None}


# a table, one knob a row
# fmt: off
KNOBS = {knob.name: knob for knob in (
    Knob("gen_length", int, "answer token budget, rounded up to whole blocks (a bidirectional model's "
         "canvas); over HTTP it is sent as max_tokens", default=64, minimum=1, sent_as="max_tokens",
         alias="--max-tokens"),
    Knob("block_length", int, "tokens per block", minimum=1, maximum=MAX_INT),
    Knob("sub_block_length", int, "a block's tokens are committed this many at a time, left to right "
         "(Fast-dLLM v2's sub-blocks)", unset="the model's, else the whole block", minimum=1,
         maximum=MAX_INT),
    Knob("steps", int, "fixed denoising steps over the whole canvas, a multiple of its blocks (LLaDA's "
         "rule)", minimum=1, maximum=MAX_INT),
    Knob("threshold", float, "commit every position more confident than this, at least the steps' share "
         "(Fast-dLLM, SDAR, LLaDA2; 1 = the steps alone)", minimum=0, maximum=1),
    Knob("factor", float, "Fast-dLLM's factor rule instead of a threshold", above=0),
    Knob("schedule", str, "tokens per step of the fixed rule: even (LLaDA: a block's tokens shared evenly "
         "by its steps) or timesteps (Dream: a step's share of the masks still left, at the last all)",
         unset="the model's, else even", choices=SCHEDULES),
    Knob("confidence", str, "how sure a position is: probability (of its token), margin (between its two "
         "likeliest tokens) or entropy (negative; Dream's alg=entropy)",
         unset="the model's, else probability", choices=CONFIDENCES),
    Knob("cache", str, "key/value cache: prefix or dual for bidirectional models, block for block-diffusion "
         "ones", choices=CACHE_MODES),
    Knob("temperature", float, "0 = greedy", default=0.0, minimum=0),
    Knob("seed", int, "random seed for sampling at temperature > 0", unset="none", minimum=0,
         maximum=MAX_INT),
    Knob("early_stop", bool, "denoise the whole canvas, not only until end-of-sequence is committed with "
         "all before it", default=True),
    Knob("ignore_eos", bool, "keep decoding past end-of-sequence (benchmarks of fixed lengths)",
         default=False),
    Knob("opening_floor", dict, "token id -> the least probability the answer may open with it",
         per_request=False),
)}
# fmt: on
REQUEST_KNOBS = [knob for knob in KNOBS.values() if knob.per_request]


def request_fields(values: dict) -> dict:
    """Knob values by name as a request's body fields (`gen_length` as OpenAI's `max_tokens`)."""
    return {KNOBS[name].field: value for name, value in values.items()}
