"""``python -m gaca_openrlhf.eval``: evaluate a model on a fixed task panel with fixed seeds.

    python -m gaca_openrlhf.eval --model DIR --env alfworld --panel eval_id --data $ALFWORLD_DATA \\
        --episodes-per-task 1 --temperature 0.4 --seed 0 --out results.json
    python -m gaca_openrlhf.eval --model DIR --env webshop --panel test --num-tasks 500 \\
        --webshop-url http://127.0.0.1:3000 --temperature 0.4 --seed 0 --out results.json

Episodes run with vLLM offline, all live episodes stepped together (one ``generate`` call per step), with the
training rollout's prompts, parsing and environment adapters. The JSON written to ``--out`` has the overall
success rate, per-task-type success, mean score, mean steps, valid-action ratio, failed-episode count, one record
per episode (task, episode, seed, won, steps, score, ...) and the configuration, including ``generated_data``
(true for the offline-generated ALFWorld games or the generated WebShop catalog: not comparable with published
numbers; null when the WebShop server does not say). The summary is printed on
stdout as one JSON line (vLLM may log after it). Exit status: 0 done (even with failed episodes), 2 bad arguments / missing model, data or panel,
3 environment unreachable.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import sys
import time

from gaca_openrlhf.eval.panels import PAPER_PROTOCOL, PanelError, alfworld_generated, resolve_panel
from gaca_openrlhf.eval.runner import RunConfig, run_episodes, summarize, tokenizer_encoder

ENV_DEFAULTS = {  # env -> (prompt_max_len, num_envs): verl-agent's prompt budgets; concurrency sized per env
    "alfworld": (2048, 16),
    "webshop": (4096, 64),
    "toy": (1024, 8),
}
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.eval", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="local HF model folder (a trained --ckpt.output_dir or a base model)")
    p.add_argument("--env", required=True, choices=["alfworld", "webshop", "toy"])
    p.add_argument("--panel", required=True,
                   help="ALFWorld: panel JSON file or name (eval_id | eval_ood | train); WebShop: goal split "
                        "(test | eval | train); toy: any name")
    p.add_argument("--out", required=True, help="results JSON path")
    p.add_argument("--episodes-per-task", type=int, default=1, help="episodes per panel task (K)")
    p.add_argument("--temperature", type=float, default=PAPER_PROTOCOL.temperature,
                   help="sampling temperature (the paper's / verl-agent's eval: 0.4)")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0, help="base seed; per-request seeds derive from (seed, task, episode, step)")
    p.add_argument("--num-tasks", type=int, default=None,
                   help="keep the first N tasks of the panel (WebShop: the first N goals of the split; default all)")
    p.add_argument("--data", default=None, help="ALFWorld data root (default $ALFWORLD_DATA)")
    p.add_argument("--panel-dir", default=None, help="folder of ALFWorld panel files <name>.json (default <data>/panels)")
    p.add_argument("--webshop-url", default=None, help="WebShop server (default $WEBSHOP_URL or http://127.0.0.1:3000)")
    p.add_argument("--env-kwargs", default=None, help="JSON object merged into the env config (agents.registry.make_env)")
    p.add_argument("--alfworld-backend", default="auto", choices=["auto", "local", "ray"],
                   help="ALFWorld engines: ray = one CPU Ray actor per env slot (crash isolation, parallel steps); "
                        "local = in this process, the env slots' threads taking turns on the engine lock (no Ray; "
                        "faster on a few cores); auto = local if --num-envs 1 else ray")
    p.add_argument("--max-steps", type=int, default=0, help="episode step limit (0: env's own, ALFWorld 50 / WebShop 15)")
    p.add_argument("--max-tokens", type=int, default=512, help="response tokens per step (training: --rollout.max_new_tokens)")
    p.add_argument("--history-k", type=int, default=2, help="(observation, action) pairs in the step prompt")
    p.add_argument("--invalid-action", default="execute", choices=["execute", "noop"],
                   help="invalid response: execute its projected action (verl-agent) or answer it as a no-op "
                        "(training: --env.invalid_action)")
    p.add_argument("--prompt-max-len", type=int, default=None, help="step-prompt token limit (ALFWorld 2048, WebShop 4096)")
    p.add_argument("--num-envs", type=int, default=None,
                   help="episodes in flight (= max generate batch); default ALFWorld 16, WebShop 64")
    p.add_argument("--env-timeout", type=float, default=120.0, help="an env reset/step slower than this fails the episode")
    p.add_argument("--dtype", default="auto", help="vLLM dtype (auto: float32 on CPU, the model's on GPU)")
    p.add_argument("--gpu-memory-utilization", type=float, default=None, help="vLLM memory share (auto: CPU 0.1, GPU 0.85)")
    p.add_argument("--tensor-parallel-size", type=int, default=1)
    p.add_argument("--enforce-eager", action="store_true", default=None, help="disable CUDA graphs (always on CPU)")
    p.add_argument("--record-actions", action="store_true", help="keep each episode's actions in the JSON")
    p.add_argument("--no-progress", action="store_true")
    return p


def _die(msg: str, code: int = 2):
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(code)


def _check_model(model: str) -> str:
    if not os.path.isdir(model):
        _die(f"model folder {model!r} does not exist (pass a local HF model folder: a training --ckpt.output_dir, "
             f"or download a base model first, e.g. `huggingface-cli download Qwen/Qwen2.5-1.5B-Instruct --local-dir DIR`)")
    if not os.path.isfile(os.path.join(model, "config.json")):
        _die(f"{model!r} is not a HF model folder (no config.json)")
    return os.path.abspath(model)


def _check_webshop(url: str, timeout: float = 10.0) -> dict:
    """The server's /health answer (exit 3 when unreachable)."""
    import urllib.request

    try:
        with urllib.request.urlopen(url.rstrip("/") + "/health", timeout=timeout) as r:  # noqa: S310 - user URL
            if r.status == 200:
                try:
                    health = json.loads(r.read().decode("utf-8", "replace"))
                except ValueError:
                    health = {}
                return health if isinstance(health, dict) else {}
            raise OSError(f"HTTP {r.status}")
    except OSError as e:
        _die(f"WebShop server {url} is not reachable ({e}); start it with `python -m webshop_server --port PORT` "
             f"and pass --webshop-url", code=3)


