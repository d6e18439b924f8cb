"""mtpserve.bench metric arithmetic on hand-built request timelines, /metrics parsing and the summary layout."""
import math
import sys

import numpy as np
import pytest

from mtpserve.bench.metrics import (RequestRecord, calculate_metrics, engine_busy, meets_slos, parse_goodput,
                                    parse_prometheus_text, spec_decode_stats, summarize_ms)
from mtpserve.bench.report import format_summary


def rec(start, chunks, tokens, success=True, index=0, prompt_len=10, usage=True, usage_prompt=None):
    r = RequestRecord(index=index, prompt_len=prompt_len, expected_output_len=tokens, start=start,
                      chunk_times=list(chunks), success=success)
    if usage:
        r.usage_completion_tokens = tokens
        r.usage_prompt_tokens = usage_prompt
    else:
        r.counted_output_tokens = tokens
    return r


def test_ttft_e2el_and_tpot_exclude_the_first_token():
    r = rec(10.0, [10.5, 10.6, 10.7, 10.8], 4)
    assert r.ttft == pytest.approx(0.5)
    assert r.latency == pytest.approx(0.8)
    # 3 tokens after the first one, over the 0.3 s that followed it; the 0.5 s TTFT is not spread over them
    assert r.tpot == pytest.approx(0.1)
    assert r.itl == pytest.approx([0.1, 0.1, 0.1])


def test_latency_ends_at_the_finishing_chunk():
    r = rec(0.0, [0.1, 0.2, 0.3], 4)
    r.finish_time = 0.4  # the last token (e.g. EOS) came without text, in the chunk with the finish reason
    assert r.latency == pytest.approx(0.4) and r.tpot == pytest.approx(0.1)
    assert r.itl == pytest.approx([0.1, 0.1])  # text chunks only
    r.finish_time = 0.3
    assert r.latency == pytest.approx(0.3)


def test_multi_token_chunks_give_one_itl_gap_per_chunk():
    # an MTP server: first chunk 1 token, then two steps of 3 tokens each (1 + 2 accepted drafts)
    r = rec(0.0, [0.2, 0.5, 0.6], 7)
    assert r.itl == pytest.approx([0.3, 0.1])  # per chunk, as vLLM records it, not per token
    assert r.tpot == pytest.approx(0.4 / 6)
    m = calculate_metrics([r], duration_s=1.0)
    assert m.latency["itl"]["mean"] == pytest.approx(200.0)
    assert m.latency["tpot"]["mean"] == pytest.approx(400 / 6)
    assert m.num_chunks == 3 and m.mean_tokens_per_chunk == pytest.approx(7 / 3)


def test_single_token_output_has_no_tpot_and_empty_request_no_ttft():
    one = rec(0.0, [0.25], 1)
    assert one.tpot is None and one.itl == [] and one.latency == pytest.approx(0.25)
    none = rec(0.0, [], 0, success=False)
    assert none.ttft is None and none.latency is None and none.tpot is None
    m = calculate_metrics([one, rec(0.0, [0.1, 0.3], 3)], duration_s=2.0)
    assert m.latency["tpot"]["mean"] == pytest.approx(100.0)  # only the 3-token request has a TPOT
    assert m.latency["ttft"]["mean"] == pytest.approx(175.0)


def test_usage_is_preferred_over_the_local_count():
    r = rec(0.0, [0.1, 0.2], 5)
    r.counted_output_tokens = 2
    assert r.output_tokens == 5
    assert rec(0.0, [0.1, 0.2], 2, usage=False).output_tokens == 2
    r = rec(0.0, [0.1], 1, prompt_len=7)
    assert r.input_tokens == 7
    r.usage_prompt_tokens = 9  # the server's count (BOS, chat template) wins
    assert r.input_tokens == 9


