"""Gemini's integer enums by number, for clients that ask for them
(``$alt=json;enum-encoding=int``: the Vertex AI SDK, gRPC-transcoding clients), and the
safety ratings of a blocking chunk read by name.

The Gemini API (googleapis ``google/ai/generativelanguage/v1beta``) and Vertex AI
(``google/cloud/aiplatform/v1``) number ``Candidate.FinishReason``, ``BlockReason`` and
``HarmCategory`` differently; :class:`lab.providers.google.GoogleAdapter` reads the first,
:class:`lab.providers.google.VertexAdapter` the second. Pure: no I/O.
"""

from __future__ import annotations

import math
from typing import Any

GOOGLE_FINISH_REASON_NUMBERS: dict[int, str] = {
    1: "STOP",
    2: "MAX_TOKENS",
    3: "SAFETY",
    4: "RECITATION",
    5: "OTHER",
    6: "LANGUAGE",
    7: "BLOCKLIST",
    8: "PROHIBITED_CONTENT",
    9: "SPII",
    10: "MALFORMED_FUNCTION_CALL",
    11: "IMAGE_SAFETY",
    12: "UNEXPECTED_TOOL_CALL",
    13: "TOO_MANY_TOOL_CALLS",
    14: "IMAGE_PROHIBITED_CONTENT",
    15: "IMAGE_OTHER",
    16: "NO_IMAGE",
    17: "IMAGE_RECITATION",
}
"""The Gemini API's ``Candidate.FinishReason`` by number, as a client that asks for integer
enums (``$alt=json;enum-encoding=int``: gRPC-transcoding clients) receives it
(googleapis ``google/ai/generativelanguage/v1beta/generative_service.proto``; 0 is the
unspecified value, read as no finish reason). Vertex AI numbers them differently:
:data:`VERTEX_FINISH_REASON_NUMBERS`."""

VERTEX_FINISH_REASON_NUMBERS: dict[int, str] = {
    1: "STOP",
    2: "MAX_TOKENS",
    3: "SAFETY",
    4: "RECITATION",
    5: "OTHER",
    6: "BLOCKLIST",
    7: "PROHIBITED_CONTENT",
    8: "SPII",
    9: "MALFORMED_FUNCTION_CALL",
    10: "MODEL_ARMOR",
    11: "IMAGE_SAFETY",
    12: "IMAGE_PROHIBITED_CONTENT",
    13: "IMAGE_RECITATION",
    14: "IMAGE_OTHER",
    15: "UNEXPECTED_TOOL_CALL",
    16: "NO_IMAGE",
}
"""Vertex AI's ``Candidate.FinishReason`` by number (googleapis
``google/cloud/aiplatform/v1/content.proto`` up to ``MODEL_ARMOR``; 11-16 as the
``aiplatform_v1`` generated clients number them). The Vertex AI SDK asks for integer
enums on every REST call, so this is the table its recordings need."""

GOOGLE_BLOCK_REASON_NUMBERS: dict[int, str] = {
    1: "SAFETY",
    2: "OTHER",
    3: "BLOCKLIST",
    4: "PROHIBITED_CONTENT",
    5: "IMAGE_SAFETY",
}
"""The Gemini API's ``PromptFeedback.BlockReason`` by number (integer enums, as above)."""

VERTEX_BLOCK_REASON_NUMBERS: dict[int, str] = {
    1: "SAFETY",
    2: "OTHER",
    3: "BLOCKLIST",
    4: "PROHIBITED_CONTENT",
    5: "MODEL_ARMOR",
    6: "JAILBREAK",
}
"""Vertex AI's ``PromptFeedback.BlockedReason`` by number."""

GOOGLE_HARM_CATEGORY_NUMBERS: dict[int, str] = {
    1: "HARM_CATEGORY_DEROGATORY",
    2: "HARM_CATEGORY_TOXICITY",
    3: "HARM_CATEGORY_VIOLENCE",
    4: "HARM_CATEGORY_SEXUAL",
    5: "HARM_CATEGORY_MEDICAL",
    6: "HARM_CATEGORY_DANGEROUS",
    7: "HARM_CATEGORY_HARASSMENT",
    8: "HARM_CATEGORY_HATE_SPEECH",
    9: "HARM_CATEGORY_SEXUALLY_EXPLICIT",
    10: "HARM_CATEGORY_DANGEROUS_CONTENT",
    11: "HARM_CATEGORY_CIVIC_INTEGRITY",
}
"""The Gemini API's ``HarmCategory`` by number (``.../v1beta/safety.proto``)."""

VERTEX_HARM_CATEGORY_NUMBERS: dict[int, str] = {
    1: "HARM_CATEGORY_HATE_SPEECH",
    2: "HARM_CATEGORY_DANGEROUS_CONTENT",
    3: "HARM_CATEGORY_HARASSMENT",
    4: "HARM_CATEGORY_SEXUALLY_EXPLICIT",
    5: "HARM_CATEGORY_CIVIC_INTEGRITY",
    6: "HARM_CATEGORY_JAILBREAK",
}
"""Vertex AI's ``HarmCategory`` by number (``google/cloud/aiplatform/v1/content.proto``)."""

HARM_PROBABILITY_NUMBERS: dict[int, str] = {1: "NEGLIGIBLE", 2: "LOW", 3: "MEDIUM", 4: "HIGH"}
"""``SafetyRating.HarmProbability`` by number (both APIs)."""
HARM_SEVERITY_NUMBERS: dict[int, str] = {
    1: "HARM_SEVERITY_NEGLIGIBLE",
    2: "HARM_SEVERITY_LOW",
    3: "HARM_SEVERITY_MEDIUM",
    4: "HARM_SEVERITY_HIGH",
}
"""``SafetyRating.HarmSeverity`` by number (Vertex AI)."""


def enum_name(value: Any, numbers: dict[int, str]) -> str | None:
    """An enum field as its name: Google sends the name, or its number under integer enums
    (0, the unspecified value, is None; an unknown number keeps its digits, so it is still
    seen and counted)."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool) and value:
        return numbers.get(value, str(value))
    return None


def _score(value: Any) -> float | None:
    """A rating's ``probabilityScore`` / ``severityScore``: a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        score = float(value)
    except OverflowError:  # a 400-digit integer
        return None
    return score if math.isfinite(score) else None


def google_safety_ratings(
    ratings: Any, categories: dict[int, str] = GOOGLE_HARM_CATEGORY_NUMBERS
) -> list[dict[str, Any]]:
    """A ``safetyRatings`` list read into plain ratings: ``category``, ``probability`` and
    ``severity`` by name (numbers under integer enums named with ``categories`` and the
    shared probability and severity tables), ``probability_score`` and ``severity_score``
    when finite, ``blocked``. Entries that are not objects are skipped."""
    out: list[dict[str, Any]] = []
    if not isinstance(ratings, list):
        return out
    for r in ratings:
        if not isinstance(r, dict):
            continue
        out.append(
            {
                "category": enum_name(r.get("category"), categories),
                "probability": enum_name(r.get("probability"), HARM_PROBABILITY_NUMBERS),
                "probability_score": _score(r.get("probabilityScore")),
                "severity": enum_name(r.get("severity"), HARM_SEVERITY_NUMBERS),
                "severity_score": _score(r.get("severityScore")),
                "blocked": r.get("blocked") is True,
            }
        )
    return out
