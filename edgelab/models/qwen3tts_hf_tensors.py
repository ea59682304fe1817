"""The tensors of edgelab's random Qwen3-TTS checkpoint; run as ``PYTHON - OUT SEED`` (script on stdin).

It runs in an interpreter that has torch and vLLM-Omni (the device venv), never in edgelab's own:
the codec (``speech_tokenizer/model.safetensors``) is the seeded state of vLLM-Omni's own
``Qwen3TTSTokenizerV2Model`` built from the config edgelab wrote, the speaker encoder that of its
``Qwen3TTSSpeakerEncoder``, so every name and shape is the loader's. The talker's tensors follow the
checkpoint names vLLM-Omni's ``hf_to_vllm_mapper`` maps (``talker.model.layers.N...``,
``talker.code_predictor...``), drawn N(0, 0.02) from the seed with unit norms, in bfloat16.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _talker(cfg: dict, torch, gen) -> dict:
    t = cfg["talker_config"]
    cp = t["code_predictor_config"]

    def w(*shape):
        return (torch.randn(*shape, generator=gen) * 0.02).to(torch.bfloat16)

    def ones(n):
        return torch.ones(n, dtype=torch.bfloat16)

    out = {}

    def layer(prefix: str, c: dict) -> None:
        h, hd = c["hidden_size"], c["head_dim"]
        q, kv, ff = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd, c["intermediate_size"]
        out[f"{prefix}.input_layernorm.weight"] = ones(h)
        out[f"{prefix}.post_attention_layernorm.weight"] = ones(h)
        out[f"{prefix}.self_attn.q_proj.weight"] = w(q, h)
        out[f"{prefix}.self_attn.k_proj.weight"] = w(kv, h)
        out[f"{prefix}.self_attn.v_proj.weight"] = w(kv, h)
        out[f"{prefix}.self_attn.o_proj.weight"] = w(h, q)
        out[f"{prefix}.self_attn.q_norm.weight"] = ones(hd)
        out[f"{prefix}.self_attn.k_norm.weight"] = ones(hd)
        out[f"{prefix}.mlp.gate_proj.weight"] = w(ff, h)
        out[f"{prefix}.mlp.up_proj.weight"] = w(ff, h)
        out[f"{prefix}.mlp.down_proj.weight"] = w(h, ff)

    h = t["hidden_size"]
    for i in range(t["num_hidden_layers"]):
        layer(f"talker.model.layers.{i}", t)
    out["talker.model.norm.weight"] = ones(h)
    out["talker.model.codec_embedding.weight"] = w(t["vocab_size"], h)
    out["talker.codec_head.weight"] = w(t["vocab_size"], h)
    th = t["text_hidden_size"]
    out["talker.model.text_embedding.weight"] = w(t["text_vocab_size"], th)
    out["talker.text_projection.linear_fc1.weight"] = w(th, th)
    out["talker.text_projection.linear_fc1.bias"] = torch.zeros(th, dtype=torch.bfloat16)
    out["talker.text_projection.linear_fc2.weight"] = w(h, th)
    out["talker.text_projection.linear_fc2.bias"] = torch.zeros(h, dtype=torch.bfloat16)
    for i in range(cp["num_hidden_layers"]):
        layer(f"talker.code_predictor.model.layers.{i}", cp)
    out["talker.code_predictor.model.norm.weight"] = ones(cp["hidden_size"])
    for g in range(cp["num_code_groups"] - 1):
        out[f"talker.code_predictor.model.codec_embedding.{g}.weight"] = w(cp["vocab_size"], h)
        out[f"talker.code_predictor.lm_head.{g}.weight"] = w(cp["vocab_size"], cp["hidden_size"])
    if cp["hidden_size"] != h:
        out["talker.code_predictor.small_to_mtp_projection.weight"] = w(cp["hidden_size"], h)
        out["talker.code_predictor.small_to_mtp_projection.bias"] = torch.zeros(
            cp["hidden_size"], dtype=torch.bfloat16
        )
    return out


def main(out: Path, seed: int) -> int:
    import torch
    from safetensors.torch import save_file
    from vllm_omni.model_executor.models.qwen3_tts.configuration_qwen3_tts import Qwen3TTSConfig
    from vllm_omni.model_executor.models.qwen3_tts.qwen3_tts_talker import Qwen3TTSSpeakerEncoder
    from vllm_omni.model_executor.models.qwen3_tts.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2Config,
    )
    from vllm_omni.model_executor.models.qwen3_tts.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2Model,
    )

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    cfg = json.loads((out / "config.json").read_text(encoding="utf-8"))
    tensors = _talker(cfg, torch, gen)
    spk = Qwen3TTSSpeakerEncoder(Qwen3TTSConfig(**cfg).speaker_encoder_config)
    for name, t in spk.state_dict().items():
        tensors[f"speaker_encoder.{name}"] = t.detach().to(torch.bfloat16).contiguous()
    meta = {"weights": "random", "seed": str(seed), "format": "pt"}
    save_file(tensors, str(out / "model.safetensors"), metadata=meta)
    codec_cfg = Qwen3TTSTokenizerV2Config.from_pretrained(str(out / "speech_tokenizer"))
    torch.manual_seed(seed + 1)
    codec = Qwen3TTSTokenizerV2Model(codec_cfg).eval()
    state = {k: v.detach().contiguous() for k, v in codec.state_dict().items()}
    save_file(state, str(out / "speech_tokenizer" / "model.safetensors"), metadata=meta)
    n = sum(t.numel() for t in tensors.values())
    m = sum(t.numel() for t in state.values())
    print(
        json.dumps(
            {
                "talker_tensors": len(tensors),
                "talker_params": n,
                "codec_tensors": len(state),
                "codec_params": m,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2])))
