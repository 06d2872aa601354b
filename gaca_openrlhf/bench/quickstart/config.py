"""The quickstart's sizes: :class:`QuickstartConfig`, the ``full`` and ``smoke`` presets, the ``--compare`` budget and
the generator seeds of the panels (each an offset from ``--data-seed``)."""
from __future__ import annotations

from dataclasses import dataclass, field, fields, make_dataclass, replace

from agents.registry import DEFAULT_ENV, specs

METHODS = ("grpo", "gigpo", "gaca")


@dataclass
class CommonConfig:
    """The settings of one quickstart run that every environment has (:class:`QuickstartConfig` adds each
    environment's own)."""

    env: str = DEFAULT_ENV  # the registered environment (agents.registry); its quickstart hooks do the env's part
    # 2582 searcher step samples (<= 6 receptacles, no distractors). Measured at ~3000 SFT steps: 256 games -> held-out
    # 47.9 +- 2.9 %, 64 games (367 samples, --sft-epochs 38.5) -> 43.8 +- 0.0 %, in the same ~15 minutes
    train_games: int = 256
    # held-out panel (split valid_seen). 64 games, not 16: the first 16 are easier than the split (the 47.9 % warm start
    # wins 35.9 % of 64) and one game of 16 is 6.25 points; measured 64-game eval ~90 s with 16 env slots (16: ~60 s)
    heldout_games: int = 128  # test panel: valid_seen games (the paper's in-distribution panel size)
    val_games: int = 64  # validation panel (valid_seen, own generator seed): every choice of a default is made here
    # learning curve on the validation panel: RL saves an HF checkpoint every N iterations and each is evaluated on
    # the validation panel after the run (the final model is evaluated on every panel anyway); 0 = final model only
    val_every: int = 4
    data_seed: int = 0
    model_size: str = "small"
    sft_epochs: float = 9.6  # ~3000 SFT steps on the ~2500 upsampled samples: object copying appears after ~2000
    sft_lr: float = 2e-3
    sft_prompt_loss_weight: float = 0.3  # next-token loss on prompt tokens, relative weight (sft --prompt-loss-weight)
    # rename entity classes in this share of drawn samples (sft --augment-prob; applies to environments with entity
    # names, EnvSpec.sft_augment: ALFWorld)
    sft_augment_prob: float = 0.8
    sft_upsample: str = "take=3,move=3"  # repeat samples of these action verbs (sft --upsample)
    sft_cycles: int = 2  # cosine cycles with restarts, the second at half the lr (sft --cycles)
    # the copy gate (sft --max-cycles, --check-verbs): after the 2 cycles, add a cycle at half the last peak while the
    # greedy action is exact on < 90 % of 64 renamed take/move training samples, up to 4 cycles in all. SFT seed 1
    # copied object names on 35/64 held-out take steps after 2 cycles (seeds 0, 2: 64/64, 62/64), 62/64 after a third
    # (notebook section 8); seeds that pass after 2 cycles get bitwise the ungated warm start
    sft_max_cycles: int = 4
    sft_check_verbs: str = "take,move"
    # the SFT's seed (sample order, entity renaming; sft --seed): the warm start's own spread over SFT seeds (issue
    # 35). Seed 0's warm start is cached as warm-<env>-<size>, any other as warm-<env>-<size>-sft<seed>
    sft_seed: int = 0
    # one evaluation seed per test game: intervals come from training seeds and test games (bootstrap), and three
    # panels of 128 + 64 + 64 games x 3 seeds would take ~10 min per model on 2 AVX2 cores
    eval_seeds: tuple[int, ...] = (0,)
    eval_temperature: float = 0.4
    max_steps: int = 15  # episode cap in RL and evaluation (most of the subset's walkthroughs need <= 13)
    max_new_tokens: int = 48
    # The RL recipe (issue 35, docs/learning_notebook.md §1-§5): 12 iterations of 8 games x 8 episodes, rollouts at
    # temperature 0.7, constant lr 1e-4, updates of 128 step samples, on the RL pool (rl_pool_games). Chosen on the
    # validation panel by a rule written before the result (GRPO, training seeds 0-2, paired 4-episode validation
    # +10.9 [+2.2, +19.5] points); the test panel, read once after 5 seeds: GRPO +18.0 [+10.0, +25.8]
    # (results/alfworld_minibatch_2026-12-05; 14-20 min of RL per seed on 2 AVX512-bf16 cores in fp32). The old
    # defaults (8 x 8 x 4, T 0.4, cosine to 0.1x, updates of 32) moved no method off the warm start
    # (results/alfworld_compare_2026-12-03_v2). The --compare budget too, so that the plain command's run is the
    # compare's GACA run of the same training seed and its distribution over seeds is the compare's GACA row.
    rl_iterations: int = 12
    rl_tasks_per_iter: int = 8
    # episodes per task group: came with step 2's recipe (notebook §2), not varied on its own since. At T 0.7, 64 % of
    # the warm start's groups of 4 on training games had mixed outcomes (§1); a group of 8 is mixed at least as often
    rl_n: int = 8
    # measured from the 64-game warm start at temperature 1.0, 12 iterations of 8 x 4: +4.2 points held-out on seed 0
    # (3e-5: +0.0, 2e-4: +2.1); kept by the recipe above
    rl_lr: float = 1e-4
    # LR schedule over the run's iterations (train_ppo --actor.lr_scheduler / --actor.min_lr_ratio; stepped once per
    # iteration; a transformers scheduler name). "constant" holds rl_lr: OpenRLHF's default cosine_with_min_lr
    # decayed to 0.13x by iteration 8 of 8, and ppo_kl fell 4-20x in the second half (issue 35)
    rl_lr_scheduler: str = "constant"
    rl_min_lr_ratio: float = 0.1  # the floor of the *_with_min_lr schedules, as a share of rl_lr; others ignore it
    # step samples per Adam update (train_ppo --train.batch_size): an iteration's ~800 step samples make 6-8 updates.
    # With updates of 32 (18-29 per iteration) seeds' validation gains spanned 30 points; with 128, 3 (notebook §5)
    rl_mini_batch_steps: int = 128
    # rollout sampling temperature in RL (evaluation: eval_temperature 0.4, as verl-agent's). At 0.4 rollouts were
    # near-deterministic (most task groups without outcome contrast, notebook §1); at 1.0 RL sharpened the small model
    # toward the mode a 0.4 evaluation already plays and its loops grew (repeat ratio ~0.30 -> ~0.40); 0.7 between
    rl_temperature: float = 0.7
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
    # what counts as an invalid (penalised, c = 0.1) step in RL: "format" (verl-agent's projection) or "admissible"
    # (also an action off the environment's admissible list). Half the warm start's held-out actions are off the list
    # (looping `go to` where it stands, objects that are not there); measured with admissible: see the module docstring.
    # ALFWorld only; WebShop keeps "format" unless asked
    rl_validity: str = "admissible"
    # subtract each task group's mean advantage over its step samples (train_ppo --gaca.center; docs/design.md §3.4):
    # "group" removes the self-imitation term GACA's per-step gate adds (GRPO and GiGPO are zero-mean already);
    # "none" = every estimator as published
    rl_center: str = "none"


