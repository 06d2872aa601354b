"""ALFWorld's :class:`~agents.base.EnvSpec`: the TextWorld adapter (in process or in Ray workers), game panels,
the data root, the expert demonstrators and the quickstart's ALFWorld leg (:mod:`agents.alfworld.quickstart`).
Importing it imports no TextWorld."""
from __future__ import annotations

import os

from agents.alfworld import tiny_corpus
from agents.alfworld.assets import TASK_TYPES
from agents.alfworld.backends import PROMPT, make_env
from agents.alfworld.benchmark import BENCHMARK
from agents.base import EnvConfigError, EnvSpec, GpuRecipe, QuickstartHooks


# ----------------------------------------------------------------------------------------------- evaluation
def add_eval_args(parser, context: str) -> None:
    if context == "diagnostics":
        parser.add_argument("--alfworld-backend", default="local", choices=["auto", "local", "ray"])
        return
    parser.add_argument("--alfworld-backend", default="auto", choices=["auto", "local", "ray"],
                        help="ALFWorld engines: ray = one CPU Ray actor per env slot (crash isolation, parallel "
                             "steps); local = in this process, the env slots' threads taking turns on the engine lock "
                             "(no Ray; faster on a few cores); auto = local if --num-envs 1 else ray")


def prepare_eval(args) -> None:
    """The data root: ``--data`` or ``$ALFWORLD_DATA``, an existing folder, made absolute."""
    args.data = args.data or os.environ.get("ALFWORLD_DATA")
    if not args.data:
        raise EnvConfigError("ALFWorld needs a data root: pass --data DIR or set $ALFWORLD_DATA (generate offline "
                             "games with `python -m agents.alfworld generate --out DIR --split valid_seen "
                             "--num-games N`)")
    if not os.path.isdir(args.data):
        raise EnvConfigError(f"ALFWorld data root {args.data!r} does not exist")
    args.data = os.path.abspath(args.data)


def eval_env_config(args) -> dict:
    backend = args.alfworld_backend
    if backend == "auto":
        backend = "local" if args.num_envs == 1 else "ray"
    kwargs = {"backend": backend, "data_dir": args.data}
    if backend == "ray":
        kwargs["reset_timeout_s"] = args.env_timeout
        kwargs["step_timeout_s"] = args.env_timeout
    return kwargs


def resolve_panel(panel: str, **kw):
    from agents.alfworld.eval_panels import resolve

    return resolve(panel, **kw)


def generated_data(data_root, tasks, health) -> bool:
    from agents.alfworld.eval_panels import alfworld_generated

    return alfworld_generated(data_root, tasks)


# ----------------------------------------------------------------------------------------------- task files, SFT
def add_task_args(parser) -> None:
    parser.add_argument("--data", required=True)
    parser.add_argument("--split", default="train")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)


def task_ids(args) -> list:
    from agents.alfworld.eval_panels import alfworld_tasks

    return alfworld_tasks(args.data, args.split, args.limit, args.seed)


def add_sft_args(parser) -> None:
    parser.add_argument("--data", required=True, help="ALFWorld data root with stored walkthroughs")
    parser.add_argument("--split", default="train")
    parser.add_argument("--max-steps", type=int, default=50, help="episode limit while replaying walkthroughs")
    parser.add_argument("--expert", default="walkthrough", choices=["walkthrough", "search"],
                        help="walkthrough: the stored (privileged) expert walkthroughs; search: the "
                             "observation-consistent searcher (agents.alfworld.search, "
                             "pick_and_place_simple only)")
    parser.add_argument("--detours", type=int, default=0,
                        help="recovery demonstrations (--expert search): per game, this many more episodes that "
                             "make one mistake (repeat a step, go to where the agent stands, wander) and recover; "
                             "only the steps after the mistake are trained on")


def sft_demos(args, progress):
    from agents.alfworld.panels import list_games
    from agents.alfworld.demos import alfworld_demos  # the experts (lazy: the SFT CLI only)

    games = [g for g, _ in list_games(args.data, args.split)]
    if not games:
        raise EnvConfigError(f"no ALFWorld games in {args.data} ({args.split})")
    detours = getattr(args, "detours", 0)
    if detours < 0 or (detours and args.expert != "search"):
        raise EnvConfigError(f"--detours {detours}: expected a count >= 0, with --expert search (recovery episodes "
                             "are the searcher's)")
    return alfworld_demos(args.data, games, history_k=args.history_k, max_steps=args.max_steps, progress=progress,
                          expert=args.expert, detours=detours)


def _quickstart() -> QuickstartHooks:
    from agents.alfworld import quickstart as q

    return QuickstartHooks(data_title="ALFWorld games (train + held-out panel)", data_phase=q.data_phase,
                           configure=q.configure, sft_source=q.sft_source, eval_args=q.eval_args, rl_max_len=2048,
                           rl_env_args=q.rl_env_args, report_data=q.report_data, setting_data=q.setting_data,
                           options=q.OPTIONS)


SPEC = EnvSpec(
    name="alfworld", label="ALFWorld", make_env=make_env, prompt=PROMPT,
    eval_prompt_max_len=2048, eval_num_envs=16, add_eval_args=add_eval_args, data_env_var="ALFWORLD_DATA",
    prepare_eval=prepare_eval, eval_env_config=eval_env_config,
    panel_help="panel JSON file or name (eval_id | eval_ood | train)", resolve_panel=resolve_panel,
    panel_files=True, generated_data=generated_data,
    needs_ray_workers=lambda env_kwargs: env_kwargs.get("backend") == "ray", ray_worker_class="AlfworldWorker",
    failure_hint="ALFWorld data (ALFWORLD_DATA) or game generation",
    task_types=tuple(TASK_TYPES[i] for i in sorted(TASK_TYPES)),
    add_task_args=add_task_args, task_ids=task_ids, add_sft_args=add_sft_args, sft_demos=sft_demos, sft_augment=True,
    quickstart=_quickstart(), packages=("alfworld", "textworld"), benchmark=BENCHMARK,
    # examples/gpu/_train_alfworld.sh; synthetic prompts: a room and a history of 2 steps
    gpu_recipe=GpuRecipe(prompt_len=2048, response_len=512, mini_batch_steps=256, synthetic_prompt_len=(500, 1300)),
    tiny_corpus_sample=tiny_corpus.sample,
    oracle=True,  # with oracle=True in its config the adapter reports info["oracle_distance"] (docs/credit_audit.md)
)
