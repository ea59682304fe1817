"""Is a server there that speaks the protocol? Asked before an S4 deployment reports running.

S4 puts one stage on the device and leaves the rest to a server; a device stage started against an
address where nothing listens would be reported running and fail seconds later. For a speech
pipeline the check opens the stream endpoint (``/v1/audio/speech/stream``), sends the
``session.config`` of codec-token mode and waits briefly for an ``error`` (a server that refuses
that mode says so at once), then closes the session; for any other pipeline it opens the
WebSocket. Each failure is a TransportError naming the address and what answered.
"""

from __future__ import annotations

import json

from websockets.exceptions import ConnectionClosed, WebSocketException

from edgelab.errors import TransportError
from edgelab.protocols.ws import open_ws, stream_url

REFUSAL_WAIT_S = 0.5  # how long a server has to refuse the session's config


def check_server(url: str, *, kind: str, timeout: float = 5.0) -> str:
    """Raise TransportError unless ``url`` answers as a ``kind`` pipeline's S4 server; returns what
    was checked (for the deploy's phase line)."""
    if kind != "tts":
        with open_ws(url, timeout):
            return f"{url}: WebSocket open"
    target = stream_url(url)
    ws = open_ws(target, timeout)
    try:
        with ws:
            ws.send(
                json.dumps({"type": "session.config", "model": "qwen3-tts", "output_mode": "codec_tokens"})
            )
            try:
                msg = ws.recv(timeout=REFUSAL_WAIT_S)
            except TimeoutError:
                msg = None  # quiet until input: the config was taken
            if isinstance(msg, str):
                d = json.loads(msg)
                if d.get("type") == "error":
                    raise TransportError(
                        f"{target} refused session.config (codec tokens): {d.get('message')}",
                        remedy="point --endpoint at a vLLM-Omni speech server that streams codec tokens",
                    )
            ws.send(json.dumps({"type": "session.close"}))
    except (ConnectionClosed, WebSocketException, OSError, ValueError) as err:
        raise TransportError(
            f"{target} closed the session on session.config: {err}",
            remedy="check that --endpoint is a vLLM-Omni speech stream (ws://HOST:PORT)",
        ) from err
    return f"{target}: session.config taken"
