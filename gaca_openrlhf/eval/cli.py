"""``python -m gaca_openrlhf.eval``: evaluate a model on a fixed task panel with fixed seeds.

    python -m gaca_openrlhf.eval --model DIR --env alfworld --panel eval_id --data $ALFWORLD_DATA \\
        --episodes-per-task 1 --temperature 0.4 --seed 0 --out results.json
    python -m gaca_openrlhf.eval --model DIR --env webshop --panel test --num-tasks 500 \\
        --webshop-url http://127.0.0.1:3000 --temperature 0.4 --seed 0 --out results.json

Episodes run with vLLM offline, all live episodes stepped together (one ``generate`` call per step), with the
training rollout's prompts, parsing and environment adapters. The JSON written to ``--out`` has the overall
success rate, per-task-type success, mean score, mean steps, valid-action ratio, failed-episode count, one record
per episode (task, episode, seed, won, steps, score, ...) and the configuration, including ``generated_data``
(true for the offline-generated ALFWorld games or the generated WebShop catalog: not comparable with published
numbers; null when the WebShop server does not say). The summary is printed on
stdout as one JSON line (vLLM may log after it). Exit status: 0 done (even with failed episodes), 2 bad arguments / missing model, data or panel,
3 environment unreachable. Start-up, Ray and the results JSON: :class:`gaca_openrlhf.eval.session.EvalSession`.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from agents.registry import specs
from gaca_openrlhf.eval.panels import PAPER_PROTOCOL
from gaca_openrlhf.eval.session import EvalSession, json_safe, write_json


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.eval", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    envs = specs()
    per_env = lambda what: ", ".join(f"{s.title} {what(s)}" for s in envs)  # noqa: E731
    p.add_argument("--model", required=True, help="local HF model folder (a trained --ckpt.output_dir or a base model)")
    p.add_argument("--env", required=True, choices=[s.name for s in envs])
    p.add_argument("--panel", required=True, help="; ".join(f"{s.title}: {s.panel_help}" for s in envs))
    p.add_argument("--out", required=True, help="results JSON path")
    p.add_argument("--episodes-per-task", type=int, default=1, help="episodes per panel task (K)")
    p.add_argument("--temperature", type=float, default=PAPER_PROTOCOL.temperature,
                   help="sampling temperature (the paper's / verl-agent's eval: 0.4)")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0, help="base seed; per-request seeds derive from (seed, task, episode, step)")
    p.add_argument("--num-tasks", type=int, default=None,
                   help="keep the first N tasks of the panel (default all)")
    p.add_argument("--data", default=None, help="the environment's data root (default "
                   + (", ".join(f"{s.title} ${s.data_env_var}" for s in envs if s.data_env_var) or "none") + ")")
    p.add_argument("--panel-dir", default=None, help="folder of panel files <name>.json (default <data>/panels)")
    for s in envs:  # each environment's own options (server URL, engine backend, ...)
        if s.add_eval_args is not None:
            s.add_eval_args(p, "eval")
    p.add_argument("--env-kwargs", default=None, help="JSON object merged into the env config (agents.registry.make_env)")
    p.add_argument("--max-steps", type=int, default=0, help="episode step limit (0: the env's own)")
    p.add_argument("--max-tokens", type=int, default=512, help="response tokens per step (training: --rollout.max_new_tokens)")
    p.add_argument("--history-k", type=int, default=2, help="(observation, action) pairs in the step prompt")
    p.add_argument("--invalid-action", default="execute", choices=["execute", "noop"],
                   help="invalid response: execute its projected action (verl-agent) or answer it as a no-op "
                        "(training: --env.invalid_action)")
    p.add_argument("--prompt-max-len", type=int, default=None,
                   help=f"step-prompt token limit (default {per_env(lambda s: s.eval_prompt_max_len)})")
    p.add_argument("--num-envs", type=int, default=None,
                   help=f"episodes in flight (= max generate batch); default {per_env(lambda s: s.eval_num_envs)}")
    p.add_argument("--env-timeout", type=float, default=120.0, help="an env reset/step slower than this fails the episode")
    p.add_argument("--dtype", default="auto", help="vLLM dtype (auto: float32 on CPU, the model's on GPU)")
    p.add_argument("--gpu-memory-utilization", type=float, default=None, help="vLLM memory share (auto: CPU 0.1, GPU 0.85)")
    p.add_argument("--tensor-parallel-size", type=int, default=1)
    p.add_argument("--enforce-eager", action="store_true", default=None, help="disable CUDA graphs (always on CPU)")
    p.add_argument("--record-actions", action="store_true",
                   help="keep each episode's actions in the JSON: action, valid (format), listed (on the "
                        "environment's admissible list; null where it lists none)")
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    with EvalSession(args) as session:
        panel = session.panel(args.panel, args.num_tasks)
        # generated data (offline ALFWorld games, the generated WebShop catalog): published numbers not comparable
        generated_data = session.generated_data(panel)
        session.start()
        episodes, timing = session.run(panel, args.seed, desc=f"eval {args.env}/{panel.name}")
        timing["total_s"] = time.time() - session.t_start
        result = session.results(panel, args.panel, args.seed, episodes, timing, generated_data=generated_data)
        write_json(args.out, result)
        brief = {k: result[k] for k in ("num_episodes", "num_failed", "success_rate", "mean_score", "mean_steps",
                                        "valid_action_ratio")}
        print(f"wrote {args.out}", file=sys.stderr)
        print(json.dumps(json_safe(brief)))
    return 0
