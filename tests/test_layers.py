"""The dependency rules between the project's packages, each checked in a fresh interpreter (what a
module imports shows in `sys.modules`) and, for imports made only when a command runs, in the source.

- The engine (llm/engine) knows nothing of serving, the agent or the support domain.
- The voice process never loads torch: it talks to the LLM over HTTP, with the agent, the chat types
  and the HTTP client all torch-free.
- The voice pipeline reaches the store domain only through the agent's tools (llm/support/tools.py)
  and the place of the bundled weights (llm/support/models.py); the LLM's own commands (serve, ask,
  generate, bench-llm, eval-llm, train) run the engine and the domain, as they must.
- Within the voice pipeline, no import leads back to a module that imports it (type-only imports
  count): the rooms of a call are handed a `CallContext`, never the `Call`.
- A turn's record has one writer, its `TurnLog` (voice/timeline.py): no other source changes one.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from voice.timeline import TurnRecord

ROOT = Path(__file__).resolve().parents[1]
LLM_COMMANDS = {"serve", "ask", "generate", "bench_llm", "eval_llm", "train", "decoding"}
TOOLS_DOOR = {"llm.support.tools", "llm.support.models"}


def modules(package: str) -> list[str]:
    base = ROOT / package
    names = []
    for path in sorted(base.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return [n for n in names if not n.endswith("__main__")]


def loaded_after_importing(names: list[str]) -> set[str]:
    code = "import importlib, json, sys\n"
    code += f"for name in {names!r}:\n    importlib.import_module(name)\n"
    code += "print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


def test_the_engine_imports_nothing_from_serving_agent_or_support():
    loaded = loaded_after_importing(modules("llm/engine"))
    assert "llm.engine.engine" in loaded and "torch" in loaded  # it did import the engine
    bad = {
        m for m in loaded if m.startswith(("llm.serving", "llm.support", "llm.agent", "llm.chat", "voice"))
    }
    assert not bad


def test_the_voice_process_never_imports_torch():
    talk_to_the_llm = ["llm.agent", "llm.chat", "llm.serving.client", "llm.serving.process", *TOOLS_DOOR]
    names = modules("voice") + modules("asr") + modules("tts") + talk_to_the_llm
    loaded = loaded_after_importing(names)
    assert "voice.call" in loaded and "llm.support.tools" in loaded
    assert "torch" not in loaded
    assert not {m for m in loaded if m.startswith("llm.engine")}


def test_the_agents_tools_stand_on_the_store_alone():
    loaded = loaded_after_importing(sorted(TOOLS_DOOR))
    support = {m for m in loaded if m.startswith("llm.support")}
    assert support == {"llm.support", "llm.support.tools", "llm.support.models", "llm.support.store",
                       "llm.support.search", "llm.support.policy", "llm.support.spoken",
                       "llm.support.datafiles"}  # fmt: skip


def imported(path: Path) -> set[str]:
    """Every module a source file imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def test_the_voice_pipeline_reaches_the_store_domain_only_through_the_agents_tools():
    for path in sorted((ROOT / "voice").rglob("*.py")):
        if path.parent.name == "cli" and path.stem in LLM_COMMANDS:
            continue
        support = {m for m in imported(path) if m.startswith("llm.support")}
        assert support <= TOOLS_DOOR, f"{path.relative_to(ROOT)} imports {support - TOOLS_DOOR}"
        engine = {m for m in imported(path) if m.startswith(("llm.engine", "torch"))}
        assert engine <= {"llm.engine.errors"}, f"{path.relative_to(ROOT)} imports {engine}"  # torch-free


def voice_import_graph() -> dict[str, set[str]]:
    """voice/*.py -> the voice modules each imports, wherever the import is (at the top, in a function,
    under `if TYPE_CHECKING:`): an import made only for a type hint still ties the two modules."""
    names = {f"voice.{p.stem}": p for p in (ROOT / "voice").glob("*.py") if p.stem != "__init__"}
    graph = {}
    for name, path in names.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:  # `from voice import x` imports voice.x
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = found & names.keys()
    return graph


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, as the modules along it (None: there is none)."""
    done, path = set(), []

    def visit(name: str) -> list[str] | None:
        if name in path:
            return path[path.index(name) :] + [name]
        if name in done:
            return None
        path.append(name)
        for other in sorted(graph[name]):
            if cycle := visit(other):
                return cycle
        path.pop()
        done.add(name)
        return None

    return next((cycle for name in sorted(graph) if (cycle := visit(name))), None)


def test_no_room_of_a_call_imports_call():
    """The rooms of a call (turn taking, speculation, the answer, ...) are handed a CallContext, never
    the Call: voice/call.py imports them and nothing it reaches imports it back."""
    graph = voice_import_graph()
    assert "voice.turntaking" in graph["voice.call"]  # the graph does see imports
    assert import_cycle(graph) is None, " -> ".join(import_cycle(graph))
    reached, todo = set(), ["voice.call"]
    while todo:
        for other in graph[todo.pop()] - reached:
            reached.add(other)
            todo.append(other)
    assert {"voice.turntaking", "voice.speculation", "voice.answer", "voice.speaking"} <= reached
    assert not {name for name in reached if "voice.call" in graph[name]}


RECORD_FIELDS = {f.name for f in dataclasses.fields(TurnRecord)}
MUTATORS = {"update", "setdefault", "append", "extend", "insert", "pop", "popitem", "clear", "remove"}


def is_record(node: ast.expr) -> bool:
    """An expression that names a turn record: `record`, `<x>.record`, `<x>.scratch`, `<x>.turns[i]`."""
    if isinstance(node, ast.Name):
        return node.id == "record"
    if isinstance(node, ast.Attribute):
        return node.attr in ("record", "scratch")
    return (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "turns"
    )


def record_writes(path: Path) -> list[str]:
    """Each place in a source file that changes a turn record or replaces one: assigning (or deleting) a
    field or an item of one, a mutating call on one, setattr on a record, or `<x>.turns[i] = ...`."""

    def field_of_record(node: ast.expr) -> bool:
        return isinstance(node, ast.Attribute) and node.attr in RECORD_FIELDS and is_record(node.value)

    def written(target: ast.expr) -> bool:
        if isinstance(target, ast.Tuple | ast.List):
            return any(written(t) for t in target.elts)
        if isinstance(target, ast.Subscript):  # record.info[k] = v, timeline.turns[i] = r
            value = target.value
            return field_of_record(value) or (isinstance(value, ast.Attribute) and value.attr == "turns")
        return field_of_record(target)

    def changes(node: ast.AST) -> bool:
        if isinstance(node, ast.Assign | ast.Delete):
            return any(written(t) for t in node.targets)
        if isinstance(node, ast.AugAssign | ast.AnnAssign):
            return written(node.target)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
            return bool(node.args) and is_record(node.args[0])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return node.func.attr in MUTATORS and field_of_record(node.func.value)
        return False

    tree = ast.parse(path.read_text())
    return [f"{path.relative_to(ROOT)}:{n.lineno}: {ast.unparse(n)}" for n in ast.walk(tree) if changes(n)]


def test_nothing_but_the_turn_log_writes_a_turn_record():
    """Stages emit events and write a turn's record through its TurnLog (voice/timeline.py), its one
    writer: nothing else assigns a record's fields or replaces a record."""
    assert record_writes(ROOT / "voice" / "timeline.py")  # the scan does find writes where they are
    writes = [w for path in sorted((ROOT / "voice").rglob("*.py")) if path.name != "timeline.py"
              for w in record_writes(path)]  # fmt: skip
    assert not writes, "\n".join(writes)
