"""Audio metrics against hand-computed cases (DESIGN §5), and the playback-start property."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgelab.metrics.audio import Chunk, audio_metrics, playback_start, schedule_arrivals, underruns

SR = 24000


def test_hand_computed_request():
    # chunks: t = 100, 150, 400, 420 ms; samples 1920, 3840, 1920, 960 at 24 kHz = 80, 160, 80, 40 ms,
    # plus a zero-sample terminal marker at 430 ms, which does not count.
    chunks = [Chunk(100, 1920), Chunk(150, 3840), Chunk(400, 1920), Chunk(420, 960), Chunk(430, 0)]
    m = audio_metrics(chunks, wall_ms=500)
    # C_i = 0, 80, 240, 320; t_i - C_i = 100, 70, 160, 100 -> playback start 160
    assert m.chunks == 4
    assert m.ttfa_ms == 100
    assert m.playback_start_ms == pytest.approx(160)
    # started at TTFA = 100: needs 100, 180, 340 (arrives 400: stall 60, cursor +60), 100+320+60 = 480 > 420
    assert m.underruns_at_ttfa == 1
    assert m.stall_ms_at_ttfa == pytest.approx(60)
    assert underruns(chunks, 160) == (0, 0.0)  # needs 160, 240, 400, 480: all on time
    assert m.audio_ms == pytest.approx(360)
    assert m.rtf_streamed == pytest.approx(420 / 360)  # last audio chunk / audio
    assert m.rtf_total == pytest.approx(500 / 360)  # wall / audio
    assert m.chunk_gaps_ms == pytest.approx([50, 250, 20])  # first excluded, terminal marker excluded


def test_no_audio_is_unknown_not_zero():
    m = audio_metrics([Chunk(10, 0)], wall_ms=100)
    assert m.chunks == 0
    assert m.ttfa_ms is None and m.playback_start_ms is None and m.underruns_at_ttfa is None
    assert m.rtf_streamed is None and m.rtf_total is None
    assert audio_metrics([Chunk(10, 1920)]).rtf_total is None  # no wall time known


def test_first_chunk_stall_1_to_25_versus_ramp_at_40_frames_per_s():
    # Producer at 40 codec frames/s (25 ms per frame, RTF 12.5/40 = 0.3125: faster than real time),
    # 55 frames; 1 frame = 80 ms = 1920 samples at 24 kHz.
    one_25 = schedule_arrivals([1, 25], total_frames=55, frames_per_s=40)
    # sizes 1, 25, 25, 4 -> complete at frames 1, 26, 51, 55 -> t = 25, 650, 1275, 1375 ms
    assert [c.t_ms for c in one_25] == pytest.approx([25, 650, 1275, 1375])
    assert [c.samples for c in one_25] == [1920, 25 * 1920, 25 * 1920, 4 * 1920]
    m = audio_metrics(one_25)
    # started at TTFA 25: chunk 1 needed at 25 + 80 = 105 but arrives at 650 -> one stall of 545 ms;
    # chunk 2 needed at 25 + 2080 + 545 = 2650 (arrived 1275), chunk 3 at 25 + 4080 + 545: no more
    assert m.ttfa_ms == pytest.approx(25)
    assert (m.underruns_at_ttfa, m.stall_ms_at_ttfa) == (1, pytest.approx(545))
    assert m.playback_start_ms == pytest.approx(570)  # max(25 - 0, 650 - 80, ...) = 570

    ramp = schedule_arrivals([2, 4, 8, 16, 25], total_frames=55, frames_per_s=40)
    # sizes 2, 4, 8, 16, 25 -> frames 2, 6, 14, 30, 55 -> t = 50, 150, 350, 750, 1375 ms;
    # C = 0, 160, 480, 1120, 2400 -> needed from TTFA 50: 50, 210, 530, 1170, 2450: all later than arrival
    assert [c.t_ms for c in ramp] == pytest.approx([50, 150, 350, 750, 1375])
    r = audio_metrics(ramp)
    assert r.ttfa_ms == pytest.approx(50)
    assert (r.underruns_at_ttfa, r.stall_ms_at_ttfa) == (0, 0.0)
    assert r.playback_start_ms == pytest.approx(50)  # = TTFA: start at first audio, never stall
    assert r.audio_ms == m.audio_ms == pytest.approx(55 * 80)


def test_ramp_stalls_too_when_the_producer_is_slower():
    # At 20 frames/s (50 ms per frame, RTF 0.625) the ramp's doubling outruns production:
    # t = 100, 300, 700, 1500, 2750; C = 0, 160, 480, 1120, 2400.
    # from TTFA 100: need 260 (arr 300: +40), 100+480+40 = 620 (arr 700: +80),
    # 100+1120+120 = 1340 (arr 1500: +160), 100+2400+280 = 2780 (arr 2750: on time) -> 3 stalls, 280 ms
    r = audio_metrics(schedule_arrivals([2, 4, 8, 16, 25], total_frames=55, frames_per_s=20))
    assert (r.underruns_at_ttfa, r.stall_ms_at_ttfa) == (3, pytest.approx(280))
    assert r.playback_start_ms == pytest.approx(380)  # max(100, 140, 220, 380, 350)


chunk_lists = st.lists(
    st.tuples(
        st.floats(0, 500, allow_nan=False), st.integers(0, 48000), st.sampled_from([16000, 22050, 24000])
    ),
    min_size=1,
    max_size=30,
).map(lambda xs: _as_chunks(xs))


def _as_chunks(xs):
    t, out = 0.0, []
    for gap, n, sr in xs:  # arrival times non-decreasing: a stream delivers in order
        t += gap
        out.append(Chunk(t, n, sr))
    return out


@settings(max_examples=300, deadline=None)
@given(chunk_lists)
def test_playback_start_never_underruns_and_is_at_least_ttfa(chunks):
    m = audio_metrics(chunks)
    if m.chunks == 0:
        assert playback_start(chunks) is None
        return
    assert m.playback_start_ms >= m.ttfa_ms
    count, stall = underruns(chunks, m.playback_start_ms)
    assert (count, stall) == (0, 0.0)
    # and starting any earlier than playback start (by more than rounding) underruns at least once
    if m.playback_start_ms - 1.0 >= 0:
        assert underruns(chunks, m.playback_start_ms - 1.0)[0] >= 1
