"""Faithful items: Responses items, content parts and Anthropic blocks are kept verbatim,
read where memlane understands them, and never become empty placeholders in windows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlane import InvalidInputError, Memory, NotFoundError
from memlane.tokens import get_counter

IMAGE = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"}
RUN = [
    {"role": "user", "content": [{"type": "input_text", "text": "what is on this picture?"}, IMAGE]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB\u00e9x"},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "look", "arguments": "{\"zoom\":2}", "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "a red bicycle"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "bikes"}},
    {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "A red bicycle.", "annotations": [], "logprobs": []}]},
]
ANTHROPIC = [
    {"role": "user", "content": [{"type": "text", "text": "weather in Oslo?"},
                                 {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "sig"},
                                      {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain, 4 C"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "It rains in Oslo."}]},
]


def test_responses_items_roundtrip_exactly_on_both_stores(any_mem: Memory) -> None:
    sid = any_mem.create_session()
    any_mem.add_messages(sid, RUN)
    got = [m.to_item() for m in any_mem.items(sid)]
    assert json.dumps(got) == json.dumps(RUN)  # same values, same key order
    assert [m.to_item() for m in any_mem.items(sid, limit=2)] == RUN[-2:]


def test_items_are_read_for_windows_search_and_tokens(any_mem: Memory) -> None:
    sid = any_mem.create_session()
    stored = any_mem.add_messages(sid, RUN)
    user, reasoning, call, output, hosted, answer = stored
    assert (user.role, user.content) == ("user", "what is on this picture?")
    assert call.tool_calls == [{"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{\"zoom\":2}"}}]
    assert (output.role, output.tool_call_id, output.content) == ("tool", "call_1", "a red bicycle")
    assert not reasoning.in_window and not hosted.in_window and answer.in_window
    window = [(m.role, m.content) for m in any_mem.window(sid, 4000).messages]
    assert window == [("user", "what is on this picture?"), ("assistant", ""), ("tool", "a red bicycle"),
                      ("assistant", "A red bicycle.")]
    assert ("assistant", "") not in [(m.role, m.content) for m in any_mem.window(sid, 4000).messages if not m.tool_calls]
    counter = get_counter(None)
    for m in stored:  # every kind is counted, as the window renders it (cached when the vocabulary was loaded)
        assert counter.count_message(m) > 3 and m.token_count in (None, counter.count_message(m))
    any_mem.flush()
    assert any_mem.search("bicycle", session_id=sid)


def test_anthropic_blocks_are_read_and_kept(any_mem: Memory) -> None:
    sid = any_mem.create_session()
    stored = any_mem.add_messages(sid, ANTHROPIC)
    assert [m.to_item() for m in any_mem.items(sid)] == ANTHROPIC
    assert stored[1].tool_calls == [{"id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]
    assert (stored[2].role, stored[2].tool_call_id, stored[2].content) == ("tool", "toolu_1", "rain, 4 C")
    window = [(m.role, m.content) for m in any_mem.window(sid, 4000).messages]
    assert window == [("user", "weather in Oslo?"), ("assistant", ""), ("tool", "rain, 4 C"), ("assistant", "It rains in Oslo.")]


def test_parallel_call_items_render_as_one_call_message(mem: Memory) -> None:
    sid = mem.create_session()
    mem.add_messages(sid, [
        {"role": "user", "content": "two cities"},
        {"type": "function_call", "call_id": "a", "name": "w", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "w", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "sun"},
        {"type": "function_call_output", "call_id": "b", "output": "snow"},
    ])
    msgs = mem.window(sid, 4000).messages
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in msgs[1].tool_calls or ()] == ["a", "b"]


def test_item_history_ops(any_mem: Memory) -> None:
    sid = any_mem.create_session()
    any_mem.add_messages(sid, [{"role": "user", "content": f"m{i}"} for i in range(5)])
    popped = any_mem.pop(sid)
    assert popped is not None and popped.content == "m4"
    assert any_mem.forget_at(sid, 1) is not None and any_mem.forget_at(sid, -1) is not None
    assert [m.content for m in any_mem.items(sid)] == ["m0", "m2"]
    assert any_mem.forget_at(sid, 7) is None
    any_mem.replace_history(sid, [{"role": "assistant", "content": "fresh"}])
    assert [m.content for m in any_mem.items(sid)] == ["fresh"]
    with pytest.raises(InvalidInputError):
        any_mem.replace_history(sid, [{"role": "bogus", "content": "x"}])
    assert [m.content for m in any_mem.items(sid)] == ["fresh"]  # bad input changed nothing
    any_mem.clear_session(sid)  # hides
    assert any_mem.forget_history(sid) == 1
    assert any_mem.store.message_ids(sid, include_hidden=True) == [] and any_mem.pop(sid) is None


def test_malformed_items_are_refused_with_a_reason(mem: Memory) -> None:
    sid = mem.create_session()
    with pytest.raises(InvalidInputError, match="call_id"):
        mem.add(sid, {"type": "function_call_output", "output": "x"})
    with pytest.raises(InvalidInputError, match="no matching call"):
        mem.add(sid, {"type": "function_call_output", "call_id": "nope", "output": "x"})
    with pytest.raises(InvalidInputError, match="role"):
        mem.add(sid, {"type": "message", "role": "robot", "content": []})
    assert mem.items(sid) == []


def test_items_survive_export_and_import_and_are_named_in_transcripts(mem: Memory) -> None:
    sid = mem.create_session()
    mem.add_messages(sid, RUN)
    for fmt in ("json", "jsonl"):
        other = Memory.in_memory(embedder="hashing")
        (copy,) = other.import_sessions(mem.export_session(sid, fmt), fmt)
        assert [m.to_item() for m in other.items(copy)] == RUN
        other.close()
    transcript = mem.export_session(sid, "markdown")
    assert "_(message item with input_image, kept as given)_" in transcript
    assert "_(reasoning item, kept as given)_" in transcript


def test_items_over_the_server_match_memory(tmp_path: Path) -> None:
    from memlane.client import MemoryClient
    from memlane.server.auth import key_store_for
    from tests.server_support import new_key, open_memory, running_server

    mem = open_memory(tmp_path / "server.db")
    key_a, key_b = new_key(mem, "a"), new_key(mem, "b")
    try:
        with running_server(mem, keys=key_store_for(mem.store), require_auth=True) as url, \
                MemoryClient(url, api_key=key_a) as remote, MemoryClient(url, api_key=key_b) as other:
            remote.add_messages("s", RUN)
            assert [m.to_item() for m in remote.items("s")] == RUN
            assert [m.to_item() for m in remote.items("s", limit=2)] == RUN[-2:]
            stored = remote.items("s")
            assert stored[2].tool_calls == [{"id": "call_1", "type": "function",
                                             "function": {"name": "look", "arguments": "{\"zoom\":2}"}}]
            with pytest.raises(NotFoundError):
                other.items("s")  # another tenant's session is not found
            popped = remote.pop("s")
            assert popped is not None and popped.to_item() == RUN[-1]
            gone = remote.forget_at("s", 1)
            assert gone is not None and gone.to_item() == RUN[1]
            assert remote.forget_at("s", 99) is None
            assert [m.to_item() for m in remote.replace_history("s", ANTHROPIC)] == ANTHROPIC
            with pytest.raises(InvalidInputError):
                remote.replace_history("s", [{"type": "function_call_output", "output": "no call id"}])
            assert [m.to_item() for m in remote.items("s")] == ANTHROPIC  # bad input changed nothing
            assert remote.forget_history("s") == len(ANTHROPIC)
            assert remote.items("s") == [] and mem.store.message_ids("s", include_hidden=True) == []
    finally:
        mem.close()
