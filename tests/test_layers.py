"""The dependency rules between the project's packages, each checked in a fresh interpreter (what a
module imports shows in `sys.modules`) and, for imports made only when a command runs, in the source.

- The `ttfat` command (ttfat/) is the only place that knows voice/, llm/, asr/ and tts/ together:
  nothing under those four imports it.
- The voice pipeline (voice/) speaks to its LLM through the chat vocabulary (llm/chat.py), never
  through a client library: it imports no `openai`.
- The engine (llm/engine) knows nothing of serving, the agent or the support domain.
- The voice process never loads torch: it talks to the LLM over HTTP, with the agent, the chat types
  and the HTTP client all torch-free; nor does the command before a command that needs it runs.
- The voice pipeline reaches the store domain only through the agent's tools (llm/support/tools.py).
- Model names are resolved on the serving side (llm/serving/models.py), which knows none itself: the
  `ttfat` command calls llm/support/models.py's `register_bundled`; importing it registers nothing.
- Within the voice pipeline, no import leads back to a module that imports it (type-only imports
  count): the rooms of a call are handed a `CallContext`, never the `Call`.
- A turn's record has one writer, its `TurnLog` (voice/timing/timeline.py): no other source changes one.
- No package's modules import each other in a circle.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from voice.timing.timeline import TurnRecord

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("voice", "llm", "asr", "tts")  # the command package (ttfat/) stands on these four
TOOLS_DOOR = {"llm.support.tools"}
BUNDLED_MODELS = "llm.support.models"


def module_files(package: str) -> dict[str, Path]:
    """Each module of a package (`__main__` left out: importing it runs a command) -> its file."""
    files = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] != "__main__":
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def modules(package: str) -> list[str]:
    return list(module_files(package))


def loaded_after_importing(names: list[str]) -> set[str]:
    code = "import importlib, json, sys\n"
    code += f"for name in {names!r}:\n    importlib.import_module(name)\n"
    code += "print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


def sources(*packages: str) -> list[Path]:
    return sorted(path for package in packages for path in (ROOT / package).rglob("*.py"))


def test_nothing_below_the_command_imports_it():
    assert any(m.startswith("voice") for path in sources("ttfat") for m in imported(path))  # the scan works
    for path in sources(*LAYERS):
        up = {m for m in imported(path) if m == "ttfat" or m.startswith("ttfat.")}
        assert not up, f"{path.relative_to(ROOT)} imports {up}"


def test_the_voice_pipeline_imports_no_llm_client_library():
    assert "openai" in imported(ROOT / "llm" / "serving" / "client.py")  # the scan sees such imports
    for path in sources("voice"):
        clients = {m for m in imported(path) if m.split(".")[0] in ("openai", "httpx")}
        assert not clients, f"{path.relative_to(ROOT)} imports {clients}"
    loaded = loaded_after_importing(modules("voice"))
    assert "voice.pipeline.call" in loaded and "openai" not in loaded


def test_the_engine_imports_nothing_from_serving_agent_or_support():
    loaded = loaded_after_importing(modules("llm/engine"))
    assert "llm.engine.engine" in loaded and "torch" in loaded  # it did import the engine
    bad = {
        m for m in loaded if m.startswith(("llm.serving", "llm.support", "llm.agent", "llm.chat", "voice"))
    }
    assert not bad


def test_the_voice_process_never_imports_torch():
    talk_to_the_llm = [
        "llm.agent",
        "llm.chat",
        "llm.serving.client",
        "llm.serving.process",
        "llm.serving.models",
        BUNDLED_MODELS,
        *TOOLS_DOOR,
    ]
    names = modules("ttfat") + modules("voice") + modules("asr") + modules("tts") + talk_to_the_llm
    loaded = loaded_after_importing(names)
    assert "voice.pipeline.call" in loaded and "llm.support.tools" in loaded and "ttfat.stack" in loaded
    assert "torch" not in loaded
    assert not {m for m in loaded if m.startswith("llm.engine")}


def test_the_agents_tools_stand_on_the_store_alone():
    loaded = loaded_after_importing(sorted(TOOLS_DOOR))
    support = {m for m in loaded if m.startswith("llm.support")}
    assert support == {
        "llm.support",
        "llm.support.tools",
        "llm.support.store",
        "llm.support.search",
        "llm.support.policy",
        "llm.support.spoken",
        "llm.support.datafiles",
    }


def test_the_model_registry_knows_no_names_of_its_own():
    """The serving side's registry imports nothing of the support line (nor torch) and starts empty;
    importing the support line's models module (and the whole command) registers nothing, and that
    module loads nothing else of the support line; its `register_bundled` adds the bundled names."""
    show = "print(json.dumps([list(m.MODELS), list(sys.modules)]))"
    code = f"import json, sys, llm.serving.models as m\n{show}"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    names, loaded = json.loads(done.stdout)
    assert names == []
    assert not [m for m in loaded if m.startswith("llm.support") or m == "torch"]
    code = f"import json, sys, ttfat.cli, {BUNDLED_MODELS} as b, llm.serving.models as m\n{show}\n"
    code += f"b.register_bundled()\n{show}"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    (before, loaded), (after, _) = (json.loads(line) for line in done.stdout.splitlines())
    assert before == [] and after == ["bundled", "bundled-ar"]
    support = {m for m in loaded_after_importing([BUNDLED_MODELS]) if m.startswith("llm.support")}
    assert support == {"llm.support", BUNDLED_MODELS}


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
    for path in sources("voice"):
        support = {m for m in imported(path) if m.startswith("llm.support")}
        assert support <= TOOLS_DOOR, f"{path.relative_to(ROOT)} imports {support - TOOLS_DOOR}"
        engine = {m for m in imported(path) if m.startswith(("llm.engine", "torch"))}
        assert engine <= {"llm.engine.errors"}, f"{path.relative_to(ROOT)} imports {engine}"  # torch-free


def import_graph(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Each module of the packages -> the modules of the packages it imports (at the top or inside a
    function; `from package import module` counts as importing the module)."""
    paths = {name: path for package in packages for name, path in module_files(package).items()}
    graph = {}
    for name, path in paths.items():
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                submodules = {f"{node.module}.{a.name}" for a in node.names} & paths.keys()
                graph[name] |= submodules
                if len(submodules) < len(node.names) and node.module in paths:
                    graph[name].add(node.module)
            elif isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names} & paths.keys()
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle of imports (its path, back to its first module) for each group of modules that
    import each other, found as the strongly connected components (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set(stack[stack.index(v) :])
            del stack[stack.index(v) :]
            if len(group) > 1 or v in graph[v]:
                found.append(circle(graph, group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """The shortest path from the group's first module back to itself, inside the group."""
    start = min(group)
    paths = {w: [start, w] for w in graph[start] & group}
    queue = list(paths)
    while start not in paths:
        v = queue.pop(0)
        for w in sorted(graph[v] & group):
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return paths[start]


def test_no_modules_import_each_other_in_a_circle():
    found = cycles(import_graph(("ttfat", *LAYERS)))
    assert not found, "; ".join(" -> ".join(c) for c in found)


def test_the_circle_check_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c", "a"], ["e", "e"]]


def test_no_room_of_a_call_imports_call():
    """The rooms of a call (turn taking, speculation, the answer, ...) are handed a CallContext, never
    the Call: voice/pipeline/call.py imports them and nothing it reaches imports it back."""
    graph = import_graph(("voice",))
    assert "voice.pipeline.turntaking" in graph["voice.pipeline.call"]  # the graph does see imports
    reached, todo = set(), ["voice.pipeline.call"]
    while todo:
        for other in graph[todo.pop()] - reached:
            reached.add(other)
            todo.append(other)
    rooms = {"turntaking", "speculation", "answer", "speaking"}
    assert {f"voice.pipeline.{room}" for room in rooms} <= reached
    assert not {name for name in reached if "voice.pipeline.call" in graph[name]}


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
    """Stages emit events and write a turn's record through its TurnLog (voice/timing/timeline.py), its one
    writer: nothing else assigns a record's fields or replaces a record."""
    assert record_writes(ROOT / "voice" / "timing" / "timeline.py")  # the scan finds writes where they are
    writes = [
        w
        for path in sorted((ROOT / "voice").rglob("*.py"))
        if path.name != "timeline.py"
        for w in record_writes(path)
    ]
    assert not writes, "\n".join(writes)
