"""One device: facts grouped, the deploy profile with its reasons, artifacts, recent runs, telemetry.

Everything comes from the database (the latest successful probe snapshot, the runs and
telemetry tables), read in a worker and refreshed every ``app.poll_s`` seconds.
"""

from __future__ import annotations

import re

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from edgelab.errors import EdgelabError
from edgelab.inventory.view import ago
from edgelab.tui import actions
from edgelab.tui.messages import ActionDone, DeviceLoaded, HostKeyFetched
from edgelab.tui.widgets.fleet_table import state_text
from edgelab.tui.widgets.info_panel import InfoPanel
from edgelab.tui.widgets.status_line import StatusLine
from edgelab.tui.widgets.telemetry import Telemetry
from edgelab.units import gib
from edgelab.views.device import DeviceDetail, load_device

_PATH = re.compile(r"/(?:[^\s/():]+/)+([^\s/():]+:\d+)")  # an absolute file:line -> its file name:line


def profile_pairs(profile: dict) -> list[tuple[str, str]]:
    budget = profile.get("budget_pool") or {}
    return [
        ("class", f"{profile.get('class')} (catalog entry {profile.get('entry')})"),
        ("dtype", str(profile.get("dtype"))),
        (
            "threads",
            f"{profile.get('threads')}"
            + (f" on cpus {profile['thread_cpus']}" if profile.get("thread_cpus") else ""),
        ),
        ("backends", ", ".join(profile.get("backends") or []) or "-"),
        ("runtime target", str(profile.get("runtime_target") or "-")),
        ("budget pool", f"{budget.get('name', '-')} {gib(budget.get('total_bytes') or None)}"),
    ]


def strategy_rows(profile: dict) -> list[list]:
    rows = []
    for p in profile.get("pipelines") or []:
        eligible = ", ".join(p.get("eligible") or []) or "none"
        refused = [s for s in p.get("strategies") or [] if not s.get("eligible")]
        fit = p.get("quantization") or "does not fit"
        rows.append(
            [
                p["pipeline"],
                fit,
                Text(eligible, style="green" if p.get("eligible") else "red"),
                "; ".join(f"{s['strategy']}: {s.get('code') or s.get('reason')}" for s in refused),
            ]
        )
    return rows


def reason_rows(profile: dict, limit: int = 12) -> list[tuple[str, str]]:
    """The rules that fired, deduplicated by (name, why), first ``limit``: why the profile is what it is."""
    seen, out = set(), []
    for r in profile.get("rules") or []:
        key = (r.get("name"), r.get("why"))
        if key in seen:
            continue
        seen.add(key)
        out.append((str(r.get("name")), _PATH.sub(r"\1", str(r.get("why")))))
    return out[:limit]


