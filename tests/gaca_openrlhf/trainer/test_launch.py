"""``trainer/launch.py`` and ``trainer/backends/``: the rollout config built from the CLI, the choice of backend, each
backend's Ray start-up and ``train``'s wiring of the Ray actors, on the CPU, GPU and rehearsal backends.

The CPU path runs for real in the slow end-to-end tests (tests/gaca_openrlhf/test_e2e*.py); these fast tests check
what ``train`` hands to each piece. The pieces themselves cannot start here in a unit test: the GPU branch needs
CUDA/NCCL placement groups, and real Ray actors, vLLM engines and DeepSpeed take minutes. So Ray, the placement
groups, the actor groups, the vLLM engine factories and the trainer actor are replaced by recorders (``Rec``) that
log every call; the arguments come from the project's real CLI parser. Each test names the one-line bug it catches.
"""
from __future__ import annotations

import json
import types

import pytest
from ray.exceptions import GetTimeoutError, RayActorError

import gaca_openrlhf.cpu.actors as cpu_actors
import gaca_openrlhf.cpu.patches as cpu_patches
import gaca_openrlhf.cpu.rehearsal as rehearsal
import gaca_openrlhf.trainer.backends.base as backend_base
import gaca_openrlhf.trainer.backends.gpu as gpu_backend
import gaca_openrlhf.trainer.cpu_actors as trainer_cpu_actors
import gaca_openrlhf.trainer.launch as launch
import gaca_openrlhf.trainer.startup as startup
from gaca_openrlhf.cli.train_ppo import parse_args
from gaca_openrlhf.trainer import backends
from gaca_openrlhf.trainer.backends.cpu import CPUBackend
from gaca_openrlhf.trainer.backends.gpu import GPUBackend
from gaca_openrlhf.trainer.backends.rehearsal import RehearsalBackend
from gaca_openrlhf.trainer.startup import StartupError
from gaca_openrlhf.cpu import SETUP_HOOK
from gaca_openrlhf.rollout.config import ENV_VAR, RolloutConfig

BASE = ["--actor.model_name_or_path", "/models/m", "--actor.num_gpus_per_node", "2", "--vllm.num_engines", "2",
        "--rollout.batch_size", "4", "--rollout.n_samples_per_prompt", "2", "--algo.kl.init_coef", "0",
        "--algo.advantage.estimator", "gaca", "--env.name", "toy", "--train.batch_size", "4"]


def _args(*extra):
    return parse_args(BASE + list(extra))


# ------------------------------------------------------------------------------- the rollout config shipped


def shipped(a) -> RolloutConfig:
    """The rollout config the Ray workers of run ``a`` read (``GACA_ROLLOUT_CONFIG``, launch.worker_env_vars)."""
    return RolloutConfig(**json.loads(launch.worker_env_vars(a)[ENV_VAR]))


def test_rollout_config_from_the_cli_options():
    """Catches: any --env.* option not passed on to the workers (history_k, max_steps, timeout, invalid_action,
    validity, kill drill, kwargs JSON), or the prompt limit/response budget swapped."""
    a = _args("--env.kwargs", '{"size": 3, "name": "x"}', "--env.history_k", "5", "--env.max_steps", "7",
              "--env.prompt_max_len", "300", "--rollout.max_new_tokens", "40", "--env.timeout_s", "9.5",
              "--env.invalid_action", "noop", "--env.kill_worker_at_step", "3", "--env.validity", "admissible")
    a.env.name = "webshop"  # not RolloutConfig's default ("toy")
    cfg = shipped(a)
    assert cfg == RolloutConfig.from_args(a)  # one builder of the config: the CLI's own
    assert (cfg.name, cfg.kwargs, cfg.history_k, cfg.max_steps) == ("webshop", {"size": 3, "name": "x"}, 5, 7)
    assert (cfg.prompt_max_len, cfg.max_new_tokens, cfg.timeout_s) == (300, 40, 9.5)
    assert (cfg.invalid_action, cfg.kill_worker_at_step, cfg.validity) == ("noop", 3, "admissible")


def test_rollout_config_defaults():
    """Catches: the 256-token default response budget changed, the prompt limit not derived from data.max_len minus
    the budget (or its floor of 1 lost), env kwargs not {} without --env.kwargs."""
    cfg = shipped(_args())  # --rollout.max_new_tokens unset, data.max_len 2048
    assert cfg.max_new_tokens == 256 and cfg.prompt_max_len == 2048 - 256 and cfg.kwargs == {}
    assert (cfg.history_k, cfg.max_steps, cfg.timeout_s, cfg.invalid_action, cfg.kill_worker_at_step) == \
        (2, 0, 120.0, "execute", -1)
    assert cfg.validity == "format"  # verl-agent's rule unless the ablation is asked for
    cfg = shipped(_args("--data.max_len", "100", "--rollout.max_new_tokens", "60"))
    assert cfg.prompt_max_len == 40 and cfg.max_new_tokens == 60
    cfg = shipped(_args("--data.max_len", "50", "--rollout.max_new_tokens", "60"))
    assert cfg.prompt_max_len == 1  # never 0 or negative


# ------------------------------------------------------------------------------------------------- recorders


