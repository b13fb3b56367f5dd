"""The dependency rules between the project's packages, each checked in a fresh interpreter (what a
module imports shows in `sys.modules`) and, for imports made only when a command runs, in the source.

- The engine (llm/engine) knows nothing of serving, the agent or the support domain.
- The voice process never loads torch: it talks to the LLM over HTTP, with the agent, the chat types
  and the HTTP client all torch-free.
- The voice pipeline reaches the store domain only through the agent's tools (llm/support/tools.py)
  and the place of the bundled weights (llm/support/models.py); the LLM's own commands (serve, ask,
  generate, bench-llm, eval-llm, train) run the engine and the domain, as they must.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LLM_COMMANDS = {"serve", "ask", "generate", "bench_llm", "eval_llm", "train"}
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
