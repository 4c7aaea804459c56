"""``lab sweep``: every prompt, K times, against every backend (or model, or base URL).

The question a leak investigation asks is comparative: *which* backend of a model leaks
reasoning or fails more than the others? A sweep answers it with enough streams per backend
for :func:`lab.tables.by_backend`'s Wilson intervals to tell (here against the fake
OpenRouter, where Chutes always leaks and SiliconFlow half the time):

>>> import tempfile
>>> from lab import tables
>>> from lab.fakes import FakeServer
>>> with FakeServer(delay_scale=0) as srv, tempfile.TemporaryDirectory() as out:
...     base = srv.base_url + "/api/v1"
...     backends = discover_backends("fake/think-leak", base_url=base)
...     targets = openrouter_targets("fake/think-leak", backends, base_url=base)
...     plan = sweep_plan("openrouter", [{"prompt": "hi"}], targets, n=10)
...     report = run_sweep(plan, provider="openrouter", out=out, progress=False)
...     bb = tables.by_backend(sweep_streams(out))
>>> report.sent, report.missing
(60, 0)
>>> bb.loc[bb["leak_worse"], "serving_provider"].tolist()
['Chutes', 'SiliconFlow']

- **Targets.** OpenRouter: one per backend, each request pinned with
  ``provider: {order: [backend], allow_fallbacks: false}``; ``auto`` asks
  ``GET {base}/models/{author}/{slug}/endpoints`` which backends serve the model
  (:func:`discover_backends`). Other families: one per model or per base URL.
- **Work items** are keyed by target, a digest of the prompt's request body and the
  repetition number, and the key goes into every exchange's ``meta`` (``meta.sweep``). A
  rerun into the same ``out`` opens what is there and sends only the keys without a finished
  request (:func:`finished_keys`): interrupted, crashed or throttled ones are sent again.
- **Politeness.** At most ``concurrency`` requests in flight; an HTTP 429 pauses every
  worker for its ``Retry-After`` (capped at :data:`MAX_RETRY_AFTER_S`; exponential when the
  header is missing) and sends the item again, up to :data:`MAX_THROTTLE_RETRIES` times. The
  throttled request stays in the capture (nothing is dropped); the table counts the last
  request of each key. ``max_requests`` caps the requests this run sends (every send counts,
  a throttled re-send too; the degradation attempts inside one request do not).
- **Ctrl-C** stops handing out work and lets the requests in flight finish, so every
  exchange in the capture is whole and a rerun sends no request twice; a second Ctrl-C
  stops waiting (the cut exchanges are marked in the capture and sent again on a rerun).
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
import pandas as pd

import lab.capture
from lab import tables
from lab.capture.journal import JOURNAL_SUFFIX
from lab.exceptions import LabError
from lab.recorder import Recorder
from lab.replay import replay

__all__ = [
    "MAX_RETRY_AFTER_S",
    "MAX_THROTTLE_RETRIES",
    "SweepError",
    "SweepItem",
    "SweepReport",
    "Target",
    "base_url_targets",
    "discover_backends",
    "finished_keys",
    "load_prompts",
    "preset_prompts",
    "model_targets",
    "openrouter_targets",
    "run_sweep",
    "sweep_plan",
    "sweep_streams",
]

MAX_RETRY_AFTER_S = 60.0
"""The longest pause a ``Retry-After`` can impose (a longer one is cut to this)."""
MAX_THROTTLE_RETRIES = 5
"""How often one item is sent again after an HTTP 429 before the sweep leaves it for a rerun."""
_BACKOFF_S = 1.0  # first pause after a 429 without Retry-After; doubled each time


class SweepError(ValueError, LabError):
    """Bad sweep input (prompts file, targets, endpoints answer): one line saying what."""


@dataclass(frozen=True)
class Target:
    """One thing a sweep compares: a backend of a model, a model, or a base URL."""

    label: str  # the row name in the per-backend table
    model: str
    base_url: str | None = None
    pin: str | None = None  # OpenRouter backend the requests are pinned to


@dataclass(frozen=True)
class SweepItem:
    """One request of the sweep plan."""

    key: str  # target label | prompt digest | repetition: stable across reruns
    target: Target
    prompt: int  # line number in the prompts file (1-based)
    rep: int
    body: dict[str, Any]


# --------------------------------------------------------------------------- input


PRESETS: dict[str, str] = {
    "tools": "tools_prompts.jsonl",
}
"""Prompt sets shipped with the lab (``lab/data/``), by ``--preset`` name. ``tools``: 54
requests that offer the same four tools (weather, currency, time, web search); 30 ask for
something a tool does, 24 do not (one of them mentions the weather without asking for it)."""


def preset_prompts(name: str) -> Path:
    """The file of the shipped prompt set ``name`` (:data:`PRESETS`)."""
    try:
        file = PRESETS[name]
    except KeyError:
        raise SweepError(
            f"--preset {name!r}: no such prompt set; known: {', '.join(sorted(PRESETS))}"
        ) from None
    return Path(__file__).parent / "data" / file


def load_prompts(path: str | Path) -> list[dict[str, Any]]:
    """Read a prompts file: one JSON value a line, a user message string or a request body.

    A body holds ``messages`` (or ``prompt``), and may hold ``tools``, ``system``, reasoning
    options, ``max_tokens``...; its ``model`` and ``stream`` are the sweep's. Blank lines are
    skipped. Returns one spec per prompt: ``{"prompt": text}`` or the body.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise SweepError(f"--prompts {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SweepError(f"--prompts {path}: cannot read it ({exc})") from None
    specs = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise SweepError(
                f"--prompts {path}:{number}: not JSON ({getattr(exc, 'msg', exc)}); a line is a JSON "
                'string ("Hi!") or a request body ({"messages": [...]})'
            ) from None
        if isinstance(value, str):
            if not value.strip():
                raise SweepError(f"--prompts {path}:{number}: an empty prompt")
            specs.append({"prompt": value, "_line": number})
        elif isinstance(value, dict):
            if not isinstance(value.get("messages"), list) and not isinstance(
                value.get("prompt"), str
            ):
                raise SweepError(
                    f"--prompts {path}:{number}: a request body needs 'messages' (a list) "
                    "or 'prompt' (a string)"
                )
            specs.append({**value, "_line": number})
        else:
            raise SweepError(
                f"--prompts {path}:{number}: a line is a JSON string or object, "
                f"not {type(value).__name__}"
            )
    if not specs:
        raise SweepError(f"--prompts {path}: no prompt in the file")
    return specs


def discover_backends(
    model: str, *, base_url: str, api_key: str | None = None, client: httpx.Client | None = None
) -> list[str]:
    """The backends OpenRouter lists for ``model`` (``GET {base_url}/models/{id}/endpoints``)."""
    if model.count("/") != 1:
        raise SweepError(f"--model {model}: OpenRouter ids are author/slug (e.g. z-ai/glm-4.6)")
    url = f"{base_url.rstrip('/')}/models/{model}/endpoints"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    own = client is None
    client = client or httpx.Client(timeout=30.0)
    try:
        response = client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        raise SweepError(f"--backends auto: GET {url} failed: {exc}") from None
    finally:
        if own:
            client.close()
    if response.status_code != 200:
        raise SweepError(
            f"--backends auto: GET {url} answered HTTP {response.status_code}: "
            f"{response.text[:200]}"
        )
    try:
        endpoints = response.json()["data"]["endpoints"]
        names = [e["provider_name"] for e in endpoints]
    except (ValueError, KeyError, TypeError):
        raise SweepError(f"--backends auto: GET {url}: not an endpoints list") from None
    names = list(dict.fromkeys(n for n in names if isinstance(n, str) and n))
    if not names:
        raise SweepError(f"--backends auto: no endpoint serves {model}; name them with --backends")
    return names


def openrouter_targets(
    model: str, backends: Sequence[str], base_url: str | None = None
) -> list[Target]:
    """One target per backend, requests pinned to it."""
    return [Target(label=b, model=model, base_url=base_url, pin=b) for b in backends]


def model_targets(models: Sequence[str], base_url: str | None = None) -> list[Target]:
    """One target per model (any provider)."""
    return [Target(label=m, model=m, base_url=base_url) for m in models]


def base_url_targets(model: str, base_urls: Sequence[str]) -> list[Target]:
    """One target per base URL serving ``model`` (OpenAI-compatible hosts, proxies...)."""
    return [Target(label=u, model=model, base_url=u) for u in base_urls]


def _digest(body: dict[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _body(provider: str, model: str, spec: dict[str, Any]) -> dict[str, Any]:
    from lab.providers import build_body

    options = {k: v for k, v in spec.items() if k not in ("_line", "model", "stream")}
    prompt = options.pop("prompt", None)
    messages = options.pop("messages", None)
    try:
        return build_body(provider, model=model, prompt=prompt, messages=messages, **options)
    except (TypeError, ValueError) as exc:
        raise SweepError(f"--prompts line {spec.get('_line')}: {exc}") from None


def sweep_plan(
    provider: str,
    prompts: Sequence[dict[str, Any]],
    targets: Sequence[Target],
    *,
    n: int,
) -> list[SweepItem]:
    """Every prompt ``n`` times against every target, interleaved so that a partial run
    (``max_requests``, Ctrl-C) has covered every target about equally."""
    if n < 1:
        raise SweepError(f"--n {n}: at least 1")
    if not targets:
        raise SweepError("nothing to sweep over: no backend, model or base URL")
    items = []
    bodies = {}
    lines = [spec.get("_line", i) for i, spec in enumerate(prompts, 1)]
    for t in targets:
        for line, spec in zip(lines, prompts, strict=True):
            body = _body(provider, t.model, spec)
            if t.pin is not None:
                body["provider"] = {"order": [t.pin], "allow_fallbacks": False}
            bodies[(t, line)] = body
    for rep in range(n):
        for line in lines:
            for t in targets:
                body = bodies[(t, line)]
                key = f"{t.label}|{_digest(body)}|{rep}"
                items.append(SweepItem(key, t, line, rep, body))
    return items


# --------------------------------------------------------------------------- resume


_UNFINISHED = frozenset({"cancelled", "incomplete"})


def _sweep_meta(text: object) -> dict[str, Any]:
    try:
        meta = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    sweep = meta.get("sweep") if isinstance(meta, dict) else None
    return sweep if isinstance(sweep, dict) else {}


def _sweep_exchanges(out: Path) -> pd.DataFrame:
    """The sweep's exchanges under ``out``: one row per exchange, with its sweep key and
    target, in the order they started. Empty when ``out`` holds no capture yet."""
    columns = [
        "stream_id",
        "attempt",
        "status",
        "end_reason",
        "key",
        "target",
        "pin",
        "prompt",
        "order",
    ]
    if not out.is_dir():
        return pd.DataFrame(columns=columns)
    try:
        streams = _capture_streams(out)
    except lab.capture.CaptureError:
        if any(out.iterdir()):
            raise
        return pd.DataFrame(columns=columns)  # an empty directory: nothing recorded yet
    if streams.empty:
        return pd.DataFrame(columns=columns)
    meta = streams["meta"].map(_sweep_meta)
    df = pd.DataFrame(
        {
            "stream_id": streams["stream_id"],
            "attempt": streams["attempt"],
            "status": streams["status"],
            "end_reason": streams["end_reason"],
            "key": meta.map(lambda m: m.get("key")),
            "target": meta.map(lambda m: m.get("target")),
            "pin": meta.map(lambda m: m.get("pin")),
            "prompt": meta.map(lambda m: m.get("prompt")),
            "order": streams["started_at"],
        }
    )
    return df.dropna(subset=["key"]).sort_values(["order", "attempt"], kind="stable")


_STREAMS_COLUMNS = ["stream_id", "attempt", "status", "end_reason", "meta", "started_at"]


def _capture_streams(out: Path) -> pd.DataFrame:
    """The capture's exchanges under ``out`` without their reads: the streams parts' few
    columns this module needs (a sweep's chunks can be gigabytes). With journals left (a
    run killed hard) the reader opens everything, to recover them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lab.capture.reader import _resolve

    parts, journals = _resolve(out)
    if journals:
        return lab.capture.open(out).streams[_STREAMS_COLUMNS]
    tables = [
        pq.read_table(p, columns=_STREAMS_COLUMNS)
        for p in parts
        if p.name.startswith("streams-") and not p.name.endswith(JOURNAL_SUFFIX)
    ]
    if not tables:
        return pd.DataFrame(columns=_STREAMS_COLUMNS)
    return pa.concat_tables(tables, promote_options="permissive").to_pandas()


def _finals(exchanges: pd.DataFrame) -> pd.DataFrame:
    """The last exchange of each logical request, one row per stream_id, in start order."""
    return exchanges.groupby("stream_id", sort=False).tail(1)


def _is_finished(row: Any) -> bool:
    return row.end_reason not in _UNFINISHED and row.status != 429


def finished_keys(out: str | Path) -> set[str]:
    """Keys under ``out`` with a finished request: its last exchange ended (not cut by a
    crash or an abort) and was not an HTTP 429."""
    finals = _finals(_sweep_exchanges(Path(out)))
    return {row.key for row in finals.itertuples() if _is_finished(row)}


# --------------------------------------------------------------------------- running


@dataclass
class SweepReport:
    """What one :func:`run_sweep` call did."""

    planned: int  # items in the plan
    already: int  # finished before this run (resume)
    sent: int = 0  # requests sent by this run (throttled re-sends included)
    finished: int = 0  # items this run finished
    throttled: int = 0  # HTTP 429 answers (each sent again after its Retry-After)
    gave_up: int = 0  # items left for a rerun after MAX_THROTTLE_RETRIES 429s
    interrupted: bool = False
    capped: bool = False  # stopped at max_requests
    path: Path | None = None  # this run's recording directory
    waited_s: float = 0.0  # time spent paused by Retry-After
    errors: list[str] = field(default_factory=list)  # unexpected exceptions, one line each

    @property
    def missing(self) -> int:
        return self.planned - self.already - self.finished


class _RetryAfter(httpx.BaseTransport):
    """Remembers, per thread, the ``Retry-After`` of the last HTTP 429 it passed on."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.local = threading.local()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if response.status_code == 429:
            self.local.value = response.headers.get("retry-after", "")
        return response

    def close(self) -> None:
        self.inner.close()


def _retry_after_s(value: str | None, tries: int) -> float:
    """Seconds to pause: ``Retry-After`` as seconds or an HTTP date; exponential without."""
    if value:
        try:
            seconds = float(value)
        except ValueError:
            try:
                seconds = parsedate_to_datetime(value).timestamp() - time.time()
            except (TypeError, ValueError):
                seconds = _BACKOFF_S * 2**tries
    else:
        seconds = _BACKOFF_S * 2**tries
    return min(max(0.0, seconds), MAX_RETRY_AFTER_S)


class _Pacer:
    """The shared pause every worker honours after a 429, and the request budget."""

    def __init__(self, max_requests: int | None, stop: threading.Event) -> None:
        self._lock = threading.Lock()
        self._not_before = 0.0
        self._left = max_requests
        self.stop = stop
        self.waited = 0.0  # seconds of wall time paused by 429s

    def pause(self, seconds: float) -> None:
        with self._lock:
            now = time.monotonic()
            until = now + seconds
            # wall time paused: the union of the pauses, not their sum
            self.waited += max(0.0, until - max(self._not_before, now))
            self._not_before = max(self._not_before, until)

    def take(self) -> bool:
        """Wait out any pause, then take one request from the budget (False: none left)."""
        while not self.stop.is_set():
            with self._lock:
                delay = self._not_before - time.monotonic()
                if delay <= 0:
                    if self._left is not None:
                        if self._left <= 0:
                            return False
                        self._left -= 1
                    return True
            self.stop.wait(min(delay, 0.2))
        return False


def run_sweep(
    items: Sequence[SweepItem],
    *,
    provider: str,
    out: str | Path,
    concurrency: int = 4,
    max_requests: int | None = None,
    api_key: str | None = None,
    label: str | None = None,
    config: Any = None,
    progress: bool = True,
    transport: httpx.BaseTransport | None = None,
    on_interrupt: Callable[[int], None] | None = None,
) -> SweepReport:
    """Send the items of ``items`` not finished under ``out`` yet; returns what it did.

    Records into a new recording directory under ``out`` (nothing is written when nothing
    is missing). ``on_interrupt(in_flight)`` is called on the first Ctrl-C.
    """
    from tqdm.auto import tqdm

    if concurrency < 1:
        raise SweepError(f"--concurrency {concurrency}: at least 1")
    out = Path(out)
    done = finished_keys(out)
    todo = [it for it in items if it.key not in done]
    report = SweepReport(planned=len(items), already=len(items) - len(todo))
    if not todo:
        return report
    stop = threading.Event()
    pacer = _Pacer(max_requests, stop)
    work: queue.Queue[SweepItem] = queue.Queue()
    for it in todo:
        work.put(it)
    finished: queue.Queue[str] = queue.Queue()
    lock = threading.Lock()
    retry_after = _RetryAfter(transport or httpx.HTTPTransport())
    rec = Recorder(out, label=label or "lab sweep", config=config, transport=retry_after)
    report.path = rec.path
    in_flight = [0]
    alive = [0]  # running workers (counted here: Thread.join interrupted by Ctrl-C can lie)

    def one(item: SweepItem) -> None:
        tries = 0
        while True:
            if not pacer.take():  # stopped, or the budget is spent: the item stays missing
                if not stop.is_set():
                    report.capped = True
                    stop.set()
                return
            retry_after.local.value = None
            meta = {
                "sweep": {
                    "key": item.key,
                    "target": item.target.label,
                    "prompt": item.prompt,
                    "rep": item.rep,
                    "try": tries,
                    "pin": item.target.pin,
                }
            }
            with lock:
                report.sent += 1
                in_flight[0] += 1
            try:
                result = rec.record(
                    provider,
                    item.body,
                    base_url=item.target.base_url,
                    api_key=api_key,
                    meta=meta,
                )
            finally:
                with lock:
                    in_flight[0] -= 1
            status = result.attempts[-1].status if result.attempts else None
            if status != 429:
                finished.put(item.key)
                return
            with lock:
                report.throttled += 1
            seconds = _retry_after_s(retry_after.local.value, tries)
            pacer.pause(seconds)
            tries += 1
            if tries > MAX_THROTTLE_RETRIES:
                with lock:
                    report.gave_up += 1
                return

    def worker() -> None:
        try:
            while not stop.is_set():
                try:
                    item = work.get_nowait()
                except queue.Empty:
                    return
                try:
                    one(item)
                except Exception as exc:  # noqa: BLE001 - one line in the report; go on
                    with lock:
                        report.errors.append(f"{item.key}: {type(exc).__name__}: {exc}")
        finally:
            with lock:
                alive[0] -= 1

    threads = [
        threading.Thread(target=worker, name=f"lab-sweep-{i}", daemon=True)
        for i in range(min(concurrency, len(todo)))
    ]
    bar = tqdm(
        total=len(items),
        initial=report.already,
        desc="sweep",
        unit="req",
        disable=not progress,
        leave=False,
    )

    def drain() -> None:
        while True:
            try:
                finished.get_nowait()
            except queue.Empty:
                return
            report.finished += 1
            bar.update(1)

    def running() -> bool:
        with lock:
            return alive[0] > 0

    try:
        for t in threads:
            with lock:
                alive[0] += 1
            t.start()
        try:
            while running():
                time.sleep(0.05)
                drain()
                bar.set_postfix(sent=report.sent, throttled=report.throttled, refresh=False)
        except KeyboardInterrupt:
            report.interrupted = True
            stop.set()
            if on_interrupt is not None:
                on_interrupt(in_flight[0])
            try:
                while running():
                    time.sleep(0.05)
                    drain()
            except KeyboardInterrupt:
                pass  # second Ctrl-C: stop waiting; the cut exchanges are marked
        drain()
    finally:
        bar.close()
        rec.close()
        report.waited_s = pacer.waited
    return report


# --------------------------------------------------------------------------- the table


def sweep_streams(out: str | Path, *, config: Any = None) -> pd.DataFrame:
    """The streams table of the sweep under ``out``: the last request of each key.

    ``serving_provider`` is the backend that served the stream; where none was named (the
    request failed before streaming) it is the pinned backend, and for a sweep over models
    or base URLs it is the target. The columns ``sweep_key``, ``sweep_target``,
    ``sweep_prompt`` (the prompt's line in the prompts file: the same prompt across targets),
    ``pinned_elsewhere`` (a backend other than the pinned one served it) and
    ``output_head`` (the first :data:`lab.sameness.SAME_MODEL_CHARS` characters of the
    answer: what the same-model test of :func:`lab.tables.scorecard` compares) are added.
    """
    import tempfile

    from lab.replay.files import replay_to
    from lab.sameness import SAME_MODEL_CHARS

    out = Path(out)
    exchanges = _sweep_exchanges(out)
    extra = ["sweep_key", "sweep_target", "sweep_prompt", "pinned_elsewhere", "output_head"]
    if exchanges.empty:
        return pd.DataFrame(columns=[*tables.STREAM_COLUMNS, *extra])
    finals = _finals(exchanges)
    last = finals.groupby("key", sort=False).tail(1).set_index("stream_id")
    heads: dict[str, str] = {}

    def replay_unit(capture: Any, **options: Any) -> Any:
        results = replay(capture, **options)
        heads.update((r.stream_id, r.text[:SAME_MODEL_CHARS]) for r in results)
        return results

    # unit by unit to Parquet and back: memory bounded by the largest unit (and the first
    # characters of each answer), not the sweep
    with tempfile.TemporaryDirectory(prefix="lab-sweep-") as tmp:
        written = replay_to(out, Path(tmp) / "results", config=config, replay=replay_unit)
        st = written.read("streams")
    st = st[st["stream_id"].isin(last.index)].reset_index(drop=True)
    st["sweep_key"] = st["stream_id"].map(last["key"])
    st["sweep_target"] = st["stream_id"].map(last["target"])
    st["sweep_prompt"] = st["stream_id"].map(last["prompt"]).astype("Int64")
    pin = st["stream_id"].map(last["pin"])
    pinned = pin.notna()
    named = st["serving_provider"].notna()
    st["pinned_elsewhere"] = pinned & named & (st["serving_provider"] != pin)
    # a pinned request that failed before streaming named no backend: the pin is its backend;
    # a sweep over models or base URLs compares its targets
    st["serving_provider"] = st["serving_provider"].where(pinned, st["sweep_target"])
    st["serving_provider"] = st["serving_provider"].fillna(pin)
    st["output_head"] = st["stream_id"].map(heads).astype("object")
    return st.reset_index(drop=True)