class Rec:
    """Records calls in ``log`` (shared by every recorder of a test) as (name, args, kwargs)."""

    def __init__(self, log, name):
        self.log, self.name = log, name

    def __call__(self, *args, **kwargs):
        self.log.append((self.name, args, kwargs))
        return f"<{self.name}>"


class FakeRay:
    """``fail``: (ref, exception) pairs whose ``get`` raises; ``never``: refs ``wait`` never reports ready."""

    def __init__(self, log, initialized=False):
        self.log, self.initialized = log, initialized
        self.fail, self.never = [], []

    def is_initialized(self):
        return self.initialized

    def init(self, **kwargs):
        self.log.append(("ray.init", (), kwargs))

    def get(self, ref, timeout=None):
        self.log.append(("ray.get", (ref,), {} if timeout is None else {"timeout": timeout}))
        for failing, err in self.fail:
            if failing == ref:
                raise err
        if isinstance(ref, list):
            return [r for r in ref]
        return 7 if ref == "<max_steps>" else ref

    def wait(self, refs, num_returns=1, timeout=None):
        """Every ref but the ``never`` ones is ready (start-up waits: launch.load_models, startup.wait_for_startup)."""
        self.log.append(("ray.wait", (list(refs),), {"num_returns": num_returns}))
        ready = [r for r in refs if not any(r == n for n in self.never)]
        return ready, [r for r in refs if r not in ready]

    def cluster_resources(self):
        return {"GPU": 2.0, "CPU": 16.0}

    def available_resources(self):
        return {"GPU": 0.0, "CPU": 12.0}

    def remote(self, **kwargs):
        return lambda cls: ("remote", kwargs, cls)


class FakePG:
    def __init__(self, log, bundles, strategy):
        self.bundles, self.strategy = bundles, strategy
        log.append(("placement_group", (bundles,), {"strategy": strategy}))

    def ready(self):
        return ("ready", self)


class FakeGroup:
    """An actor group: records how it was built and its init/save calls."""

    def __init__(self, log, nodes, per_node, cls, **kwargs):
        self.log, self.cls = log, cls
        self._actor_handlers = [f"handler-of-{cls}"]
        log.append(("group", (nodes, per_node, cls), kwargs))

    def async_init_model_from_pretrained(self, *args):
        self.log.append(("init", (self.cls,) + args, {}))
        return [("init-ref", self.cls)]

    def async_save_model(self):
        self.log.append(("save", (self.cls,), {}))
        return ("save-ref", self.cls)


class FakeEngine:
    def __init__(self, log, i):
        self.log, self.i = log, i
        self.get_num_unfinished_requests = types.SimpleNamespace(remote=lambda: f"<engine{i} ready>")


class FakeTrainer:
    def __init__(self, log, fit_error=None):
        self.log, self.fit_error = log, fit_error
        self.get_max_steps = types.SimpleNamespace(remote=lambda: "<max_steps>")
        self.fit = types.SimpleNamespace(remote=self._fit)
        self._actor_id = types.SimpleNamespace(hex=lambda: "trainer-actor-id")

    def _fit(self):
        self.log.append(("fit", (), {}))
        if self.fit_error:
            raise self.fit_error
        return "<fit>"


class FakeTrainerActor:
    def __init__(self, log, trainer):
        self.log, self.trainer = log, trainer

    def options(self, **kwargs):
        self.log.append(("trainer.options", (), kwargs))
        return types.SimpleNamespace(remote=self._remote)

    def _remote(self, *args, **kwargs):
        self.log.append(("trainer", args, kwargs))
        return self.trainer


@pytest.fixture
def rig(monkeypatch):
    """Every piece ``train`` starts, replaced by a recorder writing to one call log."""
    log = []
    r = types.SimpleNamespace(log=log, ray=FakeRay(log), trainer=FakeTrainer(log))
    engines = [FakeEngine(log, 0), FakeEngine(log, 1)]

    def engine_factory(name):
        def make(*args, **kwargs):
            log.append((name, args, kwargs))
            return engines
        return make

    def group_cls(name):
        def make(nodes, per_node, cls, **kwargs):
            return FakeGroup(log, nodes, per_node, cls, group=name, **kwargs)
        return make

    r.engines = engines
    for module in (launch, backend_base, gpu_backend):
        monkeypatch.setattr(module, "ray", r.ray)
    monkeypatch.setattr(gpu_backend, "placement_group", lambda bundles, strategy: FakePG(log, bundles, strategy))
    monkeypatch.setattr(launch, "get_strategy", lambda args: types.SimpleNamespace(
        print=lambda a: log.append(("strategy.print", (a,), {})), tag="strategy", args=args))
    monkeypatch.setattr(gpu_backend, "RayActorGroup", group_cls("RayActorGroup"))
    monkeypatch.setattr(launch, "ReferenceModelActor", "Ref")
    monkeypatch.setattr(launch, "RewardModelActor", "Reward")
    monkeypatch.setattr(launch, "CriticModelActor", "Critic")
    monkeypatch.setattr(gpu_backend, "GacaPolicyModelActor", "Policy")
    monkeypatch.setattr(launch, "GacaPPOTrainerActor", FakeTrainerActor(log, r.trainer))
    monkeypatch.setattr(gpu_backend, "create_vllm_engines", engine_factory("create_vllm_engines"))
    monkeypatch.setattr(cpu_actors, "create_cpu_vllm_engines", engine_factory("create_cpu_vllm_engines"))
    monkeypatch.setattr(cpu_actors, "CPURayActorGroup", group_cls("CPURayActorGroup"))
    monkeypatch.setattr(trainer_cpu_actors, "CPUPolicyModelActor", "CPUPolicy")
    monkeypatch.setattr(cpu_patches, "apply", Rec(log, "patches.apply"))
    monkeypatch.setattr(rehearsal, "check_args", Rec(log, "rehearsal.check_args"))
    monkeypatch.setattr(rehearsal, "init_ray", Rec(log, "rehearsal.init_ray"))
    monkeypatch.setattr(rehearsal, "create_vllm_engines", engine_factory("rehearsal.create_vllm_engines"))
    monkeypatch.setattr(trainer_cpu_actors, "RehearsalPolicyModelActor", "RehearsalPolicy")
    monkeypatch.setattr(rehearsal, "write_report", Rec(log, "rehearsal.write_report"))
    for var in ("TOKENIZERS_PARALLELISM", "NCCL_DEBUG", "RAY_ENABLE_ZERO_COPY_TORCH_TENSORS", "GACA_BACKEND",
                "GACA_REHEARSAL_DTYPE"):
        monkeypatch.delenv(var, raising=False)
    return r


