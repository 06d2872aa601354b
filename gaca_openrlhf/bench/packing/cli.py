"""``python -m gaca_openrlhf.bench.packing``: padded vs packed vs packed + token-budget training micro-batches.

    python -m gaca_openrlhf.bench.packing [--env alfworld webshop] [--lengths FILE ...] [--synthetic] \
        [--synthetic-responses] [--samples 32 8] [--micro 4] [--budget 4096] [--json OUT]

Step-sample lengths: by default the (prompt, response) token lengths recorded from a real ALFWorld and a real
WebShop rollout (``gaca_openrlhf/bench/data/packing_lengths_<env>.json``, written by
``python -m gaca_openrlhf.bench.packing_record``; how each was made is recorded in the file: command, commit, date,
model); ``--lengths FILE`` reads other recorded files (each names its environment), ``--synthetic`` uses synthetic
distributions shaped like the environments instead (:func:`length_distribution`), ``--synthetic-responses`` the
recorded prompt lengths with synthetic (trained-model-like) response lengths. Prints, side by side:

- padding waste: tokens the model computes per real token (padded: micro-batch rows x longest row; packed: the
  real tokens only), over every recorded step sample cut into verl-agent's mini-batches (256 ALFWorld, 64 WebShop)
  after a shuffle, and the micro-batch counts of the fixed and token-budget plans;
- the training-phase time of one rank's share of one update (forward + backward of the PPO loss and entropy bonus
  over ``--samples`` step samples drawn from the recorded ones, OpenRLHF's ``Actor`` and ``PolicyLoss``), padded vs
  packed vs packed + token budget (+ chunked log-probs): wall seconds and, on CPU, the process's CPU seconds (what
  the speed-up uses: on a shared machine the wall clock mostly measures the load); and the memory peak above the
  step's start (resident memory on CPU, the allocator's peak on CUDA);
- the logits peak of one ``--peak-len``-token sequence with the full-vocabulary logits (OpenRLHF) and with the
  chunked computation (:mod:`gaca_openrlhf.models.chunked_logprobs`), measured as the largest tensor autograd saves
  and the memory peak above the start (resident memory on CPU, the allocator's peak on CUDA);
- the issue's targets (padding waste <= 5 %, training phase >= 1.3x faster than padded, logits peak down by at least
  the number of chunks), each met or not with its number (:func:`targets`). ``--json OUT`` writes every figure.

A script that prints figures, not a timed test. The helpers (:func:`make_step_samples`, :func:`prepare_items`,
:func:`train_micro_batches`) are the real pipeline pieces -- ``step_experience`` -> ``StepExperienceMaker``'s
split and advantage hook -> OpenRLHF's replay-buffer items -> padded / packed / token-budget micro-batches -> the
clipped policy loss with OpenRLHF's normalizers -- and are also what the equality test
(tests/gaca_openrlhf/trainer/test_packing_equality.py) runs.
"""
from __future__ import annotations

import argparse
import math
from typing import Dict, List

import torch

from gaca_openrlhf.bench.packing.lengths import (DEFAULT_MINI_BATCH, length_distribution, mini_batch, padding_waste,
                                                 recipe_envs, recorded_lengths)
from gaca_openrlhf.bench.packing.measure import (bench_model, fixed_mmap_threshold, logits_peak,
                                                 packed_attention_default, run_env)

#: GPUs of the recipes (examples/gpu): a rank's share of a mini-batch is the mini-batch / RECIPE_GPUS
RECIPE_GPUS = 8


#: the issue's targets (issue 27)
TARGET_WASTE = 0.05
TARGET_SPEEDUP = 1.3


def targets(waste: Dict[str, dict], timed: Dict[str, dict], peak: Dict[str, float], peak_len: int,
            chunk: int, key: str) -> List[str]:
    """One line per target of the issue, met or not, with the number."""
    lines = []
    for env, w in waste.items():
        packed = w["packed"] - 1
        lines.append(f"padding waste <= {TARGET_WASTE:.0%} ({env}): packed {packed:.1%} (padded {w['padded'] - 1:.1%})"
                     f" -> {'met' if packed <= TARGET_WASTE else 'NOT met'}")
    for env, rows in timed.items():
        base = rows["padded"][key]
        for mode in ("packed", "packed+budget", "packed+budget+chunked"):
            x = base / rows[mode][key]
            lines.append(f"training phase >= {TARGET_SPEEDUP}x faster than padded ({env}, {mode}, {key}): {x:.2f}x "
                         f"-> {'met' if x >= TARGET_SPEEDUP else 'NOT met'}")
    chunks = math.ceil(peak_len / chunk)
    for what in ("largest_saved_tensor_mb", next(k[5:] for k in peak if k.startswith("full_peak_"))):
        ratio = peak[f"full_{what}"] / max(peak[f"chunked_{what}"], 1e-9)
        lines.append(f"logits peak down >= {chunks}x (the number of chunks), {what}: {ratio:.1f}x "
                     f"-> {'met' if ratio >= chunks else 'NOT met'}")
    return lines


