"""Reading a model's reply as it streams: reasoning between <think> and </think> (when the tokenizer
has them), content text, then, after a <|tool_call|> token, tool calls written as
`name {json arguments}` (the bundled models' format). Shared by the server and the in-process backend."""

from __future__ import annotations

from llm.chat import ToolCall
from llm.engine.tokenizer import Tokenizer

TOOL_CALL_TOKEN = "<|tool_call|>"
THINK_TOKENS = ("<think>", "</think>")


def parse_tool_call(text: str, index: int = 0) -> ToolCall:
    name, _, args = text.strip().partition(" ")
    return ToolCall(name=name, arguments=args.strip() or "{}", id=f"call_{index + 1}")


class ReplyParser:
    """Feed token ids as they become final; get back the new reasoning and content text each time."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        self.marker = tokenizer.token_to_id(TOOL_CALL_TOKEN)  # None: the model has no tool format
        self.think_open, self.think_close = (tokenizer.token_to_id(t) for t in THINK_TOKENS)
        self.thinking = False
        self.reasoning: list[int] = []
        self.content: list[int] = []
        self.calls: list[list[int]] = []
        self.said = {"reasoning": "", "content": ""}

    def feed(self, token_ids: list[int]) -> tuple[str, str]:
        """(new reasoning text, new content text)."""
        for token in token_ids:
            if token == self.marker:
                self.calls.append([])
            elif self.calls:
                self.calls[-1].append(token)
            elif token == self.think_open:
                self.thinking = True
            elif token == self.think_close:
                self.thinking = False
            else:
                (self.reasoning if self.thinking else self.content).append(token)
        return self._new("reasoning", self.reasoning), self._new("content", self.content)

    def _new(self, kind: str, ids: list[int]) -> str:
        text = self.tokenizer.decode(ids)
        # byte-level BPE can end mid-character: hold text back until it decodes cleanly
        if len(text) <= len(self.said[kind]) or text.endswith("\ufffd"):
            return ""
        new, self.said[kind] = text[len(self.said[kind]) :], text
        return new

    def tool_calls(self) -> list[ToolCall]:
        return [parse_tool_call(self.tokenizer.decode(ids), i) for i, ids in enumerate(self.calls)]


def split_reply(tokenizer: Tokenizer, token_ids: list[int]) -> tuple[str, list[ToolCall]]:
    """A finished reply as (content, tool calls)."""
    parser = ReplyParser(tokenizer)
    parser.feed(token_ids)
    return tokenizer.decode(parser.content).strip(), parser.tool_calls()