def calls(log, name):
    return [(a, k) for n, a, k in log if n == name]


def names(log):
    return [n for n, _, _ in log]


# ------------------------------------------------------------------------------------------- backend choice


@pytest.mark.parametrize("requested, env, expected", [
    ("gpu", None, GPUBackend), ("cpu", None, CPUBackend), ("rehearsal", None, RehearsalBackend),
    ("auto", "cpu", CPUBackend), ("auto", "rehearsal", RehearsalBackend), ("auto", "gpu", GPUBackend)])
def test_each_backend_is_chosen_by_its_name(monkeypatch, requested, env, expected):
    """Catches: a backend chosen for another's name (the rehearsal, a GPU backend underneath, for ``cpu`` or
    ``gpu``; the GPU one for ``rehearsal``), or ``auto`` not reading GACA_BACKEND. The exact class, not isinstance:
    the rehearsal backend is a GPU backend."""
    monkeypatch.delenv("GACA_BACKEND", raising=False)
    if env:
        monkeypatch.setenv("GACA_BACKEND", env)
    a = _args("--run.backend", requested)
    chosen = backends.choose(a)
    assert type(chosen) is expected and chosen.args is a and chosen.name == {
        GPUBackend: "gpu", CPUBackend: "cpu", RehearsalBackend: "rehearsal"}[expected]


def test_backend_interface():
    """Catches: an operation ``train`` needs left optional (a backend that forgets it must fail to build), or a
    backend's trainer CPUs / duplicated ranks changed."""
    assert backends.Backend.__abstractmethods__ == {"vllm_engines", "policy_actor", "actor_group"}
    a = _args()
    a.ds.ring_attn_size, a.ds.tensor_parallel_size = 2, 3
    assert [(cls(a).trainer_cpus, cls(a).duplicate_actors) for cls in (GPUBackend, CPUBackend, RehearsalBackend)] \
        == [(1, 6), (0, 6), (1, 6)]
    assert CPUBackend(a).placement_group(4) is None  # no placement groups on CPU


# ------------------------------------------------------------------------------------------------- Ray start


def test_init_ray_env_vars_gpu(rig, monkeypatch):
    """Catches: a default of the workers' env vars changed (tokenizers parallelism, NCCL log level, zero-copy
    tensors), the rollout config not shipped to the workers, the dashboard switched on, or the CPU runtime env
    (CUDA shims) used on GPU."""
    a = _args("--env.history_k", "4")
    GPUBackend(a).init_ray(launch.worker_env_vars(a))
    ((_, kw),) = calls(rig.log, "ray.init")
    assert kw["include_dashboard"] is False
    env = kw["runtime_env"]["env_vars"]
    assert set(kw["runtime_env"]) == {"env_vars"}
    assert env["TOKENIZERS_PARALLELISM"] == "true" and env["NCCL_DEBUG"] == "WARN"
    assert env["RAY_ENABLE_ZERO_COPY_TORCH_TENSORS"] == "1"
    assert json.loads(env[ENV_VAR])["history_k"] == 4 and json.loads(env[ENV_VAR])["name"] == "toy"


def test_init_ray_keeps_the_callers_env_and_cpu_runtime_env(rig, monkeypatch):
    """Catches: the caller's TOKENIZERS_PARALLELISM / NCCL_DEBUG / zero-copy setting ignored, or the CPU job started
    without the CUDA shims' setup hook and DS_ACCELERATOR=cpu."""
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("RAY_ENABLE_ZERO_COPY_TORCH_TENSORS", "0")
    a = _args()
    CPUBackend(a).init_ray(launch.worker_env_vars(a))
    ((_, kw),) = calls(rig.log, "ray.init")
    assert kw["include_dashboard"] is False
    rt = kw["runtime_env"]
    assert rt["worker_process_setup_hook"] == SETUP_HOOK and rt["env_vars"]["DS_ACCELERATOR"] == "cpu"
    assert (rt["env_vars"]["TOKENIZERS_PARALLELISM"], rt["env_vars"]["NCCL_DEBUG"],
            rt["env_vars"]["RAY_ENABLE_ZERO_COPY_TORCH_TENSORS"]) == ("false", "INFO", "0")
    assert ENV_VAR in rt["env_vars"]


