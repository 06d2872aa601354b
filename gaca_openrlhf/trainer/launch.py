"""``train(args)``: build the Ray actors and run :class:`~.ppo_trainer.GacaPPOTrainer`.

Mirrors OpenRLHF's ``cli/train_ppo_ray.py:train`` with the project's trainer and policy actor. Where the actors go is
the backend's (:mod:`.backends`: GPU, CPU or the rehearsal of the GPU path on CPU, chosen by ``--run.backend``);
what shares a placement group (OpenRLHF's ``--train.colocate_*`` rules), which models exist and the order they are
started, trained and saved in are the same on every backend and stay here.
"""
from __future__ import annotations

import os
from typing import List, Optional

import ray
from ray.exceptions import RayActorError

from openrlhf.trainer.ray.launcher import ReferenceModelActor, RewardModelActor
from openrlhf.trainer.ray.ppo_critic import CriticModelActor
from openrlhf.utils import get_strategy

from gaca_openrlhf.progress_lines import ProgressLines
from gaca_openrlhf.rollout.config import RolloutConfig

from . import backends
from .backends import Actors, Backend
from .ppo_trainer import GacaPPOTrainerActor
from .progress import progress_key, read_progress
from .startup import DEFAULT_TIMEOUT_S, Deadline, StartupError, Wait, describe_failure, startup_timeout_s, \
    wait_for_startup
from .watch import iteration_progress, wait_for_fit


def worker_env_vars(args) -> dict:
    """Environment variables of every Ray worker: the caller's settings (or defaults) and the run's rollout config
    (:meth:`RolloutConfig.from_args`: ``--env.*``, the prompt/response budgets, the seed), read by the rollout
    actors."""
    return {
        "TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM", "true"),
        "NCCL_DEBUG": os.environ.get("NCCL_DEBUG", "WARN"),
        "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS": os.environ.get("RAY_ENABLE_ZERO_COPY_TORCH_TENSORS", "1"),
        **RolloutConfig.from_args(args).to_env(),
    }


def build_actors(args, backend: Backend) -> Actors:
    """The engines and model groups of the run, placed by ``backend`` under OpenRLHF's colocation rules."""
    pg = colocated_pg = None
    if args.train.colocate_actor_ref or args.train.colocate_all:
        pg = colocated_pg = backend.placement_group(args.actor.num_nodes * args.actor.num_gpus_per_node)
    colocate_vllm = args.train.colocate_all and not args.train.async_enable
    try:
        vllm_engines = backend.vllm_engines(pg if colocate_vllm else None)
    except RayActorError as e:  # an engine the factory already called (OpenRLHF's initial sleep) is dead
        raise StartupError(describe_failure("a vLLM engine", e, backend.engine_failure_hint())) from e
    actor = backend.actor_group(args.actor.num_nodes, args.actor.num_gpus_per_node, backend.policy_actor(), pg)
    ref = backend.actor_group(args.ref.num_nodes, args.ref.num_gpus_per_node, ReferenceModelActor, pg) \
        if args.algo.kl.init_coef > 0 else None
    # critic/reward: their own placement group when colocated together (OpenRLHF's rules)
    pg = pg if args.train.colocate_all else None
    if args.critic.model_name_or_path and args.train.colocate_critic_reward and pg is None:
        pg = backend.placement_group(args.critic.num_nodes * args.critic.num_gpus_per_node)
    critic = backend.actor_group(args.critic.num_nodes, args.critic.num_gpus_per_node, CriticModelActor, pg) \
        if args.critic.model_name_or_path else None
    reward = None
    if not args.reward.remote_url:
        reward = backend.actor_group(args.reward.num_nodes, args.reward.num_gpus_per_node, RewardModelActor, pg)
    return Actors(actor=actor, ref=ref, critic=critic, reward=reward, vllm_engines=vllm_engines,
                  colocated_pg=colocated_pg)


def group_waits(group, refs: list, what: str) -> List[Wait]:
    """One :class:`~.startup.Wait` per rank of an actor group's ``refs`` (one ref per rank, in rank order)."""
    handles = list(getattr(group, "_actor_handlers", None) or [])
    if len(handles) != len(refs):
        handles = [None] * len(refs)
    return [Wait(ref, f"{what} rank {rank}", actor) for rank, (ref, actor) in enumerate(zip(refs, handles))]


def engine_waits(engines: list, hint: str = "") -> List[Wait]:
    """The engines' readiness (a no-op call answered once the engine's ``__init__`` finished), one wait each."""
    n = len(engines)
    return [Wait(engine.get_num_unfinished_requests.remote(), f"vLLM engine {i + 1}/{n}", engine, hint)
            for i, engine in enumerate(engines)]


