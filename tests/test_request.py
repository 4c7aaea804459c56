"""build_body: one neutral request -> each provider's body, with the per-provider message fixes
(docs/reference.md, "10.1 Per-provider message fixes")."""

from __future__ import annotations

import pytest

from lab.request import build_body, normalize_messages, request_url

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "integer", "enum": [1, 2]},
                    "tags": {"type": "array"},
                },
                "required": ["city", "ghost"],
            },
        },
    }
]

HISTORY = [
    {"role": "user", "content": "weather?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "need the tool",
        "tool_calls": [
            {
                "id": "call.1:x",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Bern"}'},
                "thought_signature": "CikB",
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call.1:x", "content": '{"temp": 3}'},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "and this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    },
]


def test_openrouter_body_keeps_the_reference_shape_and_order():
    body = build_body(
        "openrouter", model="m", prompt="hi", stop=["x"], temperature=0.5, tools=TOOLS, top_p=0.9
    )
    assert list(body) == [
        "model",
        "messages",
        "stream",
        "stream_options",
        "temperature",
        "tools",
        "top_p",
        "stop",
    ]
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_openai_compatible_body_follows_the_reference_order():
    body = build_body(
        "deepseek",
        model="deepseek-chat",
        system="Be brief.",
        prompt="hi",
        top_p=0.9,
        max_tokens=100,
        stop=["END"],
        temperature=0.3,
        tools=TOOLS,
        thinking=True,
    )
    assert list(body) == [
        "model",
        "messages",
        "stream",
        "stream_options",
        "temperature",
        "stop",
        "max_tokens",
        "tools",
        "top_p",
        "thinking",
    ]
    assert body["stream_options"] == {"include_usage": True}
    assert body["thinking"] == {"type": "enabled"}
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}


def test_openai_sends_max_completion_tokens_and_no_reasoning_fields():
    body = build_body("openai", model="gpt-5", messages=HISTORY, max_tokens=50)
    assert "max_tokens" not in body
    assert body["max_completion_tokens"] == 50
    assistant = body["messages"][1]
    assert "reasoning_content" not in assistant
    assert assistant["tool_calls"] == [
        {
            "id": "call.1:x",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Bern"}'},
        }
    ]


def test_unknown_options_pass_through_for_openai_compatible_families():
    body = build_body("nvidia", model="m", prompt="hi", chat_template_kwargs={"thinking": True})
    assert body["chat_template_kwargs"] == {"thinking": True}


def test_prompt_images_become_image_url_parts():
    body = build_body("zai", model="glm-4.6", prompt="what is this?", images=["https://x/a.png"])
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "https://x/a.png"}},
            ],
        }
    ]


def test_deepseek_assistant_turns_always_carry_reasoning_content():
    msgs = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ]
    body = build_body("deepseek", model="deepseek-reasoner", messages=msgs)
    assert body["messages"][1] == {"role": "assistant", "content": "b", "reasoning_content": ""}
    kept = build_body("deepseek", model="deepseek-reasoner", messages=HISTORY)["messages"][1]
    assert kept["reasoning_content"] == "need the tool"


def test_claude_tool_call_ids_are_rewritten_to_the_allowed_charset():
    msgs = normalize_messages("openrouter", "anthropic/claude-sonnet-4.5", HISTORY)
    assert msgs[1]["tool_calls"][0]["id"] == "call_1_x"
    assert msgs[2]["tool_call_id"] == "call_1_x"
    # other models keep their ids
    assert normalize_messages("openrouter", "openai/gpt-5", HISTORY)[2]["tool_call_id"] == (
        "call.1:x"
    )


def test_mistral_ids_are_nine_alphanumerics_and_done_follows_a_tool_result():
    msgs = normalize_messages("custom", "mistralai/Devstral-Small", HISTORY)
    assert msgs[1]["tool_calls"][0]["id"] == "call1x000"
    assert msgs[2]["tool_call_id"] == "call1x000"
    assert msgs[3] == {"role": "assistant", "content": "Done."}
    assert msgs[4]["role"] == "user"


def test_lone_surrogates_are_replaced():
    msgs = normalize_messages("openai", "m", [{"role": "user", "content": "a\ud83db"}])
    assert msgs[0]["content"] == "a\ufffdb"


