"""Agent files: a voice agent written down in TOML (system prompt, tools with their backends, fillers,
the model name and decoding extras to send), so that ttfat measures anyone's agent without code.
`load_agent_file(path)` reads and checks one; `AgentSpec.agent(llm)` builds the agent loop over any chat
backend. The bundled Northwind agent is one such file (`BUNDLED_AGENT`), read by the same code."""

from llm.agentfile.spec import BUNDLED_AGENT, AgentFileError, AgentSpec, ToolSpec, load_agent_file

__all__ = ["BUNDLED_AGENT", "AgentFileError", "AgentSpec", "ToolSpec", "load_agent_file"]
