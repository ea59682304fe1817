"""``python -m edgelab.protocols serve speech|http|openpi``: run a lab-side server.

For demos and for S4 runs on a lab host: the speech stream (and codec-token) WebSocket server,
the HTTP ``/v1/audio/speech`` server, or the OpenPI policy endpoint, on a loopback port.
Prints one JSON line with the URL once listening, then serves until interrupted. The speech
server runs the reference TTS, or llama.cpp's engine under edgelab's S3 controller with
``--controller PROGRAM --model TALKER.gguf --mmproj MMPROJ.gguf``. With
``EDGELAB_SERVE_AUTH=user:password`` in its environment the speech server answers 401 to a
client that does not send them (an endpoint with credentials, as a guarded real server is).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading

from edgelab import logs
from edgelab.errors import EdgelabError

AUTH_ENV = "EDGELAB_SERVE_AUTH"
"""``user:password`` the speech server requires (HTTP Basic) of every client, when set."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m edgelab.protocols", description=__doc__)
    logs.add_argument(p)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="serve a reference-backed protocol endpoint")
    s.add_argument("protocol", choices=["speech", "http", "openpi"])
    s.add_argument("--host", default="127.0.0.1", help="a loopback address")
    s.add_argument("--port", type=int, default=0, help="0 = a free port")
    s.add_argument("--frames-per-s", type=float, default=25.0, help="talker speed (0 = unpaced)")
    s.add_argument("--schedule", default="server", help="'server' (1 then 25), 'ramp' or '2,4,8'")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--slow-every", type=int, default=0, help="openpi: inject a slow step every N inferences")
    s.add_argument("--slow-ms", type=float, default=0.0)
    s.add_argument(
        "--vllm-omni-compat",
        default="current",
        metavar="COMMIT",
        help="speech: follow this vLLM-Omni version's stream protocol: 'current' (0131cb5: utterances "
        "on one connection, no split by default) or '6a96e66' (one utterance per connection, "
        "sentence split by default); a client may also send vllm_omni_compat in session.config",
    )
    s.add_argument(
        "--controller",
        default=None,
        help="speech: edgelab's s3-controller (llama.cpp) instead of the reference",
    )
    s.add_argument("--model", default=None, help="speech with --controller: the talker GGUF")
    s.add_argument("--mmproj", default=None, help="speech with --controller: the mmproj GGUF")
    s.add_argument("--threads", type=int, default=None, help="speech with --controller: llama.cpp threads")
    s.add_argument("--frames", type=int, default=None, help="speech with --controller: frames per sentence")
    args = p.parse_args(argv)
    logs.setup(args.log_level)
    info: dict[str, str] = {}
    try:
        if args.protocol == "openpi":
            from edgelab.protocols.openpi import OpenPIServer, ReferencePolicy
            from edgelab.reference.vla import ReferenceVLA

            vla = ReferenceVLA(args.seed, slow_every=args.slow_every, slow_ms=args.slow_ms)
            server = OpenPIServer(ReferencePolicy(vla), host=args.host, port=args.port or None).start()
            url = server.url
        else:
            from edgelab.protocols.omni_versions import behaviour
            from edgelab.protocols.speech_ws import ServerOptions

            version = behaviour(args.vllm_omni_compat)  # an unknown one: a ConfigError, exit 2 below
            opts = ServerOptions(
                frames_per_s=args.frames_per_s or None,
                schedule=args.schedule,
                seed=args.seed,
                compat=version.name,
                engine=_engine(args),
                frames=args.frames,
                basic_auth=os.environ.get(AUTH_ENV) or None,  # never an argument: ps would show it
            )
            info["vllm_omni"] = f"{version.name} ({version.commit})"
            if args.protocol == "speech":
                from edgelab.protocols.speech_ws import SpeechServer

                server = SpeechServer(opts, host=args.host, port=args.port).start()
                url = server.stream_url
            else:
                from edgelab.protocols.speech_http import PATH, SpeechHTTPServer

                server = SpeechHTTPServer(opts, host=args.host, port=args.port).start()
                url = server.url + PATH
    except EdgelabError as err:
        print(f"error: {err}", file=sys.stderr)
        if err.remedy:
            print(f"  -> {err.remedy}", file=sys.stderr)
        return 2
    engine = getattr(getattr(server, "opts", None), "engine", None)
    print(
        json.dumps(
            {
                "protocol": args.protocol,
                "url": url,
                "runtime": engine.provenance["runtime"] if engine is not None else "reference",
                "weights": "random",
                **info,
            }
        ),
        flush=True,
    )
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):  # SIGINT too: ignored in background jobs otherwise
        signal.signal(sig, lambda *_: done.set())
    try:
        done.wait()
    finally:
        server.stop()
        if engine is not None:
            engine.close()
    return 0


def _engine(args: argparse.Namespace):
    """llama.cpp under the S3 controller when --controller is given (with --model and --mmproj)."""
    if not args.controller:
        return None
    from pathlib import Path

    from edgelab.errors import ConfigError
    from edgelab.protocols.controller_feed import ControllerSpec, ControllerTTS

    if args.protocol != "speech":
        raise ConfigError("--controller serves the speech stream (serve speech) only")
    if not (args.model and args.mmproj):
        raise ConfigError("--controller needs --model TALKER.gguf and --mmproj MMPROJ.gguf")
    return ControllerTTS(
        ControllerSpec(Path(args.controller), Path(args.model), Path(args.mmproj), args.threads)
    )


if __name__ == "__main__":
    sys.exit(main())
