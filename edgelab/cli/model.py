"""`edgelab model synth` (random GGUF) and `edgelab model export` (random ONNX/MNN stages): thin over edgelab.models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from edgelab.cli.common import JsonOpt, console, err_console, escape, fail_from, open_session, print_json
from edgelab.errors import ConfigError

app = typer.Typer(
    help="Models edgelab makes with random weights: GGUFs (synth) and exported stages (export).",
    no_args_is_help=True,
)


@app.command("synth")
def synth(
    name: Annotated[
        str,
        typer.Argument(help="Artifact name, e.g. spark-x2.5; qwen3-tts-0.6b / qwen3-tts-1.7b: the TTS pair."),
    ],
    params: Annotated[
        str | None, typer.Option("--params", help="Parameter count of a text LM: 4M, 100M (default), 1.5B.")
    ] = None,
    scale: Annotated[
        float | None,
        typer.Option("--scale", help="Qwen3-TTS: every width times this (default 1: the real geometry)."),
    ] = None,
    quant: Annotated[
        str | None,
        typer.Option(
            "--quant", help="Quantize with the lab's llama-quantize: q4_k_m, q8_0, ... (default f16)."
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the random weights (same seed, same bytes).")
    ] = 0,
    vocab: Annotated[
        int | None, typer.Option("--vocab", help="Vocabulary size (default by size: 2048-32000).")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Folder for the GGUF files (default <cache>/models).")
    ] = None,
    quantizer: Annotated[
        Path | None,
        typer.Option(
            "--quantizer", help="llama-quantize to use (default: the registered build for this host)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a random-weight GGUF and register it as a model artifact.

    A text LM is a llama-architecture GGUF of --params parameters. qwen3-tts-0.6b and qwen3-tts-1.7b
    are Qwen3-TTS-12Hz in llama.cpp's layout: the talker (registered as the name, role talker) and its
    mmproj (NAME-mmproj: code predictor, code2wav, speaker encoder), at the real geometry unless
    --scale; --quant quantizes the talker. The weights are random: the text (or speech) is noise, the
    timings and memory are a real model's of that shape. Its metadata says weights: random, and so
    does every result that uses it; random weights never end speech on their own, so runs bound
    their frames.

    \b
      edgelab model synth spark-x2.5 --params 100M --quant q4_k_m
      edgelab model synth tiny --params 2M
      edgelab model synth qwen3-tts-0.6b                 # 1.2 GB talker + mmproj, real geometry
      edgelab model synth qwen3-tts-0.6b --scale 0.0625  # 1.4 MB + 12 MB, for tests
    """
    from edgelab.models.tts_synth import is_tts

    if is_tts(name):
        if params is not None or vocab is not None:
            fail_from(
                ConfigError(
                    f"{name} has a fixed geometry: --params and --vocab do not apply",
                    remedy="use --scale 0.0625 for a small model",
                ),
                code=2,
            )
        _synth_tts(name, scale or 1.0, quant, seed, out, quantizer, as_json)
        return
    if scale is not None:
        fail_from(ConfigError("--scale is for qwen3-tts models", remedy="use --params for a text LM"), code=2)
    from edgelab.artifacts.manifest import to_manifest
    from edgelab.models.synth import synth_model

    params = params or "100M"
    with open_session() as s:
        art = synth_model(
            s,
            name,
            params,
            quant=quant,
            seed=seed,
            vocab=vocab,
            out_dir=out,
            quantizer=quantizer,
            progress=lambda line: err_console.print(f"[dim]{escape(line)}[/]", soft_wrap=True),
        )
        data = to_manifest(s, art)
    if as_json:
        print_json(data)
        return
    m = data["metadata"]
    console.print(
        f"registered [bold]{escape(data['name'])}[/] {data['digest'][:16]}  kind model, weights random"
    )
    for path, size in data["sizes"].items():
        console.print(f"  {m['params']:,} parameters, {m['quant']}, {escape(path)} ({size / 1e6:.1f} MB)")


