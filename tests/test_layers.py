"""The dependency rules between the project's packages, each checked in a fresh interpreter (what a
module imports shows in `sys.modules`) and, for imports made only when a command runs, in the source.

- The engine (llm/engine) knows nothing of serving, the agent or the support domain.
- The voice process never loads torch: it talks to the LLM over HTTP, with the agent, the chat types
  and the HTTP client all torch-free.
- The voice pipeline reaches the store domain only through the agent's tools (llm/support/tools.py);
  the LLM's own commands (serve, ask, generate, bench-llm, eval-llm, train) run the engine and the
  domain, as they must.
- Model names are resolved on the serving side (llm/serving/models.py), which knows none itself: the
  `ttfat` command (voice/cli/__init__.py, and nothing else of the voice process) imports
  llm/support/models.py, whose import registers the bundled names.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LLM_COMMANDS = {"serve", "ask", "generate", "bench_llm", "eval_llm", "train", "decoding"}
TOOLS_DOOR = {"llm.support.tools"}
BUNDLED_MODELS = "llm.support.models"  # registers its names when imported
APP_ROOT = ROOT / "voice" / "cli" / "__init__.py"  # the one voice module that imports BUNDLED_MODELS


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


def test_the_engine_imports_nothing_from_serving_agent_or_support():
    loaded = loaded_after_importing(modules("llm/engine"))
    assert "llm.engine.engine" in loaded and "torch" in loaded  # it did import the engine
    bad = {
        m for m in loaded if m.startswith(("llm.serving", "llm.support", "llm.agent", "llm.chat", "voice"))
    }
    assert not bad


def test_the_voice_process_never_imports_torch():
    talk_to_the_llm = ["llm.agent", "llm.chat", "llm.serving.client", "llm.serving.process",
                       "llm.serving.models", BUNDLED_MODELS, *TOOLS_DOOR]  # fmt: skip
    names = modules("voice") + modules("asr") + modules("tts") + talk_to_the_llm
    loaded = loaded_after_importing(names)
    assert "voice.call" in loaded and "llm.support.tools" in loaded
    assert "torch" not in loaded
    assert not {m for m in loaded if m.startswith("llm.engine")}


def test_the_agents_tools_stand_on_the_store_alone():
    loaded = loaded_after_importing(sorted(TOOLS_DOOR))
    support = {m for m in loaded if m.startswith("llm.support")}
    assert support == {"llm.support", "llm.support.tools", "llm.support.store", "llm.support.search",
                       "llm.support.policy", "llm.support.spoken", "llm.support.datafiles"}  # fmt: skip


def test_the_model_registry_knows_no_names_of_its_own():
    """The serving side's registry imports nothing of the support line (nor torch) and starts empty;
    the bundled names are there once the support line's models module is imported, and that module
    loads nothing else of the support line."""
    code = "import llm.serving.models as m, sys\nprint(sorted(m.MODELS))\nprint(sorted(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    names, loaded = done.stdout.splitlines()
    assert names == "[]"
    assert "'llm.support" not in loaded and "'torch'" not in loaded
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
    for path in sorted((ROOT / "voice").rglob("*.py")):
        if path.parent.name == "cli" and path.stem in LLM_COMMANDS:
            continue
        door = TOOLS_DOOR | {BUNDLED_MODELS} if path == APP_ROOT else TOOLS_DOOR
        support = {m for m in imported(path) if m.startswith("llm.support")}
        assert support <= door, f"{path.relative_to(ROOT)} imports {support - door}"
        engine = {m for m in imported(path) if m.startswith(("llm.engine", "torch"))}
        assert engine <= {"llm.engine.errors"}, f"{path.relative_to(ROOT)} imports {engine}"  # torch-free