def test_throughputs_counts_and_failures():
    records = [rec(0.0, [0.1, 0.2, 0.3], 3, prompt_len=10, index=0),
               rec(0.5, [0.7, 0.9], 5, prompt_len=20, index=1, usage_prompt=21),
               rec(1.0, [], 0, success=False, prompt_len=30, index=2)]
    records[2].usage_completion_tokens = 4  # a failed request contributes no tokens even if it sent usage
    m = calculate_metrics(records, duration_s=2.0)
    assert (m.completed, m.failed) == (2, 1)
    assert (m.total_input, m.total_output) == (10 + 21, 3 + 5)
    assert m.request_throughput == pytest.approx(1.0)
    assert m.output_throughput == pytest.approx(4.0)
    assert m.total_token_throughput == pytest.approx((31 + 8) / 2)
    assert m.latency["e2el"]["mean"] == pytest.approx((300 + 400) / 2)
    assert m.request_goodput is None and m.good_requests is None
    flat = m.to_dict()
    assert flat["mean_ttft_ms"] == pytest.approx(150.0) and flat["p99_e2el_ms"] is not None
    with pytest.raises(ValueError):
        calculate_metrics(records, duration_s=0)


def test_percentiles_and_median_match_numpy_linear_interpolation():
    ttfts = [0.1 * i for i in range(1, 11)]  # 100..1000 ms
    records = [rec(0.0, [t, t + 0.01], 2, index=i) for i, t in enumerate(ttfts)]
    m = calculate_metrics(records, duration_s=1.0, percentiles=(50, 90, 99))
    s = m.latency["ttft"]
    assert s["mean"] == pytest.approx(550.0)
    assert s["median"] == pytest.approx(550.0) and s["p50"] == pytest.approx(550.0)
    assert s["p90"] == pytest.approx(910.0)  # rank 0.9 * 9 = 8.1: 900 + 0.1 * 100
    assert s["p99"] == pytest.approx(991.0)
    assert s["std"] == pytest.approx(float(np.std(np.array(ttfts) * 1000)))
    assert summarize_ms([], (90,)) == {"mean": None, "median": None, "std": None, "p90": None}
    assert "p99.9" in summarize_ms([1.0], (99.9,))


def test_all_failed_gives_empty_statistics():
    m = calculate_metrics([rec(0.0, [], 0, success=False)], duration_s=1.0)
    assert m.completed == 0 and m.failed == 1 and m.output_throughput == 0
    assert all(v is None for stats in m.latency.values() for v in stats.values())
    assert m.mean_tokens_per_chunk is None


def test_goodput_counts_requests_meeting_every_slo():
    records = [
        rec(0.0, [0.10, 0.12, 0.14], 3, index=0),  # ttft 100 ms, tpot 20 ms, e2el 140 ms: good
        rec(0.0, [0.30, 0.31], 2, index=1),        # ttft 300 ms: misses ttft
        rec(0.0, [0.05, 0.25], 2, index=2),        # tpot 200 ms: misses tpot
        rec(0.0, [0.20], 1, index=3),              # one token: TPOT counts as 0, ttft exactly on the SLO: good
        rec(0.0, [], 0, success=False, index=4),   # failed: never good
    ]
    slos = parse_goodput(["ttft:200", "tpot:50"])
    assert slos == {"ttft": 200.0, "tpot": 50.0}
    assert [meets_slos(r, slos) for r in records] == [True, False, False, True, False]
    m = calculate_metrics(records, duration_s=4.0, goodput=slos)
    assert m.good_requests == 2 and m.request_goodput == pytest.approx(0.5)
    e2e = calculate_metrics(records, duration_s=4.0, goodput=parse_goodput(["e2el:150"]))
    assert e2e.good_requests == 1  # only request 0 finishes within 150 ms
    assert calculate_metrics(records, 1.0, goodput={}).request_goodput is None


@pytest.mark.parametrize("bad", ["ttft", "foo:10", "ttft:x", "ttft:-1", "ttft:inf"])
def test_goodput_rejects_malformed_slos(bad):
    with pytest.raises(ValueError):
        parse_goodput([bad])


def test_goodput_accepts_one_string_with_several_slos():
    assert parse_goodput(["ttft:1 tpot:2,e2el:3"]) == {"ttft": 1.0, "tpot": 2.0, "e2el": 3.0}
    assert parse_goodput(None) == {}