class DeviceScreen(Screen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("p", "probe", "Probe"),
        Binding("c", "check", "Check"),
        Binding("d", "deploy", "Deploy"),
        Binding("t", "trust", "Trust host key"),
        Binding("enter", "open_run", "Open latest run", show=False),
        Binding("R", "runs", "Runs"),
        Binding("r", "refresh", "Refresh", show=False),
    ]

    def __init__(self, name: str):
        super().__init__()
        self.device_name = name
        self.detail: DeviceDetail | None = None
        self.working = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text(self.device_name, style="bold"), id="device-title", classes="title")
        with VerticalScroll(id="device-body"):
            with Horizontal():
                with Vertical(id="device-left"):
                    yield InfoPanel("device", id="device-info")
                    yield InfoPanel("facts (latest probe)", id="facts")
                with Vertical(id="device-right"):
                    yield InfoPanel("deploy profile", id="profile")
                    yield InfoPanel("why (rules that fired)", id="reasons")
                    yield Vertical(id="telemetry", classes="panel")
            yield InfoPanel("strategies per pipeline (eligible / refused with reasons)", id="strategies")
            yield InfoPanel("artifacts in the device store", id="artifacts")
            yield InfoPanel("recent runs", id="runs")
            yield Static(id="device-trend", classes="panel")
        yield StatusLine(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#telemetry").border_title = "telemetry (probe history)"
        self.query_one("#device-trend").border_title = "trend (last runs, baseline line)"
        self.action_refresh()
        self.set_interval(self.app.poll_s, self.action_refresh)

    def action_refresh(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="device-load")
    def _load(self) -> None:
        try:
            self.post_message(DeviceLoaded(load_device(self.app.engine, self.device_name)))
        except EdgelabError as err:
            self.post_message(DeviceLoaded(None, f"{err}" + (f" -> {err.remedy}" if err.remedy else "")))

    def on_device_loaded(self, message: DeviceLoaded) -> None:
        if message.detail is None:
            self.query_one(StatusLine).say(message.error or "device gone", error=True)
            return
        if message.detail == self.detail:
            return
        self.detail = d = message.detail
        title = Text(d.name, style="bold")
        if d.virtual:
            title.append("  VIRTUAL", style="bold yellow")
            title.append(
                "  (figures measured here demonstrate the machinery; they qualify nothing)", style="dim"
            )
        self.query_one("#device-title", Static).update(title)
        now = self.app.clock()
        dev = d.device
        info = [
            ("class", dev["class"] or "?"),
            ("transport", dev["transport"]),
            ("address", dev["address"]),
            ("state", state_text(dev["state"]).markup),
            ("last seen", ago(dev["last_seen"], now)),
        ]
        markup = {"state", "host key"}
        if dev["detail"]:
            info.append(("detail", dev["detail"]))
        if dev["state"] == "untrusted":
            info.append(
                ("host key", "[yellow]unknown: press t to see its SHA256 fingerprint and trust it[/]")
            )
        if dev["tags"]:
            info.append(("tags", " ".join(dev["tags"])))
        if d.snapshot:
            info.append(
                (
                    "last probe",
                    f"{ago(d.snapshot['taken_at'], now)}, facts {str(d.snapshot['facts_hash'])[:12]}",
                )
            )
        self.query_one("#device-info", InfoPanel).show_pairs(
            [(k, Text.from_markup(v) if k in markup else v) for k, v in info]
        )
        facts_panel = self.query_one("#facts", InfoPanel)
        if d.facts:
            pairs = []
            for group, items in d.facts.items():
                pairs.append((Text(group.upper(), style="bold cyan"), ""))
                pairs.extend((f"  {k}", v) for k, v in items)
            facts_panel.show_pairs(pairs)
        else:
            facts_panel.show_note(d.profile_note or "no facts")
        if d.profile:
            self.query_one("#profile", InfoPanel).show_pairs(profile_pairs(d.profile))
            self.query_one("#reasons", InfoPanel).show_pairs(reason_rows(d.profile))
            self.query_one("#strategies", InfoPanel).show_table(
                ["pipeline", "quantization", "eligible", "refused (why)"], strategy_rows(d.profile)
            )
        else:
            for pid in ("#profile", "#reasons", "#strategies"):
                self.query_one(pid, InfoPanel).show_note(d.profile_note or "no profile")
        self._telemetry(d.telemetry)
        self._section("#artifacts", d.artifacts, ["name", "sha256", "size", "pushed"])
        self._section("#runs", d.runs, ["id", "pipeline", "strategy", "state", "started"])
        self.query_one("#device-trend", Static).update(
            Text(d.trend.text(width=72, height=12))
            if d.trend
            else Text("no finished runs to plot yet", style="dim")
        )

    def _telemetry(self, series: dict[str, list[float]]) -> None:
        box = self.query_one("#telemetry", Vertical)
        if not series:
            if not box.children:
                box.mount(Static("no telemetry yet: probe the device (p) or start a run", classes="note"))
            return
        existing = {w.label: w for w in box.query(Telemetry)}
        if not existing:
            box.remove_children()
        for label, values in series.items():
            if label in existing:
                existing[label].set_values(values)
            else:
                box.mount(Telemetry(label, values))

    def _section(self, panel_id: str, section, columns: list[str]) -> None:
        panel = self.query_one(panel_id, InfoPanel)
        if not section.rows:
            panel.show_note("none yet")
            return
        rows = []
        for r in section.rows:
            cells = [str(r.get(c) if r.get(c) is not None else "-") for c in columns]
            if r.get("virtual"):
                cells[0] += " (VIRTUAL)"
            rows.append(cells)
        panel.show_table(columns, rows)

    # ------------------------------------------------------------ actions

    def action_probe(self) -> None:
        if not self.working:
            self.working = True
            self.query_one(StatusLine).say(f"probing {self.device_name}...")
            self._probe()

    @work(thread=True, group="device-action")
    def _probe(self) -> None:
        ok, text = actions.probe(self.app.engine, self.device_name)
        self.post_message(ActionDone("probe", self.device_name, ok, text))

    def action_check(self) -> None:
        if not self.working:
            self.working = True
            self.query_one(StatusLine).say(f"checking {self.device_name}...")
            self._check()

    @work(thread=True, group="device-action")
    def _check(self) -> None:
        ok, text = actions.check(self.app.engine, [self.device_name])
        self.post_message(ActionDone("check", self.device_name, ok, text))

    def on_action_done(self, message: ActionDone) -> None:
        self.working = False
        self.query_one(StatusLine).say(message.text, error=not message.ok)
        self.notify(message.text, severity="information" if message.ok else "error", timeout=6)
        self.action_refresh()

    def action_trust(self) -> None:
        if not self.working:
            self.working = True
            self.query_one(StatusLine).say(f"reading the host key on the way to {self.device_name}...")
            self._fetch_key()

    @work(thread=True, group="device-action")
    def _fetch_key(self) -> None:
        offer, error = actions.host_key(self.app.engine, self.device_name)
        self.post_message(HostKeyFetched(self.device_name, offer, error))

    def on_host_key_fetched(self, message: HostKeyFetched) -> None:
        self.working = False
        if message.offer is None:
            self.query_one(StatusLine).say(message.error or "no host key", error=True)
            return
        if message.offer.already_trusted:
            self.query_one(StatusLine).say(
                f"{self.device_name}: {message.offer.fingerprint} is already trusted"
            )
            return
        from edgelab.tui.screens.trust import TrustScreen

        def decided(yes: bool | None) -> None:
            if yes:
                self.working = True
                self._trust(message.offer)
            else:
                self.query_one(StatusLine).say("host key not trusted")

        self.app.push_screen(TrustScreen(message.offer), decided)

    @work(thread=True, group="device-action")
    def _trust(self, offer) -> None:
        ok, text = actions.trust(self.app.engine, offer)
        if ok:  # record the device's state now that its key is known (online, or the next key on the way)
            _online, checked = actions.check(self.app.engine, [self.device_name])
            text += f"; {checked}"
        self.post_message(ActionDone("trust", self.device_name, ok, text))

    def action_deploy(self) -> None:
        from edgelab.tui.screens.deploy import DeployScreen

        self.app.push_screen(DeployScreen(self.device_name))

    def action_runs(self) -> None:
        from edgelab.tui.screens.runs import RunsScreen

        self.app.push_screen(RunsScreen(self.device_name))

    def action_open_run(self) -> None:
        if self.detail and self.detail.runs.rows:
            self.app.open_run(str(self.detail.runs.rows[0]["id"]))
        else:
            self.notify("no run of this device yet", severity="warning")
