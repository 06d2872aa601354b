"""The quickstart's WebShop leg (:class:`agents.base.QuickstartHooks`): the local server with its train goals and
panels, the options of the SFT, evaluation and RL commands, and the report's data paragraph."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import replace

from agents.base import QuickstartOption

#: the WebShop leg's own settings (fields of the quickstart's config, flags --webshop-products, --webshop-data,
#: --webshop-generated)
OPTIONS = (
    QuickstartOption("webshop_products", int, 1000),  # products of the generated catalog
    QuickstartOption("webshop_data", str, ""),  # WebShop's data folder (default $WEBSHOP_DATA)
    QuickstartOption("webshop_generated", bool, False,  # opt in (default: $WEBSHOP_GENERATED == 1)
                     help="use a generated WebShop catalog (results not comparable with published numbers)"),
)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def data_phase(cfg, st, out, con, tools) -> str:
    import urllib.request

    port = _free_port()
    log = open(con.log_dir / "webshop_server.log", "a")
    # the catalog, as examples/cpu/_common.sh's start_webshop_server: WebShop's real files when given, a generated
    # stand-in only on explicit opt-in (--webshop-generated or WEBSHOP_GENERATED=1)
    if cfg.webshop_data:
        data_args = ["--data-dir", cfg.webshop_data, "--catalog", os.environ.get("WEBSHOP_CATALOG", "auto")]
    elif cfg.webshop_generated:
        data_args = ["--num-products", str(cfg.webshop_products), "--seed", str(cfg.data_seed)]
    else:
        raise tools.PhaseError("WebShop needs its data: pass --webshop-data DIR (or set WEBSHOP_DATA) with WebShop's "
                               "items_shuffle*.json / items_ins_v2*.json / items_human_ins.json, or --webshop-generated "
                               "(or WEBSHOP_GENERATED=1) to use a generated stand-in catalog (not comparable with "
                               "published numbers)")
    cmd = [sys.executable, "-m", "webshop_server", "--host", "127.0.0.1", "--port", str(port), *data_args,
           "--production", "--threads", "4", "--expose-goals"]
    log.write(f"$ {shlex.join(cmd)}\n")
    log.flush()
    st.server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=tools.ROOT, env=tools.child_env())
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 600
    while time.time() < deadline:
        if st.server.poll() is not None:
            raise tools.PhaseError(f"the WebShop server exited with {st.server.returncode}; see "
                                   f"{con.log_dir / 'webshop_server.log'}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                health = json.loads(r.read())
                break
        except OSError:
            time.sleep(1)
    else:
        raise tools.PhaseError("the WebShop server did not come up within 10 minutes")
    st.server_url = url
    n_train = max(cfg.train_games, cfg.rl_tasks_per_iter)
    tools.write_tasks([f"train:{i}" for i in range(n_train)], str(out / "data" / "train_tasks.jsonl"))
    st.train_tasks = str(out / "data" / "train_tasks.jsonl")
    st.panel = "test"  # test panel: the first --heldout-games goals of upstream's test split (goals 0-499)
    # validation panel: as many goals of upstream's eval split (goals 500-1499); choices are made there
    st.extra_panels = {"val": "eval"} if cfg.val_games > 0 else {}
    st.catalog_generated = bool(health.get("generated"))
    return f"server {url}: {health.get('products')} products ({'generated' if health.get('generated') else 'real'} catalog)"


def configure(cfg, over, smoke: bool):
    if "max_steps" not in over:  # WebShop's own limit is 15; the demonstrator needs 3-6 steps
        cfg = replace(cfg, max_steps=8 if smoke else 15)
    if "max_new_tokens" not in over:  # search[...] responses repeat the query in <think> and <action>
        cfg = replace(cfg, max_new_tokens=80)
    if "heldout_games" not in over and not smoke:  # WebShop's panel: the first 16 test goals
        cfg = replace(cfg, heldout_games=16)
    if "rl_validity" not in over:  # the admissible rule was measured on ALFWorld only
        cfg = replace(cfg, rl_validity="format")
    cfg = replace(cfg, webshop_data=cfg.webshop_data or os.environ.get("WEBSHOP_DATA", ""),
                  webshop_generated=cfg.webshop_generated or os.environ.get("WEBSHOP_GENERATED") == "1")
    return cfg


def sft_source(cfg, st) -> list:
    return ["webshop", "--url", st.server_url, "--goals", f"0:{cfg.train_games}"]


def eval_args(cfg, st) -> list:
    # the quickstart model has 4096 positions: prompt budget = 4096 - response budget
    return (["--panel", "test", "--num-tasks", str(cfg.heldout_games), "--webshop-url", st.server_url,
             "--prompt-max-len", str(4096 - cfg.max_new_tokens)]
            + [f"--extra-panel={name}={split}" for name, split in sorted(st.extra_panels.items())])


def rl_env_args(cfg, st) -> list:
    return ["--env.kwargs", json.dumps({"base_url": st.server_url}), "--gaca.mode", "mean_norm"]


def report_data(cfg, st) -> str:
    if cfg.webshop_data:
        catalog = f"WebShop's data files from `{cfg.webshop_data}`"
    else:
        catalog = (f"**generated stand-in catalog** ({cfg.webshop_products} products, seed {cfg.data_seed}; not "
                   f"comparable with published WebShop numbers)")
    return (f"Local WebShop server, {catalog}. "
            f"Train goals `train:0..{cfg.train_games - 1}` (goals 1500+); held-out panel: the first {cfg.heldout_games} goals of "
            f"the `test` split. Episodes capped at {cfg.max_steps} steps.")


def setting_data(cfg: dict) -> str:
    return f"WebShop ({'generated catalog' if cfg.get('webshop_generated') else 'WebShop data'})"
