"""The decoding knobs are declared once (llm/knobs.py), and every place that takes them holds to that
table: GenerationParams' fields, every decoding command's flags (the same names, help and choices), the
fields a request may set, the OpenAPI schema of the request body, and the agent file's [decoding]."""

from __future__ import annotations

import argparse
import json
from dataclasses import fields

import pytest

from llm.agentfile import AgentFileError, load_agent_file
from llm.engine.checkpoint import read_config
from llm.engine.params import GenerationParams
from llm.knobs import KNOBS, REQUEST_KNOBS, request_fields
from llm.serving.requests import BadRequest, Limits, parse_request
from llm.serving.routes import chat_openapi
from llm.support.models import BUNDLED
from ttfat.cli import build_parser
from ttfat.decoding import GROUP, decoding_knobs

DECODING_COMMANDS = {"generate", "ask", "replay", "talk", "serve-agent", "bench-llm"}
# a value of each knob a request may set that the bundled block-8 model takes as it is
VALID = {
    "gen_length": 16,
    "block_length": 8,
    "sub_block_length": 4,
    "steps": 16,
    "threshold": 0.5,
    "factor": 1.5,
    "schedule": "timesteps",
    "confidence": "margin",
    "cache": "block",
    "temperature": 0.5,
    "seed": 7,
    "early_stop": False,
    "ignore_eos": True,
}


def commands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


def test_the_table_is_generation_params():
    assert [f.name for f in fields(GenerationParams)] == list(KNOBS)
    assert {f.name: f.default for f in fields(GenerationParams)} == {n: k.default for n, k in KNOBS.items()}
    assert set(VALID) == {k.name for k in REQUEST_KNOBS}  # a new knob needs a value here too


def test_every_decoding_command_takes_the_same_flags_with_the_same_help():
    table = [(k.flags, k.describe(), k.choices or None) for k in REQUEST_KNOBS]
    knob_flags = {k.flags[0] for k in REQUEST_KNOBS}  # not the alias: serve's --max-tokens is its limit
    for name, parser in commands().items():
        groups = {g.title: g._group_actions for g in parser._action_groups}
        got = [(a.option_strings, a.help, a.choices) for a in groups.get(GROUP, [])]
        assert got == (table if name in DECODING_COMMANDS else []), name
        elsewhere = {
            f
            for title, actions in groups.items()
            if title != GROUP
            for a in actions
            for f in a.option_strings
        } & knob_flags
        assert not elsewhere, (name, elsewhere)
    replay = commands()["replay"]
    threshold = next(a for a in replay._actions if "--threshold" in a.option_strings)
    assert threshold.help.startswith("commit every position more confident than this")
    assert next(a for a in replay._actions if "--cache" in a.option_strings).choices == (
        "none",
        "prefix",
        "dual",
        "block",
    )


def test_flags_become_knobs_and_request_fields():
    flags = ["--max-tokens", "50", "--threshold", "0.9", "--cache", "block", "--no-early-stop"]
    args = build_parser().parse_args(["replay", "x.wav", *flags])
    assert decoding_knobs(args) == {"gen_length": 50, "threshold": 0.9, "cache": "block", "early_stop": False}
    assert request_fields(decoding_knobs(args)) == {
        "max_tokens": 50,
        "threshold": 0.9,
        "cache": "block",
        "early_stop": False,
    }
    args = build_parser().parse_args(["generate", "--prompt", "hi", "--gen-length", "16", "--ignore-eos"])
    assert GenerationParams(**decoding_knobs(args)) == GenerationParams(gen_length=16, ignore_eos=True)
    for bad in (["--threshold", "2"], ["--steps", "1.5"], ["--cache", "disk"], ["--factor", "0"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["ask", "hi", *bad])


def test_the_server_takes_exactly_the_request_knobs():
    cfg = read_config(BUNDLED["bundled"])
    messages = [{"role": "user", "content": "hi"}]
    params = parse_request({"messages": messages, **request_fields(VALID)}, cfg, Limits()).params
    assert {name: getattr(params, name) for name in VALID} == VALID
    assert parse_request({"messages": messages, "max_tokens": 16}, cfg, Limits()).max_tokens == 16
    # a knob no request sets is not read: the model's own opening floor stays
    ignored = parse_request({"messages": messages, "opening_floor": {"475": 0.1}}, cfg, Limits()).params
    assert ignored.opening_floor == {475: 0.8}
    for knob in REQUEST_KNOBS:
        with pytest.raises(BadRequest, match=f"^{knob.field} must be"):
            parse_request({"messages": messages, knob.field: [1]}, cfg, Limits())
    with pytest.raises(BadRequest, match="threshold must be at most 1"):
        parse_request({"messages": messages, "threshold": 1.5}, cfg, Limits())


def test_the_openapi_schema_lists_the_request_knobs():
    body = chat_openapi()["requestBody"]["content"]["application/json"]["schema"]["properties"]
    for knob in REQUEST_KNOBS:
        assert body[knob.field] == knob.schema(), knob.name
    assert body["threshold"]["type"] == ["number", "null"] and body["threshold"]["maximum"] == 1
    assert body["max_tokens"]["type"] == ["integer", "null"] and "gen_length" not in body
    assert body["cache"]["enum"] == ["none", "prefix", "dual", "block", None]
    assert body["early_stop"]["description"].startswith("false: ")


def toml_value(value) -> str:
    return json.dumps(value)  # TOML writes these scalars as JSON does


def test_the_agent_file_takes_the_request_knobs_by_name(tmp_path):
    path = tmp_path / "a.toml"

    def agent(decoding: dict):
        lines = "".join(f"{k} = {toml_value(v)}\n" for k, v in decoding.items())
        path.write_text(f'system_prompt = "You help."\n[decoding]\n{lines}')
        return load_agent_file(path)

    assert agent(VALID).decoding == VALID
    for bad, key in [
        ({"max_tokens": 50}, "max_tokens"),
        ({"opening_floor": 0.5}, "opening_floor"),
        ({"threshold": "high"}, "threshold"),
        ({"cache": "disk"}, "cache"),
    ]:
        with pytest.raises(AgentFileError, match=f"^{path}: decoding.{key}: "):
            agent(bad)