def test_init_ray_rehearsal(rig, monkeypatch):
    """Catches: the rehearsal's Ray start (logical GPUs) skipped or given the GPU runtime env, ray.init called as
    well in a rehearsal, the engines' dtype not the training one, or a GACA_REHEARSAL_DTYPE of the caller ignored."""
    a = _args()
    RehearsalBackend(a).init_ray(launch.worker_env_vars(a))
    ((args, kw),) = calls(rig.log, "rehearsal.init_ray")
    assert args[0] is a and args[1]["worker_process_setup_hook"] == SETUP_HOOK and ENV_VAR in args[1]["env_vars"]
    # the engines sample in the training dtype (OpenRLHF's create_vllm_engines passes bfloat16 whatever it is)
    assert args[1]["env_vars"]["GACA_REHEARSAL_DTYPE"] == {"bf16": "bfloat16", "fp32": "float32"}[a.ds.param_dtype]
    assert not calls(rig.log, "ray.init")
    monkeypatch.setenv("GACA_REHEARSAL_DTYPE", "float16")
    RehearsalBackend(a).init_ray(launch.worker_env_vars(a))
    assert calls(rig.log, "rehearsal.init_ray")[1][0][1]["env_vars"]["GACA_REHEARSAL_DTYPE"] == "float16"


@pytest.mark.parametrize("backend", ["gpu", "cpu", "rehearsal"])
def test_train_leaves_a_running_ray_alone(rig, backend):
    """Catches: a second ray.init (or the rehearsal's Ray start) when Ray is already up."""
    rig.ray.initialized = True
    a = _args()
    a.run.backend = backend  # set after parsing, as in _gpu: the parser checks the dtype against the machine
    launch.train(a)
    assert not calls(rig.log, "ray.init") and not calls(rig.log, "rehearsal.init_ray")
    assert "fit" in names(rig.log)


# ----------------------------------------------------------------------------------------------------- train


def _gpu(*extra):
    a = _args(*extra)
    a.run.backend = "gpu"
    return a


def test_train_gpu_default_wiring(rig):
    """Catches, on the GPU path without colocation: a create_vllm_engines argument dropped or moved (the engines'
    TP size, seed, determinism, prefix caching, eager mode, max_len, no placement group, memory share, sleep, the
    log-prob mode GACA reads, the agent function), the policy actor not given a full GPU, actors not duplicated
    for ring attention x TP, the trainer's sampling settings, the max_steps handed to the policy's init, the
    engines not awaited before fit, or the final save skipped."""
    a = _gpu("--vllm.tensor_parallel_size", "1", "--vllm.enable_prefix_caching", "--vllm.enforce_eager",
             "--train.seed", "5", "--vllm.gpu_memory_utilization", "0.6", "--rollout.temperature", "0.7",
             "--rollout.top_p", "0.9", "--rollout.max_new_tokens", "33", "--data.max_len", "500")
    a.train.full_determinism_enable, a.vllm.enable_sleep = True, True
    a.ds.ring_attn_size, a.ds.tensor_parallel_size = 2, 3
    launch.train(a)
    log = rig.log
    assert not calls(log, "patches.apply") and not calls(log, "rehearsal.check_args")
    assert len(calls(log, "ray.init")) == 1 and not calls(log, "placement_group")
    assert calls(log, "strategy.print") == [((a,), {})]
    assert calls(log, "trainer")[0][0][1].args is a  # the strategy is built from the run's arguments
    ((eargs, ekw),) = calls(log, "create_vllm_engines")
    assert eargs == (2, 1, "/models/m", 5, True, True, True, 500, None, 0.6, True, "processed_logprobs")
    assert ekw == {"agent_func_path": a.train.agent_func_path}
    groups = calls(log, "group")
    assert len(groups) == 1  # the policy only: no ref (KL 0), no critic, reward is remote ("agent")
    (gargs, gkw), = groups
    assert gargs == (1, 2, ("remote", {"num_gpus": 1}, "Policy"))
    assert gkw == {"group": "RayActorGroup", "pg": None, "num_gpus_per_actor": 1, "duplicate_actors": 6}
    assert calls(log, "trainer.options") == [((), {"num_cpus": 1})]
    ((targs, tkw),) = calls(log, "trainer")
    assert targs[0] == "/models/m" and targs[1].tag == "strategy" and targs[3:6] == (None, None, None)
    assert isinstance(targs[2], FakeGroup) and targs[2].cls == ("remote", {"num_gpus": 1}, "Policy")
    assert targs[6] is rig.engines
    assert tkw == {"do_sample": True, "max_len": 500, "max_new_tokens": 33, "temperature": 0.7, "top_p": 0.9}
    inits = calls(log, "init")
    assert len(inits) == 1 and inits[0][0][2:] == ("/models/m", 7, rig.engines)
    assert inits[0][0][0] == ("remote", {"num_gpus": 1}, "Policy") and inits[0][0][1].tag == "strategy"
    n = names(log)
    i_fit = n.index("fit")
    gets = [g[0][0] for g in calls(log, "ray.get")]
    # the engines' readiness is awaited together with the policy's init (one bounded start-up wait) ...
    init_ref = ("init-ref", ("remote", {"num_gpus": 1}, "Policy"))
    waits = [(i, e[1][0]) for i, e in enumerate(log) if e[0] == "ray.wait"]
    assert [w for _, w in waits[:2]] == [["<max_steps>"], [init_ref, "<engine0 ready>", "<engine1 ready>"]]
    assert waits[1][0] < i_fit  # ... before fit, which is then awaited by the watch (trainer/watch.py)
    assert [w for _, w in waits[2:]] == [["<fit>"]] and waits[2][0] > i_fit
    assert all(ref in gets for ref in ("<engine0 ready>", "<engine1 ready>", init_ref))  # and their values read
    assert [((("remote", {"num_gpus": 1}, "Policy"),), {})] == calls(log, "save") and n.index("save") > i_fit
    assert ("save-ref", ("remote", {"num_gpus": 1}, "Policy")) in gets  # the save is awaited


