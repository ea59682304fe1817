"""One run, live: audio (TTFA, RTF, underruns, chunk gaps, playout buffer) or action metrics
(latency p50/p95, observation age, deadline misses per minute), telemetry, the remote log; s stops it.

Polls the database every ``app.run_poll_s`` (0.5 s), so a run started by `edgelab deploy`
in another terminal appears here within a second.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from edgelab.errors import EdgelabError
from edgelab.safetext import printable
from edgelab.states import RunState
from edgelab.tui.messages import ActionDone, RunLoaded
from edgelab.tui.widgets.log_tail import LogTail
from edgelab.tui.widgets.metric_tile import MetricTile
from edgelab.tui.widgets.status_line import StatusLine
from edgelab.tui.widgets.telemetry import Telemetry
from edgelab.units import mib
from edgelab.views.run import RunReader, RunView


def _ms(stats: dict | None, key: str = "p50") -> str | None:
    v = (stats or {}).get(key)
    return None if v is None else f"{v:.0f} ms"


def _num(stats: dict | None, key: str = "p50", fmt: str = "{:.2f}") -> str | None:
    v = (stats or {}).get(key)
    return None if v is None else fmt.format(v)


def _sub(stats: dict | None) -> str:
    if not stats or stats.get("count") in (None, 0):
        return ""
    p95 = stats.get("p95")
    return f"p95 {p95:.4g}, n={stats['count']}" if p95 is not None else f"n={stats['count']}"


def stop_run(engine, run_id: str) -> tuple[bool, str]:
    """Stop through the deploy layer (kills the remote process group, verifies, releases memory)."""
    from edgelab.tui import deployview

    try:
        state = deployview.stop(engine, run_id)
    except EdgelabError as err:
        return False, f"{err}" + (f" -> {err.remedy}" if err.remedy else "")
    return True, f"run {run_id}: {state}"


class RunScreen(Screen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("s", "stop", "Stop run"),
    ]

    def __init__(self, run_id: str):
        super().__init__()
        self.run_id = run_id
        self.reader: RunReader | None = None
        self.view: RunView | None = None
        self.polls = 0
        self.stopping = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text(f"run {self.run_id}", style="bold"), id="run-title", classes="title")
        with Vertical(id="run-body"):
            with Horizontal(id="tiles"):
                for key, label in (
                    ("t1", "TTFA"),
                    ("t2", "RTF"),
                    ("t3", "underruns"),
                    ("t4", "playout buffer"),
                ):
                    yield MetricTile(label, id=key)
            with Horizontal(id="series"):
                yield Telemetry("chunk gap", unit=" ms", id="gaps")
                yield Telemetry("playout buffer", unit=" ms", id="buffer")
            yield Vertical(id="run-telemetry")
            yield LogTail(id="run-log")
        yield StatusLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.reader = RunReader(self.app.engine, self.run_id)
        self.ingest = None
        self._start_ingest()
        self._poll()
        self.set_interval(self.app.run_poll_s, self._poll)

    @work(thread=True, group="run-ingest")
    def _start_ingest(self) -> None:
        """A deployment nobody ingests gets a follower here while the screen is open (a thread of
        this app; one per run by lease). A deploy from the TUI has its own, detached already."""
        from edgelab.deploy.supervise import Follow, FollowerService

        service = FollowerService(self.app.engine, self.run_id, Follow.THREAD)
        try:
            self.ingest = service if service.start() else None
        except EdgelabError:
            self.ingest = None

    def on_unmount(self) -> None:
        if getattr(self, "ingest", None) is not None:
            self.ingest.stop(timeout=0)  # hands over: offset stored, the lease expires

    def _poll(self) -> None:
        self._read()

    @work(thread=True, exclusive=True, group="run-poll")
    def _read(self) -> None:
        try:
            self.post_message(RunLoaded(self.reader.poll()))
        except EdgelabError as err:
            self.post_message(RunLoaded(f"{err}" + (f" -> {err.remedy}" if err.remedy else "")))

    def on_run_loaded(self, message: RunLoaded) -> None:
        self.polls += 1
        if isinstance(message.view, str):
            self.query_one(StatusLine).say(message.view, error=True)
            return
        self.view = v = message.view
        r = v.run
        title = Text(f"run {r['id']}", style="bold")
        title.append(
            printable(
                f"  {r['pipeline'] or '?'} on {r['device'] or '?'}  "
                f"{r.get('strategy_label') or r['strategy'] or ''} {r['runtime'] or ''}"
            )
        )
        title.append(f"  [{r['state']}]", style="green" if r["state"] == RunState.RUNNING else "yellow")
        if r["virtual"]:
            title.append(
                "  VIRTUAL device: figures demonstrate the machinery, they qualify nothing",
                style="bold yellow",
            )
        ex = r.get("execution") or {}
        if ex.get("emulated"):
            title.append(f"  EMULATED ({ex.get('emulator')}, {ex.get('target')})", style="bold yellow")
        self.query_one("#run-title", Static).update(title)
        if v.kind == "action":
            self._action(v)
        elif v.kind == "text":
            self._text(v)
        else:
            self._audio(v)
        self._telemetry(v.telemetry)
        self.query_one(LogTail).follow(v.new_log_lines)
        text = f"state {r['state']}  |  figures: {v.summary_source}"
        if r.get("error"):
            text += f"  |  error: {r['error']}"
        self.query_one(StatusLine).say(text, error=bool(r.get("error")))

    def _audio(self, v: RunView) -> None:
        a = (v.summary or {}).get("audio")
        self.query_one("#t1", MetricTile).set_value(_ms(a and a.get("ttfa_ms")), _sub(a and a.get("ttfa_ms")))
        rtf = a and a.get("rtf_streamed")
        self.query_one("#t2", MetricTile).set_value(
            _num(rtf), _sub(rtf), alert=bool(rtf and (rtf.get("p50") or 0) > 1)
        )
        if a is None:
            self.query_one("#t3", MetricTile).set_value(None)
        else:
            n = a.get("underruns_at_ttfa")
            self.query_one("#t3", MetricTile).set_value(
                None if n is None else str(n),
                f"{a.get('requests_with_underrun', 0)} of {a.get('requests')} requests",
                alert=bool(n),
            )
        level = v.buffer_ms[-1] if v.buffer_ms else None
        self.query_one("#t4", MetricTile).set_value(
            None if level is None else f"{level:.0f} ms",
            "latest request, from TTFA" if level is not None else "",
        )
        self.query_one("#gaps", Telemetry).set_values(v.chunk_gaps_ms)
        self.query_one("#buffer", Telemetry).set_values(v.buffer_ms)

    def _text(self, v: RunView) -> None:
        """A text LM (llama-server measured from the lab): TTFT, inter-token, decode rate, peak RSS."""
        x = (v.summary or {}).get("text")
        res = (v.summary or {}).get("resources") or {}
        tiles = [self.query_one(f"#t{i}", MetricTile) for i in (1, 2, 3, 4)]
        for tile, label in zip(
            tiles, ("TTFT", "inter-token (p50s)", "decode tokens/s", "peak RSS"), strict=True
        ):
            tile.border_title = label
        tiles[0].set_value(_ms(x and x.get("ttft_ms")), _sub(x and x.get("ttft_ms")))
        tiles[1].set_value(_ms(x and x.get("itl_ms_p50")), _sub(x and x.get("itl_ms_p50")))
        tok = x and x.get("decode_tok_s")
        reported = ((v.summary or {}).get("reported") or {}).get("bands") or {}
        if not tok and reported:  # a one-shot program (llama-completion, llama-bench): its own figure
            figs = next(iter(reported.values()))
            tok = figs.get("decode_tok_s") or figs.get("tok_s")
            tiles[2].border_title = "decode tokens/s (reported)"
        tiles[2].set_value(_num(tok, fmt="{:.1f}"), _sub(tok))
        rss = res.get("peak_rss_bytes")
        tiles[3].set_value(mib(rss, missing=None), "the runtime's process group")
        gaps = self.query_one("#gaps", Telemetry)
        gaps.label = v.gap_label
        gaps.set_values(v.chunk_gaps_ms)
        self.query_one("#buffer", Telemetry).display = False

    def _action(self, v: RunView) -> None:
        a = (v.summary or {}).get("action")
        tiles = [self.query_one(f"#t{i}", MetricTile) for i in (1, 2, 3, 4)]
        for tile, label in zip(
            tiles, ("latency", "observation age", "deadline misses/min", "chunks"), strict=True
        ):
            tile.border_title = label
        lat, age = (a or {}).get("latency_ms"), (a or {}).get("age_ms")
        tiles[0].set_value(_ms(lat), _sub(lat))
        tiles[1].set_value(_ms(age), _sub(age))
        per = v.deadline_misses_per_min
        period = f"control period {v.period_ms:.0f} ms" if v.period_ms else "no control period: unknown"
        tiles[2].set_value(None if per is None else f"{per:g}", period, alert=bool(per))
        tiles[3].set_value(
            None if a is None else str(a.get("chunks")),
            f"stale: {a.get('stale_aligned')} aligned, {a.get('stale_dropped')} dropped" if a else "",
        )
        gaps = self.query_one("#gaps", Telemetry)
        gaps.label = "inference latency"
        gaps.set_values(v.latency_ms)
        self.query_one("#buffer", Telemetry).display = False

    def _telemetry(self, series: dict[str, list[float]]) -> None:
        box = self.query_one("#run-telemetry", Vertical)
        existing = {w.label: w for w in box.query(Telemetry)}
        for label, values in series.items():
            if label in existing:
                existing[label].set_values(values)
            else:
                box.mount(Telemetry(label, values))

    def action_stop(self) -> None:
        if self.view and self.view.final:
            self.notify(f"run already {self.view.run['state']}", severity="warning")
            return
        if not self.stopping:
            self.stopping = True
            self.query_one(StatusLine).say(f"stopping {self.run_id}...")
            self._stop()

    @work(thread=True, group="run-stop")
    def _stop(self) -> None:
        ok, text = stop_run(self.app.engine, self.run_id)
        self.post_message(ActionDone("stop", self.run_id, ok, text))

    def on_action_done(self, message: ActionDone) -> None:
        self.stopping = False
        self.notify(message.text, severity="information" if message.ok else "error", timeout=8)
        self._poll()