def test_record_round_trips_through_json_dict():
    r = rec(100.0, [100.5, 101.0], 4)
    r.generated_text, r.finish_reason = "hello", "length"
    d = r.to_dict(time_origin=100.0)
    assert d["start"] == 0.0 and d["chunk_times"] == [0.5, 1.0]
    assert d["ttft_ms"] == pytest.approx(500.0) and d["tpot_ms"] == pytest.approx(500 / 3)
    assert d["output_tokens"] == 4
    back = RequestRecord.from_dict(d)
    assert back.ttft == pytest.approx(r.ttft) and back.tpot == pytest.approx(r.tpot)


# ---- /metrics ------------------------------------------------------------------------------------------------

METRICS_BEFORE = """\
# HELP mtpserve:spec_decode_num_drafts_total Verify steps that carried MTP drafts.
# TYPE mtpserve:spec_decode_num_drafts_total counter
mtpserve:spec_decode_num_drafts_total{model_name="m"} 100.0
mtpserve:spec_decode_num_draft_tokens_total{model_name="m"} 200.0
mtpserve:spec_decode_num_accepted_tokens_total{model_name="m"} 150.0
mtpserve:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="0"} 90.0
mtpserve:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="1"} 60.0
mtpserve:num_requests_running{model_name="m"} 3.0
mtpserve:spec_decode_num_retired_sequences_total{model_name="m"} 2.0
mtpserve:spec_decode_num_fill_skipped_steps_total{model_name="m"} 4.0
mtpserve:spec_decode_draft_seconds_total{model_name="m"} 0.25
mtpserve:spec_decode_step_k_bucket{le="0.0",model_name="m"} 10.0
mtpserve:spec_decode_step_k_bucket{le="1.0",model_name="m"} 30.0
mtpserve:spec_decode_step_k_bucket{le="2.0",model_name="m"} 30.0
mtpserve:spec_decode_step_k_bucket{le="+Inf",model_name="m"} 30.0
"""
METRICS_AFTER = """\
mtpserve:spec_decode_num_drafts_total{model_name="m"} 300.0
mtpserve:spec_decode_num_draft_tokens_total{model_name="m"} 600.0
mtpserve:spec_decode_num_accepted_tokens_total{model_name="m"} 450.0
mtpserve:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="0"} 270.0
mtpserve:spec_decode_num_accepted_tokens_per_pos_total{model_name="m",position="1"} 180.0
mtpserve:spec_decode_num_retired_sequences_total{model_name="m"} 7.0
mtpserve:spec_decode_num_fill_skipped_steps_total{model_name="m"} 24.0
mtpserve:spec_decode_draft_seconds_total{model_name="m"} 1.0
mtpserve:spec_decode_step_k_bucket{le="0.0",model_name="m"} 15.0
mtpserve:spec_decode_step_k_bucket{le="1.0",model_name="m"} 60.0
mtpserve:spec_decode_step_k_bucket{le="2.0",model_name="m"} 70.0
mtpserve:spec_decode_step_k_bucket{le="+Inf",model_name="m"} 70.0
"""


@pytest.fixture(params=["prometheus_client", "fallback"])
def parser_kind(request, monkeypatch):
    if request.param == "fallback":
        monkeypatch.setitem(sys.modules, "prometheus_client.parser", None)  # import fails -> the small parser
    return request.param


def test_prometheus_text_parsing(parser_kind):
    if parser_kind == "prometheus_client":
        pytest.importorskip("prometheus_client.parser")
    snap = parse_prometheus_text(METRICS_BEFORE + 'other_total{a="x y}",b="2"} 5\nother_total{a="z"} 2.5\n')
    assert snap["mtpserve:spec_decode_num_drafts_total"] == 100.0
    assert snap["mtpserve:spec_decode_num_accepted_tokens_per_pos_total"] == 150.0  # summed over positions
    assert snap['mtpserve:spec_decode_num_accepted_tokens_per_pos_total{position="1"}'] == 60.0
    assert snap["other_total"] == 7.5


def test_spec_decode_stats_from_counter_deltas(parser_kind):
    if parser_kind == "prometheus_client":
        pytest.importorskip("prometheus_client.parser")
    s = spec_decode_stats(parse_prometheus_text(METRICS_BEFORE), parse_prometheus_text(METRICS_AFTER))
    assert s["source"] == "mtpserve"
    assert (s["num_drafts"], s["num_draft_tokens"], s["num_accepted_tokens"]) == (200, 400, 300)
    assert s["acceptance_rate"] == pytest.approx(0.75)
    assert s["mean_acceptance_length"] == pytest.approx(2.5)
    assert s["acceptance_rate_per_position"] == pytest.approx([0.9, 0.6])
    assert s["steps_by_k"] == [5, 25, 10]  # decode steps at k = 0, 1, 2 over the run
    assert s["retired_sequences"] == 5
    assert s["fill_skipped_steps"] == 20 and s["draft_seconds"] == pytest.approx(0.75)


