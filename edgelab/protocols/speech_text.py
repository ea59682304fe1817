"""How vLLM-Omni's speech stream cuts incoming text into synthesis units (``split_granularity``).

:class:`TextSplitter` follows vLLM-Omni's ``SpeechTextSplitter`` (``speech_text_splitter.py``,
the current server: :mod:`edgelab.protocols.omni_versions`), which is what a real server does
with the same ``input.text`` chunks, so edgelab's lab-side server emits the same sentences and
``sentence_index`` values:

- ``none``: nothing is emitted before ``input.done``; the flush is one unit (the whole text).
- ``sentence``: a unit ends at ``. ! ?`` followed by whitespace (or the flush: these are
  abbreviation-prone), or at once at ``。 ！ ？ … । ॥ ؟``; a decimal point (``3.5``) never ends one.
- ``clause``: as ``sentence``, plus ``, ; ， ； ،`` which end a unit at once.

Units are stripped; empty units are never emitted.

:class:`BoundarySplitter` is the older ``SentenceSplitter`` (``text_splitter.py`` at 6a96e66):
sentence (the default there) or clause only; a unit ends at whitespace after ``. ! ?`` or at once
after ``。！？`` (clause: also ``，；``); a unit shorter than two characters is carried into the
next; the flush is whatever is left, as one unit.
"""

from __future__ import annotations

import re

GRANULARITIES = ("none", "sentence", "clause")

_NEED_SPACE = frozenset(".!?")
_SENTENCE_AT_ONCE = frozenset("。！？…।॥؟")
_CLAUSE_AT_ONCE = _SENTENCE_AT_ONCE | frozenset(",;，；،")


def _decimal_point(buf: str, i: int) -> bool:
    return buf[i] == "." and 0 < i < len(buf) - 1 and buf[i - 1].isdigit() and buf[i + 1].isdigit()


def split_units(buf: str, at_once: frozenset[str], *, flush: bool) -> tuple[list[str], str]:
    """(complete units, the text still waiting for its end) of ``buf``."""
    units: list[str] = []
    start = i = 0
    n = len(buf)
    while i < n:
        ch = buf[i]
        if (ch not in _NEED_SPACE and ch not in at_once) or _decimal_point(buf, i):
            i += 1
            continue
        end = i + 1
        while end < n and buf[end].isspace():
            end += 1
        if ch in _NEED_SPACE and end == i + 1 and not flush:
            i += 1  # "3." or "e.g." mid-word: wait for whitespace or the flush
            continue
        if piece := buf[start:end].strip():
            units.append(piece)
        start = i = end
    rest = buf[start:]
    if flush:
        if tail := rest.strip():
            units.append(tail)
        rest = ""
    return units, rest


class TextSplitter:
    """The text of one utterance, fed in chunks; ``feed`` and ``flush`` return finished units."""

    def __init__(self, granularity: str = "none"):
        if granularity not in GRANULARITIES:
            raise ValueError(f"split_granularity {granularity!r} is not one of {', '.join(GRANULARITIES)}")
        self.granularity = granularity
        self._buf = ""

    @property
    def _at_once(self) -> frozenset[str] | None:
        if self.granularity == "none":
            return None
        return _CLAUSE_AT_ONCE if self.granularity == "clause" else _SENTENCE_AT_ONCE

    def feed(self, text: str) -> list[str]:
        self._buf += text
        if self._at_once is None:
            return []
        units, self._buf = split_units(self._buf, self._at_once, flush=False)
        return units

    def flush(self) -> list[str]:
        if self._at_once is None:
            whole, self._buf = self._buf.strip(), ""
            return [whole] if whole else []
        units, self._buf = split_units(self._buf, self._at_once, flush=True)
        return units


_BOUNDARY = {
    "sentence": re.compile(r"(?<=[.!?])\s+|(?<=[。！？])"),
    "clause": re.compile(r"(?<=[.!?])\s+|(?<=[。！？，；])"),
}
MAX_BUFFER = 100_000  # characters the older splitter holds before it refuses more


class BoundarySplitter:
    """vLLM-Omni's splitter at 6a96e66, fed in chunks; ``feed`` and ``flush`` return finished units."""

    def __init__(self, granularity: str = "sentence", min_length: int = 2):
        if granularity not in _BOUNDARY:
            raise ValueError(f"split_granularity {granularity!r} is not one of {', '.join(_BOUNDARY)}")
        self.granularity = granularity
        self._re, self._min, self._buf = _BOUNDARY[granularity], min_length, ""

    def feed(self, text: str) -> list[str]:
        if not text:
            return []
        self._buf += text
        if len(self._buf) > MAX_BUFFER:
            raise ValueError(
                f"Text buffer exceeded maximum size ({MAX_BUFFER} chars). "
                "Consider adding sentence-ending punctuation to your input."
            )
        parts = self._re.split(self._buf)
        if len(parts) <= 1:
            return []
        units: list[str] = []
        carry = ""
        for part in parts[:-1]:
            piece, carry = carry + part, ""
            if len(piece.strip()) >= self._min:
                units.append(piece.strip())
            elif piece.strip():
                carry = piece  # too short to stand alone ("A."): joins the next part
        self._buf = carry + parts[-1]
        return units

    def flush(self) -> list[str]:
        rest, self._buf = self._buf.strip(), ""
        return [rest] if rest else []
