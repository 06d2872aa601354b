"""The quickstart's ALFWorld leg (:class:`agents.base.QuickstartHooks`): its own settings (:data:`OPTIONS`, their
smoke values and checks), the generated games and panels (train, retired, test, validation, the RL pool; disjoint,
cached under ``$GACA_CACHE/quickstart``), the options of the SFT, evaluation and RL commands, and the report's data
paragraph and setting line."""
from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from agents.base import QuickstartOption

#: the ALFWorld leg's own settings (fields of the quickstart's config; flags --task-types, --max-receptacles, ...)
OPTIONS = (
    QuickstartOption("task_types", str, "1"),  # task types of the easier subset (1 = pick_and_place_simple)
    QuickstartOption("max_receptacles", int, 6),  # easier subset: receptacles per room (0 = the floor plan's all)
    # easier subset: other object classes per room (-1 = all; 0 = only the goal's)
    QuickstartOption("max_distractor_types", int, 0),
    # demonstrations: search (observation-consistent) | walkthrough (privileged)
    QuickstartOption("expert", str, "search"),
    # recovery demonstrations (sft --detours, searcher only): per SFT game, this many more episodes that make one
    # mistake (repeat a step, go to where the agent stands, wander) and recover; trained on after the mistake only.
    # 1 adds 865 samples to the 256 games' 1558 (4211 upsampled instead of 2582): --sft-epochs 5.886 keeps the 3102
    # SFT steps (results/alfworld_sft_detours_2026-12-05). Off until RL from it is measured (notebook section 9)
    QuickstartOption("sft_detours", int, 0),
    # RL on N other games of the subset (another generator seed) instead of the SFT games; 0 = the SFT games. 256
    # (245 after the disjointness filter) is the issue-35 recipe's pool (notebook §3: on the SFT games, which the warm
    # start has partly memorised, RL did not raise validation success; on fresh games it did). The smoke preset: 0
    QuickstartOption("rl_pool_games", int, 256),
    # test panel: valid_unseen games (ALFRED's unseen floor plans); 0 = none
    QuickstartOption("unseen_games", int, 64),
    # the retired tuning panel: the pre-issue-24 quickstart's held-out panel (valid_seen, generator seed --data-seed),
    # on which its defaults were chosen; generated only so that every panel of today excludes it; 0 = none
    QuickstartOption("retired_games", int, 64),
    # where RL runs ALFWorld's engines: "local" = threads in the rollout actor taking turns on one lock
    # (agents/alfworld/README), "ray" = one Ray worker process per episode slot (crash isolation, parallel steps; the
    # GPU recipes). On 2 cores local is faster: 32 workers took ~89 s to start in the first iteration and ~12 % of
    # the machine while idle; measured RL 8 min 26 s vs 9 min 57 s (12 iterations of 8 x 4, seed 0)
    QuickstartOption("rl_env_backend", str, "local"),
    # where evaluations run ALFWorld's engines (--alfworld-backend of the eval CLI): "local" = threads of the eval
    # process on the engine lock, no Ray (measured: 60 s vs 103 s for the 3-seed held-out eval, the same 48 episodes
    # action for action); "ray" = one worker process per env slot
    QuickstartOption("eval_env_backend", str, "local"),
)

#: the smoke preset's values of the options above (the common ones are in the quickstart's PRESETS["smoke"])
SMOKE = {"max_receptacles": 3, "max_distractor_types": 2, "unseen_games": 2, "retired_games": 2, "rl_pool_games": 0}


