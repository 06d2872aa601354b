"""Evaluate one model on a fixed panel for several seeds with one vLLM engine.

    python -m gaca_openrlhf.bench.evaluate --seeds 0,1,2 --out-dir DIR <every python -m gaca_openrlhf.eval option>

It parses the options with the eval CLI's own parser (:func:`gaca_openrlhf.eval.cli.build_parser`; ``--out`` is
ignored) and writes ``DIR/seed<S>.json`` per seed in the eval CLI's format, by the eval module's own pieces
(panel resolution, environment config, :func:`gaca_openrlhf.eval.runner.run_episodes`, ``summarize``). The only
difference to calling ``python -m gaca_openrlhf.eval --seed S`` once per seed is that the engine starts once: every
request carries its own seed derived from (seed, task, episode, step), so the sampled tokens do not depend on which
engine serves them (the engine's own seed is unused). On 2 CPU cores an engine start is 20-60 s, a third of a
smoke run's evaluation time.

``--extra-panel NAME=PANEL`` (repeatable) evaluates further panels with the same engine and seeds and writes them to
``DIR/NAME/seed<S>.json`` (the quickstart's validation and unseen test panels; for WebShop a goal split, cut to
``--num-tasks`` like the main panel).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time


def main(argv=None) -> int:
    from gaca_openrlhf.eval import cli as ev
    from gaca_openrlhf.eval.panels import PanelError, resolve_panel, tasks_digest
    from gaca_openrlhf.eval.runner import RunConfig, run_episodes, summarize, tokenizer_encoder

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--seeds", required=True, help="comma-separated evaluation seeds, e.g. 0,1,2")
    pre.add_argument("--out-dir", required=True, help="folder for seed<S>.json")
    pre.add_argument("--extra-panel", action="append", default=[], metavar="NAME=PANEL",
                     help="another panel of the same env, written to DIR/NAME/seed<S>.json (repeatable)")
    own, rest = pre.parse_known_args(argv)
    seeds = [int(s) for s in own.seeds.split(",") if s.strip()]
    if not seeds:
        ev._die("--seeds is empty")
    args = ev.build_parser().parse_args(rest + ["--out", os.path.join(own.out_dir, "unused.json")])
    prompt_default, envs_default = ev.ENV_DEFAULTS[args.env]
    args.prompt_max_len = args.prompt_max_len or prompt_default
    args.num_envs = args.num_envs or envs_default
    model = ev._check_model(args.model)
    if args.env == "alfworld":
        args.data = os.path.abspath(args.data or os.environ.get("ALFWORLD_DATA") or ev._die("--data is required"))
    if args.env == "webshop":
        from agents.webshop.env import DEFAULT_URL

        args.webshop_url = args.webshop_url or DEFAULT_URL
    panels = [("", args.panel)]
    for spec in own.extra_panel:
        name, sep, value = spec.partition("=")
        if not sep or not name or not value or os.sep in name:
            ev._die(f"--extra-panel wants NAME=PANEL, got {spec!r}")
        panels.append((name, value))
    resolved = []
    for name, arg in panels:
        try:
            resolved.append((name, arg, resolve_panel(args.env, arg, data_root=args.data, panel_dir=args.panel_dir,
                                                      # ALFWorld's extra panels are files (all their games);
                                                      # WebShop's are goal splits, cut to the main panel's size
                                                      num_tasks=None if name and args.env == "alfworld"
                                                      else args.num_tasks)))
        except PanelError as e:
            ev._die(str(e))
    env_kwargs = ev.env_config(args)
    if args.env == "webshop":
        ev._check_webshop(env_kwargs.get("base_url") or args.webshop_url)

    from transformers import AutoTokenizer

    from gaca_openrlhf.eval.vllm_generator import VLLMGenerator

    tokenizer = AutoTokenizer.from_pretrained(model, trust_remote_code=True)
    encode = tokenizer_encoder(tokenizer)
    base = RunConfig(env=args.env, env_kwargs=env_kwargs, episodes_per_task=args.episodes_per_task, seed=seeds[0],
                     history_k=args.history_k, max_steps=args.max_steps, max_new_tokens=args.max_tokens,
                     prompt_max_len=args.prompt_max_len, num_envs=args.num_envs, env_timeout_s=args.env_timeout,
                     record_actions=args.record_actions,
                     **({"invalid_action": args.invalid_action} if hasattr(args, "invalid_action") else {}))
    t_start = time.time()
    generator = VLLMGenerator(model, temperature=args.temperature, top_p=args.top_p, seed=seeds[0],
                              max_model_len=base.max_model_len, dtype=args.dtype,
                              gpu_memory_utilization=args.gpu_memory_utilization, enforce_eager=args.enforce_eager)
    engine_s = time.time() - t_start
    if args.env == "alfworld" and env_kwargs.get("backend") == "ray":
        ev._init_ray(base.num_envs)
    briefs = {}
    for (name, panel_arg, panel), seed in ((p, s) for p in resolved for s in seeds):
        cfg = RunConfig(**{**base.__dict__, "seed": seed})
        t0 = time.time()
        episodes, timing = run_episodes(panel.tasks, cfg, generator, encode, task_types=panel.task_types,
                                        progress=not args.no_progress, desc=f"eval {name or args.panel} seed {seed}")
        timing.update(engine_start_s=engine_s, episodes_s=time.time() - t0)
        summary = summarize(episodes)
        result = {**summary, "config": {
            "model": model, "env": args.env, "panel": panel.name, "panel_arg": panel_arg, "panel_meta": panel.meta,
            "num_tasks": len(panel.tasks), "tasks_sha1": tasks_digest(panel.tasks),
            "episodes_per_task": args.episodes_per_task, "seed": seed,
            "temperature": args.temperature, "top_p": args.top_p, "max_steps": args.max_steps,
            "max_tokens": args.max_tokens, "history_k": args.history_k,
            "invalid_action": base.invalid_action, "prompt_max_len": args.prompt_max_len,
            "num_envs": args.num_envs, "data": args.data, "env_kwargs": env_kwargs, "vllm": generator.settings,
            "host": platform.node(), "engine": "one engine for all seeds (gaca_openrlhf.bench.evaluate)"},
            "timing": timing, "episodes": episodes}
        ev.write_json(os.path.join(own.out_dir, name, f"seed{seed}.json"), result)
        briefs[f"{name}/{seed}" if name else seed] = summary["success_rate"]
    print(json.dumps({"success_rate_by_seed": briefs}))
    if args.env == "alfworld" and env_kwargs.get("backend") == "ray":
        import ray

        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
