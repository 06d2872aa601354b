"""gaca_openrlhf/bench/packing/, the benchmark script (not its timings): recorded lengths as its default input,
the padding-waste arithmetic by hand, the draw of the timed samples, the targets' verdicts, and one tiny run of the
whole script with ``--json``."""
from __future__ import annotations

import json

import pytest

from gaca_openrlhf.bench import packing as P
from gaca_openrlhf.bench import packing_record as R


def test_padding_waste_by_hand():
    # lengths 10, 2, 6, 4 (prompt + response); seed 0 shuffles them; compute the groups the same way
    prompts, responses = [8, 1, 5, 3], [2, 1, 1, 1]
    import random

    order = list(range(4))
    random.Random(0).shuffle(order)
    lengths = [10, 2, 6, 4]
    w = P.padding_waste(prompts, responses, micro=2, budget=10, seed=0)
    groups = [order[:2], order[2:]]
    padded = sum(2 * max(lengths[i] for i in g) for g in groups)
    assert w["padded"] == pytest.approx(padded / 22) and w["packed"] == 1.0 and w["real_tokens"] == 22
    assert (w["fixed_micro_batches"], w["mini_batches"], w["samples"]) == (2, 1, 4)
    assert w["budget_micro_batches"] == 3  # 10 | 6 + 4 | 2 ... at most 10 tokens each: 10, (6, 4), (2) -> 3
    # mini-batches of 2: micro-batches never cross a mini-batch, budgets are planned per mini-batch
    w2 = P.padding_waste(prompts, responses, micro=4, budget=100, seed=0, mini_batch=2)
    assert (w2["mini_batches"], w2["fixed_micro_batches"], w2["budget_micro_batches"]) == (2, 2, 2)
    assert w2["padded"] == pytest.approx(padded / 22)
    # equal lengths: no padding at all
    assert P.padding_waste([5] * 8, [3] * 8, micro=4, budget=64)["padded"] == 1.0


def test_draw_is_deterministic_and_without_replacement():
    prompts, responses = list(range(1, 101)), list(range(100))
    p1, r1 = P.draw(prompts, responses, 10, seed=3)
    assert (p1, r1) == P.draw(prompts, responses, 10, seed=3)
    assert len(set(p1)) == 10 and all(p - 1 == r for p, r in zip(p1, r1))  # pairs kept together
    p2, _ = P.draw([7, 9], [1, 2], 5, seed=0)  # more than recorded: with replacement
    assert len(p2) == 5 and set(p2) <= {7, 9}


def _lengths_file(path, env, prompts, responses):
    R.write_compact(str(path), {"format": R.FORMAT, "env": env, "recorded": {"command": "x"},
                                "summary": R.summary(prompts, responses), "prompt_len": prompts,
                                "response_len": responses})
    return str(path)


def test_recorded_lengths_default_and_by_environment(tmp_path):
    a = _lengths_file(tmp_path / "a.json", "alfworld", [30, 40], [3, 4])
    w = _lengths_file(tmp_path / "w.json", "webshop", [50], [5])
    assert P.recorded_lengths("webshop", [a, w])[:2] == ([50], [5])
    assert P.recorded_lengths("alfworld", [w, a])[2]["path"] == a
    for env in ("alfworld", "webshop"):  # no file of that environment given: the committed recording
        p, r, meta = P.recorded_lengths(env, [w] if env == "alfworld" else [a])
        assert meta["path"] == R.default_lengths_file(env) and meta["env"] == env and len(p) == len(r)


def test_targets_verdicts():
    waste = {"e": {"packed": 1.0, "padded": 1.4}}
    timed = {"e": {"padded": {"cpu_seconds": 2.6}, "packed": {"cpu_seconds": 2.0},
                   "packed+budget": {"cpu_seconds": 1.0}, "packed+budget+chunked": {"cpu_seconds": 3.0}}}
    peak = {"full_largest_saved_tensor_mb": 80.0, "chunked_largest_saved_tensor_mb": 10.0,
            "full_peak_rss_mb": 100.0, "chunked_peak_rss_mb": 40.0}
    lines = P.targets(waste, timed, peak, peak_len=64, chunk=8, key="cpu_seconds")
    assert "packed 0.0% (padded 40.0%) -> met" in lines[0]
    assert "(e, packed, cpu_seconds): 1.30x -> met" in lines[1]
    assert "(e, packed+budget, cpu_seconds): 2.60x -> met" in lines[2]
    assert "0.87x -> NOT met" in lines[3]
    assert "down >= 8x (the number of chunks), largest_saved_tensor_mb: 8.0x -> met" in lines[4]
    assert "peak_rss_mb: 2.5x -> NOT met" in lines[5]


def test_tiny_run_of_the_script(tmp_path, capsys):
    """The whole script on small recorded-style files and a tiny model: every table, the targets, the JSON."""
    a = _lengths_file(tmp_path / "a.json", "alfworld", [40, 12, 25, 33, 18, 9], [5, 1, 9, 2, 7, 3])
    w = _lengths_file(tmp_path / "w.json", "webshop", [60, 20, 44, 31], [3, 8, 2, 5])
    out = tmp_path / "r.json"
    assert P.main(["--lengths", a, w, "--samples", "4", "3", "--micro", "2", "--budget", "80", "--train-chunk", "8",
                   "--hidden", "64", "--layers", "1", "--vocab", "128", "--peak-len", "64", "--peak-vocab", "256",
                   "--chunk", "16", "--waste-budget", "100", "--repeats", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "padding waste" in text and "targets (issue 27)" in text and "packed+budget+chunked" in text
    rep = json.loads(out.read_text())
    assert rep["lengths"]["alfworld"]["path"].endswith("a.json") and rep["waste"]["webshop"]["samples"] == 4
    for env, n in (("alfworld", 4), ("webshop", 3)):
        rows = rep["timed"][env]
        assert set(rows) == {"padded", "packed", "packed+budget", "packed+budget+chunked"}
        assert rows["padded"]["waste"] >= 1.0 and rows["packed"]["waste"] == 1.0
        real = {r["real_tokens"] for r in rows.values()}
        assert len(real) == 1  # the same samples in every mode
        losses = [r["loss"] for r in rows.values()]
        assert max(losses) - min(losses) < 1e-4  # the same update, however it is batched
    assert len(rep["targets"]) == 2 + 2 * 3 + 2
    assert rep["packed_attention"] == "gaca_varlen_sdpa"  # no flash-attn here: what train_ppo runs packed rows on
    assert rep["machine"]["load_avg"] and rep["logits_peak"]["full_logits_fp32_mb"] > 0