def test_train_gpu_colocate_all_with_ref_critic_reward(rig):
    """Catches, with --train.colocate_all: the shared placement group's size/strategy, it not awaited, the engines
    not placed in it, the 0.2-GPU actors, the reference model missing with KL > 0 or left out of the group, the
    critic/reward not sharing it, the reward model's init skipped, the critic initialised without max_steps or
    before the others finish, and the value network saved when asked."""
    a = _gpu("--train.colocate_all", "--algo.kl.init_coef", "0.01", "--algo.kl.use_loss", "--ref.num_gpus_per_node",
             "2", "--vllm.num_engines", "2")
    a.actor.num_nodes = a.ref.num_nodes = 2
    a.critic.model_name_or_path, a.critic.num_nodes, a.critic.num_gpus_per_node = "/models/c", 1, 3
    a.critic.save_value_network = True
    a.reward.remote_url, a.reward.model_name_or_path, a.reward.num_nodes, a.reward.num_gpus_per_node = \
        None, "/models/r", 1, 4
    a.ds.param_dtype = "fp16"
    launch.train(a)
    log = rig.log
    ((pgargs, pgkw),) = calls(log, "placement_group")
    assert pgargs == ([{"GPU": 1, "CPU": 1}] * 4,) and pgkw == {"strategy": "PACK"}
    pg = calls(log, "create_vllm_engines")[0][0][8]
    assert isinstance(pg, FakePG) and ("ready", pg) in [g[0][0] for g in calls(log, "ray.get")]
    groups = {g[0][2] if isinstance(g[0][2], str) else "Policy": g for g in calls(log, "group")}
    assert groups["Policy"][0][:2] == (2, 2) and groups["Policy"][1]["pg"] is pg
    assert groups["Policy"][1]["num_gpus_per_actor"] == 0.2
    assert groups["Ref"] == ((2, 2, "Ref"), {"group": "RayActorGroup", "pg": pg, "num_gpus_per_actor": 0.2,
                                               "duplicate_actors": 1})
    assert groups["Critic"][0] == (1, 3, "Critic") and groups["Critic"][1]["pg"] is pg
    assert groups["Reward"][0] == (1, 4, "Reward") and groups["Reward"][1]["pg"] is pg
    ((targs, _),) = calls(log, "trainer")  # the trainer gets the actor, critic, reward and reference groups
    assert [t.cls if isinstance(t.cls, str) else "Policy" for t in targs[2:6]] == ["Policy", "Critic", "Reward", "Ref"]
    inits = {i[0][0] if isinstance(i[0][0], str) else "Policy": i[0][1:] for i in calls(log, "init")}
    assert all(v[0].tag == "strategy" for v in inits.values())  # every model is loaded with the strategy
    assert inits["Ref"][1:] == ("/models/m",) and inits["Reward"][1:] == ("/models/r",)
    assert inits["Critic"][1:] == ("/models/c", 7) and inits["Policy"][1:] == ("/models/m", 7, rig.engines)
    n = names(log)
    waits = [(i, e[1][0]) for i, e in enumerate(log) if e[0] == "ray.wait"]
    first_models_wait, models = [(i, w) for i, w in waits if any(r[0] == "init-ref" for r in w
                                                                 if isinstance(r, tuple))][0]
    inits_awaited = [r for r in models if isinstance(r, tuple) and r[0] == "init-ref"]
    assert {r[1] if isinstance(r[1], str) else "Policy" for r in inits_awaited} == {"Policy", "Ref", "Reward"}
    assert "<engine0 ready>" in models and "<engine1 ready>" in models  # the engines, in the same wait
    critic_init = [i for i, e in enumerate(log) if e[0] == "init" and e[1][0] == "Critic"][0]
    assert critic_init > first_models_wait  # the critic after the others finished loading ...
    assert [w for i, w in waits if i > critic_init] == [[("init-ref", "Critic")], ["<fit>"]]  # ... and awaited too
    saves = [s[0][0] for s in calls(log, "save")]
    assert "Critic" in saves and len(saves) == 2 and n.index("save") > n.index("fit")


