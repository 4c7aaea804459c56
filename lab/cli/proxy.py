"""``lab proxy``: a recording reverse proxy in front of a provider API."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from typing import Any

from lab.cli.common import (
    UsageError,
    add_live_config_args,
    check_base_url,
    check_out_dir,
    live_config,
    nonnegative_float,
    positive,
    positive_float,
    providers,
    stop_on_sigterm,
)
from lab.cli.record import RECORD_WRITE_FAILED


def run(args: argparse.Namespace) -> int:
    from lab.providers import get_adapter
    from lab.proxy import (
        PROXY_TOKEN_ENV,
        ProxyConfig,
        is_loopback,
        require_httptools,
        require_uvicorn,
        serve,
    )

    try:
        adapter = get_adapter(args.provider)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    upstream = args.upstream or adapter.default_base_url
    if not upstream:
        raise UsageError(
            f"provider {args.provider!r} has no public API: give --upstream http://host/v1"
        )
    try:
        check_base_url(upstream)
    except UsageError as exc:
        raise UsageError(str(exc).replace("--base-url", "--upstream", 1)) from None
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: must be 0-65535 (0 = any free port)")
    check_out_dir("--out", args.out)
    try:
        require_uvicorn()
        if args.upstream_http == "wire":
            require_httptools()
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    token = args.auth_token if args.auth_token is not None else os.environ.get(PROXY_TOKEN_ENV)
    if not is_loopback(args.host) and not args.allow_remote:
        raise UsageError(
            f"--host {args.host} is beyond loopback: anyone who reaches it could send requests "
            "through the proxy and fill --out; pass --allow-remote (and set --auth-token) to "
            "do it anyway"
        )
    config = ProxyConfig(
        upstream_http=args.upstream_http,
        provider=args.provider,
        upstream=upstream,
        out=args.out,
        label=args.label,
        roll_bytes=int(args.roll_mb * 1024 * 1024),
        roll_seconds=args.roll_minutes * 60.0,
        lab_config=_with_retry_window(live_config(args), args.client_retry_window),
        auth_token=token or None,
        require_recording=args.require_recording,
        **{
            field: value
            for field, value in (
                ("max_request_body_bytes", args.max_request_bytes),
                ("header_timeout_s", args.header_timeout),
                ("body_timeout_s", args.body_timeout),
            )
            if value is not None  # None: ProxyConfig's default
        },
    )
    restore = stop_on_sigterm()  # SIGTERM ends it as Ctrl-C does: the report is printed
    try:
        report = serve(config, host=args.host, port=args.port, allow_remote=args.allow_remote)
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise UsageError(f"--port {args.port} on {args.host}: {exc.strerror}") from None
        raise
    finally:
        restore()
    if report is not None:  # the capture could not be written: say what is safe, and where
        print(report, file=sys.stderr)
        return RECORD_WRITE_FAILED
    return 0


def _with_retry_window(config: Any, window: float | None) -> Any:
    """``config`` with ``--client-retry-window`` on top (when given)."""
    if window is None:
        return config
    return config.model_copy(update={"client_retry_window_s": window})


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab proxy`` to ``sub`` (it prints no tables: ``tv`` is unused)."""
    px = sub.add_parser(
        "proxy",
        help="a recording reverse proxy in front of a provider API",
        description="Serve a streaming reverse proxy whose root stands for the upstream base "
        "URL (POST {proxy}/chat/completions goes to {upstream}/chat/completions), recording "
        "every exchange byte for byte under --out. Point any client at it by changing its "
        "base URL. The first line printed is the proxy's URL, then one line per finished "
        "exchange. The client's key is forwarded and never written. An X-Lab-Session header "
        "names the exchange's session (not forwarded). Needs the [proxy] extra (uvicorn).",
    )
    px.add_argument("--provider", required=True, help="one of: " + ", ".join(providers()))
    px.add_argument(
        "--upstream",
        default=None,
        help="the upstream base URL (default: the provider's public API; 'custom' needs one)",
    )
    px.add_argument("--port", type=int, default=8787, help="port (default 8787; 0 = any free)")
    px.add_argument(
        "--client-retry-window",
        type=nonnegative_float,
        default=None,
        metavar="S",
        help="an equal request (method, URL, body) within S seconds after one failed is the "
        "client's automatic retry of it: the same stream, attempt client_retry (SDKs that "
        "send x-stainless-retry-count are told by it); 0 turns the window off (default: "
        "LabConfig.client_retry_window_s, 60)",
    )
    px.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    px.add_argument(
        "--out",
        default="recordings",
        help="capture root directory (default: recordings; captures/ holds the bundled sample)",
    )
    px.add_argument(
        "--label", default=None, help="a label stored with each recording (default: none)"
    )
    px.add_argument(
        "--roll-mb",
        type=positive_float,
        default=256.0,
        help="start a new recording directory after this many MiB of responses (default 256)",
    )
    px.add_argument(
        "--roll-minutes",
        type=positive_float,
        default=60.0,
        help="... or after this many minutes (default 60)",
    )
    px.add_argument(
        "--upstream-http",
        choices=("wire", "httpx"),
        default="wire",
        help="the upstream client: wire (HTTP/1.1 parsed by httptools, the fast one; default) "
        "or httpx (the client of lab record; for what wire does not do: HTTP/2)",
    )
    add_live_config_args(px)
    px.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host beyond loopback (a warning is printed; set --auth-token too). "
        "(default: loopback only)",
    )
    px.add_argument(
        "--auth-token",
        default=None,
        metavar="TOKEN",
        help="every request must carry X-Lab-Proxy-Token: TOKEN, or a path starting with "
        "/lab-token/TOKEN/ (so a base URL alone can carry it); others get 401 (default: "
        "the LAB_PROXY_TOKEN environment variable, else none)",
    )
    px.add_argument(
        "--require-recording",
        action="store_true",
        help="once the capture cannot be written (a full disk), refuse requests with 503 "
        "(default: forward them unrecorded; either way the proxy says so at once)",
    )
    px.add_argument(
        "--max-request-bytes",
        type=positive,
        default=None,
        metavar="N",
        help="the largest request body taken; 413 past it (default 33554432, 32 MiB)",
    )
    px.add_argument(
        "--header-timeout",
        type=positive_float,
        default=None,
        metavar="S",
        help="a client has S seconds to send its request line and headers; 408 past it "
        "(default 10)",
    )
    px.add_argument(
        "--body-timeout",
        type=positive_float,
        default=None,
        metavar="S",
        help="a client has S seconds to send its request body; 408 past it (default 120)",
    )
    px.set_defaults(func=run)