def watched_actors(actors: Actors) -> List[Wait]:
    """Every model rank and engine of the run, named as at start-up, for :func:`~.watch.wait_for_fit` to watch
    (``ref`` unused)."""
    out: List[Wait] = []
    for group, what in ((actors.actor, "policy"), (actors.ref, "reference model"), (actors.critic, "critic"),
                        (actors.reward, "reward model")):
        handles = list(getattr(group, "_actor_handlers", None) or []) if group is not None else []
        out += [Wait(None, f"{what} rank {rank}", handle) for rank, handle in enumerate(handles)]
    engines = actors.vllm_engines or []
    out += [Wait(None, f"vLLM engine {i + 1}/{len(engines)}", engine) for i, engine in enumerate(engines)]
    return out


def load_models(args, strategy, actors: Actors, backend: Optional[Backend] = None) -> None:
    """Load every model (the critic after the others, as OpenRLHF does) and wait for the engines to be up.

    Everything is awaited with :func:`~.startup.wait_for_startup` under one bound (:func:`~.startup.startup_timeout_s`
    of the backend): the engines together with the models, so an engine that died in its creation task (vLLM out
    of memory) stops the run at once with its error, not after every model loaded -- or never, when a model actor
    does not come up."""
    timeout = startup_timeout_s(backend.startup_timeout_s if backend is not None else DEFAULT_TIMEOUT_S)
    deadline = Deadline(timeout)

    def wait(waits):
        return wait_for_startup(waits, deadline.left(), ray_api=ray, total_s=timeout)

    (max_steps,) = wait([Wait(actors.trainer.get_max_steps.remote(), "the trainer actor", actors.trainer)])
    waits = group_waits(actors.actor, actors.actor.async_init_model_from_pretrained(
        strategy, args.actor.model_name_or_path, max_steps, actors.vllm_engines), "policy")
    if actors.ref is not None:
        waits += group_waits(actors.ref, actors.ref.async_init_model_from_pretrained(
            strategy, args.actor.model_name_or_path), "reference model")
    if actors.reward is not None and args.reward.model_name_or_path:
        waits += group_waits(actors.reward, actors.reward.async_init_model_from_pretrained(
            strategy, args.reward.model_name_or_path), "reward model")
    # engines finish starting here, not inside the first iteration's generation timing
    waits += engine_waits(actors.vllm_engines or [], backend.engine_failure_hint() if backend is not None else "")
    wait(waits)
    if actors.critic is not None:
        wait(group_waits(actors.critic, actors.critic.async_init_model_from_pretrained(
            strategy, args.critic.model_name_or_path, max_steps), "critic"))


def train(args) -> None:
    """Start Ray on the chosen backend, build and load the models, run the trainer's ``fit``, save the models."""
    backend = backends.choose(args)
    backend.prepare()
    if not ray.is_initialized():
        backend.init_ray(worker_env_vars(args))
    strategy = get_strategy(args)
    strategy.print(args)
    actors = build_actors(args, backend)
    actors.trainer = GacaPPOTrainerActor.options(num_cpus=backend.trainer_cpus).remote(
        args.actor.model_name_or_path, strategy, actors.actor, actors.critic, actors.reward, actors.ref,
        actors.vllm_engines, do_sample=True, max_len=args.data.max_len, max_new_tokens=args.rollout.max_new_tokens,
        temperature=args.rollout.temperature, top_p=args.rollout.top_p,
    )
    load_models(args, strategy, actors, backend)
    try:  # not a plain ray.get: a rank or engine that dies mid-run would leave the others waiting for it forever
        key = progress_key(actors.trainer._actor_id.hex())  # the trainer publishes its phases there
        on_mark = None
        if args.run.progress_lines and args.run.max_iterations > 0:  # a parent's progress line (the quickstart's)
            on_mark = iteration_progress(args.run.max_iterations, ProgressLines("rl", every_s=0.0))
        wait_for_fit(Wait(actors.trainer.fit.remote(), "the trainer's fit", actors.trainer), watched_actors(actors),
                     ray_api=ray, progress=lambda: read_progress(key), stall_s=args.run.stall_timeout_s,
                     on_mark=on_mark)
    finally:
        backend.finish(actors)
    ray.get(actors.actor.async_save_model())
    if actors.critic is not None and args.critic.save_value_network:
        ray.get(actors.critic.async_save_model())
