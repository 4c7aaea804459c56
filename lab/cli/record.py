"""``lab record``: live streams into a capture."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lab.cli.common import (
    STREAM_VIEW,
    Terminated,
    UsageError,
    add_live_config_args,
    check_base_url,
    check_out_dir,
    displayable,
    key_env_names,
    key_help,
    live_config,
    n_requests,
    positive,
    print_table,
    progress,
    providers,
    stop_on_sigterm,
    table_view,
)

API_PATHS: dict[str, str | None] = {"chat": None, "responses": "/responses"}
"""``lab record --api``: the provider API a recording goes to, as the endpoint path after the
base URL (None: the family's own, chat completions for the OpenAI-shaped families). An API is
named rather than a path given because the base URL already carries the version prefix
(``/v1``, ``/api/v1``) and the path also decides the body shape and the adapter."""


RECORD_ALL_FAILED = 1
"""``lab record``'s exit status when every request failed (each is still in the capture)."""


RECORD_SOME_FAILED = 3
"""``lab record``'s exit status when some requests failed and others got an answer."""


RECORD_WRITE_FAILED = 4
"""``lab record``'s exit status when the capture could not be written (disk full, I/O
error): it stopped sending, and the last line on stderr says how many exchanges are safe on
disk and where."""


RECORD_TERMINATED = 143
"""``lab record``'s exit status on SIGTERM (128 + 15, what a shell reports for a process the
signal killed): it stops sending like on Ctrl-C (130), and the last line on stderr says
where the partial capture is."""


_RECORD_EPILOG = (
    "exit status: 0 when every request got an answer; 1 when every request failed; 3 when "
    "some failed (each failure is recorded too, and the last line on stderr says how many "
    "of N failed and where the capture is); 4 when the capture could not be written "
    "(disk full, I/O error: it stops sending, and the last line on stderr says how many "
    "exchanges are safe on disk and where); 2 on bad input, before anything is sent or "
    "written; 130 on Ctrl-C and 143 on SIGTERM, after saying where the partial capture is."
)


def run(args: argparse.Namespace) -> int:
    from lab.capture.errors import CaptureWriteError
    from lab.providers import adapter_for
    from lab.recorder import Recorder

    path = API_PATHS[args.api]
    try:
        adapter = adapter_for(args.provider, path)
    except ValueError as exc:
        raise UsageError(str(exc) if path is None else f"--api {args.api}: {exc}") from None
    body = _request_body(args)
    if args.base_url is not None:
        check_base_url(args.base_url)
    elif not adapter.default_base_url:  # 'custom' has no public API to default to
        raise UsageError(
            f"provider {args.provider!r} needs a base URL (e.g. --base-url http://host/v1)"
        )
    key = adapter.api_key_from_env()
    if not key and not args.base_url:
        names = key_env_names(adapter)
        raise UsageError(
            f"no API key: set {names} (or pass --base-url to a server that needs none)"
        )
    check_out_dir("--out", args.out)
    if path is not None:
        from lab.providers.openai_responses import responses_body

        body = responses_body(body)
    config = live_config(args)
    try:
        rec = Recorder(args.out, label=args.label, config=config)
    except OSError as exc:
        raise UsageError(
            f"--out {args.out}: cannot create a recording directory: {exc.strerror or exc}"
        ) from None
    restore = stop_on_sigterm()
    width = table_view(args).width
    try:
        with rec:
            bar = progress(list(range(args.n)), "record", disable=args.n == 1)
            for i in bar:
                r = rec.record(args.provider, body, base_url=args.base_url, api_key=key, path=path)
                if args.n == 1:  # one answer: all of it, then what it is
                    print(displayable(r.text))
                    print(answer_line(r, width, None))
                else:  # one line each, above the progress bar
                    bar.write(answer_line(r, width, (i + 1, args.n)), file=sys.stdout)
                if r.error is not None:
                    message = displayable(r.error.message)
                    print(f"stream error ({r.error.type}): {message}", file=sys.stderr)
            results = rec.results
            print(f"capture written to {rec.path}")
    except KeyboardInterrupt as stop:
        done = len(rec.results)
        how = "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"
        print(
            f"lab: {how} after {done} of {n_requests(args.n)}; "
            f"partial capture written to {rec.path}",
            file=sys.stderr,
        )
        return RECORD_TERMINATED if isinstance(stop, Terminated) else 130
    except CaptureWriteError as first:  # disk full, I/O error: stop sending, say what is safe
        error = first
        try:
            rec.close()  # a no-op when leaving the with block closed it already
        except CaptureWriteError as final:  # the last word on what reached the disk
            error = final
        print(
            f"lab: error: cannot write the capture: {error}; stopped sending after "
            f"{len(rec.results)} of {n_requests(args.n)}",
            file=sys.stderr,
        )
        return RECORD_WRITE_FAILED
    finally:
        restore()
    from lab import tables

    print_table("streams", tables.streams(results), STREAM_VIEW, table_view(args))
    _say_secrets(results)
    failed = sum(1 for r in results if r.error is not None)
    if failed:
        severity = "error" if failed == len(results) else "warning"
        print(
            f"lab: {severity}: {failed} of {n_requests(len(results))} failed; "
            f"capture written to {rec.path}",
            file=sys.stderr,
        )
        return RECORD_ALL_FAILED if failed == len(results) else RECORD_SOME_FAILED
    return 0


def _request_body(args: argparse.Namespace) -> dict[str, Any]:
    """The body to send: ``--prompt`` or ``--body``, ``--param`` over it, ``--model``, then
    the provider's body builder (:func:`lab.providers.build_body`). Bad input raises a
    :class:`UsageError` before anything is sent or written."""
    from lab.providers import build_body

    if args.prompt is not None and args.body is not None:
        raise UsageError(
            "--prompt and --body both give the request: give one (put the prompt in the "
            "body's messages)"
        )
    if args.prompt is None and args.body is None:
        raise UsageError("no request: give --prompt TEXT or --body FILE.json")
    spec = request_spec(args.prompt, args.body, args.param or [])
    model = args.model or spec.get("model")
    spec.pop("model", None)
    if not isinstance(model, str) or not model:
        where = f' or a "model" (a string) in --body {args.body}' if args.body else ""
        raise UsageError(f"no model: give --model{where}")
    prompt, messages = spec.pop("prompt", None), spec.pop("messages", None)
    try:
        return build_body(args.provider, model=model, prompt=prompt, messages=messages, **spec)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--body {args.body}: {exc}" if args.body else str(exc)) from None


def load_body(path: str) -> dict[str, Any]:
    """``--body FILE``: the request as a JSON object in the lab's form, the form of a line
    of ``lab sweep --prompts`` (``messages`` or ``prompt``; ``tools``, ``system`` and any
    provider parameter beside them). Every problem is a :class:`UsageError` naming the
    file."""
    import json

    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"--body {path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"--body {path}: a directory, not a JSON file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--body {path}: cannot read it ({exc})") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"--body {path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            'a body is a JSON object ({"messages": [...]})'
        ) from None
    except RecursionError:
        raise UsageError(f"--body {path}: nested too deeply to read") from None
    if not isinstance(value, dict):
        raise UsageError(
            f'--body {path}: a body is a JSON object ({{"messages": [...]}}), '
            f"not {_json_kind(value)}"
        )
    if not isinstance(value.get("messages"), list) and not isinstance(value.get("prompt"), str):
        raise UsageError(f"--body {path}: a body needs 'messages' (a list) or 'prompt' (a string)")
    return value


def _json_kind(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def parse_param(text: str) -> tuple[list[str], Any]:
    """``--param key=value``: the key's path (split at ``.``: ``reasoning.effort``) and the
    value, read as JSON when it is JSON (``0.2``, ``true``, ``{"a": 1}``, ``"0.2"``) and
    kept as a string otherwise (``high``).

    >>> parse_param("temperature=0.2"), parse_param("reasoning.effort=high")
    ((['temperature'], 0.2), (['reasoning', 'effort'], 'high'))
    >>> parse_param('stop=["END"]'), parse_param("user=")
    ((['stop'], ['END']), (['user'], ''))
    """
    import json

    key, sep, raw = text.partition("=")
    if not sep:
        raise UsageError(f"--param {text}: no '=' (give --param key=value)")
    if not key.strip():
        raise UsageError(f"--param {text}: the key before '=' is empty (give --param key=value)")
    path = key.strip().split(".")
    if any(not part for part in path):
        raise UsageError(f"--param {text}: an empty part in the key {key.strip()!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return path, value


def request_spec(prompt: str | None, body: str | None, params: list[str]) -> dict[str, Any]:
    """What ``lab record`` sends, in the lab's request form: ``--prompt`` or the ``--body``
    file, then each ``--param`` set over it in order (a dotted key sets inside an object,
    making it when missing). ``stream`` is the lab's: true is accepted, anything else
    refused (a recording is of a stream)."""
    import json

    spec: dict[str, Any] = load_body(body) if body is not None else {"prompt": prompt}
    for text in params:
        path, value = parse_param(text)
        holder = spec
        for i, part in enumerate(path[:-1]):
            inner = holder.get(part)
            if inner is None:
                inner = holder[part] = {}
            elif not isinstance(inner, dict):
                where = ".".join(path[: i + 1])
                raise UsageError(
                    f"--param {text}: {where} is {_json_kind(inner)}, not an object to set "
                    f"{path[i + 1]!r} in"
                )
            holder = inner
        holder[path[-1]] = value
    stream = spec.pop("stream", True)
    if stream is not True:
        raise UsageError(
            f"'stream' is {json.dumps(stream)}: lab record always streams (leave 'stream' "
            "out, or true)"
        )
    return spec


def answer_line(r: Any, width: int, count: tuple[int, int] | None) -> str:
    """One recorded answer as one line of at most ``width`` cells: ``[i/n]``, its backend and
    how it ended, the answer's first line (cut with ``…``), then its flags
    (:func:`lab.reading.stream_flags`: leak, error, degradation, anomalies) or ``no flags``.
    Model and provider text shows terminal-safe."""
    from lab.cli.show import cells
    from lab.reading import stream_flags

    backend = r.serving_provider or f"{r.provider} (direct)"
    status = "error" if r.error is not None else (r.finish_reason or "—")
    first = next((line.strip() for line in r.text.splitlines() if line.strip()), "")
    if not first:
        calls = ", ".join(f.name for f in r.function_calls)
        first = f"(tool calls: {calls})" if calls else "(no answer)"
    flags = stream_flags(r)
    tail = " · " + ("flags: " + "; ".join(flags) if flags else "no flags")
    head = (f"[{count[0]}/{count[1]}] " if count else "") + f"{backend} · {status}: "
    head, tail = displayable(head), displayable(tail).replace("\n", " ")
    text = displayable(first.replace("\t", " "))
    room = width - cells(head) - cells(tail)
    if room < 12:  # too narrow for the answer beside its flags: the flags on their own line
        return _cut(head + text, width) + "\n  " + _cut(tail[3:], width - 2)
    return head + _cut(text, room) + tail


def _cut(text: str, width: int) -> str:
    from lab.cli.show import cells

    if cells(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = cells(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


def _say_secrets(results: list) -> None:
    """One line each: how many echoes of the key were replaced (the anomaly
    ``secret_redacted``), and how many responses could not be looked into
    (``secret_unchecked``: an encoding the lab cannot decode)."""
    echoes = sum(r.facts.get("secrets_redacted", 0) for r in results)
    if echoes:
        print(
            f"lab: note: the responses echoed the key sent {echoes} time(s); each echo "
            "is replaced by a [REDACTED] marker in the capture and every output",
            file=sys.stderr,
        )
    unchecked = sorted(
        {r.facts["secret_unchecked"] for r in results if "secret_unchecked" in r.facts}
    )
    if unchecked:
        n = sum(1 for r in results if "secret_unchecked" in r.facts)
        print(
            f"lab: warning: {n} response(s) came in a Content-Encoding the lab cannot decode "
            f"({', '.join(unchecked)}): recorded as they came, an echo of the key in them "
            "could not be looked for",
            file=sys.stderr,
        )


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab record`` to ``sub`` (``tv``: the table options parent parser)."""
    r = sub.add_parser(
        "record",
        parents=[tv],
        help="record live streams into a capture",
        description="Send one prompt (or a whole request: --body, --param) to a provider, "
        "stream the answer and record it byte for "
        "byte (every read, its timing, every degradation attempt) into a new recording "
        "directory under --out. The API key comes from the provider's environment variable: "
        + key_help()
        + ". It is sent, never written to the capture. Prints each answer's first line "
        "with its flags (leak, error, degradation, anomalies); with --n 1 the whole answer "
        "first.",
        epilog=_RECORD_EPILOG,
    )
    r.add_argument("--provider", required=True, help="one of: " + ", ".join(providers()))
    r.add_argument(
        "--model",
        default=None,
        help='the model name as the provider spells it (default: the "model" of --body)',
    )
    r.add_argument("--prompt", help="the user message (no default: --prompt or --body)")
    r.add_argument(
        "--body",
        metavar="FILE.json",
        help="the whole request from a JSON object, in the form of a lab sweep --prompts "
        'line: {"messages": [...], "tools": [...], "temperature": 0.2, ...} (any provider '
        "parameter beside them); the provider's body builder makes the wire body from it, "
        'as from --prompt. Not with --prompt: put the prompt in its messages. Its "model" '
        'is used when --model is not given; "stream" is the lab\'s (always true). A field '
        "named like a credential (api_key, access_token, client_secret, password, at any "
        "depth) is sent as given and written to the capture as [REDACTED] (default: none)",
    )
    r.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="set a request parameter over --prompt or --body (repeatable): "
        "--param temperature=0.2 --param max_tokens=50; the value is read as JSON when it "
        "is JSON, else kept as a string; a dotted key sets inside an object "
        "(--param reasoning.effort=high); default: none",
    )
    r.add_argument(
        "--base-url",
        default=None,
        help="another endpoint of the provider's API family, e.g. a vLLM server "
        "(default: the provider's public API; 'custom' needs one)",
    )
    r.add_argument(
        "--api",
        choices=sorted(API_PATHS),
        default="chat",
        help="which API of the provider: chat (its chat completions or native API, the "
        "default) or responses (the OpenAI Responses API, POST {base}/responses: openai, "
        "openrouter, deepseek)",
    )
    r.add_argument("--n", type=positive, default=1, help="how many times (default 1)")
    add_live_config_args(r)
    r.add_argument(
        "--out",
        default="recordings",
        help="capture root directory (default: recordings; captures/ holds the bundled sample)",
    )
    r.add_argument(
        "--label", default=None, help="a label stored with the recording (default: none)"
    )
    r.set_defaults(func=run)
