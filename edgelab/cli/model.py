"""`edgelab model synth`: thin over edgelab.models.synth."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from edgelab.cli.common import JsonOpt, console, err_console, fail_from, open_session, print_json
from edgelab.errors import EdgelabError

app = typer.Typer(help="Models: make a random-weight GGUF for measuring runtimes without a download.",
                  no_args_is_help=True)


@app.command("synth")
def synth(
    name: Annotated[str, typer.Argument(help="Artifact name, e.g. spark-x2.5.")],
    params: Annotated[str, typer.Option("--params", help="Parameter count: 4M, 100M, 1.5B.")] = "100M",
    quant: Annotated[
        str | None, typer.Option("--quant", help="Quantize with the lab's llama-quantize: q4_k_m, q8_0, ... (default f16).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random weights (same seed, same bytes).")] = 0,
    vocab: Annotated[int | None, typer.Option("--vocab", help="Vocabulary size (default by size: 2048-32000).")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Folder for the GGUF files (default <cache>/models).")] = None,
    quantizer: Annotated[
        Path | None, typer.Option("--quantizer", help="llama-quantize to use (default: the registered build for this host).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a random-weight llama-architecture GGUF and register it as a model artifact.

    The weights are random: the text is noise, the timings and memory are a real model's of that
    shape. Its metadata says weights: random, and so does every result that uses it.

    \b
      edgelab model synth spark-x2.5 --params 100M --quant q4_k_m
      edgelab model synth tiny --params 2M
    """
    from edgelab.artifacts.manifest import to_manifest
    from edgelab.models.synth import synth_model

    try:
        with open_session() as s:
            art = synth_model(s, name, params, quant=quant, seed=seed, vocab=vocab, out_dir=out, quantizer=quantizer,
                              progress=lambda line: err_console.print(f"[dim]{escape(line)}[/]", soft_wrap=True))
            data = to_manifest(s, art)
    except EdgelabError as err:
        fail_from(err)
    if as_json:
        print_json(data)
        return
    m = data["metadata"]
    console.print(f"registered [bold]{escape(data['name'])}[/] {data['digest'][:16]}  kind model, weights random")
    for path, size in data["sizes"].items():
        console.print(f"  {m['params']:,} parameters, {m['quant']}, {escape(path)} ({size / 1e6:.1f} MB)")
