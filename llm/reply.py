"""Reading a bundled-model reply as it streams: content text until a <|tool_call|> token, then tool
calls written as `name {json arguments}`. Shared by the in-process agent and the HTTP server."""

from __future__ import annotations

from dataclasses import dataclass

from llm.tokenizer import Tokenizer

TOOL_CALL_TOKEN = "<|tool_call|>"


@dataclass
class ToolCall:
    name: str
    arguments: str  # JSON text, as the model wrote it
    id: str = "call_1"
    result: dict | None = None
    start_ns: int = 0
    end_ns: int = 0


def parse_tool_call(text: str, index: int = 0) -> ToolCall:
    name, _, args = text.strip().partition(" ")
    return ToolCall(name=name, arguments=args.strip() or "{}", id=f"call_{index + 1}")


class ReplyParser:
    """Feed token ids as they become final; get back the new content text each time."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        self.marker = tokenizer.token_to_id(TOOL_CALL_TOKEN)  # None: the model has no tool format
        self.content: list[int] = []
        self.calls: list[list[int]] = []
        self.text = ""

    def feed(self, token_ids: list[int]) -> str:
        for token in token_ids:
            if token == self.marker:
                self.calls.append([])
            elif self.calls:
                self.calls[-1].append(token)
            else:
                self.content.append(token)
        text = self.tokenizer.decode(self.content)
        # byte-level BPE can end mid-character: hold text back until it decodes cleanly
        if len(text) <= len(self.text) or text.endswith("\ufffd"):
            return ""
        new, self.text = text[len(self.text) :], text
        return new

    def tool_calls(self) -> list[ToolCall]:
        return [parse_tool_call(self.tokenizer.decode(ids), i) for i, ids in enumerate(self.calls)]


def split_reply(tokenizer: Tokenizer, token_ids: list[int]) -> tuple[str, list[ToolCall]]:
    """A finished reply as (content, tool calls)."""
    parser = ReplyParser(tokenizer)
    parser.feed(token_ids)
    return tokenizer.decode(parser.content).strip(), parser.tool_calls()
