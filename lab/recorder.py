"""``Recorder``: live streams -> Parquet capture, through the full stack.

>>> with Recorder("recordings", label="glm leak hunt") as rec:          # doctest: +SKIP
...     result = rec.record("openrouter", {"model": "z-ai/glm-4.6",
...                                        "messages": [{"role": "user", "content": "hi"}]})
...     result.text, result.serving_provider

Every degradation attempt is its own exchange in the capture, tied to the others by the
logical request's ``stream_id``. The API key is read from the provider's usual environment
variable unless given; it is sent in a header and redacted before anything is written.
With no key and no ``base_url`` (a server of your own that may need none), ``record``
raises :class:`NoAPIKeyError` before anything is sent or written, as ``lab record`` does.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from lab.capture import CaptureWriter
from lab.capture.errors import CaptureWriteError
from lab.config import LabConfig
from lab.exceptions import LabError
from lab.http.transports import RecordingTransport
from lab.providers import get_adapter
from lab.providers.openai_responses import RESPONSES_PATH
from lab.result import StreamResult
from lab.stream import client_timeout, new_stream_id, run_stream

__all__ = ["DEFAULT_OUT", "NoAPIKeyError", "Recorder"]

DEFAULT_OUT = "recordings"
"""Where recordings go by default (``Recorder()`` and ``lab record``): a folder of your own,
never ``captures/``, which holds the bundled sample the notebooks read."""


class NoAPIKeyError(ValueError, LabError):
    """``Recorder.record`` was asked to call a provider's public API without a key."""


def key_names(adapter: Any) -> str:
    """The environment variable(s) an adapter reads its API key from (``A or B``)."""
    return " or ".join(adapter.api_key_envs or (adapter.api_key_env,))


def _remove_empty_recording(path: Path, made_root: bool) -> None:
    """Remove a recording that holds no exchange (its empty parts) and, when ``made_root``,
    its root if nothing else is in it."""
    for f in path.iterdir():
        if f.suffix != ".parquet":  # anything but the writer's empty parts: keep it all
            return
    for f in path.iterdir():
        f.unlink()
    path.rmdir()
    if made_root and not any(path.parent.iterdir()):
        path.parent.rmdir()


class Recorder:
    """Record live streams into one capture (a directory of Parquet files).

    **Parameters**
    - **out** – the captures root; this recording's files go in a new subdirectory.
    - **label** – a free-form tag stored in every file's footer.
    - **config** – guard/ladder config (anything :meth:`LabConfig.coerce` takes).
    - **transport** – the real transport to wrap (default: ``httpx.HTTPTransport()``).
    """

    def __init__(
        self,
        out: str | Path = DEFAULT_OUT,
        *,
        label: str | None = None,
        config: Any = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float | None = None,
    ) -> None:
        self.config = LabConfig.coerce(config)
        self._made_root = not Path(out).exists()
        self.writer = CaptureWriter(out, label=label)
        self._transport = RecordingTransport(self.writer, inner=transport)
        read_timeout = timeout if timeout is not None else self.config.inactivity_timeout_s
        self.client = httpx.Client(transport=self._transport, timeout=client_timeout(read_timeout))
        self.results: list[StreamResult] = []

    @property
    def path(self) -> Path:
        """The directory holding this recording's files."""
        return self.writer.path

    @property
    def capture_id(self) -> str:
        return self.writer.capture_id

    def record(
        self,
        provider: str,
        body: dict,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        tools: list[dict] | None = None,
        meta: dict | None = None,
        on_chunk: Any = None,
        path: str | None = None,
    ) -> StreamResult:
        """Send one logical request (with its degradation attempts) and record every byte.

        **path** picks the API when it is not the provider's default (``"/responses"``: the
        OpenAI Responses API); a body with ``input`` and no ``messages`` is a Responses body
        and goes to ``/responses`` without being told.

        Raises :class:`~lab.capture.CaptureWriteError` (before sending, or after the stream
        with the result as ``.result``) when the capture cannot be written: disk full, an
        I/O error; its message says how many exchanges are safe on disk and where.
        """
        if not isinstance(body, dict):
            raise TypeError("body must be a dict (the provider's JSON request body)")
        if path is None and "input" in body and "messages" not in body:
            path = RESPONSES_PATH
        adapter = get_adapter(provider)
        if adapter.stream_key and "stream" not in body:
            body = {**body, "stream": True}
        if api_key is None:
            api_key = adapter.api_key_from_env()
            if not api_key and base_url is None and (adapter.api_key_envs or adapter.api_key_env):
                raise NoAPIKeyError(
                    f"no API key for {provider}: set {key_names(adapter)} or pass api_key=... "
                    "(or base_url= a server that needs none); nothing was sent or recorded"
                )
        self.writer.check()  # a recording that cannot be written sends nothing more
        stream_id = new_stream_id()
        started_at = datetime.now(UTC)
        with self.writer.logical_request(stream_id):  # all its attempts in one part
            result = run_stream(
                provider,
                body,
                client=self.client,
                base_url=base_url,
                api_key=api_key,
                config=self.config,
                tools=tools,
                stream_id=stream_id,
                meta=meta,
                on_chunk=on_chunk,
                path=path,
            )
        # what a replay of the recording gives: the recording, and (to the ms) the send time
        result.started_at, result.capture_id = started_at, self.capture_id
        self.results.append(result)
        try:
            self.writer.check()
        except CaptureWriteError as exc:  # the stream came, the disk did not take it
            exc.result = result
            raise
        return result

    def close(self) -> None:
        """Close the recording. A recorder that sent nothing (every ``record`` refused, or
        none was made) leaves nothing behind: its empty recording directory goes, and the
        captures root too when this recorder made it and it is empty."""
        self.client.close()
        self.writer.close()
        if self.writer.safety()[0] == 0:
            _remove_empty_recording(self.writer.path, self._made_root)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