def test_engine_busy_is_the_share_of_the_run_in_steps():
    before = parse_prometheus_text('mtpserve:engine_step_seconds_total{model_name="m"} 10.0\n'
                                   'mtpserve:engine_prompt_step_seconds_total{model_name="m"} 2.0\n')
    after = parse_prometheus_text('mtpserve:engine_step_seconds_total{model_name="m"} 11.5\n'
                                  'mtpserve:engine_prompt_step_seconds_total{model_name="m"} 2.5\n')
    assert engine_busy(before, after, 2.0) == {"busy": pytest.approx(0.75), "prompt_steps": pytest.approx(0.25)}
    assert engine_busy(parse_prometheus_text(METRICS_BEFORE), after, 2.0) is None  # a server without the counters
    assert engine_busy(None, after, 2.0) is None


def test_engine_busy_splits_the_mean_step_where_the_server_counts_steps():
    before = parse_prometheus_text('mtpserve:engine_step_seconds_total{model_name="m"} 10.0\n'
                                   'mtpserve:engine_prompt_step_seconds_total{model_name="m"} 2.0\n'
                                   'mtpserve:engine_steps_total{model_name="m"} 100\n'
                                   'mtpserve:engine_target_seconds_total{model_name="m"} 6.0\n'
                                   'mtpserve:engine_sample_seconds_total{model_name="m"} 3.0\n'
                                   'mtpserve:engine_draft_host_seconds_total{model_name="m"} 1.0\n'
                                   'mtpserve:engine_plan_seconds_total{model_name="m"} 0.5\n'
                                   'mtpserve:num_preemptions_total{model_name="m"} 2\n')
    after = parse_prometheus_text('mtpserve:engine_step_seconds_total{model_name="m"} 11.5\n'
                                  'mtpserve:engine_prompt_step_seconds_total{model_name="m"} 2.5\n'
                                  'mtpserve:engine_steps_total{model_name="m"} 600\n'
                                  'mtpserve:engine_target_seconds_total{model_name="m"} 7.0\n'
                                  'mtpserve:engine_sample_seconds_total{model_name="m"} 3.25\n'
                                  'mtpserve:engine_draft_host_seconds_total{model_name="m"} 1.05\n'
                                  'mtpserve:engine_plan_seconds_total{model_name="m"} 0.51\n'
                                  'mtpserve:num_preemptions_total{model_name="m"} 5\n')
    assert engine_busy(before, after, 2.0) == {"busy": pytest.approx(0.75), "prompt_steps": pytest.approx(0.25),
                                               "steps": 500, "step_ms": pytest.approx(3.0),
                                               "target_ms": pytest.approx(2.0), "sample_ms": pytest.approx(0.5),
                                               "draft_host_ms": pytest.approx(0.1), "plan_ms": pytest.approx(0.02),
                                               "preemptions": 3}


def test_engine_busy_adds_the_servers_event_loop_where_it_counts_its_cpu_time():
    counters = ('mtpserve:engine_step_seconds_total{model_name="m"} %s\n'
                'mtpserve:engine_prompt_step_seconds_total{model_name="m"} 1.0\n'
                'mtpserve:frontend_loop_cpu_seconds_total{model_name="m"} %s\n')
    before, after = parse_prometheus_text(counters % (10.0, 4.0)), parse_prometheus_text(counters % (11.0, 5.5))
    assert engine_busy(before, after, 2.0) == {"busy": pytest.approx(0.5), "prompt_steps": pytest.approx(0.0),
                                               "frontend_busy": pytest.approx(0.75)}


