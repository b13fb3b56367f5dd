"""Streaming replies split into reasoning, content and tool calls, whatever the chunking."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers

from llm.engine.tokenizer import Tokenizer
from llm.serving.reply import ReplyParser, split_reply

SPECIAL = ["<think>", "</think>", "<|tool_call|>"]
WORDS = (
    SPECIAL
    + ["lookup_order", '{"order_id":', '"4217"}']
    + ["Let", "me", "check", "hmm", "an", "order", "Your", "shipped."]
)


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok")
    hf = HFTokenizer(models.WordLevel({w: i for i, w in enumerate(dict.fromkeys(WORDS))}, unk_token="hmm"))
    hf.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    hf.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    hf.save(str(path / "tokenizer.json"))
    return Tokenizer(path)


@pytest.mark.parametrize("chunk", [1, 2, 5])
def test_reasoning_content_and_tool_calls(tok, chunk):
    ids = tok.encode(
        '<think> hmm an order </think> Let me check <|tool_call|> lookup_order {"order_id": "4217"}'
    )
    parser = ReplyParser(tok)
    reasoning = content = ""
    for i in range(0, len(ids), chunk):
        r, c = parser.feed(ids[i : i + chunk])
        reasoning += r
        content += c
    assert reasoning == "hmm an order"
    assert content == "Let me check"
    (call,) = parser.tool_calls()
    assert (call.name, call.arguments, call.id) == ("lookup_order", '{"order_id": "4217"}', "call_1")
    assert split_reply(tok, ids)[0] == "Let me check"


def test_plain_answer_has_no_tool_calls(tok):
    content, calls = split_reply(tok, tok.encode("Your order shipped."))
    assert content == "Your order shipped." and calls == []
