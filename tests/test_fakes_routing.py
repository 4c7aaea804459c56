"""The fake OpenRouter's endpoints API, provider pinning and the server's 429 throttle."""

from __future__ import annotations

import httpx
import pytest

from lab.fakes import FakeServer, script
from lab.fakes.openrouter import Route, routing

POOL = ("Chutes", "DeepInfra", "SiliconFlow", "Together", "Fireworks", "Nebius")


def _pinned(backend: str, **prefs) -> dict:
    return {
        "model": "fake/think-leak",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "provider": {"order": [backend], "allow_fallbacks": False, **prefs},
    }


def test_endpoints_api_lists_the_scenarios_backend_pool(fake_server):
    r = httpx.get(f"{fake_server.base_url}/api/v1/models/fake/think-leak/endpoints")
    assert r.status_code == 200
    data = r.json()["data"]
    assert data["id"] == "fake/think-leak"
    assert [e["provider_name"] for e in data["endpoints"]] == list(POOL)
    assert data["endpoints"][0]["name"] == "Chutes | fake/think-leak"
    assert data["endpoints"][0]["pricing"]["prompt"] == "0.0000003"


def test_endpoints_api_of_an_unknown_model_is_404(fake_server):
    r = httpx.get(f"{fake_server.base_url}/api/v1/models/fake/nope/endpoints")
    assert (r.status_code, r.json()) == (
        404,
        {"error": {"message": "Model not found", "code": 404}},
    )


@pytest.mark.parametrize(
    ("prefs", "expected"),
    [
        ({"order": ["SiliconFlow"], "allow_fallbacks": False}, Route("SiliconFlow")),
        ({"order": ["siliconflow/fp8"]}, Route("SiliconFlow")),  # slug, variant ignored
        ({"order": ["Parasail", "Nebius"]}, Route("Nebius")),  # first that serves it
        ({"order": ["Parasail"], "allow_fallbacks": False}, Route(unavailable=True)),
        ({"order": ["Parasail"]}, Route()),  # fallbacks allowed: the usual choice
        ({"order": ["Chutes"], "ignore": ["chutes"], "allow_fallbacks": False}, Route(None, True)),
        ({"only": ["Parasail"]}, Route(unavailable=True)),
    ],
)
def test_routing_honours_order_only_ignore_and_allow_fallbacks(prefs, expected):
    assert routing({"provider": prefs}, POOL) == expected


def test_a_pinned_request_is_served_by_its_backend():
    for backend in POOL:
        assert script("openrouter", "fake/think-leak", _pinned(backend), seed=0).backend == backend


def test_a_pinned_request_to_a_backend_outside_the_pool_gets_openrouters_404():
    plan = script("openrouter", "fake/think-leak", _pinned("Parasail"), seed=0)
    assert plan.status == 404
    assert b"No allowed providers are available for the selected model." in plan.body


def test_pinned_visits_to_a_half_leaky_backend_leak_at_its_rate():
    # SiliconFlow leaks half the time: visit k leaks when frac(k * golden ratio) < 0.5
    leaks = [
        b" the caf\xc3\xa9. Keep it"
        in script("openrouter", "fake/think-leak", _pinned("SiliconFlow"), seed=k).body
        for k in range(20)
    ]
    assert leaks[:6] == [True, False, True, False, True, True]
    assert sum(leaks) == 10


def test_the_server_counts_pinned_visits_per_backend():
    with FakeServer(delay_scale=0) as srv:
        url = f"{srv.base_url}/api/v1/chat/completions"
        for backend in ("Chutes", "SiliconFlow", "Chutes", "SiliconFlow"):
            httpx.post(url, json=_pinned(backend)).read()
        assert [(r.body["provider"]["order"][0], r.seed) for r in srv.requests] == [
            ("Chutes", 0),
            ("SiliconFlow", 0),
            ("Chutes", 1),
            ("SiliconFlow", 1),
        ]


def test_throttle_first_answers_429_with_retry_after_then_serves():
    with FakeServer(delay_scale=0, throttle_first=2, retry_after="3") as srv:
        url = f"{srv.base_url}/api/v1/chat/completions"
        first = [httpx.post(url, json=_pinned("Chutes")) for _ in range(3)]
        assert [r.status_code for r in first] == [429, 429, 200]
        assert first[0].headers["retry-after"] == "3"
        assert [r.status for r in srv.requests] == [429, 429, 200]


# -- the route table the fake modules declare -------------------------------------------------


def test_every_fake_family_declares_its_route_and_the_server_reads_them():
    from lab.demo import FAMILY_ROUTES
    from lab.fakes.base import FAMILIES, ROUTES
    from lab.fakes.server import route

    assert set(FAMILIES) | {"responses"} == set(ROUTES)
    assert FAMILY_ROUTES == {
        "openrouter": ("openrouter", "/api/v1"),
        "openai": ("openai", "/v1"),
        "google": ("google", "/v1beta"),
        "anthropic": ("anthropic", "/v1"),
    }
    assert [
        route("POST", p)
        for p in (
            "/api/v1/chat/completions",
            "/v1/chat/completions",
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            "/v1alpha/models/a%2Fb:generateContent",
            "/v1beta/models/gemini-2.5-flash:countTokens",
            "/v1/messages",
            "/api/v1/responses",
            "/v1/embeddings",
        )
    ] == [
        ("openrouter", None),
        ("openai", None),
        ("google", "gemini-2.5-flash"),
        ("google", "a/b"),
        (None, None),
        ("anthropic", None),
        ("responses", None),
        (None, None),
    ]
    assert route("GET", "/v1/chat/completions") == (None, None)


def test_family_base_url_is_each_sdks_base_from_the_routes(fake_server):
    base = fake_server.base_url
    assert {
        f: fake_server.family_base_url(f) for f in ("openrouter", "openai", "gemini", "anthropic")
    } == {
        "openrouter": base + "/api/v1",
        "openai": base + "/v1",
        "gemini": base + "/v1beta",
        "anthropic": base,
    }
