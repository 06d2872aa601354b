"""One evaluation session: panel -> environment config -> generator -> episodes -> results, owning Ray's start and
stop. The eval CLI (:mod:`gaca_openrlhf.eval.cli`), the benchmark's one-engine-for-all-seeds evaluation
(:mod:`gaca_openrlhf.bench.evaluate`) and the diagnostics' disagreement test (:mod:`gaca_openrlhf.diagnostics.cli`)
all start evaluation here::

    with EvalSession(args) as session:         # settings, model folder, data root / server URL, env config
        panel = session.panel(args.panel, args.num_tasks)
        session.start()                        # server check, tokenizer, generator, Ray when the env needs it
        episodes, timing = session.run(panel, seed, desc="eval")
        write_json(path, session.results(panel, args.panel, seed, episodes, timing))
    # Ray (if this session started it) is shut down here, also when an episode raised

``args`` is the eval CLI's namespace (:func:`gaca_openrlhf.eval.cli.build_parser`) or one with the same option
names (the diagnostics' parser); the few options a caller's parser lacks take the eval CLI's defaults. The session
fills the environment's defaults into ``args`` in place, so a caller that records ``vars(args)`` records the values
used. Everything environment-specific (options, data root, server, panels, Ray) comes from the environment's
:class:`agents.base.EnvSpec`. Errors in the user's input exit with status 2 (:func:`die`), an unreachable server
with 3.

Seams for tests: the episode loop (``run_episodes`` of this module), :func:`init_ray`, and the generator factory
passed to :meth:`EvalSession.start` (default :func:`vllm_generator`, which builds
``gaca_openrlhf.eval.vllm_generator.VLLMGenerator``).
"""
from __future__ import annotations

import json
import math
import os
import platform
import sys
import time

from agents.base import EnvConfigError
from agents.registry import spec as env_spec
from gaca_openrlhf.eval.panels import Panel, resolve_panel, tasks_digest
from gaca_openrlhf.eval.runner import RunConfig, run_episodes, summarize, tokenizer_encoder

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: options some callers' parsers lack (the diagnostics have no --top-p, --enforce-eager, --record-actions), read
#: with these defaults and never added to ``args`` (the diagnostics record ``vars(args)``)
_OPTIONAL = {"top_p": 1.0, "enforce_eager": None, "record_actions": False, "no_progress": False}
_OMIT = object()


# ----------------------------------------------------------------------------------------------- start-up pieces
def die(msg: str, code: int = 2):
    """Print ``error: msg`` on stderr and exit with ``code`` (2: bad input, 3: environment unreachable)."""
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(code)


def check_model(model: str) -> str:
    """The absolute path of a local HF model folder (exit 2 when missing or without config.json)."""
    if not os.path.isdir(model):
        die(f"model folder {model!r} does not exist (pass a local HF model folder: a training --ckpt.output_dir, "
            f"or download a base model first, e.g. `huggingface-cli download Qwen/Qwen2.5-1.5B-Instruct --local-dir DIR`)")
    if not os.path.isfile(os.path.join(model, "config.json")):
        die(f"{model!r} is not a HF model folder (no config.json)")
    return os.path.abspath(model)


def checked(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, an :class:`agents.base.EnvConfigError` it raises ending the run (:func:`die` with the
    error's exit status: 2 bad input, 3 environment unreachable)."""
    try:
        return fn(*args, **kwargs)
    except EnvConfigError as e:
        die(str(e), e.code)


def env_config(args) -> dict:
    """The keyword config of ``agents.registry.make_env`` from the options (``--env-kwargs`` merged last: it wins)."""
    kwargs = env_spec(args.env).env_config(args)
    if args.env_kwargs:
        try:
            extra = json.loads(args.env_kwargs)
        except ValueError as e:
            die(f"--env-kwargs is not JSON: {e}")
        if not isinstance(extra, dict):
            die("--env-kwargs must be a JSON object")
        kwargs.update(extra)
    return kwargs


def init_ray(num_envs: int) -> None:
    """Start a local Ray for ``num_envs`` CPU env actors (half a CPU each, plus one); a running Ray is kept."""
    import ray

    if ray.is_initialized():
        return
    # the env actors import agents.*: the repository goes on their PYTHONPATH
    path = os.pathsep.join(x for x in (REPO_ROOT, os.environ.get("PYTHONPATH", "")) if x)
    ray.init(num_cpus=max(os.cpu_count() or 1, math.ceil(num_envs * 0.5) + 1), include_dashboard=False,
             log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}})


