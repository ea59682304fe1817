"""Deploy dialog: pipeline, strategy (eligible with reasons, refused with theirs), runtime (from
runtimes/*.yaml), the S4 server endpoint, the dry-run plan with admission, then launch (which opens the run's live screen).

Profile decisions, planning and launching run in workers; nothing is reserved or pushed
until Launch, and Launch is offered only after a dry run that was not refused.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Label, Select, Static

from edgelab.errors import EdgelabError
from edgelab.tui import deployview
from edgelab.tui.messages import ActionDone
from edgelab.tui.widgets.info_panel import InfoPanel
from edgelab.views import plan

STRATEGIES = ("S1", "S3", "S4", "S5")
DEFAULT_PIPELINE = "qwen3-tts-0.6b"


def _err(err: EdgelabError) -> str:
    return f"{err}" + (f" -> {err.remedy}" if err.remedy else "")


class DeployScreen(ModalScreen[str | None]):
    """Dismisses with the launched run id, or None.

    The form, the strategy decisions and the plan scroll in the dialog's body; its title, the error
    line and the buttons stay in view at any terminal size (80x24 upwards), and the keys are in the
    footer. A dry run scrolls its plan into view."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+d", "dry_run", "Dry run"),
        Binding("ctrl+l", "launch", "Launch"),
    ]
    DEFAULT_CSS = """
    DeployScreen #deploy-dialog { width: 100; max-width: 100%; height: 1fr; max-height: 100%; padding: 0 1; }
    DeployScreen #deploy-body { height: 1fr; }
    DeployScreen #deploy-error { height: auto; max-height: 3; }
    """

    def __init__(self, device: str):
        super().__init__()
        self.device = device
        self.planned: dict | None = None
        self.decisions: dict | None = None

    def compose(self) -> ComposeResult:
        names = plan.pipelines()
        with Vertical(classes="dialog", id="deploy-dialog"):
            yield Static(Text(f"Deploy on {self.device}", style="bold"), id="deploy-title", classes="title")
            with VerticalScroll(id="deploy-body"):
                yield from self._form(names)
            yield Static("", id="deploy-error", classes="error")
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Dry run", id="dry-run", variant="default")
                yield Button("Launch", id="launch", variant="primary", disabled=True)
        yield Footer()

    def _form(self, names: list[str]) -> ComposeResult:
        yield Label("pipeline")
        yield Select(
            [(n, n) for n in names],
            value=DEFAULT_PIPELINE if DEFAULT_PIPELINE in names else names[0],
            allow_blank=False,
            id="pipeline",
        )
        yield Label("strategy")
        yield Select(
            [("auto (the profile's choice)", "auto")] + [(s, s) for s in STRATEGIES],
            value="auto",
            allow_blank=False,
            id="strategy",
        )
        yield Label("runtime (auto: a real one that can launch here, else the reference)")
        yield Select(
            [("auto (the plan's choice)", "auto")] + [(r, r) for r in plan.runtimes()],
            value="auto",
            allow_blank=False,
            id="runtime",
        )
        yield Label("S4 server endpoint (ws://HOST:PORT; empty: none)")
        yield Input(id="endpoint", placeholder="ws://127.0.0.1:8091")
        yield InfoPanel("strategies (from the deploy profile)", id="decisions")
        yield InfoPanel("dry-run plan and admission", id="plan")

    def on_mount(self) -> None:
        self.query_one("#plan", InfoPanel).show_note(
            "press Dry run to plan and check admission (nothing is reserved)"
        )
        self._decide(self._pipeline())

    def _pipeline(self) -> str:
        return str(self.query_one("#pipeline", Select).value)

    def _choice(self) -> tuple[str, str | None, str | None, str | None]:
        strategy = str(self.query_one("#strategy", Select).value)
        runtime = str(self.query_one("#runtime", Select).value)
        endpoint = self.query_one("#endpoint", Input).value.strip() or None
        return (
            self._pipeline(),
            None if strategy == "auto" else strategy,
            None if runtime == "auto" else runtime,
            endpoint,
        )

    def on_select_changed(self, event: Select.Changed) -> None:
        self._reset_plan()
        if event.select.id == "pipeline":
            self._decide(self._pipeline())

    def on_input_changed(self, _event: Input.Changed) -> None:
        self._reset_plan()

    def _reset_plan(self) -> None:
        self.planned = None
        self.query_one("#launch", Button).disabled = True

    @work(thread=True, exclusive=True, group="deploy-decide")
    def _decide(self, pipeline: str) -> None:
        try:
            self.app.call_from_thread(
                self._show_decisions, plan.strategy_decisions(self.app.engine, self.device, pipeline)
            )
        except EdgelabError as err:
            self.app.call_from_thread(self.query_one("#decisions", InfoPanel).show_note, _err(err))

    def _show_decisions(self, d: dict) -> None:
        self.decisions = d
        rows = [[Text(s["strategy"], style="green"), "eligible", s["reason"]] for s in d["eligible"]]
        rows += [
            [Text(s["strategy"], style="red"), f"refused ({s.get('code')})", s["reason"]]
            for s in d["refused"]
        ]
        note = (
            f"runtime target {d.get('runtime_target')}, quantization {d.get('quantization') or 'none fits'}"
        )
        self.query_one("#decisions", InfoPanel).show_table(["strategy", "", "why"], rows, note)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_dry_run(self) -> None:
        self._reset_plan()
        self.query_one("#deploy-error", Static).update("")
        self.query_one("#plan", InfoPanel).show_note("planning...")
        self._dry_run(*self._choice())

    @work(thread=True, exclusive=True, group="deploy-plan")
    def _dry_run(
        self, pipeline: str, strategy: str | None, runtime: str | None, endpoint: str | None
    ) -> None:
        try:
            planned = deployview.dry_run(self.app.engine, self.device, pipeline, strategy, runtime, endpoint)
        except EdgelabError as err:
            self.post_message(ActionDone("dry-run", self.device, False, _err(err)))
            return
        self.app.call_from_thread(self._show_plan, planned)

    def _show_plan(self, planned: dict) -> None:
        self.planned = planned
        panel = self.query_one("#plan", InfoPanel)
        panel.show_pairs([(r.key, r.value) for r in plan.plan_rows(planned)])
        self.query_one("#launch", Button).disabled = bool(planned.get("refusal"))
        self.call_after_refresh(
            self.query_one("#deploy-body", VerticalScroll).scroll_to_widget, panel, top=True
        )

    def action_launch(self) -> None:
        button = self.query_one("#launch", Button)
        if not button.disabled:
            button.press()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
        elif event.button.id == "dry-run":
            self.action_dry_run()
        elif event.button.id == "launch" and self.planned and not self.planned.get("refusal"):
            event.button.disabled = True
            self.query_one("#plan", InfoPanel).show_note("launching: admit, push, start, wait until ready...")
            self._launch(*self._choice())

    @work(thread=True, exclusive=True, group="deploy-launch")
    def _launch(self, pipeline: str, strategy: str | None, runtime: str | None, endpoint: str | None) -> None:
        try:
            run_id = deployview.launch(self.app.engine, self.device, pipeline, strategy, runtime, endpoint)
        except EdgelabError as err:
            self.post_message(ActionDone("launch", self.device, False, _err(err)))
            return
        self.post_message(ActionDone("launch", run_id, True, f"launched run {run_id}"))

    def on_action_done(self, message: ActionDone) -> None:
        if not message.ok:
            self.query_one("#deploy-error", Static).update(message.text)
            if message.action == "dry-run":
                self.query_one("#plan", InfoPanel).show_note("no plan")
            return
        run_id = message.target
        self.dismiss(run_id)
        self.app.open_run(run_id)