def _env_options() -> dict:
    """Every quickstart environment's own settings (:attr:`agents.base.QuickstartHooks.options`): name -> (the
    environment's name, :class:`agents.base.QuickstartOption`). A name is a field and a flag of one config, so it may
    be taken once: by a common setting or by one environment's option."""
    owner = {f.name: "common" for f in fields(CommonConfig)}
    out = {}
    for s in specs(with_quickstart=True):
        for o in s.quickstart.options:
            if o.name in owner:
                raise TypeError(f"quickstart option {o.name!r} of {s.name!r} is already a setting of the quickstart "
                                f"({owner[o.name]})")
            owner[o.name] = s.name
            out[o.name] = (s.name, o)
    return out


#: option name -> (environment name, option) of every environment's own setting (the fields QuickstartConfig adds)
ENV_OPTIONS = _env_options()
QuickstartConfig = make_dataclass(
    "QuickstartConfig", [(o.name, o.type, field(default=o.default, metadata={"help": o.help} if o.help else {}))
                         for _, o in ENV_OPTIONS.values()], bases=(CommonConfig,))
QuickstartConfig.__module__ = __name__
QuickstartConfig.__doc__ = """Sizes of one quickstart run (``full`` and ``smoke`` presets below; every field has a CLI
flag): the common settings (:class:`CommonConfig`), then each environment's own (its spec's quickstart options,
:class:`agents.base.QuickstartOption`)."""

PRESETS = {
    "full": QuickstartConfig(),
    # each environment's configure hook makes its own options' smoke changes; no copy gate (a 2-epoch SFT never
    # copies, and the gate's extra cycles would only lengthen CI)
    "smoke": QuickstartConfig(train_games=4, heldout_games=3, val_games=2, model_size="smoke", sft_epochs=2.0,
                              sft_max_cycles=0, max_steps=6, max_new_tokens=40, rl_iterations=2,
                              rl_tasks_per_iter=2, rl_n=2, rl_mini_batch_steps=8, num_envs=3, val_every=1),
}


def plain_config(env: str = DEFAULT_ENV) -> QuickstartConfig:
    """The configuration of the plain ``bash scripts/quickstart.sh --env ENV`` (no flag): the full preset with the
    environment's own preset changes."""
    from agents.registry import spec

    cfg = replace(PRESETS["full"], env=env)
    hooks = spec(env).quickstart
    return hooks.configure(cfg, set(), False) if hooks is not None else cfg


#: settings added after records were committed, with the value every record without them ran with (a record's
#: config lacking one of these ran at this value: the records' comparisons read it so, bench/records/, choice.py)
IMPLICIT_BEFORE = {"rl_lr_scheduler": "cosine_with_min_lr", "rl_min_lr_ratio": 0.1, "rl_center": "none",
                   "sft_seed": 0,
                   # the records before the copy gate ran 2 cycles with no check; SFT seed 0's warm start, the one
                   # they share, passes the check after its 2 cycles (results/alfworld_sft_gate_2026-12-05), so
                   # they ran what the gated recipe makes (SFT seeds 1-2 differ from the plain command by sft_seed)
                   "sft_max_cycles": 4, "sft_check_verbs": "take,move",
                   "sft_detours": 0}  # recovery demonstrations came after every record before 2026-12-06


def recorded_setting(cfg: dict, name: str):
    """``name`` of a record's config, or the value it implicitly had (:data:`IMPLICIT_BEFORE`) where it is absent."""
    return cfg.get(name, IMPLICIT_BEFORE.get(name))


COMPARE_SEEDS = (0, 1, 2, 3, 4)  # issue 24: at least 5 training seeds per method
#: the validation panel's generator seed is this plus --data-seed (train and test panels use --data-seed)
VALIDATION_SEED_OFFSET = 500
#: the test panels' generator seed is this plus --data-seed (train uses --data-seed)
TEST_SEED_OFFSET = 2000
#: the RL pool's generator seed is this plus --data-seed (the SFT games and the held-out panel use --data-seed)
RL_POOL_SEED_OFFSET = 1000
