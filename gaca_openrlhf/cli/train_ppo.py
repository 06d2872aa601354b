"""``python -m gaca_openrlhf.cli.train_ppo``: OpenRLHF PPO training with step-level agent rollouts.

Accepts every option of OpenRLHF's ``train_ppo_ray`` (same parser, same validation); ``--algo.advantage.estimator``
also takes the project's estimators (``grpo``, ``gigpo``, ``gaca``, ...). Three namespaces are added, each generated
from one config dataclass (:mod:`gaca_openrlhf.cli.options`; option, parsed attribute and field share a name):
- ``--gaca.*``: the estimator's :class:`~gaca_openrlhf.advantages.AdvantageConfig` fields;
- ``--run.*``: the step trainer's :class:`~gaca_openrlhf.trainer.run_options.RunOptions` (backend, mini-batches,
  stopping, metrics, dumps); their old ``--gaca.*`` names still work, with a deprecation warning
  (:func:`~gaca_openrlhf.trainer.run_options.deprecated_flags`);
- ``--env.*``: the rollout's :class:`~gaca_openrlhf.rollout.config.RolloutConfig` (the environment: ``--env.name``,
  ``--env.kwargs``, ``--env.timeout_s``, and the episode settings).

The parsed arguments carry the run's :class:`~gaca_openrlhf.trainer.run_shape.RunShape` (``args.run_shape``),
computed once here.
"""
from __future__ import annotations

import argparse
import sys

from gaca_openrlhf.advantages import AdvantageConfig, is_step_estimator, list_estimators
from gaca_openrlhf.cli.openrlhf_parser import build_parser, extend_choices, redefault, validate
from gaca_openrlhf.cli.options import AliasedNamespace, add_dataclass_options, add_deprecated_flag
from gaca_openrlhf.cpu import CPU_DTYPE_ENV, PARAM_DTYPES, backend_mode, forced_cpu_dtype, resolve_param_dtype
from gaca_openrlhf.rollout import AGENT_FUNC_PATH
from gaca_openrlhf.rollout.config import RolloutConfig
from gaca_openrlhf.trainer.run_options import MOVED_FROM, RunOptions, deprecated_flags, run_option_names
from gaca_openrlhf.trainer.run_shape import RunShape
from gaca_openrlhf.trainer.validation import EVAL_DEFAULTS


def add_project_args(parser: argparse.ArgumentParser) -> None:
    extend_choices(parser, "algo.advantage.estimator", list_estimators())
    extend_choices(parser, "ds.param_dtype", PARAM_DTYPES, default="auto",
                   help="training and rollout dtype: bf16 | fp16 | fp32 (CPU backend only) | auto (default: bf16 on "
                        "GPUs and on CPUs with native bf16 matmuls, else fp32, ~10x faster there)")
    # estimator fields default to None: AdvantageConfig's own defaults apply (and stay in one place)
    add_dataclass_options(parser, AdvantageConfig, "gaca", "GACA estimator (--gaca.*, AdvantageConfig)",
                          skip=("estimator",), with_defaults=False)  # estimator: --algo.advantage.estimator
    add_dataclass_options(parser, RunOptions, "run", "GACA trainer (--run.*, RunOptions)")
    add_dataclass_options(parser, RolloutConfig, "env", "Environment and episodes (--env.*, RolloutConfig)")
    for old, new in deprecated_flags().items():
        add_deprecated_flag(parser, old, new)
    # validation during training (--eval.dataset: a task file of the validation panel; gaca_openrlhf.trainer.validation)
    helps = {"eval.steps": "play the validation panel (--eval.dataset) every this many iterations and after the last "
                           "(default: %(default)s, verl-agent's test_freq; <= 0: never)",
             "eval.temperature": "validation episodes' sampling temperature (default: %(default)s, the evaluation's)",
             "eval.n_samples_per_prompt": "validation episodes per panel task (default: %(default)s)"}
    for dest, value in EVAL_DEFAULTS.items():
        redefault(parser, dest, value, help=helps[dest])