def data_phase(cfg, st, out, con, tools) -> str:
    """Phase 1: the generated games and panels (see the module doc); ``tools``: the quickstart's runner pieces."""
    types = ",".join(t.strip() for t in cfg.task_types.split(",") if t.strip())
    # one folder per (task types, seed, sizes): a panel lists every game of its split folder
    caps = []  # (folder tag, generator flag, value, summary) of each easier-subset cap in use
    if cfg.max_receptacles > 0:
        caps.append(("r", "--max-receptacles", cfg.max_receptacles, "receptacles"))
    if cfg.max_distractor_types >= 0:
        caps.append(("d", "--max-distractor-types", cfg.max_distractor_types, "distractor classes"))
    subset = "".join(f"-{tag}{value}" for tag, _, value, _ in caps)
    stem = tools.cache_root() / "quickstart" / f"alfworld-t{types.replace(',', '')}{subset}"
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
        tools.run_logged(cmd + ["--workers", str(min(4, os.cpu_count() or 1)), "--no-progress"],
                         con.log_dir / "data.log", env=tools.child_env())
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
    test_seed = tools.TEST_SEED_OFFSET + cfg.data_seed
    test_root = stem.with_name(f"{stem.name}-s{test_seed}-test{cfg.heldout_games}u{cfg.unseen_games}")
    splits["test"] = generate(test_root, "valid_seen", cfg.heldout_games, test_seed, list(splits.values()))
    if cfg.unseen_games > 0:
        splits["test_unseen"] = generate(test_root, "valid_unseen", cfg.unseen_games, test_seed,
                                         list(splits.values()))
    val_root = stem.with_name(f"{stem.name}-s{tools.VALIDATION_SEED_OFFSET + cfg.data_seed}-val{cfg.val_games}")
    if cfg.val_games > 0:
        splits["val"] = generate(val_root, "valid_seen", cfg.val_games, tools.VALIDATION_SEED_OFFSET + cfg.data_seed,
                                 list(splits.values()))
    from agents.alfworld.disjoint import OverlapError, check_disjoint

    try:  # the generator excluded these already; a changed generator must not slip through
        check_disjoint({k: v for k, v in splits.items() if k != "retired"})
        if "retired" in splits:  # the retired panel may share games with train, never with a panel of today
            check_disjoint({k: v for k, v in splits.items() if k != "train"})
    except OverlapError as e:
        raise tools.PhaseError(f"generated splits overlap: {e}") from e
    from agents.alfworld.panels import build_panel, save_panel

    type_ids = [int(t) for t in types.split(",")]

    def own_root_panel(panel_root, name: str, split: str) -> dict:
        """A panel of a split in its own data root, with absolute game paths (evaluation gets training's root)."""
        panel = build_panel(str(panel_root), name, split, task_types=type_ids)
        panel["games"] = [str(panel_root / g) for g in panel["games"]]
        return panel

    train = build_panel(str(root), "quickstart_train", "train", task_types=type_ids)
    held = own_root_panel(test_root, "quickstart_heldout", "valid_seen")
    counts = {"train": train["num_games"], "heldout": held["num_games"]}
    if not counts["train"] or not counts["heldout"]:
        raise tools.PhaseError(f"no games generated under {root} ({counts}); see {con.log_dir / 'data.log'}")
    save_panel(held, str(out / "data" / "heldout_panel.json"))
    save_panel(train, str(out / "data" / "train_panel.json"))
    st.data, st.panel, st.rl_data = str(root), str(out / "data" / "heldout_panel.json"), str(root)
    st.extra_panels = {}
    if cfg.unseen_games > 0:
        unseen = own_root_panel(test_root, "quickstart_test_unseen", "valid_unseen")
        counts["test_unseen"] = unseen["num_games"]
        save_panel(unseen, str(out / "data" / "test_unseen_panel.json"))
        st.extra_panels["test_unseen"] = str(out / "data" / "test_unseen_panel.json")
    if cfg.val_games > 0:
        val = own_root_panel(val_root, "quickstart_val", "valid_seen")
        counts["val"] = val["num_games"]
        save_panel(val, str(out / "data" / "val_panel.json"))
        st.extra_panels["val"] = str(out / "data" / "val_panel.json")
    rl_games = train["games"]
    pool_note = ""
    if cfg.rl_pool_games > 0:
        # RL's own games: the warm start has memorised the SFT games, so their groups are mostly all-success and carry
        # little advantage signal; fresh games of the same subset (another generator seed) are where it still fails
        pool_seed = tools.RL_POOL_SEED_OFFSET + cfg.data_seed
        pool = stem.with_name(f"{stem.name}-s{pool_seed}-rl{cfg.rl_pool_games}")
        generate(pool, "train", cfg.rl_pool_games, pool_seed)
        held_names = {Path(g).parent.name for g in held["games"]}  # <type>-<object>-None-<receptacle>-<floor plan>
        for path in st.extra_panels.values():
            held_names |= {Path(g).parent.name for g in json.loads(Path(path).read_text())["games"]}
        rl_games = [g for g in build_panel(str(pool), "quickstart_rl_pool", "train", task_types=type_ids)["games"]
                    if Path(g).parent.name not in held_names]  # never train on a held-out game's (goal, room)
        if not rl_games:
            raise tools.PhaseError(f"no RL pool games under {pool}; see {con.log_dir / 'data.log'}")
        st.rl_data = str(pool)
        pool_note = f"; RL pool {len(rl_games)} other games ({pool})"
    tools.write_tasks(rl_games, str(out / "data" / "train_tasks.jsonl"))
    st.train_tasks = str(out / "data" / "train_tasks.jsonl")
    return (f"{counts['train']} train games; test panels (seed {test_seed}): {counts['heldout']} valid_seen"
            + (f", {counts['test_unseen']} valid_unseen" if "test_unseen" in counts else "")
            + (f"; validation panel {counts['val']} valid_seen (seed {tools.VALIDATION_SEED_OFFSET + cfg.data_seed})"
               if "val" in counts else "") + f"; disjoint; task types {types}"
            + "".join(f", <= {value} {what}" for _, _, value, what in caps) + f"; {root}" + pool_note)