def env_config(args) -> dict:
    kwargs: dict = {}
    if args.env == "alfworld":
        backend = args.alfworld_backend
        if backend == "auto":
            backend = "local" if args.num_envs == 1 else "ray"
        kwargs = {"backend": backend, "data_dir": args.data}
        if backend == "ray":
            kwargs["reset_timeout_s"] = args.env_timeout
            kwargs["step_timeout_s"] = args.env_timeout
    elif args.env == "webshop":
        kwargs = {"base_url": args.webshop_url}
    if args.env_kwargs:
        try:
            extra = json.loads(args.env_kwargs)
        except ValueError as e:
            _die(f"--env-kwargs is not JSON: {e}")
        if not isinstance(extra, dict):
            _die("--env-kwargs must be a JSON object")
        kwargs.update(extra)
    return kwargs


def _init_ray(num_envs: int) -> None:
    import ray

    if ray.is_initialized():
        return
    path = os.pathsep.join(x for x in (REPO_ROOT, os.environ.get("PYTHONPATH", "")) if x)
    ray.init(num_cpus=max(os.cpu_count() or 1, math.ceil(num_envs * 0.5) + 1), include_dashboard=False,
             log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}})


def _json_safe(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def write_json(path: str, data: dict) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(_json_safe(data), f, indent=1)
    os.replace(tmp, path)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.episodes_per_task < 1:
        _die("--episodes-per-task must be >= 1")
    if args.temperature < 0:
        _die("--temperature must be >= 0")
    prompt_default, envs_default = ENV_DEFAULTS[args.env]
    args.prompt_max_len = args.prompt_max_len or prompt_default
    args.num_envs = args.num_envs or envs_default
    if args.num_envs < 1:
        _die("--num-envs must be >= 1")
    model = _check_model(args.model)

    if args.env == "alfworld":
        args.data = args.data or os.environ.get("ALFWORLD_DATA")
        if not args.data:
            _die("ALFWorld needs a data root: pass --data DIR or set $ALFWORLD_DATA (generate offline games with "
                 "`python -m agents.alfworld generate --out DIR --split valid_seen --num-games N`)")
        if not os.path.isdir(args.data):
            _die(f"ALFWorld data root {args.data!r} does not exist")
        args.data = os.path.abspath(args.data)
    if args.env == "webshop":
        from agents.webshop.env import DEFAULT_URL

        args.webshop_url = args.webshop_url or DEFAULT_URL
    if args.env == "toy":
        from gaca_openrlhf.rollout.toy_env import register

        register()
    try:
        panel = resolve_panel(args.env, args.panel, data_root=args.data, panel_dir=args.panel_dir,
                              num_tasks=args.num_tasks)
    except PanelError as e:
        _die(str(e))
    env_kwargs = env_config(args)
    # generated data (offline ALFWorld games, the generated WebShop catalog): published numbers are not comparable
    generated_data = None
    if args.env == "alfworld":
        generated_data = alfworld_generated(args.data, panel.tasks)
    if args.env == "webshop":
        health = _check_webshop(env_kwargs.get("base_url") or args.webshop_url)
        generated_data = health.get("generated")

    cfg = RunConfig(env=args.env, env_kwargs=env_kwargs, episodes_per_task=args.episodes_per_task, seed=args.seed,
                    history_k=args.history_k, max_steps=args.max_steps, max_new_tokens=args.max_tokens,
                    prompt_max_len=args.prompt_max_len, num_envs=args.num_envs, env_timeout_s=args.env_timeout,
                    record_actions=args.record_actions, invalid_action=args.invalid_action)

    from transformers import AutoTokenizer

    from gaca_openrlhf.eval.vllm_generator import VLLMGenerator

    tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=True)

    encode = tokenizer_encoder(tokenizer)  # the training rollout's encoding (agents.prompts.encode_step_prompt)

    t_start = time.time()
    generator = VLLMGenerator(model, temperature=args.temperature, top_p=args.top_p, seed=args.seed,
                              max_model_len=cfg.max_model_len, dtype=args.dtype,
                              gpu_memory_utilization=args.gpu_memory_utilization, enforce_eager=args.enforce_eager,
                              tensor_parallel_size=args.tensor_parallel_size)
    engine_s = time.time() - t_start
    if args.env == "alfworld" and env_kwargs.get("backend") == "ray":
        _init_ray(cfg.num_envs)

    t0 = time.time()
    episodes, timing = run_episodes(panel.tasks, cfg, generator, encode, task_types=panel.task_types,
                                    progress=not args.no_progress, desc=f"eval {args.env}/{panel.name}")
    timing.update(engine_start_s=engine_s, episodes_s=time.time() - t0, total_s=time.time() - t_start)
    summary = summarize(episodes)
    result = {
        **summary,
        "config": {
            "model": model, "env": args.env, "panel": panel.name, "panel_arg": args.panel, "panel_meta": panel.meta,
            "num_tasks": len(panel.tasks), "episodes_per_task": args.episodes_per_task, "seed": args.seed,
            "temperature": args.temperature, "top_p": args.top_p, "max_steps": args.max_steps,
            "max_tokens": args.max_tokens, "history_k": args.history_k, "invalid_action": args.invalid_action,
            "prompt_max_len": args.prompt_max_len,
            "num_envs": args.num_envs, "data": args.data, "generated_data": generated_data, "env_kwargs": env_kwargs,
            "vllm": generator.settings, "host": platform.node(),
        },
        "timing": timing,
        "episodes": episodes,
    }
    write_json(args.out, result)
    brief = {k: summary[k] for k in ("num_episodes", "num_failed", "success_rate", "mean_score", "mean_steps",
                                     "valid_action_ratio")}
    print(f"wrote {args.out}", file=sys.stderr)
    print(json.dumps(_json_safe(brief)))
    if args.env == "alfworld" and env_kwargs.get("backend") == "ray":
        import ray

        ray.shutdown()
    return 0
