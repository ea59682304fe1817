"""Which runtimes and pipeline kinds edgelab's own S3 controller (``python -m edgelab.controller``) covers.

The process itself is the runtime's S3 launch template (runtimes/mnn.yaml, runtimes/onnxruntime.yaml);
this only names the pairs, so planning can treat the exported fp32 stages and the lab-host
interpreter of a virtual device the way it treats the reference runtime.
"""

from __future__ import annotations

CONTROLLER_RUNTIMES = {"mnn": "mnn", "onnxruntime": "onnx"}  # runtime -> exported model format
# pipeline kind -> (spec stage, export stage): the VLA action head (S3), the TTS codec decoder (S4 device side)
CONTROLLER_STAGES = {"vla": ("action_head", "action-head"), "tts": ("code2wav", "codec-decoder")}


def has_controller(runtime: str | None, kind: str) -> bool:
    return runtime in CONTROLLER_RUNTIMES and kind in CONTROLLER_STAGES