def alias_moved_options(args) -> None:
    """Old attribute names of moved options (``args.gaca.backend``) keep reading and setting the values' new homes
    (``args.run.backend``), with a DeprecationWarning, for code not moved yet."""
    args.gaca = AliasedNamespace(vars(args.gaca), {
        name: (args.run, name, f"args.{MOVED_FROM}.{name} is deprecated: use args.run.{name} (--run.{name})")
        for name in run_option_names()})


def parse_args(argv=None):
    parser = build_parser()
    add_project_args(parser)
    flat = parser.parse_args(argv)
    requested = getattr(flat, "ds.param_dtype")
    try:
        mode = backend_mode(getattr(flat, "run.backend"))
        dtype = resolve_param_dtype(requested, mode)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if dtype != requested:
        why = f" (${CPU_DTYPE_ENV})" if mode != "gpu" and forced_cpu_dtype() else ""
        print(f"[gaca] --ds.param_dtype {requested} -> {dtype}{why}", file=sys.stderr)
    setattr(flat, "ds.param_dtype", dtype)
    if is_step_estimator(getattr(flat, "algo.advantage.estimator")) and not getattr(flat, "train.agent_func_path"):
        setattr(flat, "train.agent_func_path", AGENT_FUNC_PATH)  # the step-level agent rollout
    args = validate(flat)
    alias_moved_options(args)
    args.run_shape = shape = RunShape.from_args(args)
    if args.train.agent_func_path == AGENT_FUNC_PATH and not shape.step_estimator:
        raise SystemExit(f"{args.algo.advantage.estimator!r} needs one sample per response (OpenRLHF's rollouts); "
                         f"with step-level agent rollouts use one of {list_estimators()}")
    check_launch(args)
    if shape.step_estimator:
        check_step_args(args, shape)
        if args.algo.kl.init_coef > 0 and not args.algo.kl.use_loss:
            raise SystemExit("step estimators give one advantage per step: use --algo.kl.use_loss for the KL term "
                             "(or --algo.kl.init_coef 0)")
        if args.train.async_enable:
            raise SystemExit("--train.async_enable is not supported with step samples (the step trainer is synchronous)")
        check_packing_args(args)
    return args


#: why packed micro-batches are refused on a GPU node without flash-attn (:func:`check_packing_args`)
PACKING_NEEDS_FLASH_ATTN = (
    "flash-attn is not installed (transformers' is_flash_attn_2_available() is False) on this GPU node: packed "
    "micro-batches (--ds.packing_samples, --train.dynamic_batch_enable; the GPU scripts' PACKING=1) would fall back "
    "to sdpa with a dense block-diagonal mask over each packed row of up to {budget} tokens per GPU, quadratic in "
    "the row: exact, but slow and memory-hungry. Refused. Install flash-attn (bash scripts/setup.sh installs "
    "flash-attn 2.8.3 and says what is missing when it cannot), or train unpacked: PACKING=0 with the GPU scripts, "
    "or without --ds.packing_samples and --train.dynamic_batch_enable.")


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def check_packing_args(args) -> None:
    """Packing / token-budget micro-batches with step samples (docs/packing.md).

    OpenRLHF's validation turns packing on with dynamic batches and forces ``flash_attention_2`` with packing. Where
    flash-attn is not installed, packed micro-batches run on the pure-PyTorch variable-length attention
    (:mod:`gaca_openrlhf.models.varlen_attention`, registered in every worker by the CPU backend's setup hook) on
    the CPU backend and in the rehearsal: each sample of a packed row attends to itself only, as with flash-attn's
    varlen kernel. On a GPU node (GPU backend, CUDA available) without flash-attn, packing is refused with
    :data:`PACKING_NEEDS_FLASH_ATTN`: the only fallback there is ``sdpa`` with a dense block-diagonal mask over the
    whole packed row (quadratic in the row: exact, but a silent slow path). On a machine without CUDA, the GPU
    backend's commands still parse (the scripts' dry runs), with ``sdpa`` named.
    """
    if args.ds.packing_samples and "flash_attention" in args.ds.attn_implementation:
        from transformers.utils import is_flash_attn_2_available

        if not is_flash_attn_2_available():
            from gaca_openrlhf.cpu import backend_mode
            from gaca_openrlhf.models.varlen_attention import ATTN_IMPLEMENTATION

            on_cpu = backend_mode(args.run.backend) != "gpu"
            if not on_cpu and _cuda_available():
                raise SystemExit(PACKING_NEEDS_FLASH_ATTN.format(budget=args.train.max_tokens_per_gpu or "the"))
            name = ATTN_IMPLEMENTATION if on_cpu else "sdpa"
            how = "each packed sample attends to itself" if on_cpu else \
                "block-diagonal mask from per-sequence position ids"
            print(f"[gaca] flash-attn is not installed: packed micro-batches use --ds.attn_implementation {name} "
                  f"({how}) instead of {args.ds.attn_implementation}")
            args.ds.attn_implementation = name
    if args.ds.ring_attn_size > 1 and (args.ds.packing_samples or args.train.dynamic_batch_enable):
        raise SystemExit("--ds.ring_attn_size > 1 is not supported with step samples")
    if args.train.dynamic_batch_enable and args.run.updates_per_iteration:
        raise SystemExit("--train.dynamic_batch_enable needs --run.mini_batch_steps (the update windows in step "
                         "samples), not the deprecated --run.updates_per_iteration")


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


