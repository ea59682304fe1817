"""Relative gates: parsed without eval, judged against a baseline's pooled figures and the
comparison's verdict; every failure names the baseline's runs and the interval; no baseline,
no pass by accident."""

from __future__ import annotations

import pytest

from edgelab.errors import ConfigError
from edgelab.metrics import compare as cmp
from edgelab.metrics.runsets import Comparison, RunSet
from edgelab.playbook.gates import BaselineFigures, evaluate, parse_gate


def test_parse_relative_and_verdict_gates():
    g = parse_gate("decode_tok_s.p50 >= baseline * 0.95")
    assert (g.metric, g.stat, g.op, g.relative, g.value) == ("decode_tok_s", "p50", ">=", "*", 0.95)
    g = parse_gate("ttfa.p95 <= baseline + 20ms")
    assert (g.relative, g.value) == ("+", 20.0)
    assert parse_gate("ttfa.p95 <= baseline + 0.02s").value == 20.0
    assert parse_gate("rtf_total.p50 <= baseline").relative == "="
    g = parse_gate("slower == false")
    assert (g.verdict, g.metric, g.value, g.needs_baseline) == ("slower", "*", 0.0, True)
    g = parse_gate("ttfa.faster == true")
    assert (g.verdict, g.metric, g.value) == ("faster", "ttfa", 1.0)
    assert not parse_gate("ttfa.p95 < 500ms").needs_baseline
    for bad in (
        "ttfa.p95 <= baseline * 2ms",
        "rtf_total.p95 <= baseline + 5ms",
        "slower < true",
        "underruns.slower == false",
        "errors <= baseline",
    ):
        with pytest.raises(ConfigError):
            parse_gate(bad)


def _figures(ttfa_p50: float, run_ratio: float | None = None) -> BaselineFigures:
    figs = {"audio": {"ttfa_ms": {"count": 20, "p50": ttfa_p50, "p95": ttfa_p50 * 1.2}}}
    comp = None
    if run_ratio is not None:
        a = [100.0 + i * 0.1 for i in range(20)]
        b = [x * run_ratio for x in a]
        results = cmp.compare_samples({"ttfa": a}, {"ttfa": b})
        comp = Comparison(RunSet("a", [], "A"), RunSet("b", [], "B"), results, [], False, [], 0.99, 0, 4000)
    return BaselineFigures("nightly", ["r0000base"], figs, comp)


def test_relative_gate_judges_against_the_baseline_and_names_it():
    run = {"audio": {"ttfa_ms": {"count": 20, "p50": 112.0, "p95": 130.0}}}
    base = _figures(100.0, run_ratio=1.12)
    bad = evaluate(parse_gate("ttfa.p50 <= baseline * 1.05"), run, base)
    assert not bad.ok and bad.actual == 112.0
    assert "limit 105 ms" in bad.message and "baseline nightly (run r0000base)" in bad.message
    assert "median ratio 1.120 [" in bad.message and "at 99%: slower" in bad.message
    assert evaluate(parse_gate("ttfa.p50 <= baseline + 15ms"), run, base).ok
    assert not evaluate(parse_gate("ttfa.p50 <= baseline"), run, base).ok


def test_verdict_gates_read_the_comparison():
    slower = _figures(100.0, run_ratio=1.12)
    same = _figures(100.0, run_ratio=1.0)
    r = evaluate(parse_gate("slower == false"), None, slower)
    assert not r.ok and "ttfa 1.120 [" in r.message and "run r0000base" in r.message
    assert evaluate(parse_gate("slower == false"), None, same).ok
    assert evaluate(parse_gate("ttfa.slower == true"), None, slower).ok
    assert not evaluate(parse_gate("ttfa.faster == true"), None, same).ok


def test_without_a_baseline_or_a_value_a_relative_gate_fails():
    g = parse_gate("ttfa.p50 <= baseline * 1.05")
    assert not evaluate(g, {"audio": {"ttfa_ms": {"p50": 1.0}}}, None).ok
    r = evaluate(g, {}, _figures(100.0))
    assert not r.ok and "did not produce ttfa" in r.message
    few = BaselineFigures(
        "n",
        ["r1"],
        {},
        Comparison(
            RunSet("a", [], "A"),
            RunSet("b", [], "B"),
            cmp.compare_samples({"ttfa": [1.0]}, {"ttfa": [1.0]}),
            [],
            False,
            [],
            0.99,
            0,
            4000,
        ),
    )
    r = evaluate(parse_gate("slower == false"), None, few)
    assert not r.ok and "no verdict" in r.message and "too few samples" in r.message