def main(argv=None) -> int:
    """Print the padding-waste table, the timed padded / packed / token-budget / chunked update per environment,
    the logits peak and the issue's targets (module docstring); returns 0."""
    import json
    import os
    import platform

    # prog: the usage line as when this was the module gaca_openrlhf/bench/packing.py
    ap = argparse.ArgumentParser(prog="python -m gaca_openrlhf.bench.packing", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    envs = recipe_envs()
    ap.add_argument("--env", nargs="*", default=[s.name for s in envs])
    ap.add_argument("--lengths", nargs="*", default=[], metavar="FILE",
                    help="recorded step-sample lengths (python -m gaca_openrlhf.bench.packing_record; each file names "
                         "its environment); default: gaca_openrlhf/bench/data/packing_lengths_<env>.json")
    ap.add_argument("--synthetic", action="store_true",
                    help="synthetic lengths shaped like the environments instead of recorded ones")
    ap.add_argument("--synthetic-responses", action="store_true",
                    help="the recorded prompt lengths with synthetic response lengths (30-512 tokens, log-uniform: "
                         "a trained model's reasoning) instead of the recorded model's")
    ap.add_argument("--waste-micro", type=int, default=4,
                    help="fixed micro-batch size of the padding-waste table (the recipes' MICRO_BATCH)")
    ap.add_argument("--waste-budget", type=int, default=16384, help="token budget of the padding-waste table")
    ap.add_argument("--waste-samples", type=int, nargs=len(envs), default=None,
                    metavar=tuple(s.name.upper() for s in envs),
                    help="synthetic lengths only: step samples of the padding-waste table (default one mini-batch)")
    shares = ", ".join(f"{s.gpu_recipe.mini_batch_steps} / {RECIPE_GPUS} {s.title}" for s in envs)
    ap.add_argument("--samples", type=int, nargs="+",
                    default=[s.gpu_recipe.mini_batch_steps // RECIPE_GPUS for s in envs],
                    help="step samples of the timed update, per --env (default: one rank's share of verl-agent's "
                         f"mini-batch on {RECIPE_GPUS} GPUs: {shares}); one number: all")
    ap.add_argument("--micro", type=int, default=4, help="fixed micro-batch size of the timed padded/packed paths")
    ap.add_argument("--budget", type=int, default=4096, help="token budget of a timed micro-batch")
    ap.add_argument("--train-chunk", type=int, default=256, help="log-prob chunk of the timed chunked mode")
    ap.add_argument("--packed-attention", default="",
                    help="attn_implementation of the timed packed modes (default: flash_attention_2 where installed, "
                         "else the CPU stand-in gaca_varlen_sdpa, as training runs them; 'sdpa': transformers' "
                         "block-diagonal mask over the whole packed row, the stand-in before 2026-12-04)")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--peak-len", type=int, default=4096, help="tokens of the logits-peak micro-batch")
    ap.add_argument("--peak-vocab", type=int, default=32768, help="vocabulary of the logits-peak model")
    ap.add_argument("--chunk", type=int, default=512, help="log-prob chunk of the logits-peak measurement")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, metavar="OUT", help="also write every figure to this JSON file")
    a = ap.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    import openrlhf.models.actor as actor_module

    if device == "cpu":  # torch.compile'd on CPU it recompiles per shape inside the timing; the same math eagerly
        actor_module.compute_entropy = getattr(actor_module.compute_entropy, "_torchdynamo_orig_callable",
                                               actor_module.compute_entropy)
    mmap_fixed = device == "cpu" and fixed_mmap_threshold()
    lengths, sources = {}, {}
    for i, env in enumerate(a.env):
        if a.synthetic:
            n = a.waste_samples[i] if a.waste_samples else mini_batch(env) or DEFAULT_MINI_BATCH
            lengths[env] = length_distribution(env, n, a.seed)
            sources[env] = {"synthetic": True}
        else:
            prompts, responses, meta = recorded_lengths(env, a.lengths)
            sources[env] = {"path": os.path.relpath(meta["path"]), **meta.get("recorded", {})}
            sources[env].pop("command", None)
            if a.synthetic_responses:
                responses = length_distribution(env, len(prompts), a.seed)[1]
                sources[env]["synthetic_responses"] = True
            lengths[env] = (prompts, responses)
    report = {"machine": {"device": device, "torch": torch.__version__, "threads": torch.get_num_threads(),
                          "cpus": os.cpu_count(), "load_avg": list(os.getloadavg()), "host": platform.node(),
                          "cpu": platform.processor() or platform.machine(), "mmap_threshold_fixed": mmap_fixed},
              "lengths": sources, "waste": {}, "timed": {}, "args": vars(a)}
    print("step-sample lengths: " + "; ".join(
        f"{env}: {'synthetic' if s.get('synthetic') else s['path']}"
        f"{' + synthetic responses' if s.get('synthetic_responses') else ''} ({len(lengths[env][0])} samples, "
        f"prompts mean {sum(lengths[env][0]) / len(lengths[env][0]):.0f}, responses mean "
        f"{sum(lengths[env][1]) / len(lengths[env][1]):.0f} tokens)" for env, s in sources.items()))
    minis = "/".join(str(mini_batch(e) or DEFAULT_MINI_BATCH) for e in a.env)
    print(f"\npadding waste (tokens computed per real token; the samples shuffled, cut into mini-batches of "
          f"{minis}, fixed micro-batches of {a.waste_micro}; token budget {a.waste_budget}):")
    print(f"{'env':10s} {'samples':>7s} {'mini-b':>6s} {'real tokens':>11s} {'padded':>8s} {'packed':>8s} "
          f"{'fixed mb':>8s} {'budget mb':>9s}")
    for env in a.env:
        w = padding_waste(*lengths[env], a.waste_micro, a.waste_budget, a.seed, mini_batch=mini_batch(env))
        report["waste"][env] = w
        print(f"{env:10s} {w['samples']:7d} {w['mini_batches']:6d} {w['real_tokens']:11d} {w['padded']:8.3f} "
              f"{w['packed']:8.3f} {w['fixed_micro_batches']:8d} {w['budget_micro_batches']:9d}")
    from gaca_openrlhf.models import varlen_attention

    varlen_attention.register()
    packed_attention = a.packed_attention or packed_attention_default(device)
    report["packed_attention"] = packed_attention
    actor = bench_model(a.hidden, a.layers, a.vocab, device)
    samples = dict(zip(a.env, a.samples if len(a.samples) > 1 else a.samples * len(a.env)))
    print(f"\ntimed training phase: device={device} torch={torch.__version__} threads={torch.get_num_threads()} "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; model: Qwen2 hidden {a.hidden}, "
          f"{a.layers} layers, vocab {a.vocab}, fp32; attention: padded sdpa, packed {packed_attention}; "
          f"fixed micro-batches of {a.micro}, token budget "
          f"{a.budget}, chunk {a.train_chunk}")
    key = "cpu_seconds" if device == "cpu" else "seconds"
    for env in a.env:
        rows = run_env(env, actor, samples[env], a.micro, a.budget, a.repeats, a.seed, device,
                       lengths=None if a.synthetic else lengths[env], chunk=a.train_chunk,
                       packed_attention=packed_attention)
        report["timed"][env] = rows
        base = rows["padded"][key]
        print(f"\n{env}: {samples[env]} step samples, {rows['padded']['real_tokens']} real tokens")
        print(f"{'mode':24s} {'tokens/real':>11s} {'micro-b':>7s} {'wall s':>8s} {'cpu s':>8s} {'speed-up':>8s} "
              f"{'peak +MB':>9s} {'loss':>12s}")
        for mode, r in rows.items():
            print(f"{mode:24s} {r['waste']:11.3f} {r['micro_batches']:7d} {r['seconds']:8.2f} {r['cpu_seconds']:8.2f} "
                  f"{base / r[key]:7.2f}x {r['peak_mb']:9.0f} {r['loss']:12.6f}")
        if device == "cpu":
            print("(speed-up from process CPU seconds: the wall clock of a shared machine mostly measures the load)")
    del actor
    actor = bench_model(a.hidden, 1, a.peak_vocab, device)
    peak = logits_peak(actor, a.peak_len, a.chunk, device)
    report["logits_peak"] = peak
    print(f"\nlogits peak, one {a.peak_len}-token sequence, vocab {a.peak_vocab}, chunk {a.chunk} "
          f"(log-probs + entropy + backward; 1-layer model):")
    for k, v in peak.items():
        print(f"  {k:24s} {v:10.1f}")
    report["targets"] = targets(report["waste"], report["timed"], peak, a.peak_len, a.chunk, key)
    print("\ntargets (issue 27):")
    for line in report["targets"]:
        print(f"  {line}")
    report["machine"]["load_avg_end"] = list(os.getloadavg())
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
    return 0