def check_step_args(args, shape: RunShape) -> None:
    """Checks for the step trainer (step samples, agent rollouts in the vLLM engines, mini-batches)."""
    if not args.vllm.num_engines:
        raise SystemExit("step-level agent rollouts run inside vLLM engines: set --vllm.num_engines >= 1 "
                         f"(got {args.vllm.num_engines})")
    if args.rollout.n_samples_per_prompt < 2:
        raise SystemExit(f"{args.algo.advantage.estimator!r} normalizes within the n rollouts of a task: "
                         "--rollout.n_samples_per_prompt must be >= 2 (with 1, every episode advantage is 0 and "
                         "training is silently unbaselined)")
    if args.algo.dynamic_filtering_enable and tuple(args.algo.dynamic_filtering_range) != (0.0, 1.0):
        raise SystemExit("--algo.dynamic_filtering_range is not used with step samples: --algo.dynamic_filtering_enable "
                         "drops the task groups whose episode scores do not vary (gaca_openrlhf/trainer/samples.py:"
                         f"filter_uniform_groups); leave the range at its default (got {args.algo.dynamic_filtering_range})")
    dp, micro = shape.dp_size, shape.micro_batch_size
    mini = shape.mini_batch_steps
    if mini < 0 or args.run.updates_per_iteration < 0:
        raise SystemExit("--run.mini_batch_steps / --run.updates_per_iteration must be >= 0")
    if mini:
        if args.run.updates_per_iteration:
            raise SystemExit("give --run.mini_batch_steps or the deprecated --run.updates_per_iteration, not both")
        if mini % (micro * dp):
            raise SystemExit(f"--run.mini_batch_steps {mini} must be a multiple of --train.micro_batch_size x DP "
                             f"ranks = {micro} x {dp} = {micro * dp}")
        args.train.batch_size = mini  # DeepSpeed's start-up batch size; re-set per iteration by the trainer
    else:
        print("[gaca] --run.updates_per_iteration (a fixed update count) is deprecated: use --run.mini_batch_steps "
              "(mini-batch in step samples, verl-agent's semantics)")
        if args.train.batch_size % (micro * dp):
            raise SystemExit(f"--train.batch_size {args.train.batch_size} must be a multiple of "
                             f"--train.micro_batch_size x DP ranks = {micro} x {dp} (DeepSpeed start-up)")


def main(argv=None) -> None:
    args = parse_args(argv)
    from gaca_openrlhf.trainer.launch import train
    from gaca_openrlhf.trainer.startup import StartupError
    from gaca_openrlhf.trainer.watch import RunFailure

    try:
        train(args)
    except StartupError as e:  # an actor or engine that did not come up: its cause, no Ray traceback around it
        print(f"[gaca] error: the run could not start: {e}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    except RunFailure as e:  # an actor that died mid-run: its name and Ray's death cause, no Ray traceback around it
        print(f"[gaca] error: the run stopped: {e}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main(sys.argv[1:])