def test_engine_busy_adds_the_servers_own_mean_latencies_where_it_has_their_histograms():
    counters = ('mtpserve:engine_step_seconds_total{model_name="m"} 1.0\n'
                'mtpserve:engine_prompt_step_seconds_total{model_name="m"} 1.0\n'
                'mtpserve:time_to_first_token_seconds_sum{model_name="m"} %s\n'
                'mtpserve:time_to_first_token_seconds_count{model_name="m"} %s\n'
                'mtpserve:time_per_output_token_seconds_sum{model_name="m"} %s\n'
                'mtpserve:time_per_output_token_seconds_count{model_name="m"} %s\n')
    before = parse_prometheus_text(counters % (1, 10, 0.1, 10))
    after = parse_prometheus_text(counters % (3, 30, 0.5, 30))
    busy = engine_busy(before, after, 2.0)
    # 20 requests ended over the run: (3 - 1) s of TTFT and (0.5 - 0.1) s of TPOT between them
    assert busy["server_ttft_ms"] == pytest.approx(100) and busy["server_tpot_ms"] == pytest.approx(20)
    assert "server_e2el_ms" not in busy  # no such histogram
    assert "server_ttft_ms" not in engine_busy(before, before, 2.0)  # no request ended


def test_spec_decode_stats_without_counters_or_drafts():
    assert spec_decode_stats(None, {}) is None
    assert spec_decode_stats({"foo": 1.0}, {"foo": 2.0}) is None
    same = parse_prometheus_text(METRICS_BEFORE)
    s = spec_decode_stats(same, same)  # a baseline server: counters present, nothing drafted
    assert s["num_draft_tokens"] == 0 and s["acceptance_rate"] is None and s["mean_acceptance_length"] is None
    assert s["acceptance_rate_per_position"] == []
    vllm = spec_decode_stats({"vllm:spec_decode_num_drafts_total": 0, "vllm:spec_decode_num_draft_tokens_total": 0,
                              "vllm:spec_decode_num_accepted_tokens_total": 0},
                             {"vllm:spec_decode_num_drafts_total": 10, "vllm:spec_decode_num_draft_tokens_total": 30,
                              "vllm:spec_decode_num_accepted_tokens_total": 15})
    assert vllm["source"] == "vllm" and vllm["mean_acceptance_length"] == pytest.approx(2.5)
    assert vllm["retired_sequences"] is None and vllm["fill_skipped_steps"] is None and vllm["draft_seconds"] is None


# ---- summary layout ------------------------------------------------------------------------------------------


def test_summary_has_the_bench_serving_layout():
    records = [rec(0.0, [0.1, 0.2, 0.3], 3, index=0), rec(0.0, [0.2, 0.4], 2, index=1)]
    m = calculate_metrics(records, duration_s=1.0, goodput={"ttft": 150.0})
    spec = spec_decode_stats(parse_prometheus_text(METRICS_BEFORE), parse_prometheus_text(METRICS_AFTER))
    text = format_summary(m, spec, max_concurrency=4, request_rate=math.inf)
    lines = text.splitlines()
    assert lines[0] == "============ Serving Benchmark Result ============"
    assert lines[-1] == "=" * 50
    for label in ("Successful requests:", "Benchmark duration (s):", "Total input tokens:", "Total generated tokens:",
                  "Request throughput (req/s):", "Request goodput (req/s):", "Output token throughput (tok/s):",
                  "Total Token throughput (tok/s):", "Mean TTFT (ms):", "Median TTFT (ms):", "P90 TTFT (ms):",
                  "P99 TTFT (ms):", "Mean TPOT (ms):", "P99 ITL (ms):", "Median E2EL (ms):",
                  "Acceptance rate (%):", "Mean acceptance length:"):
        assert any(line.startswith(label) for line in lines), label
    for rule in ("---------------Time to First Token----------------",
                 "-----Time per Output Token (excl. 1st token)------",
                 "---------------Inter-token Latency----------------",
                 "----------------End-to-end Latency----------------"):
        assert rule in lines
    assert "Successful requests:                     2" in text
    assert "Acceptance rate (%):                     75.00" in text
    assert "Mean acceptance length:                  2.50" in text
    assert "Per-position acceptance (%):             90.00, 60.00" in text
    no_spec = format_summary(m, None)
    assert "Acceptance rate (%):                     N/A" in no_spec
    assert "Request rate configured" not in no_spec