def _synth_tts(
    name: str,
    scale: float,
    quant: str | None,
    seed: int,
    out: Path | None,
    quantizer: Path | None,
    as_json: bool,
) -> None:
    from edgelab.artifacts.manifest import to_manifest
    from edgelab.models.tts_synth import synth_tts

    try:
        with open_session() as s:
            arts = synth_tts(
                s,
                name,
                scale=scale,
                quant=quant,
                seed=seed,
                out_dir=out,
                quantizer=quantizer,
                progress=lambda line: err_console.print(f"[dim]{escape(line)}[/]", soft_wrap=True),
            )
            data = [to_manifest(s, a) for a in arts]
    except ConfigError as err:
        fail_from(err, code=2)
    if as_json:
        print_json(data)
        return
    for d in data:
        m = d["metadata"]
        console.print(
            f"registered [bold]{escape(d['name'])}[/] {d['digest'][:16]}  kind model, role {m['role']}, "
            "weights random"
        )
        for path, size in d["sizes"].items():
            console.print(f"  {m['params']:,} parameters, {m['quant']}, {escape(path)} ({size / 1e6:.1f} MB)")


@app.command("export")
def export(
    stage: Annotated[
        str,
        typer.Argument(help="action-head (internvla-a1 flow head) or codec-decoder (Qwen3-TTS code2wav)."),
    ],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="onnx, or mnn (converted from the ONNX export).")
    ] = "onnx",
    seed: Annotated[int, typer.Option("--seed", help="Weight seed: the same seed gives the same bytes.")] = 0,
    out: Annotated[
        Path | None, typer.Option("--out", help="Cache folder (default $EDGELAB_HOME/models).")
    ] = None,
    register: Annotated[
        bool, typer.Option("--register/--no-register", help="Add it to the artifact registry.")
    ] = True,
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
    except ConfigError as err:  # bad input here is a usage error: exit 2 (root handler: 1)
        fail_from(err, code=2)
    d = ex.as_dict() | {"registered": register}
    if as_json:
        print_json(d)
        return
    console.print(f"[bold]{escape(ex.artifact)}[/]  {ex.size / 1e6:.1f} MB  weights: random")
    console.print(f"  sha256 {ex.sha256}")
    console.print(f"  file   {escape(str(ex.path))}")


@app.command("synth-hf")
def synth_hf(
    pipeline: Annotated[str, typer.Argument(help="Pipeline: qwen3-tts (the 0.6B CustomVoice layout).")],
    name: Annotated[
        str | None, typer.Option("--name", help="Artifact name (default PIPELINE-hf-random).")
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the random weights (same seed, same bytes).")
    ] = 0,
    python: Annotated[
        str | None,
        typer.Option(
            "--python",
            help="Interpreter with torch and vllm-omni that draws the tensors (default: the vLLM-Omni "
            "venv a virtual device's probe recorded; `edgelab runtime install vllm-omni` makes one).",
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Folder of the checkpoint (default <cache>/models/NAME).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a random-weight Hugging Face checkpoint (config, tokenizer, safetensors) and register it.

    The layout vLLM-Omni serves (`vllm serve DIR --omni`, S1) and llama.cpp's convert_hf_to_gguf.py
    converts; its geometry is stated in edgelab/models/qwen3tts_hf.py. Weights: random.

    \b
      edgelab model synth-hf qwen3-tts
      edgelab model synth-hf qwen3-tts --python ~/.edgelab/venvs/vllm-omni-0.30.0/bin/python
    """
    from edgelab.artifacts.manifest import to_manifest
    from edgelab.catalog.pipelines import load_pipelines, resolve_pipeline_id
    from edgelab.cli.common import open_engine
    from edgelab.models.qwen3tts_hf import default_python, synth_checkpoint
    from edgelab.runtimes.cache import cache_root

    pid = resolve_pipeline_id(pipeline, load_pipelines())
    if not pid.startswith("qwen3-tts"):
        fail_from(ConfigError(f"no Hugging Face synth for {pid}", remedy="qwen3-tts only"), code=2)
    py = python or default_python(open_engine())
    if py is None:
        fail_from(
            ConfigError(
                "no interpreter with torch and vllm-omni to draw the tensors",
                remedy="`edgelab runtime install vllm-omni --device wsl-hx370`, probe it, or give --python",
            )
        )
    art_name = name or f"{pid}-hf-random"
    folder = out or cache_root() / "models" / art_name
    with open_session() as s:
        art = synth_checkpoint(s, art_name, folder, python=str(py), seed=seed, pipeline=pid)
        data = to_manifest(s, art)
    if as_json:
        print_json(data)
        return
    console.print(
        f"registered [bold]{escape(data['name'])}[/] {data['digest'][:16]}  kind model (Hugging Face), weights random"
    )
    for path, size in data["sizes"].items():
        console.print(f"  {escape(path)} ({size / 1e6:.2f} MB)")
