"""The device catalog and pipeline specs load, and every schema error names file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgelab.catalog import load_devices, load_pipelines
from edgelab.catalog.devices import DEVICE_CLASSES
from edgelab.catalog.pipelines import PIPELINE_DIR
from edgelab.errors import CatalogError

REPO = Path(__file__).resolve().parents[2]
DEVICES = REPO / "devices"

PIPELINES = [
    "qwen3-tts-0.6b",
    "qwen3-tts-1.7b",
    "minicpm-o-4.5",
    "internvla-a1",
    "pi0",
    "gr00t-n1.7",
    "spark-x2.5",
    "qwen3.8-27b",
]


def test_every_device_file_loads_and_covers_the_matrix():
    cat = load_devices(DEVICES)
    assert len(cat.files) == len(list(DEVICES.glob("*.yaml")))
    rows = cat.matrix_rows()
    assert sorted(rows) == list(range(1, 13))
    assert rows[9].id == "galaxy-s25" and rows[12].id == "rb3-gen2"
    for needed in [
        "jetson-agx-orin-32gb",
        "jetson-agx-orin-64gb",
        "jetson-orin-nx-8gb",
        "jetson-orin-nx-16gb",
        "jetson-orin-nano-4gb",
        "jetson-orin-nano-8gb",
        "jetson-agx-thor",
    ]:
        e = cat.get(needed)
        assert e is not None and e.device_class == "jetson", needed
        assert e.runtime_targets[0].startswith("linux-aarch64-cuda-sm")
    for e in cat.entries:
        assert e.device_class in DEVICE_CLASSES
        assert e.runtime_targets and e.match_sets and all(e.match_sets)
        assert e.source.startswith(str(DEVICES))
    json.dumps([e.to_dict() for e in cat.entries])


def test_every_pipeline_spec_loads_with_sources_and_memory_model():
    specs = load_pipelines()
    assert sorted(specs) == sorted(PIPELINES)
    assert len(list(PIPELINE_DIR.glob("*.yaml"))) == len(PIPELINES)
    for spec in specs.values():
        assert spec.sources and all(s.startswith("http") for s in spec.sources)
        full, q8, q4 = (spec.weight_bytes(q) for q in ("bf16", "q8_0", "q4"))
        assert full > q8 > q4 > 0, spec.id
    tts = specs["qwen3-tts-1.7b"]
    assert tts.chunk_schedule["server"] == {"first_frames": 1, "steady_frames": 25, "left_context_frames": 72}
    assert tts.edge_ramp == [2, 4, 8, 16, 25]
    assert (
        tts.metrics == ["audio"]
        and specs["pi0"].metrics == ["action"]
        and specs["spark-x2.5"].metrics == ["text"]
    )
    # talker: 2 x 28 layers x 8 KV heads x 128 head dim x 2 bytes; the code predictor keeps no long-lived cache
    assert tts.kv_bytes_per_token() == 2 * 28 * 8 * 128 * 2
    # pi0's Gemma backbone is multi-query: one KV head of 256
    assert specs["pi0"].kv_bytes_per_token() == 2 * 18 * 1 * 256 * 2
    # q4 keeps the non-quantizable codec decoder at 16 bits
    assert tts.weight_bytes("q4", ["code2wav"]) == tts.weight_bytes("bf16", ["code2wav"]) == int(0.11e9 * 2)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    d = tmp_path / "devices"
    d.mkdir(exist_ok=True)
    (d / name).write_text(text)
    return d


GOOD_ENTRY = """\
id: test-board
name: Test board
class: arm64_cpu
match: {soc_part: [RK3588]}
runtime_targets: [linux-aarch64]
"""


@pytest.mark.parametrize(
    "text, line, words",
    [
        (GOOD_ENTRY.replace("class: arm64_cpu", "class: gpu_box"), 3, "expected one of"),
        (GOOD_ENTRY + "colour: red\n", 6, "unknown key 'colour'"),
        (GOOD_ENTRY.replace("name: Test board\n", ""), 1, "missing required key 'name'"),
        (GOOD_ENTRY.replace("soc_part: [RK3588]", "soc_parts: [RK3588]"), 4, "unknown key 'soc_parts'"),
        (GOOD_ENTRY.replace("{soc_part: [RK3588]}", "{min_ram_gb: lots}"), 4, "min_ram_gb must be a number"),
        (GOOD_ENTRY.replace("[linux-aarch64]", "linux-aarch64"), 5, "runtime_targets must be a list"),
        (GOOD_ENTRY.replace("match: {soc_part: [RK3588]}", "match: {}"), 4, "empty match rules"),
        (GOOD_ENTRY + "id: again\n", 6, "duplicate key 'id'"),
        (
            GOOD_ENTRY.replace("name: Test board", "name: [Test board"),
            3,
            "YAML syntax error",
        ),  # where PyYAML sees it
        (
            "devices:\n  - "
            + GOOD_ENTRY.replace("\n", "\n    ").rstrip()
            + "\n  - id: x\n    name: y\n    class: jetson\n"
            "    match: {cuda_arch: [sm_87]}\n    runtime_targets: [linux-aarch64]\n    capabilities: {cuda: yes}\n",
            12,
            "unknown key 'cuda'",
        ),
    ],
)
def test_device_schema_errors_name_file_and_line(tmp_path, text, line, words):
    d = _write(tmp_path, "bad.yaml", text)
    with pytest.raises(CatalogError) as info:
        load_devices(d)
    msg = str(info.value)
    assert msg.startswith(f"{d / 'bad.yaml'}:{line}:"), msg
    assert words in msg
    assert info.value.remedy


def test_duplicate_ids_across_files_name_both_places(tmp_path):
    _write(tmp_path, "a.yaml", GOOD_ENTRY)
    d = _write(tmp_path, "b.yaml", "# another file\n" + GOOD_ENTRY)
    with pytest.raises(CatalogError) as info:
        load_devices(d)
    assert str(info.value).startswith(f"{d / 'b.yaml'}:2: duplicate device id 'test-board'")
    assert f"{d / 'a.yaml'}:1" in str(info.value)


def test_a_good_tmp_catalog_loads(tmp_path):
    cat = load_devices(_write(tmp_path, "ok.yaml", GOOD_ENTRY))
    assert [e.id for e in cat.entries] == ["test-board"]


def test_empty_catalog_dir_is_an_error(tmp_path):
    with pytest.raises(CatalogError, match="no device catalog files"):
        load_devices(tmp_path)


PIPE = (PIPELINE_DIR / "qwen3-tts-0.6b.yaml").read_text()


@pytest.mark.parametrize(
    "old, new, words",
    [
        ("parameters: 0.6e+9", "parameters: 0.6e9", "write 1.7e+9"),
        ("edge_ramp: [2, 4, 8, 16, 25]", "edge_ramp: [2, 8, 4, 16, 25]", "edge_ramp must increase"),
        ("device_stages_s4: [code2wav]", "device_stages_s4: [vocoder]", "unknown stage 'vocoder'"),
        ("kind: tts", "kind: speech", "kind is 'speech'"),
        ("metrics: [audio]", "metrics: [audio, smell]", "metric 'smell'"),
        (
            "layers: 28, kv_heads: 8, head_dim: 128, dtype_bytes: 2}",
            "kv_cache: true, dtype_bytes: 2}",
            "needs layers, kv_heads",
        ),
    ],
)
def test_pipeline_schema_errors_name_file_and_line(tmp_path, old, new, words):
    assert old in PIPE
    text = PIPE.replace(old, new, 1)
    path = tmp_path / "p.yaml"
    path.write_text(text)
    expect_line = next(i for i, ln in enumerate(text.splitlines(), 1) if new.split(":")[0].strip() in ln)
    with pytest.raises(CatalogError) as info:
        load_pipelines(path)
    msg = str(info.value)
    assert words in msg, msg
    assert msg.startswith(f"{path}:"), msg
    line = int(msg.split(":")[1])
    assert abs(line - expect_line) <= 1, (line, expect_line, msg)
