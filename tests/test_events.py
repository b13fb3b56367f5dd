"""Event names are a closed set: the timeline's (voice/timing/events.py: the anchors and the events
besides them) and the agent's (llm/agent.py). A name outside them is refused when emitted, and every
name the sources emit or look for is checked here, so a typo in a path no test runs fails too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from llm.agent import AGENT_EVENTS, AgentEvent
from voice.timing.anchors import ANCHORS
from voice.timing.events import EVENTS, OTHER_EVENTS
from voice.timing.timeline import Timeline, TurnLog

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [*sorted((ROOT / "voice").rglob("*.py")), ROOT / "llm" / "agent.py"]
WIRE = ROOT / "voice" / "runs" / "telephony.py"  # its `name` is a wire protocol's, not an event's


def names_used(path: Path) -> list[tuple[int, str]]:
    """(line, name) for each event name written in a source: the name given to `emit` or `AgentEvent`,
    and each string compared with an event's name (`e.name == "x"`, `name in ("x", "y")`,
    `e.get("event") == "x"`)."""
    found = []

    def strings(node: ast.AST) -> list[str]:
        return [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)]

    def is_name(node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute):
            return node.attr == "name"
        if isinstance(node, ast.Name):
            return node.id == "name"
        return isinstance(node, ast.Call) and strings(node) == ["event"]  # e.get("event")

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if callee in ("emit", "AgentEvent"):
                # Timeline.emit(turn, name, ...), TurnLog.emit(name, ...), AgentEvent(name, ...)
                given = [a for a in node.args[:2] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                found += [(node.lineno, a.value) for a in given]
        elif isinstance(node, ast.Compare) and path != WIRE:
            sides = [node.left, *node.comparators]
            if any(is_name(s) for s in sides):
                found += [(node.lineno, s) for side in sides if not is_name(side) for s in strings(side)]
    return found


def test_every_event_name_in_the_sources_is_in_a_closed_set():
    used = [(path, line, name) for path in SOURCES for line, name in names_used(path)]
    assert len({name for _, _, name in used}) > 30  # the scan does see the names
    unknown = [
        f"{p.relative_to(ROOT)}:{line}: {name!r}"
        for p, line, name in used
        if name not in EVENTS | AGENT_EVENTS
    ]
    assert not unknown, "\n".join(unknown)


def test_the_scan_finds_a_misspelt_name(tmp_path):
    source = tmp_path / "typo.py"
    source.write_text('log.emit("tool_strat")\nif e.name in ("t0", "endpiont"):\n    pass\n')
    assert [n for _, n in names_used(source) if n not in EVENTS] == ["tool_strat", "endpiont"]


def test_an_unknown_name_is_refused_when_emitted():
    timeline = Timeline("call")
    timeline.emit(0, "t0", 0)
    with pytest.raises(ValueError, match="tool_strat"):
        timeline.emit(0, "tool_strat")
    with pytest.raises(ValueError, match="tool_strat"):
        TurnLog(timeline, 0, held=True).emit("tool_strat")  # held logs too, before any release
    with pytest.raises(ValueError, match="answr"):
        AgentEvent("answr", 0, 0)


def test_the_anchors_and_the_other_events_are_apart():
    assert not {a.name for a in ANCHORS} & set(OTHER_EVENTS)
