"""LiteLLM, langchain-openai and pydantic-ai record through the lab with no false cut.

Issue 30 item 1: these clients drive the openai SDK, which closes the response right after
``data: [DONE]``; the lab once marked every such recording ``cancelled`` with the
``recording_cut`` anomaly. For each client this check streams one chat completion from
``lab fake-server`` on loopback (no key on disk, nothing leaves 127.0.0.1), recorded three
ways: ``lab.recording_client`` (or ``async_recording_client``) on ``httpx`` and on
``httpx2``, and through ``lab proxy``. It then replays each recording and checks that the
replayed text is what the client read, that no attempt ends other than ``eof``, and that
neither ``recording_cut`` nor ``eof_without_terminator`` is detected.

The tests drive the openai, anthropic and google-genai SDKs themselves
(``tests/test_sdk_recordings.py``); these three wrappers are too heavy for the dev extra and
live in ``[bench]``. A client that is not installed prints ``SKIP``.

    python bench/sdk_wrappers_record.py
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Table, machine_notes, verdict  # noqa: E402

KEY = "sk-canary-wrappers"
HI = [{"role": "user", "content": "hi"}]
MODEL = "fake/clean"
WAYS = ("recording_client httpx", "recording_client httpx2", "lab proxy")


def _langchain(base_url: str, http: Any) -> str:
    """langchain-openai's sync ``.stream()``."""
    from langchain_openai import ChatOpenAI

    kwargs = {"http_client": http} if http is not None else {}
    llm = ChatOpenAI(model=MODEL, base_url=base_url, api_key=KEY, **kwargs)
    return "".join(str(chunk.content) for chunk in llm.stream("hi"))


def _litellm(base_url: str, http: Any) -> str:
    """``litellm.completion(stream=True)`` (its OpenAI-compatible route)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch its price map
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    import litellm
    import openai

    logging.getLogger("LiteLLM").setLevel(logging.ERROR)
    extra: dict[str, Any] = {}
    if http is not None:
        extra["client"] = openai.OpenAI(base_url=base_url, api_key=KEY, http_client=http)
    response = litellm.completion(
        model=f"openai/{MODEL}",
        messages=HI,
        stream=True,
        api_base=base_url,
        api_key=KEY,
        **extra,
    )
    return "".join(c.choices[0].delta.content or "" for c in response if c.choices)


def _pydantic_ai(base_url: str, http: Any) -> str:
    """pydantic-ai's ``Agent.run_stream`` (async; closes ``http`` in its own event loop)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    async def run() -> str:
        kwargs = {"http_client": http} if http is not None else {}
        provider = OpenAIProvider(base_url=base_url, api_key=KEY, **kwargs)
        agent = Agent(OpenAIChatModel(MODEL, provider=provider))
        try:
            async with agent.run_stream("hi") as result:
                return await result.get_output()
        finally:
            if http is not None:
                await http.aclose()

    return asyncio.run(run())


CLIENTS: dict[str, tuple[str, Callable[[str, Any], str], bool]] = {
    # name: (module to find, run(base_url, http client or None), async client)
    "langchain-openai .stream()": ("langchain_openai", _langchain, False),
    "litellm completion(stream=True)": ("litellm", _litellm, False),
    "pydantic-ai run_stream": ("pydantic_ai", _pydantic_ai, True),
}


def _record(fake: Any, out: Path, way: str, run: Callable[[str, Any], str], is_async: bool):
    """Run one client one way; returns (text it read, capture path)."""
    import lab

    base_url = fake.family_base_url("openai")
    if way == "lab proxy":
        from lab.proxy import ProxyConfig, ProxyServer

        config = ProxyConfig(provider="openai", upstream=base_url, out=out)
        with ProxyServer(config) as proxy:
            text = run(proxy.url, None)
        (path,) = proxy.recordings
        return text, path
    transport = way.split()[-1]
    make = lab.async_recording_client if is_async else lab.recording_client
    http = make(out, provider="openai", http=transport)
    try:
        text = run(base_url, http)
    finally:
        if not is_async:  # an async client is closed by ``run`` in its event loop
            http.close()
    return text, http.capture_path


def main(argv: list[str] | None = None) -> int:
    from lab.anomalies import detect
    from lab.fakes import FakeServer
    from lab.replay import replay

    print(f"# SDK wrappers recording through the lab  ({machine_notes()})")
    table = Table("client", "recorded by", "text as read", "attempts end", "anomalies")
    ok = True
    with tempfile.TemporaryDirectory() as tmp, FakeServer(delay_scale=0) as fake:
        for name, (module, run, is_async) in CLIENTS.items():
            if importlib.util.find_spec(module) is None:
                ok = verdict(name, None, f"{module} not installed (pip install -e '.[bench]')")
                continue
            for i, way in enumerate(WAYS):
                out = Path(tmp) / f"{module}-{i}"
                text, path = _record(fake, out, way, run, is_async)
                (result,) = replay(path)
                ends = [a.end_reason for a in result.attempts]
                found = detect(result)
                same = bool(text) and result.text == text
                table.add(name, way, same, ",".join(ends), ",".join(found) or "-")
                good = (
                    same
                    and ends == ["eof"]
                    and result.error is None
                    and "recording_cut" not in found
                    and "eof_without_terminator" not in found
                )
                ok = (
                    verdict(
                        f"{name}, {way}",
                        good,
                        f"replayed text equals the client's ({len(text)} chars): {same}; "
                        f"attempts end {ends}; anomalies {found}",
                    )
                    and ok
                )
    table.print()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
