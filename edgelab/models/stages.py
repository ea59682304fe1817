"""Random-weight stages of the study's pipelines, written as ONNX graphs with the ``onnx`` helpers.

Two stages the study puts on device runtimes (DESIGN §4):

- ``action-head``: the flow-matching action head of internvla-a1 / pi0. One call is one Euler
  step's velocity ``v(x, tau, cond)``: conditioning vector [1, cond_dim] + noisy action chunk
  [50, 32] + timestep [1] in, velocity [50, 32] out. The runner drives K = 10 steps
  (``x += v / K``), as the real head's sampler does.
- ``codec-decoder``: the Qwen3-TTS code2wav stage. Codes [16 codebooks, frames] (entries < 2048)
  in, PCM [frames, 1920] out (80 ms at 24 kHz per frame); the runner feeds up to 72 frames of
  left context before the new ones and keeps the new frames' samples.

The weights come from a seeded generator, so the same seed gives byte-identical files: the
SHA-256 names the graph. The numbers mean nothing; the shapes, operators and cost are the point.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgelab.reference.tts import CODEBOOK_SIZE, CODEBOOKS, LEFT_CONTEXT, SAMPLE_RATE, SAMPLES_PER_FRAME
from edgelab.reference.vla import DIMS as ACTION_DIMS
from edgelab.reference.vla import FLOW_STEPS, HORIZON

OPSET = 17
IR_VERSION = 8  # readable by every ONNX Runtime and MNN converter in use
PRODUCER = "edgelab.models.stages"

# internvla-a1 / pi0 action head (catalog: action {chunk: [50, 32], flow_steps: 10}): the chunk
# shape and step count come from edgelab.reference.vla, the Qwen3-TTS code2wav numbers (CODEBOOKS,
# CODEBOOK_SIZE, SAMPLES_PER_FRAME, LEFT_CONTEXT, SAMPLE_RATE) from edgelab.reference.tts, their
# one homes; the controller (which runs these graphs) imports them there, not from here.
COND_DIM = 128


@dataclass(frozen=True)
class StageSpec:
    """One exportable stage: its name, pipeline, interface and size knobs (part of the recipe)."""

    name: str
    pipeline: str
    stage: str  # the pipeline spec's stage name
    inputs: dict[str, tuple[str, tuple[Any, ...]]]  # name -> (dtype, shape; str = symbolic)
    outputs: dict[str, tuple[str, tuple[Any, ...]]]
    params: dict[str, int] = field(default_factory=dict)


ACTION_HEAD = StageSpec(
    "action-head",
    "internvla-a1",
    "action_head",
    inputs={
        "cond": ("float32", (1, COND_DIM)),
        "x": ("float32", (HORIZON, ACTION_DIMS)),
        "tau": ("float32", (1,)),
    },
    outputs={"v": ("float32", (HORIZON, ACTION_DIMS))},
    params={
        "horizon": HORIZON,
        "dims": ACTION_DIMS,
        "cond_dim": COND_DIM,
        "hidden": 384,
        "ffn": 768,
        "blocks": 2,
        "flow_steps": FLOW_STEPS,
    },
)
CODEC_DECODER = StageSpec(
    "codec-decoder",
    "qwen3-tts-0.6b",
    "code2wav",
    inputs={"codes": ("int32", (CODEBOOKS, "frames"))},
    outputs={"pcm": ("float32", ("frames", SAMPLES_PER_FRAME))},
    params={
        "codebooks": CODEBOOKS,
        "codebook_size": CODEBOOK_SIZE,
        "samples_per_frame": SAMPLES_PER_FRAME,
        "left_context": LEFT_CONTEXT,
        "sample_rate": SAMPLE_RATE,
        "dim": 64,
        "kernel": 3,
    },
)
STAGES = {s.name: s for s in (ACTION_HEAD, CODEC_DECODER)}


def _rng(stage: str, seed: int) -> np.random.Generator:
    h = hashlib.sha256(f"edgelab-stage\x00{stage}\x00{seed}".encode()).digest()
    return np.random.default_rng(int.from_bytes(h[:8], "little"))


class _Graph:
    """A tiny builder over ``onnx.helper``: named initializers and nodes with generated names."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        from onnx import helper

        self._n += 1
        out = f"{op_type.lower()}_{self._n}"
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [out], name=f"n{self._n}_{op_type}", **attrs)
        )
        return out

    def gelu(self, x: str, c: dict[str, str]) -> str:
        """tanh-approximation GELU from plain ops (every runtime lowers them)."""
        x3 = self.op("Mul", self.op("Mul", x, x), x)
        inner = self.op("Add", x, self.op("Mul", x3, c["k"]))
        t = self.op("Tanh", self.op("Mul", inner, c["s"]))
        return self.op("Mul", self.op("Mul", x, c["half"]), self.op("Add", t, c["one"]))

    def model(self, spec: StageSpec, out: str, seed: int) -> Any:
        from onnx import TensorProto, helper

        types = {"float32": TensorProto.FLOAT, "int32": TensorProto.INT32}
        self.nodes.append(helper.make_node("Identity", [out], list(spec.outputs), name="output"))
        graph = helper.make_graph(
            self.nodes,
            spec.name.replace("-", "_"),
            [helper.make_tensor_value_info(n, types[t], list(s)) for n, (t, s) in spec.inputs.items()],
            [helper.make_tensor_value_info(n, types[t], list(s)) for n, (t, s) in spec.outputs.items()],
            self.inits,
        )
        m = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name=PRODUCER,
            producer_version="1",
            ir_version=IR_VERSION,
        )
        m.doc_string = f"edgelab random-weight {spec.name} ({spec.pipeline}:{spec.stage}), seed {seed}"
        helper.set_model_props(
            m,
            {
                "weights": "random",
                "seed": str(seed),
                "pipeline": spec.pipeline,
                "stage": spec.stage,
                **{k: str(v) for k, v in spec.params.items()},
            },
        )
        return m