def test_train_gpu_colocated_critic_reward_get_their_own_group(rig):
    """Catches: colocated critic+reward not given their own placement group (sized critic nodes x GPUs), the
    actor's group reused for them without colocate_all, the reward model initialised without a reward model path,
    or the value network saved when not asked."""
    a = _gpu("--train.colocate_actor_ref", "--train.colocate_critic_reward")
    a.critic.model_name_or_path, a.critic.num_nodes, a.critic.num_gpus_per_node = "/models/c", 2, 3
    a.reward.remote_url = None
    launch.train(a)
    log = rig.log
    pgs = calls(log, "placement_group")
    assert [p[0][0] for p in pgs] == [[{"GPU": 1, "CPU": 1}] * 2, [{"GPU": 1, "CPU": 1}] * 6]
    gets = [g[0][0] for g in calls(log, "ray.get")]
    assert sum(1 for g in gets if isinstance(g, tuple) and g[0] == "ready") == 2
    groups = calls(log, "group")
    policy_pg = groups[0][1]["pg"]
    assert calls(log, "create_vllm_engines")[0][0][8] is None  # colocate_actor_ref does not place the engines
    critic = [g for g in groups if g[0][2] == "Critic"][0]
    reward = [g for g in groups if g[0][2] == "Reward"][0]
    assert critic[1]["pg"] is reward[1]["pg"] and critic[1]["pg"] is not policy_pg
    assert critic[1]["pg"].bundles == [{"GPU": 1, "CPU": 1}] * 6 and critic[1]["num_gpus_per_actor"] == 0.2
    assert [p[1] for p in pgs] == [{"strategy": "PACK"}, {"strategy": "PACK"}]
    assert "Reward" not in [i[0][0] for i in calls(log, "init")]  # no reward model path: nothing to load
    assert [s[0][0] for s in calls(log, "save")] == [("remote", {"num_gpus": 1}, "Policy")]


def test_train_gpu_no_critic_group_without_colocation(rig):
    """Catches: a placement group made for a critic that is not colocated with the reward model."""
    a = _gpu()
    a.critic.model_name_or_path, a.critic.num_nodes, a.critic.num_gpus_per_node = "/models/c", 1, 1
    launch.train(a)
    assert not calls(rig.log, "placement_group")
    critic = [g for g in calls(rig.log, "group") if g[0][2] == "Critic"][0]
    assert critic[1]["pg"] is None and critic[1]["num_gpus_per_actor"] == 1


def test_train_cpu_wiring(rig):
    """Catches, on the CPU path: the CPU patches not applied, the CUDA-shim runtime env not used, an argument of
    create_cpu_vllm_engines dropped or changed (one engine when --vllm.num_engines is 0, seed, max_len, memory share,
    the dtype from --ds.param_dtype, agent function, prefix caching, determinism), the CPU actor group / policy
    class not used, actors not duplicated, or the trainer given a CPU slot (it starves the env workers)."""
    a = _args("--run.backend", "cpu", "--train.seed", "3", "--vllm.gpu_memory_utilization", "0.3",
              "--vllm.enable_prefix_caching", "--data.max_len", "600", "--ds.param_dtype", "bf16")
    a.vllm.num_engines = 0
    a.train.full_determinism_enable = True
    a.ds.ring_attn_size = 2
    launch.train(a)
    log = rig.log
    assert names(log)[0] == "patches.apply"
    ((_, kw),) = calls(log, "ray.init")
    assert kw["runtime_env"]["worker_process_setup_hook"] == SETUP_HOOK
    ((eargs, ekw),) = calls(log, "create_cpu_vllm_engines")
    assert eargs == (1, "/models/m", 3, 600)
    assert ekw == {"gpu_memory_utilization": 0.3, "dtype": "bfloat16", "agent_func_path": a.train.agent_func_path,
                   "enable_prefix_caching": True, "full_determinism": True}
    assert not calls(log, "create_vllm_engines") and not calls(log, "placement_group")
    ((gargs, gkw),) = calls(log, "group")
    assert gargs == (1, 2, "CPUPolicy") and gkw == {"group": "CPURayActorGroup", "duplicate_actors": 2}
    assert calls(log, "trainer.options") == [((), {"num_cpus": 0})]
    assert not calls(log, "rehearsal.write_report")
    a2 = _args("--run.backend", "cpu", "--vllm.num_engines", "3")
    a2.ds.param_dtype = "fp16"
    rig.log.clear()
    launch.train(a2)
    ((eargs, ekw),) = calls(log, "create_cpu_vllm_engines")
    assert eargs[0] == 3 and ekw["dtype"] == "float16"
    rig.log.clear()
    launch.train(_args("--run.backend", "cpu", "--ds.param_dtype", "fp32"))
    ((_, ekw),) = calls(log, "create_cpu_vllm_engines")
    assert ekw["dtype"] == "float32"  # the engines sample from the dtype the actor trains in


def test_train_cpu_ref_model_with_kl(rig):
    """Catches: the reference model made without KL (or not with it), or on the CPU its group not the CPU one."""
    a = _args("--run.backend", "cpu", "--algo.kl.init_coef", "0.001", "--algo.kl.use_loss")
    launch.train(a)
    groups = calls(rig.log, "group")
    assert [g[0][2] for g in groups] == ["CPUPolicy", "Ref"]
    assert groups[1][1] == {"group": "CPURayActorGroup", "duplicate_actors": 1}
    assert groups[1][0][:2] == (a.ref.num_nodes, a.ref.num_gpus_per_node)


