"""The packing benchmark, ``python -m gaca_openrlhf.bench.packing`` (:mod:`.cli`): padded vs packed vs packed +
token-budget training micro-batches (the lengths it reads are recorded by :mod:`gaca_openrlhf.bench.packing_record`).

- :mod:`.pipeline`: the real pipeline pieces, step samples -> replay-buffer items -> padded / packed / token-budget
  micro-batches -> one update's forward + backward (also what tests/gaca_openrlhf/trainer/test_packing_equality.py
  runs);
- :mod:`.lengths`: the step-sample lengths (recorded, drawn, synthetic) and the padding waste of micro-batching them;
- :mod:`.measure`: the timed update of each mode and the logits peak, with their memory probes;
- :mod:`.cli`: the command line: its tables, the issue's targets and ``--json``.
"""
from gaca_openrlhf.bench.packing.cli import RECIPE_GPUS, TARGET_SPEEDUP, TARGET_WASTE, main, targets
from gaca_openrlhf.bench.packing.lengths import (DEFAULT_MINI_BATCH, SYNTHETIC_PROMPT_LEN, draw, gpu_recipe,
                                                 length_distribution, mini_batch, padding_waste, recipe_envs,
                                                 recorded_lengths)
from gaca_openrlhf.bench.packing.measure import (PeakRSS, bench_model, fixed_mmap_threshold, logits_peak,
                                                 packed_attention_default, run_env)
from gaca_openrlhf.bench.packing.pipeline import (CLIP_EPS, ENTROPY_COEF, Items, StepResult, budget_plan, fixed_plan,
                                                  make_step_samples, prepare_items, standalone_log_probs,
                                                  train_micro_batches)

__all__ = [
    # pipeline
    "CLIP_EPS", "ENTROPY_COEF", "Items", "StepResult", "budget_plan", "fixed_plan", "make_step_samples",
    "prepare_items", "standalone_log_probs", "train_micro_batches",
    # lengths
    "DEFAULT_MINI_BATCH", "SYNTHETIC_PROMPT_LEN", "draw", "gpu_recipe", "length_distribution", "mini_batch",
    "padding_waste", "recipe_envs", "recorded_lengths",
    # measure
    "PeakRSS", "bench_model", "fixed_mmap_threshold", "logits_peak", "packed_attention_default", "run_env",
    # cli
    "RECIPE_GPUS", "TARGET_SPEEDUP", "TARGET_WASTE", "main", "targets",
]
