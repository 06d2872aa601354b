"""The environment interface the agent rollout function is generic over.

An environment contributes three things (docs/design.md §2.4): an adapter with ``reset``/``step``
(this protocol), a prompt template (see :mod:`agents.prompts`) and its success metrics (``EnvStep.info``).
Adding an environment touches ``agents/<env>/`` (its :class:`EnvSpec`, everything the rest of the system asks of an
environment) and one line in :data:`agents.registry.ENVIRONMENTS`.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Protocol, Sequence, runtime_checkable


class EnvError(RuntimeError):
    """An environment failed (crashed worker, unreachable server, timeout).

    The rollout marks the episode as failed and excludes it from the update instead of crashing training.
    """


@dataclass
class EnvStep:
    """What the agent sees after ``reset`` or ``step``.

    observation: text the prompt shows as the current observation (already formatted for the agent).
    anchor: the anchor-state string used to build GiGPO/GACA step groups (ALFWorld: the raw observation,
        WebShop: the formatted observation); the rollout hashes it to a 64-bit id (the estimators' anchor hash).
    admissible_actions: the actions the environment accepts now (listed in the prompt).
    reward: environment reward of the step just taken (0.0 after reset).
    done: the episode is over (success, failure or step limit).
    won: the task was solved.
    info: environment-specific numbers for metrics (e.g. ``score``, ``task_type``); JSON-serialisable.
    """

    observation: str
    anchor: str
    admissible_actions: list[str]
    reward: float = 0.0
    done: bool = False
    won: bool = False
    info: dict[str, Any] = field(default_factory=dict)


def oracle_progress(before: dict, after: dict) -> float:
    """A step's oracle progress from the ``oracle_*`` info before and after it (docs/credit_audit.md):
    ``oracle_distance`` (actions a full-knowledge agent still needs; ALFWorld, toy) gives before - after,
    ``oracle_value`` (best reward still reachable; WebShop) gives after - before; NaN when either side lacks it."""
    for key, sign in (("oracle_distance", 1.0), ("oracle_value", -1.0)):
        b, a = before.get(key), after.get(key)
        if b is not None and a is not None:
            return sign * (float(b) - float(a))
    return float("nan")


@runtime_checkable
class AgentEnv(Protocol):
    """One episode at a time of one environment instance."""

    #: registry name, e.g. "alfworld" or "webshop"
    name: str
    #: episode length limit in agent steps (ALFWorld 50, WebShop 15)
    max_steps: int

    def reset(self, task: str | int) -> tuple[str, EnvStep]:
        """Start the episode for ``task`` (a panel entry: game path or goal index); return (task text, first step)."""
        ...

    def step(self, action: str) -> EnvStep:
        """Execute ``action`` (the projected action, see :func:`agents.parsing.parse_action`).

        Environments may take a second argument ``valid``: with ``valid=False`` they answer the step as an unknown
        command without executing it (the rollout's ``invalid_action="noop"`` mode; see :func:`step_env`).
        """
        ...

    def close(self) -> None:
        """Release resources (worker, HTTP session)."""
        ...


def takes_validity(env) -> bool:
    """Whether ``env.step`` accepts the ``valid`` argument (ALFWorld, WebShop) or only the action (toy)."""
    try:
        return "valid" in inspect.signature(env.step).parameters
    except (TypeError, ValueError):
        return False


def is_listed(action: str, listed: Sequence[str]) -> bool:
    """Whether ``action`` is one of the environment's admissible actions. An entry with a ``<placeholder>`` in
    brackets (WebShop's ``search[<your query>]``) admits any argument: ``search[red shoes]``."""
    if action in listed:
        return True
    head, sep, _ = action.partition("[")
    return bool(sep) and action.endswith("]") and any(
        a.startswith(head + "[<") and a.endswith(">]") for a in listed)


def step_env(env, action: str, valid: bool, invalid_action: str = "execute", pass_validity: bool | None = None):
    """One environment step of a projected action, as training rollouts and evaluation both take it.

    invalid_action="execute" (default, verl-agent): the action is executed whatever its validity; validity only
    decides the invalid-action penalty. "noop": an invalid action is passed with ``valid=False`` to environments
    that take it, which answer it as an unknown command (no state change) while it still counts as a step.
    ``pass_validity``: the cached :func:`takes_validity` of ``env`` (computed when None).
    """
    if invalid_action == "execute":
        return env.step(action)
    if invalid_action != "noop":
        raise ValueError(f"invalid_action must be 'execute' or 'noop', got {invalid_action!r}")
    if pass_validity is None:
        pass_validity = takes_validity(env)
    return env.step(action, valid) if pass_validity else env.step(action)


# ----------------------------------------------------------------------------------------------- environment spec
class EnvConfigError(ValueError):
    """The user's options do not fit the environment (no data root, bad panel, unreachable server).

    ``code`` is the exit status the command line answers with: 2 bad input, 3 environment unreachable.
    """

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


class PanelError(EnvConfigError):
    """A panel could not be resolved (missing data, unknown name, empty panel)."""


@dataclass
class Panel:
    """name: panel name; tasks: task ids passed to ``env.reset``; task_types: task id -> type known up front
    (panels that list them; otherwise filled from the env's info during the run); meta: provenance."""

    name: str
    tasks: list[str]
    task_types: dict[str, str] = field(default_factory=dict)
    meta: dict = field(default_factory=dict)


def integer_panel(name: str, *, data_root: str | None = None, panel_dir: str | None = None,
                  num_tasks: int | None = None, panel_seed: int = 0, env: str = "env") -> Panel:
    """The default panel of an environment whose tasks are integers: tasks ``0 .. N-1`` (``num_tasks``, default 4),
    whatever the panel's name."""
    n = num_tasks or 4
    return Panel(name=f"{env}[:{n}]", tasks=[str(i) for i in range(n)], meta={"first_n": n})


def _add_num_arg(parser) -> None:
    parser.add_argument("--num", type=int, required=True, help="number of integer tasks 0 .. N-1")


def _num_task_ids(args) -> list:
    return list(range(args.num))


@dataclass(frozen=True)
class QuickstartOption:
    """An environment's own setting of the quickstart: a field ``name`` of its config (``QuickstartConfig``; the flag
    ``--name-with-dashes``, recorded in run.json's ``config``) of ``type`` (``int``, ``float``, ``str``, or ``bool``: a
    switch, off unless given) with ``default``. help: the switch's help text (other options' help says
    "default: preset")."""

    name: str
    type: type
    default: Any
    help: str | None = None


@dataclass(frozen=True)
class QuickstartHooks:
    """What ``python -m gaca_openrlhf.bench`` (the quickstart) asks of an environment. Every hook gets the
    quickstart's config ``cfg`` (:class:`gaca_openrlhf.bench.quickstart.config.QuickstartConfig`) and its phase
    state ``st`` (:class:`gaca_openrlhf.bench.quickstart.state.State`: ``data``, ``panel``, ``extra_panels``,
    ``train_tasks``, ``rl_data``, ``server``, ``server_url``, ...), duck-typed so that ``agents`` imports nothing above.

    data_title: the data phase's status line.
    data_phase(cfg, st, out, console) -> detail: phase 1. Makes the task file (``st.train_tasks``), the test panel
        (``st.panel``; a panel argument of the eval CLI), the extra panels (``st.extra_panels``: name -> panel
        argument; ``"val"`` is the validation panel) and, if the env needs one, starts its server (``st.server``,
        a ``subprocess.Popen`` the quickstart terminates at the end, and ``st.server_url``). Raises ``RuntimeError``
        subclasses (the quickstart's ``PhaseError``; ``phase_error`` below builds one) on failure.
    configure(cfg, overridden, smoke) -> cfg: the env's preset changes (fields not in ``overridden``, the names the
        user set) and checks (``raise SystemExit(msg)``).
    out_suffix: appended to the default output folder name (``outputs/quickstart[_compare]<suffix>``).
    sft_source(cfg, st) -> argv: the ``python -m gaca_openrlhf.sft`` subcommand and its source options.
    eval_args(cfg, st) -> argv: the eval CLI options that select the panels (``--panel``, ``--extra-panel``, data
        root or server, prompt budget).
    rl_max_len: ``train_ppo --data.max_len``.
    rl_env_args(cfg, st) -> argv: ``train_ppo`` options of the env (``--env.kwargs``, ...), appended last.
    report_data(cfg, st) -> markdown: the report's "Data" paragraph.
    setting_data(cfg: dict) -> text: the data part of a record's setting line (``cfg`` is the recorded config).
    options: the env's own settings (:class:`QuickstartOption`), fields of the config next to the common ones (the
        hooks read them as ``cfg.<name>``; ``configure`` sets their smoke values and checks them). The config and its
        flags are one namespace: a name must be unique across the environments and the common settings. Every
        config has every environment's options; the quickstart refuses a flag of another environment's option.
    """

    data_title: str
    data_phase: Callable[..., str]
    sft_source: Callable[[Any, Any], list]
    eval_args: Callable[[Any, Any], list]
    rl_env_args: Callable[[Any, Any], list]
    report_data: Callable[[Any, Any], str]
    setting_data: Callable[[dict], str]
    configure: Callable[[Any, set, bool], Any] = lambda cfg, overridden, smoke: cfg
    out_suffix: str = ""
    rl_max_len: int = 2048
    options: tuple = ()


@dataclass(frozen=True)
class ServerPreflight:
    """The start-up check of an environment whose env workers talk to a server (``python -m gaca_openrlhf.preflight
    --url URL``): ``URL/health`` must answer from the head node, and the env workers on every node use that URL.

    reach_hint: what lets the other nodes reach the URL (named when the run has several nodes).
    describe(health) -> text: what the ``/health`` answer (a dict, ``{}`` when not one) says, for the ok line.
    """

    reach_hint: str
    describe: Callable[[dict], str]


@dataclass(frozen=True)
class GpuRecipe:
    """The shapes of an environment's GPU training recipe (examples/gpu/_train_<env>.sh), which the memory plan
    (``python -m gaca_openrlhf.memory_plan``) and the packing benchmark (``python -m gaca_openrlhf.bench.packing``)
    model.

    prompt_len: ``PROMPT_MAX_LEN``. response_len: ``MAX_NEW_TOKENS``. mini_batch_steps: ``MINI_BATCH_STEPS``, the PPO
    mini-batch in step samples (verl-agent's). synthetic_prompt_len: (low, high) of the packing benchmark's synthetic
    prompt lengths (``--synthetic``: uniform, in tokens). micro_batch: ``(model, MICRO_BATCH)`` pairs of the models
    (the memory plan's names: ``1.5b``, ``7b``) for which the script lowers it from the recipes' default.
    """

    prompt_len: int
    response_len: int
    mini_batch_steps: int
    synthetic_prompt_len: tuple[int, int]
    micro_batch: tuple = ()

    def micro_batch_of(self, model: str, default: int) -> int:
        """``MICRO_BATCH`` of the recipe with ``model``: its own when :attr:`micro_batch` lists it, else ``default``."""
        return dict(self.micro_batch).get(model, default)


class PublishedResult(NamedTuple):
    """A success rate a paper published for a benchmark (never measured here)."""

    source: str  # the paper
    model: str
    setting: str  # method / setting
    success: float  # percent


@dataclass(frozen=True)
class Benchmark:
    """The published benchmark an environment stands for, as the comparison report (``python -m gaca_openrlhf.report``)
    speaks of it.

    results: the papers' published success rates (:class:`PublishedResult`), which the report prints in their own,
    labelled section. setup: the benchmark's part of the papers' training setup (prompt / response budgets, advantage
    normalisation). generated_data: what the env's generated stand-in data is, in the report's generated-data warning;
    generated_runs: the same, as runs on it are named in the reference section ("runs on ... are not comparable").
    score: what the env's ``score`` metric is, in the training-score plot's title: ``"score"`` (its own score) or
    ``"success"`` (the success flag).
    """

    results: tuple = ()
    setup: str = ""
    generated_data: str = ""
    generated_runs: str = ""
    score: str = "score"


@dataclass(frozen=True)
class EnvSpec:
    """Everything the rest of the system asks of an environment; each ``agents/<env>/spec.py`` defines one as
    ``SPEC`` and :data:`agents.registry.ENVIRONMENTS` maps the env's name to that module (one line). Only ``name``,
    ``make_env`` and ``prompt`` are required: the defaults make an environment with integer tasks, no options, no
    server, no Ray workers, no demonstrator and no quickstart.

    Adapter and prompt
        name: registry name (``--env``, ``--env.name``). label: its name in messages and reports (default ``name``).
        make_env(**config) -> AgentEnv: the adapter (training rollouts and evaluation). prompt: the step-prompt
        template (:mod:`agents.prompts`). prompt_case_inputs(task, observation, actions, history) -> the same four
        as the prompt shows them, from the raw environment outputs a prompt case holds (default: unchanged).
    Evaluation (``python -m gaca_openrlhf.eval``, the benchmark's evaluate, the diagnostics)
        eval_prompt_max_len, eval_num_envs: defaults of ``--prompt-max-len`` and ``--num-envs``.
        add_eval_args(parser, context): the env's own options (``context``: ``"eval"`` or ``"diagnostics"``, whose
        defaults may differ). data_env_var: the variable ``--data`` defaults to (help text; the env reads it).
        prepare_eval(args): check and fill the env's options in place (raise :class:`EnvConfigError`).
        eval_env_config(args) -> dict: ``make_env`` keywords from the options (``--env-kwargs`` is merged after).
        panel_help: what ``--panel`` names for this env. resolve_panel(name, *, data_root, panel_dir, num_tasks,
        panel_seed) -> Panel (raise :class:`PanelError`). panel_files: panels are files listing all their tasks
        (extra panels are not cut to ``--num-tasks``; the main one is).
        check_server(env_kwargs, args) -> health dict, or None when the env has no server (raise
        ``EnvConfigError(msg, code=3)`` when unreachable). generated_data(data_root, tasks, health) -> whether the
        tasks are generated stand-ins, not comparable with published numbers (None: unknown).
        needs_ray_workers(env_kwargs) -> whether the env slots are Ray actors (the session starts Ray).
        rehearsal_workers_note: a rehearsal with no env workers is fine for this env, and this says why (None: a
        rehearsal must place env workers). ray_worker_class: the Ray actor class of its env workers (the rehearsal
        reports on which nodes they ran). task_types: its task-type names, when a task id names its type as a
        folder ``<type>-...`` (the diagnostics' per-type lambda from advantage dumps).
    Training and start-up checks
        failure_hint: what of the env's own setup to check when most of its episodes fail (its data, its server);
        training's failed-iteration error names it (None: only the generic causes). server_preflight:
        :class:`ServerPreflight`, the check of ``python -m gaca_openrlhf.preflight --url`` (None: no server).
    Credit audit (docs/credit_audit.md)
        oracle: the adapter accepts ``oracle=True`` and then reports, in every ``EnvStep.info`` (after reset and
        after each step), ``oracle_distance`` (actions a full-knowledge agent still needs) or ``oracle_value`` (best
        reward still reachable); None there for a task it does not cover.
    Task files (``python -m gaca_openrlhf.rollout.tasks <env>``)
        add_task_args(subparser); task_ids(args) -> task ids (default: ``--num N`` integer tasks).
    SFT demonstrations (``python -m gaca_openrlhf.sft <env>``)
        add_sft_args(subparser); sft_demos(args, progress) -> (DemoStep list, stats) or None (no demonstrator: no
        subcommand; raise :class:`EnvConfigError` for bad input). sft_augment: ``--augment-prob`` applies (entity
        renaming, :mod:`gaca_openrlhf.sft.augment`); otherwise it is forced to 0.
    Quickstart and report labels
        quickstart: :class:`QuickstartHooks`, or None (``--env`` of the quickstart does not offer the env).
        packages: distributions whose versions a quickstart run records. benchmark: :class:`Benchmark`, the published
        benchmark the env stands for (the report's captions and reference numbers), or None.
    GPU recipe, tiny model
        gpu_recipe: :class:`GpuRecipe`, the shapes of the env's GPU training recipe, or None (no recipe: the memory
        plan does not offer the env). tiny_corpus_sample(rng) -> (user prompt, assistant answer): text shaped like
        the env's step prompts and answers, drawn with the ``random.Random`` ``rng``; the tiny test model's tokenizer
        and warm-up corpus (:mod:`gaca_openrlhf.models.tiny`) takes one sample of each env that has one in turn, in
        registry order (None: the env contributes none). Changing a sampler changes the tiny model: bump its
        ``RECIPE_VERSION``.
    """

    name: str
    make_env: Callable[..., "AgentEnv"]
    prompt: Any  # agents.prompts.PromptTemplate
    label: str = ""
    prompt_case_inputs: Callable[[str, str, Any, list], tuple] | None = None
    # evaluation
    eval_prompt_max_len: int = 1024
    eval_num_envs: int = 8
    add_eval_args: Callable[[Any, str], None] | None = None
    data_env_var: str | None = None
    prepare_eval: Callable[[Any], None] | None = None
    eval_env_config: Callable[[Any], dict] | None = None
    panel_help: str = "any name"
    resolve_panel: Callable[..., Panel] | None = None
    panel_files: bool = False
    check_server: Callable[[dict, Any], dict] | None = None
    generated_data: Callable[[str | None, list, dict], bool | None] | None = None
    needs_ray_workers: Callable[[dict], bool] | None = None
    rehearsal_workers_note: str | None = None
    ray_worker_class: str | None = None
    task_types: tuple = ()
    # training, start-up checks
    failure_hint: str | None = None
    server_preflight: ServerPreflight | None = None
    # credit audit
    oracle: bool = False
    # task files
    add_task_args: Callable[[Any], None] = _add_num_arg
    task_ids: Callable[[Any], list] = _num_task_ids
    # SFT
    add_sft_args: Callable[[Any], None] | None = None
    sft_demos: Callable[[Any, Any], tuple] | None = None
    sft_augment: bool = False
    # quickstart, report
    quickstart: QuickstartHooks | None = None
    packages: tuple = ()
    benchmark: Benchmark | None = None
    # GPU recipe, tiny model
    gpu_recipe: GpuRecipe | None = None
    tiny_corpus_sample: Callable[[Any], tuple] | None = None

    @property
    def title(self) -> str:
        """``label`` or, when empty, ``name``."""
        return self.label or self.name

    @property
    def needs_server(self) -> bool:
        return self.check_server is not None

    def panel(self, name: str, *, data_root: str | None = None, panel_dir: str | None = None,
              num_tasks: int | None = None, panel_seed: int = 0) -> Panel:
        """The panel ``name`` of this env (``resolve_panel``; default :func:`integer_panel`)."""
        if self.resolve_panel is None:
            return integer_panel(name, num_tasks=num_tasks, env=self.name)
        return self.resolve_panel(name, data_root=data_root, panel_dir=panel_dir, num_tasks=num_tasks,
                                  panel_seed=panel_seed)

    def env_config(self, args) -> dict:
        return dict(self.eval_env_config(args)) if self.eval_env_config is not None else {}

    def uses_ray(self, env_kwargs: dict) -> bool:
        return bool(self.needs_ray_workers and self.needs_ray_workers(env_kwargs))
