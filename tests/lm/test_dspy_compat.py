"""Every DSPy internal scijudge uses lives in lm/dspy_compat.py; each one is checked against the installed DSPy.

These tests fail loudly on a DSPy upgrade that moves or reshapes something a patch relies on, instead of the
patch silently doing nothing.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import dspy
import pytest
from dspy import lm15

from scijudge.lm import dspy_compat

SRC = Path(__file__).resolve().parents[2] / "src" / "scijudge"
# DSPy modules that are public API and may be used anywhere; every other dspy.* module is internal.
PUBLIC_DSPY = {"dspy", "dspy.lm15"}


def test_the_installed_dspy_has_every_internal_we_use():
    assert dspy_compat.check() == []
    assert dspy_compat.dspy_version().startswith(dspy_compat.TESTED_DSPY)


def test_check_fails_loudly_when_an_internal_moves(monkeypatch):
    from dspy.clients import costs
    from dspy.clients.engines import base

    monkeypatch.delattr(costs, "estimate_cost")
    monkeypatch.delattr(base, "validate_request")
    monkeypatch.delattr(lm15.AnthropicLM, "_payload")
    problems = dspy_compat.check()
    assert "dspy.clients.costs.estimate_cost is gone" in problems
    assert "dspy.clients.engines.base.validate_request is gone" in problems
    assert "dspy.lm15.AnthropicLM._payload(request, stream) changed" in problems


def test_an_untested_dspy_version_warns(monkeypatch):
    monkeypatch.setattr(dspy_compat, "dspy_version", lambda: "3.5.0")
    with pytest.warns(UserWarning, match=r"tested with DSPy 3\.4\.x; found 3\.5\.0"):
        dspy_compat.warn_if_untested()


@pytest.mark.slow  # seconds: the fast subset stays under a minute
def test_only_the_compat_module_imports_dspy_internals(source_trees):
    offenders = []
    sources = source_trees(SRC)
    for path in sources.paths:
        if path.name == "dspy_compat.py":
            continue
        for node in sources.nodes(path):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            offenders += [f"{path.relative_to(SRC)}:{node.lineno} {name}" for name in names
                          if name.split(".")[0] == "dspy" and name not in PUBLIC_DSPY]
    assert offenders == []


def test_the_class_swap_adds_hooks_to_a_real_lm_and_refuses_an_unrelated_class():
    lm = dspy.LM("openai/gpt-4o-mini")
    seen = []

    class Counting(type(lm)):
        def update_history(self, entry):
            seen.append(entry)
            super().update_history(entry)

    dspy_compat.rebind_class(lm, Counting)
    assert type(lm) is Counting and lm.model == "openai/gpt-4o-mini"
    with pytest.raises(TypeError, match="does not extend"):
        dspy_compat.rebind_class(lm, dict)


def test_every_call_of_a_swapped_lm_reaches_update_history():
    """What the optimization budget counts on: DSPy records each call through ``update_history``."""
    from scijudge.testing.scripted import scripted_lm

    lm = scripted_lm(lambda request: "hello", cache=False)
    seen = []

    class Counting(type(lm)):
        def update_history(self, entry):
            seen.append(entry)
            super().update_history(entry)

    dspy_compat.rebind_class(lm, Counting)
    assert lm("say hello") == ["hello"]
    assert len(seen) == 1 and seen[0]["usage"]["prompt_tokens"] == 100


def test_the_engine_request_check_is_dspys():
    request = lm15.Request(model="m", messages=(lm15.Message.user("hi"),))
    dspy_compat.validate_engine_request(request)
    bad = lm15.Request(model="m", messages=(lm15.Message.user("hi"),), config=lm15.Config(extensions={"api_key": "k"}))
    with pytest.raises(ValueError, match="execution controls"):
        dspy_compat.validate_engine_request(bad)
    with pytest.raises(TypeError):
        dspy_compat.validate_engine_request({"model": "m"})


def test_anthropic_batch_entries_use_the_native_clients_payload_and_parser():
    client = lm15.AnthropicLM(api_key="test-key", base_url="http://127.0.0.1:9/v1")
    request = lm15.Request(model="claude-x", messages=(lm15.Message.user("Rate this."),), system="Be brief.",
                           config=lm15.Config(max_tokens=64, temperature=0.3))
    params = dspy_compat.anthropic_payload(client, request)
    assert "stream" not in params
    assert params["model"] == "claude-x" and params["max_tokens"] == 64 and params["temperature"] == 0.3
    assert params["messages"][0]["role"] == "user"
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
               "content": [{"type": "text", "text": '{"judgment": {"rating": 4}}'}], "stop_reason": "end_turn",
               "usage": {"input_tokens": 11, "output_tokens": 7}}
    response = dspy_compat.anthropic_batch_answer(client, message)
    assert response.text == '{"judgment": {"rating": 4}}'
    assert response.usage.input_tokens == 11 and response.usage.output_tokens == 7


def test_model_prices_and_lm_errors_come_from_dspy():
    list_in, list_out = dspy_compat.model_rates("openai", "gpt-4o-mini", ("input_cost_per_token",
                                                                          "output_cost_per_token"))
    assert list_in is not None and 0 < list_in < list_out  # output tokens cost more than input for this model
    assert dspy_compat.model_rates("openai", "no-such-model-xyz", ("input_cost_per_token",
                                                                   "output_cost_per_token")) == (None, None)
    from dspy.utils.exceptions import LMRateLimitError

    assert issubclass(LMRateLimitError, dspy_compat.lm_error_class())


def test_offline_model_metadata_sets_the_variable_once_and_respects_the_user(monkeypatch):
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    dspy_compat.use_local_cost_map()
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "true"
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "false")
    dspy_compat.use_local_cost_map()
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "false"


def test_the_model_info_memoisation_applies():
    from scijudge.lm import _speedups

    assert _speedups.install() is True and dspy_compat.model_info_patched()


def _entry(lm):
    entry = {k: v for k, v in lm.history[-1].items() if k not in ("uuid", "timestamp", "response")}
    entry["request"] = repr(entry["request"])  # (the response differs by its id only: compared by text above)
    return entry


def _request(text, config):
    return lm15.Request(model="openai/gpt-4o-mini", messages=(lm15.Message.user(text),), system="Be brief.",
                        config=config)


def test_the_inline_async_call_is_lm_acall_without_its_thread_hops(loopback, monkeypatch):
    """``acall_request`` (the asyncio executor's LM call) gives what ``lm.acall(request, cache=False)`` gives: the
    response, the history entry with its price; the engine is routed once per request shape."""
    import asyncio

    from dspy.clients import execution

    from scijudge import make_lm

    server = loopback(lambda body: '{"judgment": {"rating": 4}}')
    lm = make_lm("openai/gpt-4o-mini", api_base=server.url, cache=False)
    config = lm15.Config(temperature=0.0, max_tokens=64, response_format={"type": "json_object"})
    routed = []
    engine = execution._engine
    monkeypatch.setattr(execution, "_engine", lambda *args: routed.append(args) or engine(*args))

    async def both():
        stock = await lm.acall(_request("one", config), cache=False)
        stock_entry = _entry(lm)
        routed.clear()
        inline = [await dspy_compat.acall_request(lm, _request(text, config)) for text in ("one", "two", "three")]
        assert len(routed) == 1  # the same shape (texts aside): routed once
        await dspy_compat.acall_request(lm, _request("four", lm15.Config(temperature=0.3, max_tokens=64)))
        assert len(routed) == 2  # another config: routed afresh
        return stock, stock_entry, inline

    assert dspy_compat.inline_acall_holds()
    stock, stock_entry, inline = asyncio.run(both())
    assert [r.text for r in inline] == [stock.text] * 3
    assert inline[0].usage == stock.usage and inline[0].finish_reason == stock.finish_reason
    lm.history.clear()
    asyncio.run(dspy_compat.acall_request(lm, _request("one", config)))
    assert _entry(lm) == stock_entry and stock_entry["cost"] is not None


def test_the_inline_async_call_raises_what_lm_acall_raises(monkeypatch):
    import asyncio

    from scijudge import make_lm
    from scijudge.testing import closed_port_url

    lm = make_lm("openai/gpt-4o-mini", api_base=closed_port_url(), cache=False)
    config = lm15.Config(max_tokens=8)
    errors = []
    for call in (lambda: lm.acall(_request("x", config), cache=False), lambda: dspy_compat.acall_request(
            lm, _request("x", config))):
        with pytest.raises(Exception) as caught:
            asyncio.run(call())
        errors.append((type(caught.value), getattr(caught.value, "status", None)))
    assert errors[0] == errors[1]


def test_the_inline_async_call_leaves_callbacks_subclasses_and_a_changed_dspy_to_lm_acall(monkeypatch):
    import asyncio

    from dspy.utils.callback import BaseCallback

    used = []

    async def stock(self, request, cache=True):
        used.append(type(self).__name__)
        return "stock"

    monkeypatch.setattr(dspy.LM, "acall", stock)
    monkeypatch.setattr(dspy_compat, "inline_acall_holds", lambda: True)
    lm = dspy.LM("openai/gpt-4o-mini", cache=False)
    request = _request("x", lm15.Config(max_tokens=8))
    with dspy.context(callbacks=[BaseCallback()]):
        assert asyncio.run(dspy_compat.acall_request(lm, request)) == "stock"
    monkeypatch.setattr(dspy_compat, "inline_acall_holds", lambda: False)
    assert asyncio.run(dspy_compat.acall_request(lm, request)) == "stock"
    assert used == ["LM", "LM"]


def test_check_names_a_mirrored_dspy_function_that_changed(monkeypatch):
    monkeypatch.setitem(dspy_compat._MIRRORED, "dspy.clients.execution:aexecute", "0" * 16)
    monkeypatch.setattr(dspy_compat, "_MIRROR_HOLDS", None)
    assert any("dspy.clients.execution:aexecute" in problem for problem in dspy_compat.check())
    assert not dspy_compat.inline_acall_holds()
    monkeypatch.setattr(dspy_compat, "_MIRROR_HOLDS", None)


def test_the_route_memo_gives_dspys_route():
    from dspy.clients import capabilities

    assert dspy_compat.memoise_route_lookup() and capabilities.resolve.scijudge_memo
    lm = dspy.LM("openai/gpt-4o-mini")
    assert capabilities.resolve(lm) == capabilities.resolve.__wrapped__(lm)
    assert capabilities.resolve(lm) is capabilities.resolve(lm)
