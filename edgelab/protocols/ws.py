"""WebSocket helpers shared by the speech stream (``speech_ws``) and its codec-token mode (``codec_ws``).

Both speak over vLLM-Omni's ``/v1/audio/speech/stream`` endpoint, so the URL, the client socket,
the event recorder, the JSON control messages and the server's stop watcher live here once; the
two protocol modules import this one and not each other (``speech_ws`` hands a codec-token
session to ``codec_ws``).
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from typing import Any

from websockets.exceptions import WebSocketException
from websockets.sync.client import connect

from edgelab.credentials import mask_text
from edgelab.errors import TransportError
from edgelab.metrics.events import Event
from edgelab.protocols.serving import Inbox
from edgelab.reference.tts import CodecDecoder, Talker

PATH = "/v1/audio/speech/stream"
EventSink = Callable[[Event], None]


# ---------------------------------------------------------------- client side


def stream_url(base: str) -> str:
    """``ws://host:port`` or a full URL -> the speech stream URL (a query, e.g. a token, kept)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(base.strip())
    scheme = "ws" + parts.scheme[4:] if parts.scheme.startswith("http") else parts.scheme
    path = parts.path.rstrip("/")
    if not path.endswith(PATH):
        path += PATH
    return urlunsplit((scheme, parts.netloc, path, parts.query, parts.fragment))


def open_ws(url: str, timeout: float):
    """A client WebSocket to a streaming endpoint; an unreachable server is a TransportError."""
    try:
        return connect(url, open_timeout=timeout, max_size=None, compression=None)
    except (OSError, WebSocketException) as err:
        raise TransportError(
            mask_text(f"cannot open {url}: {err}"), remedy="check the server is running and the URL/port"
        ) from err


class Recorder:
    """Tags each event with the run, keeps it on the result and hands it to the caller's sink."""

    def __init__(self, result: Any, run: str | None, sink: EventSink | None):  # any result with .events
        self.result, self.run, self.sink = result, run, sink

    def __call__(self, ev: Event) -> None:
        ev.run = self.run
        self.result.events.append(ev)
        if self.sink is not None:
            self.sink(ev)


# ---------------------------------------------------------------- server side


@functools.lru_cache(maxsize=4)
def loaded_models(seed: int) -> tuple[Talker, CodecDecoder]:
    """The reference weights for a seed, made once per server like a model load."""
    return Talker(seed), CodecDecoder(seed)


def json_message(kind: str, **kw: Any) -> str:
    """One JSON control message of the stream protocol, ``{"type": kind, ...}``."""
    return json.dumps({"type": kind, **kw})


async def watch_for_stop(
    inbox: Inbox,
    stop: threading.Event,
    deferred: list,
    stop_on: tuple[str, ...] = ("input.cancel", "session.close"),
) -> None:
    """While a response streams: a message of a ``stop_on`` type or a hang-up stops it; every
    message read meanwhile is kept (in order) for the session loop."""
    while True:
        msg = await inbox.get()
        deferred.append(msg)
        if msg is None or (isinstance(msg, dict) and msg.get("type") in stop_on):
            stop.set()
            return
