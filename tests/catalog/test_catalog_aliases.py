"""Pipeline aliases are catalog data (`aliases:` in a spec): resolved the same by every consumer."""

from __future__ import annotations

import shutil

import pytest

from edgelab.catalog.pipelines import (
    PIPELINE_DIR,
    load_pipeline,
    load_pipelines,
    pipeline_aliases,
    resolve_pipeline_id,
)
from edgelab.deploy.planning import resolve_pipeline
from edgelab.errors import CatalogError, ConfigError
from edgelab.matrix.layout import column_by


def test_qwen3_tts_is_the_0_6b_spec():
    assert pipeline_aliases()["qwen3-tts"] == "qwen3-tts-0.6b"
    assert load_pipeline("qwen3-tts").id == "qwen3-tts-0.6b"
    assert resolve_pipeline("qwen3-tts") == resolve_pipeline_id("qwen3-tts-0.6b") == "qwen3-tts-0.6b"
    assert column_by("qwen3-tts") is column_by("qwen3-tts-0.6b") is not None


def test_unknown_name_lists_ids_and_aliases():
    with pytest.raises(ConfigError) as err:
        resolve_pipeline("tts")
    assert "unknown pipeline 'tts'" in str(err.value) and "qwen3-tts = qwen3-tts-0.6b" in err.value.remedy


def test_an_alias_that_shadows_an_id_is_refused_with_its_line(tmp_path):
    for f in PIPELINE_DIR.glob("*.yaml"):
        shutil.copy(f, tmp_path / f.name)
    spec = tmp_path / "qwen3-tts-1.7b.yaml"
    spec.write_text(
        spec.read_text().replace("id: qwen3-tts-1.7b\n", "id: qwen3-tts-1.7b\naliases: [qwen3-tts]\n", 1)
    )
    with pytest.raises(CatalogError, match=r"alias 'qwen3-tts' is already a pipeline id or alias"):
        load_pipelines(tmp_path)
    spec.write_text(spec.read_text().replace("aliases: [qwen3-tts]", "aliases: [qwen3-tts-0.6b]"))
    with pytest.raises(CatalogError, match=r"qwen3-tts-1.7b.yaml:\d+: alias 'qwen3-tts-0.6b'"):
        load_pipelines(tmp_path)
