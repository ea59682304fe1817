"""The root command group: one handler for domain errors, and subcommands built only when run.

Every ``EdgelabError`` that a command lets through becomes one ``error:`` line and
its remedy on stderr, exit 1 (:func:`edgelab.cli.common.emit_error`), so commands need
no copies of the same except block.

Typer converts every registered command of an app up front (it evaluates each
function's annotations to build its parameters): for ~50 commands that is most of
the cost of ``edgelab --help``. This group keeps the registrations of the real app
and builds the one a command line names; the listing in ``--help`` reads each
entry's help text without building it.
"""

from __future__ import annotations

import inspect

import typer
from typer import _click as click
from typer import main as typer_main
from typer._click.utils import make_default_short_help
from typer.core import TyperGroup
from typer.models import CommandInfo, TyperInfo

from edgelab.cli.common import emit_error
from edgelab.errors import EdgelabError


class ErrorsGroup(TyperGroup):
    """The root group: a domain error from any command is one line plus its remedy, exit 1 (or the
    error class's own code: 2 for bad input); any other fault is one line too (edgelab.cli.guard)."""

    def invoke(self, ctx: click.Context):
        from edgelab.cli.common import debug_enabled
        from edgelab.cli.guard import fail_for, is_cli_framework

        try:
            return super().invoke(ctx)
        except EdgelabError as err:
            if debug_enabled():
                raise
            emit_error(str(err), err.remedy)
            raise typer.Exit(err.exit_code or 1) from None
        except KeyboardInterrupt:
            if debug_enabled():
                raise
            emit_error("interrupted")
            raise typer.Exit(130) from None
        except Exception as err:
            if is_cli_framework(err) or debug_enabled():  # typer's Exit and usage errors keep their codes
                raise
            fail_for(err)


class LazyGroup(ErrorsGroup):
    """Subcommands come from ``source`` (a :class:`typer.Typer`), each built on first use."""

    source: typer.Typer | None = None
    # the root app's settings, which every group below it is built with
    settings: typer.Typer | None = None

    def _entries(self) -> dict[str, CommandInfo | TyperInfo]:
        src = self.source
        if src is None:
            return {}
        entries: dict[str, CommandInfo | TyperInfo] = {}
        for info in src.registered_commands:
            name = info.name or typer_main.get_command_name(info.callback.__name__)  # type: ignore[union-attr]
            entries[name] = info
        for group in src.registered_groups:
            solved = typer_main.solve_typer_info_defaults(group)
            if solved.name:
                entries[solved.name] = group
        return entries

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*self.commands, *(n for n in self._entries() if n not in self.commands)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        info = self._entries().get(cmd_name)
        if info is None:
            return None
        src = self.settings or self.source
        assert src is not None and self.source is not None
        if isinstance(info, CommandInfo):
            cmd: click.Command = typer_main.get_command_from_info(
                info,
                pretty_exceptions_short=src.pretty_exceptions_short,
                rich_markup_mode=src.rich_markup_mode,
            )
        else:
            cmd = _subgroup(info, src)
        self.commands[cmd_name] = cmd
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the registrations' help texts: nothing is built to list it."""
        rows: list[tuple[str, str]] = []
        entries = self._entries()
        if not entries:
            return
        limit = formatter.width - 6 - max(len(n) for n in entries)
        for name, info in entries.items():
            if isinstance(info, CommandInfo):
                if info.hidden:
                    continue
                text = info.help if info.help is not None else inspect.getdoc(info.callback) or ""
                text = info.short_help or make_default_short_help(inspect.cleandoc(text), limit)
            else:
                solved = typer_main.solve_typer_info_defaults(info)
                if solved.hidden:
                    continue
                text = solved.short_help or make_default_short_help(
                    inspect.cleandoc(solved.help or ""), limit
                )
            rows.append((name, text))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _subgroup(info: TyperInfo, src: typer.Typer) -> click.Command:
    """A noun group (``device``, ``runs`` ...), itself lazy unless it brings its own group class."""
    solved = typer_main.solve_typer_info_defaults(info)
    kwargs = {
        "pretty_exceptions_short": src.pretty_exceptions_short,
        "rich_markup_mode": src.rich_markup_mode,
        "suggest_commands": src.suggest_commands,
    }
    sub = info.typer_instance
    if (
        solved.cls not in (None, TyperGroup)
        or sub is None
        or sub.registered_groups
        and any(
            typer_main.solve_typer_info_defaults(g).cls not in (None, TyperGroup)
            for g in sub.registered_groups
        )
    ):
        return typer_main.get_group_from_info(info, **kwargs)
    fields = (
        "name",
        "invoke_without_command",
        "no_args_is_help",
        "subcommand_metavar",
        "chain",
        "result_callback",
        "context_settings",
        "callback",
        "help",
        "epilog",
        "short_help",
        "options_metavar",
        "add_help_option",
        "hidden",
        "deprecated",
        "rich_help_panel",
    )
    shell = TyperInfo(typer.Typer(), cls=LazyGroup, **{f: getattr(solved, f) for f in fields})
    group = typer_main.get_group_from_info(shell, **kwargs)
    assert isinstance(group, LazyGroup)
    group.source = sub
    group.settings = src
    return group


def lazy_root(app: typer.Typer) -> click.Command:
    """The click group for ``app`` whose subcommands are built only when a command line names them."""
    shell = typer.Typer(
        name=app.info.name,
        cls=LazyGroup,
        help=app.info.help,
        no_args_is_help=app.info.no_args_is_help,
        rich_markup_mode=app.rich_markup_mode,
        context_settings=app.info.context_settings,
        add_completion=app._add_completion,
        pretty_exceptions_enable=app.pretty_exceptions_enable,
        pretty_exceptions_short=app.pretty_exceptions_short,
        pretty_exceptions_show_locals=app.pretty_exceptions_show_locals,
        suggest_commands=app.suggest_commands,
    )
    callback = app.registered_callback
    if callback is not None and callback.callback is not None:
        shell.callback()(callback.callback)
    group = typer_main.get_command(shell)
    assert isinstance(group, LazyGroup)
    group.source = app
    group.settings = app
    return group