def test_train_cpu_ignores_colocation(rig):
    """Catches: a placement group made on the CPU backend (its actors are scheduled by CPUs alone) when the GPU
    colocation flags are given, or the engines / groups handed one."""
    a = _args("--run.backend", "cpu", "--train.colocate_all", "--train.colocate_critic_reward")
    a.critic.model_name_or_path, a.reward.remote_url = "/models/c", None
    launch.train(a)
    assert not calls(rig.log, "placement_group") and calls(rig.log, "create_cpu_vllm_engines")
    assert [g[0][2] for g in calls(rig.log, "group")] == ["CPUPolicy", "Critic", "Reward"]
    assert all("pg" not in g[1] for g in calls(rig.log, "group"))
    assert not calls(rig.log, "rehearsal.write_report")


def test_train_rehearsal_wiring_and_report(rig, capsys):
    """Catches, in a rehearsal: its argument check or Ray start skipped, the CPU patches not applied, OpenRLHF's
    engine factory used instead of the rehearsal's (blob sync), the rehearsal policy not used, or the report not
    written with the output dir, engines, colocated placement group and policy actors."""
    a = _args("--run.backend", "rehearsal", "--train.colocate_all", "--ckpt.output_dir", "/out")
    a.actor.num_gpus_per_node, a.vllm.num_engines = 2, 2
    launch.train(a)
    log = rig.log
    n = names(log)
    assert n[:3] == ["patches.apply", "rehearsal.check_args", "rehearsal.init_ray"]
    assert calls(log, "rehearsal.check_args") == [((a,), {})]
    assert not calls(log, "ray.init") and not calls(log, "create_vllm_engines")
    ((eargs, _),) = calls(log, "rehearsal.create_vllm_engines")
    pg = eargs[8]
    assert isinstance(pg, FakePG)
    group = calls(log, "group")[0]
    assert group[0][2] == "RehearsalPolicy" and group[1]["group"] == "RayActorGroup"
    ((rargs, rkw),) = calls(log, "rehearsal.write_report")
    assert rargs == ("/out", rig.engines, pg, ["handler-of-RehearsalPolicy"])
    assert set(rkw) == {"ref_actors", "trainer"} and rkw["trainer"] is not None  # their Ray nodes in the report
    assert n.index("rehearsal.write_report") > n.index("fit")
    assert n.index("save") > n.index("rehearsal.write_report")


