"""Tokenizer from `tokenizer.json` (the `tokenizers` library) and the chat template of
`tokenizer_config.json`, rendered with a sandboxed Jinja environment as Hugging Face does."""

from __future__ import annotations

import json
from pathlib import Path

from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer as HFTokenizer


def _token_text(value) -> str | None:
    """tokenizer_config.json stores special tokens as strings or as {"content": ...} objects."""
    return value.get("content") if isinstance(value, dict) else value


class Tokenizer:
    def __init__(self, directory: str | Path):
        directory = Path(directory)
        self._tok = HFTokenizer.from_file(str(directory / "tokenizer.json"))
        self._longest: int | None = None
        cfg_path = directory / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
        self.bos_token = _token_text(cfg.get("bos_token"))
        self.eos_token = _token_text(cfg.get("eos_token"))
        template = cfg.get("chat_template")
        if template is None and (directory / "chat_template.jinja").exists():  # newer checkpoints' own file
            template = (directory / "chat_template.jinja").read_text()
        if isinstance(template, list):  # named templates: take the default one
            template = next((t["template"] for t in template if t.get("name") == "default"), None)
        self.chat_template: str | None = template
        self._template = None

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def token_to_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def encode(self, text: str) -> list[int]:
        """Encode text as it is: special tokens written in the text are recognised, none are added."""
        return self._tok.encode(text, add_special_tokens=False).ids

    def longest_token_bytes(self) -> int:
        """The most UTF-8 bytes of text any one token stands for: a text of n bytes is at least
        n / this many tokens, which bounds a prompt's length before it is tokenized."""
        if self._longest is None:
            self._longest = max(
                len(self.decode([i], skip_special_tokens=False).encode()) for i in range(self.vocab_size)
            )
        return max(self._longest, 1)

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def encode_chat(
        self, messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = True
    ) -> list[int]:
        """Token ids of a conversation rendered with the chat template."""
        return self.encode(self.apply_chat_template(messages, tools, add_generation_prompt))

    def apply_chat_template(
        self, messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = True
    ) -> str:
        if not self.chat_template:
            raise ValueError("this tokenizer has no chat_template in tokenizer_config.json; use raw prompts")
        if self._template is None:  # compiling is slow: once per tokenizer
            env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
            env.filters["tojson"] = lambda v, indent=None: json.dumps(v, indent=indent, ensure_ascii=False)
            env.globals["raise_exception"] = _raise
            self._template = env.from_string(self.chat_template)
        return self._template.render(
            messages=messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token or "",
            eos_token=self.eos_token or "",
        )


def _raise(message: str):
    raise ValueError(message)
