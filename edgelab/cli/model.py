"""`edgelab model export STAGE --format onnx|mnn`: random-weight stages as registered artifacts (thin)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from edgelab.cli.common import JsonOpt, console, fail_from, open_session, print_json
from edgelab.errors import EdgelabError

app = typer.Typer(help="Models edgelab makes: random-weight stages exported for device runtimes.",
                  no_args_is_help=True)


@app.command("export")
def export(
    stage: Annotated[str, typer.Argument(help="action-head (internvla-a1 flow head) or codec-decoder "
                                              "(Qwen3-TTS code2wav).")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="onnx, or mnn (converted from the ONNX export).")]
    = "onnx",
    seed: Annotated[int, typer.Option("--seed", help="Weight seed: the same seed gives the same bytes.")] = 0,
    out: Annotated[Path | None, typer.Option("--out", help="Cache folder (default $EDGELAB_HOME/models).")]
    = None,
    register: Annotated[bool, typer.Option("--register/--no-register", help="Add it to the artifact registry.")]
    = True,
    as_json: JsonOpt = False,
) -> None:
    """Write the stage with random weights (shapes from the pipeline spec), print its SHA-256 and recipe.

    Example: `edgelab model export action-head --format mnn` then `edgelab artifact show
    action-head.random-s0.mnn`. The weights mean nothing: figures from them never qualify a cell.
    """
    from edgelab.models.export import export as do_export
    from edgelab.models.export import register as do_register

    try:
        ex = do_export(stage, fmt, seed=seed, out_dir=out)
        if register:
            with open_session() as s:
                do_register(s, ex)
    except EdgelabError as err:
        fail_from(err, code=2 if type(err).__name__ == "ConfigError" else 1)
    d = ex.as_dict() | {"registered": register}
    if as_json:
        print_json(d)
        return
    console.print(f"[bold]{escape(ex.artifact)}[/]  {ex.size / 1e6:.1f} MB  weights: random")
    console.print(f"  sha256 {ex.sha256}")
    console.print(f"  file   {escape(str(ex.path))}")