def configure(cfg, over, smoke: bool):
    """The smoke preset's :data:`SMOKE` values (of the options not in ``over``) and the checks of the options."""
    if smoke:
        cfg = replace(cfg, **{k: v for k, v in SMOKE.items() if k not in over})
    if cfg.expert not in ("search", "walkthrough"):
        raise SystemExit(f"unknown --expert {cfg.expert!r}; expected search or walkthrough")
    for flag, backend in (("--rl-env-backend", cfg.rl_env_backend), ("--eval-env-backend", cfg.eval_env_backend)):
        if backend not in ("ray", "local"):
            raise SystemExit(f"unknown {flag} {backend!r}; expected ray or local")
    if getattr(cfg, "sft_detours", 0) and cfg.expert != "search":
        raise SystemExit("--sft-detours needs --expert search (the recovery episodes are the searcher's)")
    if cfg.expert == "search" and cfg.task_types.replace(" ", "") != "1":
        raise SystemExit("--expert search plays task type 1 (pick_and_place_simple) only; "
                         "use --expert walkthrough for other task types")
    return cfg


def sft_source(cfg, st) -> list:
    detours = getattr(cfg, "sft_detours", 0)
    return (["alfworld", "--data", st.data, "--split", "train", "--expert", cfg.expert, "--max-steps", "50"]
            + (["--detours", str(detours)] if detours else []))


def eval_args(cfg, st) -> list:
    return (["--panel", st.panel, "--data", st.data, "--alfworld-backend", cfg.eval_env_backend]
            + [f"--extra-panel={name}={path}" for name, path in sorted(st.extra_panels.items())])


def rl_env_args(cfg, st) -> list:
    env_kwargs = {"backend": cfg.rl_env_backend, "data_dir": st.rl_data or st.data}
    if cfg.rl_env_backend == "ray":
        env_kwargs["num_cpus"] = 0
    return ["--env.kwargs", json.dumps(env_kwargs)]


def report_data(cfg, st) -> str:
    return (f"ALFWorld games generated offline (`python -m agents.alfworld generate`, seed {cfg.data_seed}), "
            f"**easier subset: task type(s) {cfg.task_types}** (1 = pick_and_place_simple)"
            + (f", **at most {cfg.max_receptacles} receptacles per room**"
               if getattr(cfg, "max_receptacles", 0) > 0 else "")
            + (f", **at most {cfg.max_distractor_types} other object classes**"
               if getattr(cfg, "max_distractor_types", -1) >= 0 else "")
            + f" -- not ALFWorld's task distribution, not comparable to published numbers. Train: {cfg.train_games} games (split `train`); "
            f"held-out panel: {cfg.heldout_games} games of split `valid_seen` (`{st.panel}`). Episodes capped at "
            f"{cfg.max_steps} steps, responses at {cfg.max_new_tokens} tokens. Demonstrations: "
            + ("the observation-consistent searcher (`agents/alfworld/search.py`)."
               if getattr(cfg, "expert", "walkthrough") == "search"
               else "the games' stored expert walkthroughs (privileged: they know where objects are)."))


def setting_data(cfg: dict) -> str:
    rooms = (f"<= {cfg['max_receptacles']} receptacles" if cfg.get("max_receptacles", 0) > 0 else "full rooms")
    distr = ("no distractor objects" if cfg.get("max_distractor_types") == 0 else
             "ALFRED's distractors" if cfg.get("max_distractor_types", -1) < 0 else
             f"<= {cfg['max_distractor_types']} distractor classes")
    # records made before the retired tuning panel existed drew their test panels from the train games' seed;
    # 2000 = gaca_openrlhf.bench.quickstart.config.TEST_SEED_OFFSET (tests/agents/alfworld/test_quickstart_setting.py)
    panels = (f"; test panels of generator seed {2000 + cfg.get('data_seed', 0)}, excluding the retired tuning panel"
              if "retired_games" in cfg else "; test panels of the train games' generator seed")
    return (f"generated ALFWorld games (not ALFWorld's data), task type(s) {cfg.get('task_types')}, {rooms}, "
            f"{distr}, {cfg.get('train_games')} train games" + panels)
