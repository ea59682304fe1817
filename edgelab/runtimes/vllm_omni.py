"""vLLM-Omni's deploy config for Qwen3-TTS, as the edge profile sets it (``--deploy-config``).

The shape is vLLM-Omni 0.30.0's own ``vllm_omni/deploy/qwen3_tts.yaml`` (talker -> code2wav over
the shared-memory connector with async chunking); edgelab writes every value the profile decides
instead of inheriting them, so the file in the run directory is the whole configuration and its
SHA-256 names it in the run's provenance:

- per stage ``gpu_memory_utilization``: the fraction of the budget pool the plan reserves for that
  stage (the GPU pool on CUDA, unified RAM on Jetson, the RAM on vLLM's CPU backend, where vLLM
  reads the same flag as a fraction of CPU memory);
- ``max_num_seqs`` and the talker's ``max_model_len`` from the profile; code2wav keeps vLLM-Omni's
  65536 (its prefill is 16 x frames, beyond a 32k default);
- the chunk schedule: first chunk, steady chunk and left context of the server schedule, and the
  edge ramp (``codec_chunk_ramp``) that removed the study's first-chunk stall;
- CPU: eager stages, the V1 model runner (vLLM-Omni's MRv2 is CUDA-only) and the profile's dtype;
  CUDA: vLLM-Omni's defaults (MRv2, code2wav graphs, bf16 decoder).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import yaml

VERSION = "0.30.0"  # the vllm-omni release this file's keys follow
FILENAME = "vllm-omni-deploy.yaml"
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass(frozen=True)
class StageMemory:
    talker: float  # fraction of the pool for stage 0 (talker + code predictor)
    code2wav: float  # fraction for stage 1


@dataclass(frozen=True)
class Qwen3TTSDeploy:
    backend: str  # cpu | cuda
    dtype: str  # bf16 | fp16 | fp32 (the profile's)
    max_seqs: int
    max_model_len: int
    memory: StageMemory
    first_frames: int = 1
    steady_frames: int = 25
    left_context_frames: int = 72
    ramp: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        cpu = self.backend == "cpu"
        extra: dict[str, Any] = {
            "codec_streaming": True,
            "connector_get_sleep_s": 0.01,
            "connector_get_max_wait_first_chunk": 3000,
            "connector_get_max_wait": 300,
            "codec_chunk_frames": self.steady_frames,
            "codec_left_context_frames": self.left_context_frames,
            "initial_codec_chunk_frames": self.first_frames,
            "decode_batch_max_size": 4,
        }
        if self.ramp:
            extra["codec_chunk_ramp"] = list(self.ramp)
        devices = {} if cpu else {"devices": "0"}
        talker = {
            "stage_id": 0,
            "max_num_seqs": self.max_seqs,
            "gpu_memory_utilization": self.memory.talker,
            "trust_remote_code": True,
            "enable_prefix_caching": False,
            "async_scheduling": True,
            "max_num_batched_tokens": 512,
            "max_model_len": self.max_model_len,
            **devices,
            **({"enforce_eager": True} if cpu else {}),
            "output_connectors": {"to_stage_1": "connector_of_shared_memory"},
            "default_sampling_params": {
                "temperature": 0.9,
                "top_k": 50,
                "max_tokens": self.max_model_len,
                "min_tokens": 2,
                "repetition_penalty": 1.05,
            },
            "subtalker_sampling_params": {"do_sample": True, "temperature": 0.9, "top_k": 50, "top_p": 1.0},
        }
        code2wav = {
            "stage_id": 1,
            "dtype": DTYPES.get(self.dtype, "float32") if cpu else "bfloat16",
            "max_num_seqs": self.max_seqs,
            "gpu_memory_utilization": self.memory.code2wav,
            "enforce_eager": cpu,
            "trust_remote_code": True,
            "enable_prefix_caching": False,
            "async_scheduling": True,
            "max_num_batched_tokens": 65536,
            "max_model_len": 65536,
            **devices,
            "input_connectors": {"from_stage_0": "connector_of_shared_memory"},
            "default_sampling_params": {
                "temperature": 0.0,
                "top_p": 1.0,
                "top_k": -1,
                "max_tokens": 65536,
                "repetition_penalty": 1.0,
            },
        }
        out: dict[str, Any] = {
            "model_runner": "v1" if cpu else "v2",
            "async_chunk": True,
            "trust_remote_code": True,
        }
        if cpu:
            out["dtype"] = DTYPES.get(self.dtype, "float32")
        out["connectors"] = {"connector_of_shared_memory": {"name": "SharedMemoryConnector", "extra": extra}}
        out["stages"] = [talker, code2wav]
        return out

    def text(self) -> str:
        head = (
            f"# edgelab: vLLM-Omni {VERSION} deploy config for Qwen3-TTS ({self.backend}), from the device's\n"
            "# deploy profile; the keys are those of vllm_omni/deploy/qwen3_tts.yaml.\n"
        )
        return head + yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fraction(want_bytes: int, pool_bytes: int) -> float:
    """``want`` of ``pool`` rounded up to 0.01, at least 0.01 and at most 0.95."""
    import math

    return max(0.01, min(0.95, math.ceil(want_bytes / pool_bytes * 100) / 100))
