"""Which vLLM-Omni speech-stream behaviour a lab server or client follows, version by version.

vLLM-Omni's ``/v1/audio/speech/stream`` changed under the same URL. edgelab follows the newer
server by default and can follow one pinned commit that teams still run; each behaviour is read
from vLLM-Omni's own source at that commit (``vllm_omni/entrypoints/openai/serving_speech_stream.py``,
its text splitter and ``protocol/audio.py``'s ``StreamingSpeechSessionConfig``):

- ``0131cb5`` (current): a connection carries any number of utterances; ``input.done`` flushes
  one and the connection stays open, ``session.close`` ends it, ``session.config`` may be sent
  again between utterances; ``split_granularity`` none (default) / sentence / clause
  (:class:`edgelab.protocols.speech_text.TextSplitter`); messages carry ``utterance_index``;
  streamed pcm sends ``audio.start`` with its first audio, stating ``sample_rate`` and
  ``channels``; ``seed``, ``speaker_embedding``, ``word_timestamps`` are config fields.
- ``6a96e66`` (pinned): one utterance per connection: ``session.config`` once, ``input.done``
  answers ``session.done{total_sentences}`` and the server closes; any other message type
  (``session.close``, a second ``session.config``) is "Unknown message type"; text is split at
  sentences by default (sentence / clause only: :class:`edgelab.protocols.speech_text.BoundarySplitter`);
  no ``utterance_index``; streamed pcm's ``audio.start`` comes before the audio with
  ``sample_rate`` only; a malformed handshake has its own texts ("Invalid JSON in session.config").

Both refuse ``stream_audio`` with any ``response_format`` but ``pcm`` (the pinned one in its
config model, the current one too), with pydantic's own error text, reproduced by validating the
same fields with pydantic. edgelab's extensions, the same in both: ``output_mode: codec_tokens``
(S4), ``input.cancel``, ``audio.done.cancelled``, provenance keys on ``audio.start``, and the
``vllm_omni_compat`` session-config key that switches a lab server's behaviour per connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from edgelab.errors import ConfigError
from edgelab.protocols.speech_text import BoundarySplitter, TextSplitter

COMPAT_KEY = "vllm_omni_compat"  # session.config key (an edgelab extension; vLLM-Omni ignores it)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class _Config0131cb5(BaseModel):
    """``StreamingSpeechSessionConfig`` at 0131cb5: the fields and checks, so refusals read as its."""

    model_config = ConfigDict(title="StreamingSpeechSessionConfig")

    model: str | None = None
    voice: str | None = Field(default=None, validation_alias=AliasChoices("voice", "speaker"))
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = None
    language: str | None = None
    instructions: str | None = None
    response_format: Literal["wav", "pcm", "flac", "mp3", "opus"] = "wav"
    speed: float | None = Field(default=1.0, ge=0.25, le=4.0)
    max_new_tokens: int | None = Field(default=None, ge=1, le=_INT64_MAX)
    initial_codec_chunk_frames: int | None = Field(default=None, ge=0, le=_INT64_MAX)
    non_streaming_mode: bool | None = None
    ref_audio: str | None = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    speaker_embedding: list[float] | None = Field(default=None, max_length=8192)
    stream_audio: bool = False
    word_timestamps: bool = False
    seed: int | None = Field(default=None, ge=_INT64_MIN, le=_INT64_MAX)
    split_granularity: Literal["none", "sentence", "clause"] = "none"

    @model_validator(mode="after")
    def _streaming(self) -> _Config0131cb5:
        if self.stream_audio:
            if self.response_format != "pcm":
                raise ValueError(
                    "WebSocket streaming audio (stream_audio=true) requires response_format='pcm'. "
                    f"Got response_format='{self.response_format}'."
                )
            if self.speed is None:
                self.speed = 1.0
            elif self.speed != 1.0:
                raise ValueError(
                    "WebSocket stream_audio=true currently requires speed=1.0; "
                    "native speed control is only available through HTTP streaming."
                )
        return self


class _Config6a96e66(BaseModel):
    """``StreamingSpeechSessionConfig`` at 6a96e66 (no seed, no "none" granularity, aac allowed)."""

    model_config = ConfigDict(title="StreamingSpeechSessionConfig")

    model: str | None = None
    voice: str | None = None
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = None
    language: str | None = None
    instructions: str | None = None
    response_format: Literal["wav", "pcm", "flac", "mp3", "aac", "opus"] = "wav"
    speed: float | None = Field(default=1.0, ge=0.25, le=4.0)
    max_new_tokens: int | None = Field(default=None, ge=1)
    initial_codec_chunk_frames: int | None = Field(default=None, ge=0)
    ref_audio: str | None = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    stream_audio: bool = False
    split_granularity: Literal["sentence", "clause"] = "sentence"

    @model_validator(mode="after")
    def _streaming(self) -> _Config6a96e66:
        if self.stream_audio:
            if self.response_format != "pcm":
                raise ValueError(
                    "WebSocket streaming audio (stream_audio=true) requires response_format='pcm'. "
                    f"Got response_format='{self.response_format}'."
                )
            if self.speed is None:
                self.speed = 1.0
            elif self.speed != 1.0:
                raise ValueError(
                    "Speed adjustment is not supported when stream_audio=true. Set speed=1.0 or omit it."
                )
        return self


@dataclass(frozen=True)
class OmniBehaviour:
    """One vLLM-Omni version's speech-stream behaviour, as its server source has it."""

    name: str  # the short commit, as operators pin it
    commit: str
    multi_utterance: bool  # input.done keeps the connection open; session.close ends it
    utterance_index: bool  # audio.start / audio.done / session.done carry utterance_index
    pcm_start_with_audio: bool  # streamed pcm: audio.start deferred to the first audio (rate, channels)
    config_model: type[BaseModel]
    handshake_invalid_json: str
    handshake_not_object: str
    partial_audio_flag: bool  # an error after some audio says partial_audio / action: discard

    @property
    def label(self) -> str:
        return f"vLLM-Omni {self.name}"

    def session_config(self, msg: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """(config, None) for a session.config this version accepts, (None, its error text)."""
        try:
            model = self.config_model(**{k: v for k, v in msg.items() if k != "type"})
        except ValidationError as err:
            return None, f"Invalid session config: {err}"
        cfg = model.model_dump()
        cfg["response_format"] = cfg["response_format"] or "wav"
        return cfg, None

    def splitter(self, granularity: str) -> TextSplitter | BoundarySplitter:
        if self.name == "6a96e66":
            return BoundarySplitter(granularity)
        return TextSplitter(granularity)

    def start_message(
        self, *, utterance: int, sentence: int, text: str, fmt: str, streamed_pcm: bool
    ) -> dict[str, Any]:
        """``audio.start``'s fields (without ``type``); a deferred pcm start adds rate and channels."""
        out: dict[str, Any] = {"utterance_index": utterance} if self.utterance_index else {}
        out.update(sentence_index=sentence, sentence_text=text, format=fmt)
        if streamed_pcm and not self.pcm_start_with_audio:
            out["sample_rate"] = 24000  # the pinned server states the rate up front, no channels
        return out

    def done_message(self, *, utterance: int, sentence: int, total_bytes: int, error: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"utterance_index": utterance} if self.utterance_index else {}
        out.update(sentence_index=sentence, total_bytes=total_bytes, error=error)
        return out

    def session_done(self, *, utterance: int, total: int) -> dict[str, Any]:
        out: dict[str, Any] = {"utterance_index": utterance} if self.utterance_index else {}
        out["total_sentences"] = total
        return out

    def generation_failed(
        self, err: BaseException, *, utterance: int, sentence: int, partial: bool
    ) -> dict[str, Any]:
        """The ``error`` message's fields for a sentence whose synthesis failed."""
        if not self.utterance_index:
            return {"message": f"Generation failed for sentence {sentence}: {err}"}
        out: dict[str, Any] = {
            "message": f"Generation failed for utterance {utterance}, sentence {sentence}: {err}"
        }
        if partial and self.partial_audio_flag:
            out.update(partial_audio=True, action="discard")
        return out


CURRENT = OmniBehaviour(
    name="0131cb5",
    commit="0131cb5560450800b800e889fb849ea2c851bd3f",
    multi_utterance=True,
    utterance_index=True,
    pcm_start_with_audio=True,
    config_model=_Config0131cb5,
    handshake_invalid_json="Invalid JSON message",
    handshake_not_object="WebSocket messages must be JSON objects",
    partial_audio_flag=True,
)
PINNED = OmniBehaviour(
    name="6a96e66",
    commit="6a96e66ea6f85ea42d3d514cf3feb1ed1a1a1ca2",
    multi_utterance=False,
    utterance_index=False,
    pcm_start_with_audio=False,
    config_model=_Config6a96e66,
    handshake_invalid_json="Invalid JSON in session.config",
    handshake_not_object="session.config must be a JSON object",
    partial_audio_flag=False,
)
BEHAVIOURS = {b.name: b for b in (CURRENT, PINNED)}
INVALID_JSON = "Invalid JSON message"  # after the handshake, in both
NOT_OBJECT = "WebSocket messages must be JSON objects"


def behaviour(name: str | None) -> OmniBehaviour:
    """The behaviour for a commit (short or full hash; None: the current one); an unknown one is a
    ConfigError naming the known ones."""
    if not name or name == "current":
        return CURRENT
    want = name.strip().lower()
    for b in BEHAVIOURS.values():
        if b.commit.startswith(want) or want.startswith(b.name):
            return b
    known = ", ".join(f"{b.name} ({'current' if b is CURRENT else 'pinned'})" for b in BEHAVIOURS.values())
    raise ConfigError(
        f"unknown vLLM-Omni version {name!r}: known {known}",
        remedy="pass --vllm-omni-compat current or 6a96e66 (or that key in session.config)",
    )
