"""The S3 controller: a small real-time loop over a device runtime (MNN, ONNX Runtime) running one stage.

It is what a robotics or audio team ships beside the runtime: the runtime adapter per runtime
(``rt_mnn``, ``rt_onnxruntime``), the action-chunk buffer (``chunks``), the VLA control loop with
inference on its own thread (``vla``) and the codec-decoder stage of S4/S3 TTS (``codec``). It
emits edgelab's JSON-lines events, so the lab ingests it like any other workload.
"""
