"""The bundled models' tokenizer: byte-level BPE with every digit its own token (a tiny model must
copy order numbers digit by digit), a word after a JSON quote encoded as in running text (see
`space_after_quotes`), special tokens for the chat roles and tool calls, and a chat template that
renders OpenAI-style messages (tool calls and tool results included)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

SPECIAL = ["<|pad|>", "<|bos|>", "<|eos|>", "<|mask|>", "<|system|>", "<|user|>", "<|assistant|>",
           "<|tool_call|>", "<|tool_result|>"]  # fmt: skip

# The tool list is fixed for the bundled models (they were trained on it), so `tools` is not rendered.
# A conversation without a system message gets the default system prompt the tokenizer was saved with
# (the models always saw one).
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if messages[0]['role'] != 'system' %}<|system|>DEFAULT_SYSTEM{% endif %}"
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}<|system|>{{ m['content'] }}"
    "{% elif m['role'] == 'user' %}<|user|>{{ m['content'] }}"
    "{% elif m['role'] == 'assistant' %}<|assistant|>{{ m['content'] or '' }}"
    "{% for c in m['tool_calls'] or [] %}<|tool_call|>{{ c['function']['name'] }} "
    "{% if c['function']['arguments'] is string %}{{ c['function']['arguments'] }}"
    "{% else %}{{ c['function']['arguments'] | tojson }}{% endif %}{% endfor %}<|eos|>"
    "{% elif m['role'] == 'tool' %}<|tool_result|>{{ m['content'] }}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def space_after_quotes(tok: Tokenizer) -> Tokenizer:
    """Encode a word that follows a quote as if a space preceded it, and drop that space when decoding.

    Byte-level BPE splits a word differently at the start of a JSON string than after a space: the
    caller's " sofa" is [" so", "f", "a"], the argument `"sofa` was ["so", "f", "a"], so copying a
    product name into `check_stock` was a spelling transduction the small model got wrong for names it
    had not seen as arguments. With this, both are [" so", "f", "a"] and the copy is token for token.
    Decoding is exact unless the text has a quote, a space and a letter ("a "b" c" decodes as "a "b"c");
    the bundled models never write quotes outside JSON, where a quote is never followed by a space."""
    tok.normalizer = normalizers.Replace(Regex(r'"(?=\p{L})'), '" ')
    tok.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Replace(Regex(r'" (?=\p{L})'), '"')])
    return tok


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1024) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    space_after_quotes(tok)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return tok


def save_tokenizer(tok: Tokenizer, path: str | Path, default_system: str) -> None:
    """tokenizer.json and tokenizer_config.json (special tokens, the chat template with
    `default_system` for conversations that bring no system message)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    config = {
        "bos_token": "<|bos|>",
        "eos_token": "<|eos|>",
        "pad_token": "<|pad|>",
        "mask_token": "<|mask|>",
        "chat_template": CHAT_TEMPLATE.replace("DEFAULT_SYSTEM", default_system),
    }
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
