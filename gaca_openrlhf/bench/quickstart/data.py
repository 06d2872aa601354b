"""Phase 1, the data: ALFWorld's generated games and panels (train, retired, test, validation, the RL pool; disjoint,
cached under ``$GACA_CACHE/quickstart``), or WebShop's local server with its train goals and panels."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from gaca_openrlhf.bench.quickstart.config import (RL_POOL_SEED_OFFSET, TEST_SEED_OFFSET, VALIDATION_SEED_OFFSET,
                                                   QuickstartConfig)
from gaca_openrlhf.bench.quickstart.console import Console
from gaca_openrlhf.bench.quickstart.runner import ROOT, PhaseError, child_env, run_logged
from gaca_openrlhf.bench.quickstart.state import State


def phase_data_alfworld(cfg: QuickstartConfig, st: State, out: Path, con: Console) -> str:
    from gaca_openrlhf.models.tiny import cache_root

    types = ",".join(t.strip() for t in cfg.task_types.split(",") if t.strip())
    # one folder per (task types, seed, sizes): a panel lists every game of its split folder
    caps = []  # (folder tag, generator flag, value, summary) of each easier-subset cap in use
    if cfg.max_receptacles > 0:
        caps.append(("r", "--max-receptacles", cfg.max_receptacles, "receptacles"))
    if cfg.max_distractor_types >= 0:
        caps.append(("d", "--max-distractor-types", cfg.max_distractor_types, "distractor classes"))
    subset = "".join(f"-{tag}{value}" for tag, _, value, _ in caps)
    stem = cache_root() / "quickstart" / f"alfworld-t{types.replace(',', '')}{subset}"
    root = stem.with_name(f"{stem.name}-s{cfg.data_seed}-n{cfg.train_games}x{cfg.heldout_games}")
    extra = [arg for _, flag, value, _ in caps for arg in (flag, str(value))]

    split_dir = lambda r, split: str(r / "json_2.1.1" / split)  # noqa: E731

    def generate(root: Path, split: str, n: int, seed: int, exclude=()) -> str:
        """Generate ``split`` under ``root`` unless it is there already from the same command and the same
        excluded splits (each split's marker holds its command and its exclusions' markers)."""
        cmd = [sys.executable, "-m", "agents.alfworld", "generate", "--out", str(root), "--split", split,
               "--num-games", str(n), "--seed", str(seed), "--task-types", types, *extra,
               *[a for d in exclude for a in ("--exclude-split", d)]]
        marker = root / f".complete-{split}"
        stamp = shlex.join(cmd[1:]) + "".join(
            "\n" + (Path(d).parent.parent / f".complete-{Path(d).name}").read_text() for d in exclude)
        if marker.is_file() and marker.read_text() == stamp:
            return split_dir(root, split)
        if Path(split_dir(root, split)).exists():
            import shutil

            shutil.rmtree(split_dir(root, split))  # partial, or from other settings: regenerate (deterministic)
        marker.unlink(missing_ok=True)
        run_logged(cmd + ["--workers", str(min(4, os.cpu_count() or 1)), "--no-progress"], con.log_dir / "data.log",
                   env=child_env())
        marker.write_text(stamp)
        return split_dir(root, split)

    # Splits, each excluding the goals and first observations of every earlier one (agents.alfworld.disjoint):
    # 1. train (the SFT and RL games; its root keeps its historical name, which the RL runs' commands hold);
    # 2. retired: the valid_seen panel the defaults were tuned on before issue 24 (64 games of generator seed
    #    --data-seed, nothing excluded) -- generated only to be kept out of the panels below;
    # 3. the test panels (own generator seed, own root): valid_seen (`heldout_games`) and valid_unseen
    #    (`unseen_games`, ALFRED's unseen floor plans) -- reported, never used for a choice;
    # 4. the validation panel (`val_games`, valid_seen, own seed and root): every choice of a default is made here.
    splits = {"train": generate(root, "train", cfg.train_games, cfg.data_seed)}
    if cfg.retired_games > 0:
        retired_root = stem.with_name(f"{stem.name}-s{cfg.data_seed}-retired{cfg.retired_games}")
        splits["retired"] = generate(retired_root, "valid_seen", cfg.retired_games, cfg.data_seed)
    test_seed = TEST_SEED_OFFSET + cfg.data_seed
    test_root = stem.with_name(f"{stem.name}-s{test_seed}-test{cfg.heldout_games}u{cfg.unseen_games}")
    splits["test"] = generate(test_root, "valid_seen", cfg.heldout_games, test_seed, list(splits.values()))
    if cfg.unseen_games > 0:
        splits["test_unseen"] = generate(test_root, "valid_unseen", cfg.unseen_games, test_seed,
                                         list(splits.values()))
    val_root = stem.with_name(f"{stem.name}-s{VALIDATION_SEED_OFFSET + cfg.data_seed}-val{cfg.val_games}")
    if cfg.val_games > 0:
        splits["val"] = generate(val_root, "valid_seen", cfg.val_games, VALIDATION_SEED_OFFSET + cfg.data_seed,
                                 list(splits.values()))
    from agents.alfworld.disjoint import OverlapError, check_disjoint

    try:  # the generator excluded these already; a changed generator must not slip through
        check_disjoint({k: v for k, v in splits.items() if k != "retired"})
        if "retired" in splits:  # the retired panel may share games with train, never with a panel of today
            check_disjoint({k: v for k, v in splits.items() if k != "train"})
    except OverlapError as e:
        raise PhaseError(f"generated splits overlap: {e}") from e
    from agents.alfworld.panels import build_panel, save_panel
    from gaca_openrlhf.rollout.tasks import write_tasks

    type_ids = [int(t) for t in types.split(",")]
    train = build_panel(str(root), "quickstart_train", "train", task_types=type_ids)
    held = build_panel(str(test_root), "quickstart_heldout", "valid_seen", task_types=type_ids)
    held["games"] = [str(test_root / g) for g in held["games"]]  # absolute: another data root than training's
    counts = {"train": train["num_games"], "heldout": held["num_games"]}
    if not counts["train"] or not counts["heldout"]:
        raise PhaseError(f"no games generated under {root} ({counts}); see {con.log_dir / 'data.log'}")
    save_panel(held, str(out / "data" / "heldout_panel.json"))
    save_panel(train, str(out / "data" / "train_panel.json"))
    st.data, st.panel, st.rl_data = str(root), str(out / "data" / "heldout_panel.json"), str(root)
    st.extra_panels = {}
    if cfg.unseen_games > 0:
        unseen = build_panel(str(test_root), "quickstart_test_unseen", "valid_unseen", task_types=type_ids)
        unseen["games"] = [str(test_root / g) for g in unseen["games"]]
        counts["test_unseen"] = unseen["num_games"]
        save_panel(unseen, str(out / "data" / "test_unseen_panel.json"))
        st.extra_panels["test_unseen"] = str(out / "data" / "test_unseen_panel.json")
    if cfg.val_games > 0:
        val = build_panel(str(val_root), "quickstart_val", "valid_seen", task_types=type_ids)
        val["games"] = [str(val_root / g) for g in val["games"]]
        counts["val"] = val["num_games"]
        save_panel(val, str(out / "data" / "val_panel.json"))
        st.extra_panels["val"] = str(out / "data" / "val_panel.json")
    rl_games = train["games"]
    pool_note = ""
    if cfg.rl_pool_games > 0:
        # RL's own games: the warm start has memorised the SFT games, so their groups are mostly all-success and carry
        # little advantage signal; fresh games of the same subset (another generator seed) are where it still fails
        pool_seed = RL_POOL_SEED_OFFSET + cfg.data_seed
        pool = stem.with_name(f"{stem.name}-s{pool_seed}-rl{cfg.rl_pool_games}")
        generate(pool, "train", cfg.rl_pool_games, pool_seed)
        held_names = {Path(g).parent.name for g in held["games"]}  # <type>-<object>-None-<receptacle>-<floor plan>
        for path in st.extra_panels.values():
            held_names |= {Path(g).parent.name for g in json.loads(Path(path).read_text())["games"]}
        rl_games = [g for g in build_panel(str(pool), "quickstart_rl_pool", "train", task_types=type_ids)["games"]
                    if Path(g).parent.name not in held_names]  # never train on a held-out game's (goal, room)
        if not rl_games:
            raise PhaseError(f"no RL pool games under {pool}; see {con.log_dir / 'data.log'}")
        st.rl_data = str(pool)
        pool_note = f"; RL pool {len(rl_games)} other games ({pool})"
    write_tasks(rl_games, str(out / "data" / "train_tasks.jsonl"))
    st.train_tasks = str(out / "data" / "train_tasks.jsonl")
    return (f"{counts['train']} train games; test panels (seed {test_seed}): {counts['heldout']} valid_seen"
            + (f", {counts['test_unseen']} valid_unseen" if "test_unseen" in counts else "")
            + (f"; validation panel {counts['val']} valid_seen (seed {VALIDATION_SEED_OFFSET + cfg.data_seed})"
               if "val" in counts else "") + f"; disjoint; task types {types}"
            + "".join(f", <= {value} {what}" for _, _, value, what in caps) + f"; {root}" + pool_note)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def phase_data_webshop(cfg: QuickstartConfig, st: State, out: Path, con: Console) -> str:
    import urllib.request

    from gaca_openrlhf.rollout.tasks import write_tasks

    port = _free_port()
    log = open(con.log_dir / "webshop_server.log", "a")
    # the catalog, as examples/cpu/_common.sh's start_webshop_server: WebShop's real files when given, a generated
    # stand-in only on explicit opt-in (--webshop-generated or WEBSHOP_GENERATED=1)
    if cfg.webshop_data:
        data_args = ["--data-dir", cfg.webshop_data, "--catalog", os.environ.get("WEBSHOP_CATALOG", "auto")]
    elif cfg.webshop_generated:
        data_args = ["--num-products", str(cfg.webshop_products), "--seed", str(cfg.data_seed)]
    else:
        raise PhaseError("WebShop needs its data: pass --webshop-data DIR (or set WEBSHOP_DATA) with WebShop's "
                         "items_shuffle*.json / items_ins_v2*.json / items_human_ins.json, or --webshop-generated "
                         "(or WEBSHOP_GENERATED=1) to use a generated stand-in catalog (not comparable with "
                         "published numbers)")
    cmd = [sys.executable, "-m", "webshop_server", "--host", "127.0.0.1", "--port", str(port), *data_args,
           "--production", "--threads", "4", "--expose-goals"]
    log.write(f"$ {shlex.join(cmd)}\n")
    log.flush()
    st.server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=child_env())
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 600
    while time.time() < deadline:
        if st.server.poll() is not None:
            raise PhaseError(f"the WebShop server exited with {st.server.returncode}; see {con.log_dir / 'webshop_server.log'}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                health = json.loads(r.read())
                break
        except OSError:
            time.sleep(1)
    else:
        raise PhaseError("the WebShop server did not come up within 10 minutes")
    st.webshop_url = url
    n_train = max(cfg.train_games, cfg.rl_tasks_per_iter)
    write_tasks([f"train:{i}" for i in range(n_train)], str(out / "data" / "train_tasks.jsonl"))
    st.train_tasks = str(out / "data" / "train_tasks.jsonl")
    st.panel = "test"  # test panel: the first --heldout-games goals of upstream's test split (goals 0-499)
    # validation panel: as many goals of upstream's eval split (goals 500-1499); choices are made there
    st.extra_panels = {"val": "eval"} if cfg.val_games > 0 else {}
    st.catalog_generated = bool(health.get("generated"))
    return f"server {url}: {health.get('products')} products ({'generated' if health.get('generated') else 'real'} catalog)"