def _scalars(g: _Graph) -> dict[str, str]:
    f = np.float32
    return {
        "k": g.const("c_gelu_k", np.array(0.044715, f)),
        "s": g.const("c_gelu_s", np.array(0.7978845608, f)),
        "half": g.const("c_half", np.array(0.5, f)),
        "one": g.const("c_one", np.array(1.0, f)),
    }


def action_head(seed: int = 0) -> Any:
    """The velocity network of one Euler step (an ONNX ModelProto)."""
    p = ACTION_HEAD.params
    rng = _rng("action-head", seed)
    H, F, D, C, T = p["hidden"], p["ffn"], p["dims"], p["cond_dim"], p["horizon"]

    def w(*shape: int, fan_in: int) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(fan_in)).astype(np.float32)

    g = _Graph()
    c = _scalars(g)
    h = g.op(
        "Add",
        g.op("MatMul", "x", g.const("w_in", w(D, H, fan_in=D))),
        g.op("MatMul", "cond", g.const("w_cond", w(C, H, fan_in=C))),
    )
    h = g.op("Add", h, g.op("Mul", "tau", g.const("w_tau", w(H, fan_in=1))))
    h = g.gelu(g.op("Add", h, g.const("pos", w(T, H, fan_in=16))), c)
    h = g.op(
        "Add", h, g.op("Tanh", g.op("MatMul", g.const("mix", w(T, T, fan_in=T)), h))
    )  # across the horizon
    for b in range(p["blocks"]):
        up = g.gelu(
            g.op(
                "Add",
                g.op("MatMul", h, g.const(f"b{b}_w1", w(H, F, fan_in=H))),
                g.const(f"b{b}_b1", w(F, fan_in=F * 4)),
            ),
            c,
        )
        h = g.op("Add", h, g.op("MatMul", up, g.const(f"b{b}_w2", w(F, H, fan_in=F * 2))))
    v = g.op("MatMul", g.op("Tanh", h), g.const("w_out", w(H, D, fan_in=H)))
    return g.model(ACTION_HEAD, v, seed)


def codec_decoder(seed: int = 0) -> Any:
    """Codes -> summed codebook embeddings -> causal temporal conv -> per-frame upsampling to PCM."""
    p = CODEC_DECODER.params
    rng = _rng("codec-decoder", seed)
    K, N, E, S, k = p["codebooks"], p["codebook_size"], p["dim"], p["samples_per_frame"], p["kernel"]
    g = _Graph()
    table = (rng.standard_normal((K * N, E), dtype=np.float32) / 4).astype(np.float32)
    offsets = (np.arange(K, dtype=np.int32) * N).reshape(K, 1)
    idx = g.op("Add", "codes", g.const("codebook_offsets", offsets))
    emb = g.op("Gather", g.const("codebooks", table), idx, axis=0)  # [K, frames, E]
    s = g.op("ReduceSum", emb, g.const("axis0", np.array([0], np.int64)), keepdims=0)  # [frames, E]
    s = g.op("Unsqueeze", g.op("Transpose", s, perm=[1, 0]), g.const("axes0", np.array([0], np.int64)))
    conv_w = (rng.standard_normal((E, E, k), dtype=np.float32) / np.sqrt(E * k)).astype(np.float32)
    y = g.op("Tanh", g.op("Conv", s, g.const("conv_w", conv_w), kernel_shape=[k], pads=[k - 1, 0]))  # causal
    y = g.op("Transpose", g.op("Squeeze", y, "axes0"), perm=[1, 0])  # [frames, E]
    up = (rng.standard_normal((E, S), dtype=np.float32) / np.sqrt(E)).astype(np.float32)
    pcm = g.op(
        "Mul",
        g.op("Tanh", g.op("MatMul", y, g.const("w_up", up))),
        g.const("gain", np.array(0.5, np.float32)),
    )
    return g.model(CODEC_DECODER, pcm, seed)


BUILDERS = {"action-head": action_head, "codec-decoder": codec_decoder}


def build(name: str, seed: int = 0) -> Any:
    """The checked ONNX model of one stage."""
    import onnx

    m = BUILDERS[name](seed)
    onnx.checker.check_model(m, full_check=True)
    return m