def test_train_rehearsal_report_after_a_failed_fit(rig, monkeypatch, capsys):
    """Catches: the rehearsal report skipped when training fails, a failing report masking the training error, or
    its failure message lost."""
    rig.trainer.fit_error = RuntimeError("fit broke")
    a = _args("--run.backend", "rehearsal")
    with pytest.raises(RuntimeError, match="fit broke"):
        launch.train(a)
    assert len(calls(rig.log, "rehearsal.write_report")) == 1 and not calls(rig.log, "save")

    def bad_report(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(rehearsal, "write_report", bad_report)
    rig.trainer.fit_error = None
    rig.log.clear()
    launch.train(a)  # the report's failure is printed, training still saves
    assert "[rehearsal] could not write rehearsal.json: OSError('disk full')" in capsys.readouterr().out
    assert len(calls(rig.log, "save")) == 1


# ------------------------------------------------------------------------------------------- start-up failures


def engine_died(message: str) -> RayActorError:
    """What a method call on an engine whose ``__init__`` raised gives (Ray's text around the engine's error)."""
    return RayActorError(actor_id=None, error_msg=(
        "The actor died because of an error raised in its creation task, ray::RolloutRayActor.__init__()\n"
        "  File \"vllm_engine.py\", line 64, in __init__\n"
        f"RuntimeError: {message}"))


def test_a_dead_engine_stops_train_even_while_a_model_never_loads(rig):
    """Catches the hang of a quickstart run (vLLM refused to start for lack of memory, the policy actor never came
    up): the engines awaited only after the models loaded, i.e. never; or the error not naming the engine, its own
    error and the --vllm.gpu_memory_utilization hint; or training started anyway."""
    a = _gpu("--vllm.gpu_memory_utilization", "0.6")
    rig.ray.never = [("init-ref", ("remote", {"num_gpus": 1}, "Policy"))]
    rig.ray.fail = [("<engine1 ready>", engine_died("Engine core initialization failed. See root cause above."))]
    with pytest.raises(StartupError) as info:
        launch.train(a)
    msg = str(info.value)
    assert msg.startswith("vLLM engine 2/2 failed to start: RuntimeError: Engine core initialization failed.")
    assert "lower --vllm.gpu_memory_utilization" in msg and "= 0.6 of the GPU's memory" in msg
    assert isinstance(info.value.__cause__, RayActorError)
    assert "fit" not in names(rig.log) and not calls(rig.log, "save")


def test_cpu_engine_hint_speaks_of_ram_unless_the_engine_said_it(rig):
    """Catches: the CPU backend's hint calling the KV-cache share a GPU's memory, or the advice repeated when the
    CPU engine's own error (gaca_openrlhf/cpu/actors.py) already gives it."""
    a = _args("--run.backend", "cpu", "--vllm.gpu_memory_utilization", "0.99")
    rig.ray.fail = [("<engine0 ready>", engine_died("boom"))]
    with pytest.raises(StartupError, match=r"(?s)vLLM engine 1/2 failed to start: RuntimeError: boom\n.*"
                                           r"0\.99 of the machine's RAM"):
        launch.train(a)
    rig.ray.fail = [("<engine0 ready>", engine_died(
        "vLLM engine could not start: not enough free memory ... Lower --vllm.gpu_memory_utilization or free memory"))]
    with pytest.raises(StartupError) as info:
        launch.train(a)
    assert "machine's RAM" not in str(info.value) and str(info.value).count("--vllm.gpu_memory_utilization") == 1


def test_a_dead_trainer_or_critic_is_named(rig):
    """Catches: the trainer actor's or the critic's start-up failure unbounded / not named."""
    rig.ray.fail = [("<max_steps>", engine_died("trainer broke"))]
    with pytest.raises(StartupError, match="the trainer actor failed to start: RuntimeError: trainer broke"):
        launch.train(_gpu())
    rig.ray.fail = [(("init-ref", "Critic"), engine_died("no such model"))]
    a = _gpu()
    a.critic.model_name_or_path = "/models/c"
    with pytest.raises(StartupError, match="critic rank 0 failed to start: RuntimeError: no such model"):
        launch.train(a)


def test_engine_factory_failure_is_a_startup_error(rig, monkeypatch):
    """Catches: an engine that died before the factory returned (OpenRLHF's initial sleep call) raised as a bare
    Ray error without the memory hint."""
    def dying_factory(*args, **kwargs):
        raise engine_died("Engine core initialization failed.")

    monkeypatch.setattr(gpu_backend, "create_vllm_engines", dying_factory)
    with pytest.raises(StartupError, match=r"(?s)a vLLM engine failed to start: .*--vllm.gpu_memory_utilization"):
        launch.train(_gpu())


def test_placement_group_wait_is_bounded(rig, monkeypatch):
    """Catches: ``ray.get(pg.ready())`` without a timeout (a placement group the cluster cannot hold waits forever),
    or its error not saying what was asked and what the cluster has."""
    monkeypatch.setenv(startup.TIMEOUT_ENV, "30")
    a = _gpu("--train.colocate_all", "--vllm.num_engines", "2")
    monkeypatch.setattr(FakePG, "ready", lambda self: "<pg ready>")
    rig.ray.fail = [("<pg ready>", GetTimeoutError("timed out"))]
    with pytest.raises(StartupError, match=r"placement group of 2 \{GPU: 1, CPU: 1\} bundles was not ready within "
                                           r"30 s: the Ray cluster has 2 GPU, 16 CPU in all, 0 GPU, 12 CPU free"):
        launch.train(a)
    assert ("ray.get", ("<pg ready>",), {"timeout": 30.0}) in rig.log


def test_cli_reports_a_startup_error_without_a_traceback(monkeypatch, capsys):
    """Catches: a start-up failure leaving train_ppo with a Ray traceback and no one-line cause, or exit status 0
    (the quickstart's phase must fail so that --resume retries it)."""
    from gaca_openrlhf.cli import train_ppo

    def failing_train(args):
        raise StartupError("vLLM engine 1/1 failed to start: not enough free memory")

    monkeypatch.setattr(launch, "train", failing_train)
    with pytest.raises(SystemExit) as info:
        train_ppo.main(BASE)
    assert info.value.code == 1
    assert "[gaca] error: the run could not start: vLLM engine 1/1 failed to start: not enough free memory" in \
        capsys.readouterr().err


def test_train_watches_every_rank_and_engine_while_fit_runs(rig, monkeypatch):
    """Catches: fit awaited with a plain ray.get again (a rank that dies mid-run leaves the driver waiting for the
    others, which wait in a collective for it), or a model group / the engines / the trainer left out of the watch."""
    seen = {}

    def fake_wait_for_fit(fit, watched, ray_api=None, progress=None, stall_s=None, on_mark=None):
        seen["fit"], seen["watched"], seen["progress"], seen["stall_s"] = fit, watched, progress, stall_s
        seen["on_mark"] = on_mark
        return ray_api.get(fit.ref)

    monkeypatch.setattr(launch, "wait_for_fit", fake_wait_for_fit)
    a = _gpu("--train.colocate_all", "--algo.kl.init_coef", "0.01", "--algo.kl.use_loss", "--ref.num_gpus_per_node",
             "2", "--vllm.num_engines", "2")
    a.critic.model_name_or_path, a.critic.num_nodes, a.critic.num_gpus_per_node = "/models/c", 1, 1
    launch.train(a)
    assert seen["fit"].ref == "<fit>" and seen["fit"].actor is rig.trainer and seen["fit"].what == "the trainer's fit"
    got = [(w.what, w.actor) for w in seen["watched"]]
    assert got == [("policy rank 0", "handler-of-('remote', {'num_gpus': 1}, 'Policy')"),
                   ("reference model rank 0", "handler-of-Ref"), ("critic rank 0", "handler-of-Critic"),
                   ("vLLM engine 1/2", rig.engines[0]), ("vLLM engine 2/2", rig.engines[1])]
    # the stall watch reads what this run's trainer publishes (its actor id), with --run.stall_timeout_s
    assert seen["stall_s"] == a.run.stall_timeout_s == 3600.0
    published = []
    monkeypatch.setattr(launch, "read_progress", lambda key: published.append(key) or "mark")
    assert seen["progress"]() == "mark" and published == ["gaca/progress/trainer-actor-id"]
    assert seen["on_mark"] is None  # no progress lines unless asked (--run.progress_lines true)