def vllm_generator(model: str, **kwargs):
    """The default generator factory: vLLM offline (:class:`gaca_openrlhf.eval.vllm_generator.VLLMGenerator`)."""
    from gaca_openrlhf.eval.vllm_generator import VLLMGenerator

    return VLLMGenerator(model, **kwargs)


def json_safe(obj):
    """``obj`` with NaN and infinities replaced by None (strict JSON)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def write_json(path: str, data: dict) -> None:
    """Write ``data`` as strict JSON, atomically (a reader never sees half a file)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(json_safe(data), f, indent=1)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------------------------- the session
class EvalSession:
    """Evaluation of one model on one environment (see the module doc); a context manager that stops Ray."""

    def __init__(self, args) -> None:
        """Check the settings, the model folder and the data root / server URL (exit 2 when bad), fill the
        environment's defaults into ``args`` and build the environment config. Starts nothing."""
        self.args = args
        if args.episodes_per_task < 1:
            die("--episodes-per-task must be >= 1")
        if args.temperature < 0:
            die("--temperature must be >= 0")
        self.spec = checked(env_spec, args.env) if args.env else None
        if self.spec is None:
            die("--env is required")
        args.prompt_max_len = args.prompt_max_len or self.spec.eval_prompt_max_len
        args.num_envs = args.num_envs or self.spec.eval_num_envs
        if args.num_envs < 1:
            die("--num-envs must be >= 1")
        self.env = args.env
        self.model = check_model(args.model)
        if self.spec.prepare_eval is not None:
            checked(self.spec.prepare_eval, args)  # the env's options checked and filled in place (data root, URL)
        self.env_kwargs = env_config(args)
        self.generator = self.encode = None
        self.engine_s = 0.0
        self.t_start = time.time()
        self._health: dict | None = None
        self._ray = False

    def opt(self, name: str):
        """Option ``name`` of ``args``, or the eval CLI's default when the caller's parser lacks it."""
        return getattr(self.args, name, _OPTIONAL.get(name))

    # ------------------------------------------------------------------ panel and environment
    def panel(self, name: str, num_tasks: int | None = None) -> Panel:
        """The task panel ``name`` of the session's environment, first ``num_tasks`` tasks (exit 2 when bad)."""
        return checked(resolve_panel, self.env, name, data_root=self.args.data, panel_dir=self.args.panel_dir,
                       num_tasks=num_tasks)

    def check_server(self) -> dict:
        """The environment's server health (``EnvSpec.check_server``, e.g. WebShop's /health), asked once; exit 3
        when unreachable. Environments without a server: {}."""
        if self._health is None:
            self._health = (checked(self.spec.check_server, self.env_kwargs, self.args) if self.spec.needs_server
                            else {})
        return self._health

    def generated_data(self, panel: Panel) -> bool | None:
        """Whether the panel runs on generated data (``EnvSpec.generated_data``: offline-generated games, a
        generated catalog), so that published numbers are not comparable; None when unknown."""
        if self.spec.generated_data is None:
            return None
        return self.spec.generated_data(self.args.data, panel.tasks, self.check_server())

    @property
    def needs_ray(self) -> bool:
        """Whether the env slots are Ray actors (``EnvSpec.needs_ray_workers`` of the env config)."""
        return self.spec.uses_ray(self.env_kwargs)

    def run_config(self, seed: int) -> RunConfig:
        """The episode loop's settings for base seed ``seed``."""
        a = self.args
        return RunConfig(env=a.env, env_kwargs=self.env_kwargs, episodes_per_task=a.episodes_per_task, seed=seed,
                         history_k=a.history_k, max_steps=a.max_steps, max_new_tokens=a.max_tokens,
                         prompt_max_len=a.prompt_max_len, num_envs=a.num_envs, env_timeout_s=a.env_timeout,
                         record_actions=self.opt("record_actions"), invalid_action=a.invalid_action)

    # ------------------------------------------------------------------ generator and Ray
    def start(self, make_generator=None, seed: int | None = None) -> "EvalSession":
        """Check the server, load the tokenizer, build the generator (``make_generator(model, **settings)``,
        default :func:`vllm_generator`; ``seed``: the engine's, default ``--seed``) and start Ray if needed."""
        from transformers import AutoTokenizer

        a = self.args
        self.check_server()
        tokenizer = AutoTokenizer.from_pretrained(self.model, trust_remote_code=True)
        self.encode = tokenizer_encoder(tokenizer)  # the training rollout's encoding (agents.prompts)
        self.t_start = time.time()
        self.generator = (make_generator or vllm_generator)(
            self.model, temperature=a.temperature, top_p=self.opt("top_p"), seed=a.seed if seed is None else seed,
            max_model_len=self.run_config(a.seed).max_model_len, dtype=a.dtype,
            gpu_memory_utilization=a.gpu_memory_utilization, enforce_eager=self.opt("enforce_eager"),
            tensor_parallel_size=a.tensor_parallel_size)
        self.engine_s = time.time() - self.t_start
        if self.needs_ray:
            self._ray = True  # set first: a failed start is shut down too
            init_ray(a.num_envs)
        return self

    def close(self) -> None:
        """Shut Ray down if this session started it (idempotent)."""
        if self._ray:
            self._ray = False
            import ray

            ray.shutdown()

    def __enter__(self) -> "EvalSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ episodes and results
    def run(self, panel: Panel, seed: int, desc: str = "eval", progress: bool | None = None) -> tuple[list, dict]:
        """Every episode of ``panel`` with base seed ``seed``; returns (episode records, timing)."""
        if self.generator is None:
            raise RuntimeError("EvalSession.run before start()")
        progress = not self.opt("no_progress") if progress is None else progress
        t0 = time.time()
        episodes, timing = run_episodes(panel.tasks, self.run_config(seed), self.generator, self.encode,
                                        task_types=panel.task_types, progress=progress, desc=desc)
        timing.update(engine_start_s=self.engine_s, episodes_s=time.time() - t0)
        return episodes, timing

    def results(self, panel: Panel, panel_arg: str, seed: int, episodes: list, timing: dict, *,
                tasks_sha1: bool = False, generated_data=_OMIT, engine: str | None = None) -> dict:
        """The results JSON: summary, ``config``, ``timing``, ``episodes``. The optional ``config`` entries keep
        their places: ``tasks_sha1`` (the panel's task digest, what ``--resume`` checks) after ``num_tasks``,
        ``generated_data`` (when given) after ``data``, ``engine`` last."""
        a = self.args
        config = {"model": self.model, "env": a.env, "panel": panel.name, "panel_arg": panel_arg,
                  "panel_meta": panel.meta, "num_tasks": len(panel.tasks)}
        if tasks_sha1:
            config["tasks_sha1"] = tasks_digest(panel.tasks)
        config.update(episodes_per_task=a.episodes_per_task, seed=seed, temperature=a.temperature,
                      top_p=self.opt("top_p"), max_steps=a.max_steps, max_tokens=a.max_tokens, history_k=a.history_k,
                      invalid_action=a.invalid_action, prompt_max_len=a.prompt_max_len, num_envs=a.num_envs,
                      data=a.data)
        if generated_data is not _OMIT:
            config["generated_data"] = generated_data
        config.update(env_kwargs=self.env_kwargs, vllm=getattr(self.generator, "settings", None),
                      host=platform.node())
        if engine is not None:
            config["engine"] = engine
        return {**summarize(episodes), "config": config, "timing": timing, "episodes": episodes}