def test_anthropic_body_blocks_tools_and_alternation():
    body = build_body(
        "anthropic",
        model="claude-sonnet-4-5",
        system="Be brief.",
        messages=[{"role": "user", "content": ""}, *HISTORY],
        tools=TOOLS,
        temperature=0.2,
        stop="END",
        thinking=2048,
        tool_choice="required",
    )
    assert body["model"] == "claude-sonnet-4-5"
    assert body["max_tokens"] == 4096
    assert body["stream"] is True
    assert body["system"] == "Be brief."
    assert body["stop_sequences"] == ["END"]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["tool_choice"] == {"type": "any"}
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city",
            "input_schema": TOOLS[0]["function"]["parameters"],
        }
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "call_1_x",
                    "name": "get_weather",
                    "input": {"city": "Bern"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1_x", "content": '{"temp": 3}'},
                {"type": "text", "text": "and this?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                },
            ],
        },
    ]


def test_anthropic_thinking_blocks_are_replayed_first():
    msgs = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "a",
            "thinking_blocks": [{"type": "thinking", "thinking": "t", "signature": "S"}],
        },
    ]
    body = build_body("anthropic", model="claude-x", messages=msgs, max_tokens=10)
    assert body["max_tokens"] == 10
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "t", "signature": "S"},
        {"type": "text", "text": "a"},
    ]


def test_google_body_is_gemini_native():
    body = build_body(
        "google",
        model="gemini-2.5-flash",
        system="Be brief.",
        messages=HISTORY,
        tools=TOOLS,
        temperature=1.0,
        top_p=0.95,
        top_k=40,
        max_tokens=8192,
        stop=["END"],
        thinking_budget=1024,
        include_thoughts=True,
    )
    assert body["model"] == "gemini-2.5-flash"
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "weather?"}]},
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Bern"}},
                    "thoughtSignature": "CikB",
                }
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"temp": 3}}},
                {"text": "and this?"},
                {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
            ],
        },
    ]
    assert body["generationConfig"] == {
        "temperature": 1.0,
        "topP": 0.95,
        "topK": 40,
        "maxOutputTokens": 8192,
        "stopSequences": ["END"],
        "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True},
    }
    (decl,) = body["tools"][0]["functionDeclarations"]
    assert decl["parameters"]["properties"]["unit"] == {"type": "string", "enum": ["1", "2"]}
    assert decl["parameters"]["properties"]["tags"] == {"type": "array", "items": {}}
    assert decl["parameters"]["required"] == ["city"]


def test_gemma_gets_the_system_prompt_as_the_first_user_text():
    body = build_body("google", model="gemma-3-27b-it", system="S", prompt="hi")
    assert "systemInstruction" not in body
    assert body["contents"][0]["parts"][0]["text"].endswith("do not reveal them.]\n\nS")
    assert body["contents"][0]["parts"][1] == {"text": "hi"}
    assert "systemInstruction" in build_body("google", model="gemma-4-e4b", system="S", prompt="x")


def test_google_rejects_options_it_cannot_map():
    with pytest.raises(ValueError, match="min_p"):
        build_body("google", model="gemini-2.5-flash", prompt="hi", min_p=0.1)


def test_errors_for_missing_input_and_unknown_provider():
    with pytest.raises(ValueError, match="prompt or messages"):
        build_body("openai", model="m")
    with pytest.raises(ValueError, match="unknown provider"):
        build_body("nope", model="m", prompt="x")


def test_request_url_per_provider():
    assert request_url("anthropic", None, "c") == "https://api.anthropic.com/v1/messages"
    assert request_url("custom", "http://h:1/v1", "m") == "http://h:1/v1/chat/completions"
    assert request_url("google", None, "gemini-2.5-flash").endswith(
        "/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )


def test_reference_stops_add_the_universal_and_persona_stops():
    body = build_body(
        "zai",
        model="glm-4.6",
        prompt="hi",
        stop=["END"],
        reference_stops=True,
        persona_name="Tomori",
    )
    assert body["stop"] == ["END", "<｜begin▁of▁sentence｜>", "\nTomori:"]
    custom = build_body(
        "custom", model="m", prompt="hi", reference_stops=True, persona_name="Tomori"
    )
    assert custom["stop"] == ["<｜begin▁of▁sentence｜>"]
    assert "stop" not in build_body("zai", model="glm-4.6", prompt="hi", persona_name="Tomori")
