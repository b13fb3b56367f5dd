"""The decoding flags, the same for every command that decodes (`generate`, `ask`, `replay`, `talk`,
`bench-llm`), built from the knobs' table (llm/knobs.py). A flag left unset sets nothing: the model's
default in-process, the endpoint's over HTTP. Torch-free: `replay` and `talk` take them too."""

from __future__ import annotations

import argparse

from llm.knobs import REQUEST_KNOBS

GROUP = "decoding (in-process, or sent with each request)"


def add_decoding_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(GROUP)
    for knob in REQUEST_KNOBS:
        if knob.kind is bool:  # a switch away from its default
            g.add_argument(
                *knob.flags,
                dest=knob.name,
                action="store_const",
                const=not knob.default,
                help=knob.describe(),
            )
        else:
            g.add_argument(
                *knob.flags,
                dest=knob.name,
                type=knob.parse,
                choices=knob.choices or None,
                help=knob.describe(),
            )


def decoding_knobs(args: argparse.Namespace) -> dict:
    """The knobs set on the command line, by name (GenerationParams' fields)."""
    return {k.name: getattr(args, k.name) for k in REQUEST_KNOBS if getattr(args, k.name) is not None}


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="bundled", help="bundled, bundled-ar or a checkpoint directory")
    p.add_argument("--device", help="cuda or cpu (default: cuda when available)")
