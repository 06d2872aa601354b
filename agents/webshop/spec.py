"""WebShop's :class:`~agents.base.EnvSpec`: the HTTP adapter of the local ``webshop_server``, goal-split panels,
the server check, the scripted SFT expert and the quickstart's WebShop leg (:mod:`agents.webshop.quickstart`)."""
from __future__ import annotations

import json

from agents.base import (EnvConfigError, EnvSpec, GpuRecipe, Panel, PanelError, QuickstartHooks, QuickstartOption,
                         ServerPreflight)
from agents.webshop import tiny_corpus
from agents.webshop.benchmark import BENCHMARK
from agents.webshop.env import PROMPT, format_avail_actions, format_obs, make_env

#: WebShop goal splits (webshop_server.goals): name -> number of goals (None: open-ended)
SPLITS = {"test": 500, "eval": 1000, "train": None}


def prompt_case_inputs(task, obs, actions, history):
    """A prompt case holds the server's raw ``[SEP]`` text and may hold its ``{"has_search_bar", "clickables"}``."""
    obs = format_obs(obs, task)
    history = [(format_obs(o, task), a) for o, a in history]
    if isinstance(actions, dict):
        actions = format_avail_actions(actions)
    return task, obs, actions, history


# ----------------------------------------------------------------------------------------------- evaluation
def add_eval_args(parser, context: str) -> None:
    help_ = "WebShop server (default $WEBSHOP_URL or http://127.0.0.1:3000)" if context == "eval" else None
    parser.add_argument("--webshop-url", default=None, help=help_)


def prepare_eval(args) -> None:
    from agents.webshop.env import DEFAULT_URL

    args.webshop_url = args.webshop_url or DEFAULT_URL


def eval_env_config(args) -> dict:
    return {"base_url": args.webshop_url}


def panel(panel: str, *, data_root=None, panel_dir=None, num_tasks: int | None = None, panel_seed: int = 0) -> Panel:
    """A goal split (``test`` = goals 0-499, ``eval`` = 500-1499, ``train`` = 1500+): its first ``num_tasks`` goals,
    as ``test:0``, ``test:1``, ... (:func:`agents.webshop.env.parse_task`)."""
    if panel not in SPLITS:
        raise PanelError(f"unknown WebShop panel {panel!r}: use a goal split, one of {list(SPLITS)}")
    size = SPLITS[panel]
    if num_tasks is None:
        if size is None:
            raise PanelError("the WebShop train split is open-ended: pass --num-tasks N")
        num_tasks = size
    if num_tasks <= 0:
        raise PanelError(f"--num-tasks must be positive, got {num_tasks}")
    if size is not None and num_tasks > size:
        raise PanelError(f"WebShop split {panel!r} has {size} goals, asked for {num_tasks}")
    tasks = [f"{panel}:{i}" for i in range(num_tasks)]
    return Panel(name=f"{panel}[:{num_tasks}]", tasks=tasks, meta={"split": panel, "first_n": num_tasks})


def health(url: str, timeout: float = 10.0) -> dict:
    """The server's /health answer ({} when not a JSON object); ``EnvConfigError`` with code 3 when unreachable."""
    import urllib.request

    try:
        with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=timeout) as r:  # noqa: S310 - user URL
            if r.status == 200:
                try:
                    answer = json.loads(r.read().decode("utf-8", "replace"))
                except ValueError:
                    answer = {}
                return answer if isinstance(answer, dict) else {}
            raise OSError(f"HTTP {r.status}")
    except OSError as e:
        raise EnvConfigError(f"WebShop server {url} is not reachable ({e}); start it with `python -m webshop_server "
                             f"--port PORT` and pass --webshop-url", code=3) from e


def check_server(env_kwargs: dict, args) -> dict:
    """The health of the server the environments use (``--env-kwargs`` ``base_url`` over ``--webshop-url``)."""
    return health(env_kwargs.get("base_url") or args.webshop_url)


# ----------------------------------------------------------------------------------------------- task files, SFT
def add_task_args(parser) -> None:
    parser.add_argument("--start", type=int, default=1500, help="first goal index (WebShop splits: train is 1500+)")
    parser.add_argument("--num", type=int, required=True)


def task_ids(args) -> list:
    return list(range(args.start, args.start + args.num))


def add_sft_args(parser) -> None:
    parser.add_argument("--url", required=True, help="WebShop server started with --expose-goals")
    parser.add_argument("--goals", required=True, help="indices START:END within the train split (goals train:START..)")


def sft_demos(args, progress):
    from agents.webshop.expert import webshop_demos  # the scripted expert (lazy: the SFT CLI only)

    start, _, end = args.goals.partition(":")
    return webshop_demos(args.url, [f"train:{i}" for i in range(int(start), int(end))], history_k=args.history_k,
                         progress=progress)


def _quickstart() -> QuickstartHooks:
    from agents.webshop import quickstart as q

    return QuickstartHooks(data_title="WebShop server (generated catalog)", data_phase=q.data_phase,
                           configure=q.configure, out_suffix="_webshop", sft_source=q.sft_source,
                           eval_args=q.eval_args, rl_max_len=4096, rl_env_args=q.rl_env_args,
                           report_data=q.report_data, setting_data=q.setting_data, options=q.OPTIONS)


SPEC = EnvSpec(
    name="webshop", label="WebShop", make_env=make_env, prompt=PROMPT, prompt_case_inputs=prompt_case_inputs,
    eval_prompt_max_len=4096, eval_num_envs=64, add_eval_args=add_eval_args, prepare_eval=prepare_eval,
    eval_env_config=eval_env_config, panel_help="goal split (test | eval | train)", resolve_panel=panel,
    check_server=check_server, generated_data=lambda data_root, tasks, health: health.get("generated"),
    rehearsal_workers_note="WebShop episodes run inside the vLLM engines, over HTTP",
    failure_hint="the WebShop server (URL, health)",
    # the env workers of every node use the head node's URL (examples/gpu: webshop_advertise_host)
    server_preflight=ServerPreflight(reach_hint="WEBSHOP_ADVERTISE_HOST, firewall",
                                     describe=lambda health: f"{health.get('goals')} goals"),
    add_task_args=add_task_args, task_ids=task_ids, add_sft_args=add_sft_args, sft_demos=sft_demos,
    quickstart=_quickstart(), packages=("flask", "bm25s"), benchmark=BENCHMARK,
    # examples/gpu/_train_webshop.sh (7B: MICRO_BATCH 2); synthetic prompts: up to search-result pages
    gpu_recipe=GpuRecipe(prompt_len=4096, response_len=512, mini_batch_steps=64, synthetic_prompt_len=(300, 4000),
                         micro_batch=(("7b", 2),)),
    tiny_corpus_sample=tiny_corpus.sample,
    oracle=True,  # with oracle=True in its config the adapter reports info["oracle_value"] (docs/credit_audit.md)
)
