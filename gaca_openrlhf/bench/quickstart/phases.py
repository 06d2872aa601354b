"""Phases 2-5: the SFT warm start (or a given one), the held-out evaluations (with the validation curve of an RL
run's checkpoints) and the RL runs through ``train_ppo``; each returns its status-line detail."""
from __future__ import annotations

import json
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

from gaca_openrlhf.bench.quickstart.config import QuickstartConfig
from gaca_openrlhf.bench.quickstart.console import Console
from gaca_openrlhf.bench.quickstart.data import hooks
from gaca_openrlhf.bench.quickstart.resume import panel_digests, reusable_eval, reusable_run
from gaca_openrlhf.bench.quickstart.runner import PhaseError, child_env, run_logged
from gaca_openrlhf.bench.quickstart.state import WALL_TIME_FILE, State


def warm_start_path(cfg: QuickstartConfig) -> Path:
    """Where the quickstart's SFT writes (and reuses) its warm start: ``$GACA_CACHE/quickstart/warm-<env>-<size>``,
    with ``-sft<seed>`` for an SFT seed other than 0 (seed 0's folder keeps the name every record cites) and
    ``-det<n>`` with recovery demonstrations (ALFWorld's ``--sft-detours``)."""
    from gaca_openrlhf.models.tiny import cache_root

    detours = getattr(cfg, "sft_detours", 0)
    name = (f"warm-{cfg.env}-{cfg.model_size}" + (f"-sft{cfg.sft_seed}" if cfg.sft_seed else "")
            + (f"-det{detours}" if detours else ""))
    return cache_root() / "quickstart" / name


def phase_sft(cfg: QuickstartConfig, st: State, out: Path, con: Console) -> str:
    warm = warm_start_path(cfg)
    src = hooks(cfg).sft_source(cfg, st)  # the env's subcommand and demonstration source
    run_logged([sys.executable, "-m", "gaca_openrlhf.sft", *src, "--out", str(warm), "--model-size", cfg.model_size,
                "--epochs", str(cfg.sft_epochs), "--lr", str(cfg.sft_lr),
                "--prompt-loss-weight", str(cfg.sft_prompt_loss_weight), "--augment-prob", str(cfg.sft_augment_prob),
                "--upsample", cfg.sft_upsample, "--cycles", str(cfg.sft_cycles), "--seed", str(cfg.sft_seed),
                "--max-cycles", str(cfg.sft_max_cycles), "--check-verbs", cfg.sft_check_verbs, "--progress-lines"],
               con.log_dir / "sft.log", env=child_env(), on_progress=con.progress)
    st.warm = str(warm)
    st.sft = json.loads((warm / "gaca_sft.json").read_text())
    s = st.sft
    gate = ""
    if s.get("copy_checks"):
        scores = " -> ".join(f"{c['exact']:.2f}" for c in s["copy_checks"])
        gate = f"; copy check {scores} after {s['cycles_run']} cycles"
    return (f"{s['demos'].get('won')} expert episodes, {s['samples']} step samples, {s['steps']} steps, "
            f"loss {s['loss_first']:.2f} -> {s['loss_last10pct']:.3f}{gate}; {warm}")


def phase_given_warm_start(st: State, model_dir: str) -> str:
    path = Path(model_dir).resolve()
    if not (path / "config.json").is_file():
        raise PhaseError(f"--warm-start {model_dir}: no model there (config.json missing)")
    st.warm = str(path)
    stats = path / "gaca_sft.json"
    st.sft = json.loads(stats.read_text()) if stats.is_file() else {}
    return str(path)


def eval_command(cfg: QuickstartConfig, st: State, model: str, out_dir: Path, seeds) -> list[str]:
    """The command that evaluates ``model`` on the run's test panel and its extra panels in one engine
    (:mod:`gaca_openrlhf.bench.evaluate`), results under ``out_dir``."""
    cmd = [sys.executable, "-m", "gaca_openrlhf.bench.evaluate", "--seeds", ",".join(map(str, seeds)),
           "--out-dir", str(out_dir), "--model", model, "--env", cfg.env, "--episodes-per-task", "1",
           "--temperature", str(cfg.eval_temperature), "--max-steps", str(cfg.max_steps),
           "--max-tokens", str(cfg.max_new_tokens), "--num-envs", str(cfg.num_envs), "--record-actions",
           "--no-progress"]
    return cmd + hooks(cfg).eval_args(cfg, st)  # the env's panels, data root or server, prompt budget


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
        run_logged(eval_command(cfg, st, model, out_dir, seeds), con.log_dir / f"eval-{label}.log", env=child_env())
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
            cmd = eval_command(cfg, replace(st, panel=st.extra_panels["val"], extra_panels={}), str(ckpt), dest,
                            cfg.eval_seeds)
            run_logged(cmd, con.log_dir / f"eval-{label}-val-step{step}.log", env=child_env())
        parts.append(f"{step}: {100 * seed_stats(load_eval_dir(dest))[0]:.1f}")
    return f"; validation curve {', '.join(parts)} %" if parts else ""


def rl_command(cfg: QuickstartConfig, st: State, run_dir: Path, method: str, seed: int) -> list[str]:
    """The ``train_ppo`` command of one RL run: examples/cpu/_common.sh's CPU settings, quickstart sizes."""
    cmd = [
        sys.executable, "-m", "gaca_openrlhf.cli.train_ppo",
        "--actor.model_name_or_path", st.warm, "--actor.num_nodes", "1", "--actor.num_gpus_per_node", "1",
        "--ref.num_gpus_per_node", "1", "--vllm.num_engines", "1", "--vllm.gpu_memory_utilization", "0.1",
        "--data.input_key", "input", "--data.max_len", str(hooks(cfg).rl_max_len),
        "--data.prompt_dataset", st.train_tasks,
        "--rollout.batch_size", str(cfg.rl_tasks_per_iter), "--rollout.n_samples_per_prompt", str(cfg.rl_n),
        "--rollout.temperature", str(cfg.rl_temperature), "--rollout.micro_batch_size", "4", "--rollout.max_new_tokens",
        str(cfg.max_new_tokens), "--train.micro_batch_size", str(cfg.rl_micro_batch), "--train.max_epochs", "1",
        "--run.mini_batch_steps", str(cfg.rl_mini_batch_steps), "--train.num_episodes", "1000",
        "--train.seed", str(seed), "--algo.advantage.estimator", method, "--algo.kl.init_coef", str(cfg.rl_kl_coef),
        "--actor.adam.lr", str(cfg.rl_lr), "--actor.lr_warmup_ratio", "0", "--ds.zero_stage", "2",
        "--ds.attn_implementation", "sdpa", "--run.max_iterations", str(cfg.rl_iterations),
        "--env.name", cfg.env, "--env.max_steps", str(cfg.max_steps), "--env.validity", cfg.rl_validity,
        "--ckpt.output_dir", str(run_dir), "--ckpt.path", str(run_dir / "ckpt"),
        "--run.progress_lines", "true",  # iterations done, for the status line's time estimate
    ]
    if cfg.val_every > 0 and cfg.val_games > 0:  # HF checkpoints for the validation curve (no DeepSpeed states)
        cmd += ["--ckpt.save_steps", str(cfg.val_every), "--ckpt.save_hf", "--ckpt.disable_ds", "--ckpt.max_num",
                "1000"]
    else:
        cmd += ["--ckpt.save_steps", "-1"]
    if cfg.rl_kl_coef > 0:
        cmd += ["--algo.kl.use_loss", "--algo.kl.estimator", cfg.rl_kl_estimator]
    cmd += lr_schedule_args(cfg)
    if cfg.rl_center != "none":  # given only when set: a run at the default keeps its command (--resume reuses it)
        cmd += ["--gaca.center", cfg.rl_center]
    return cmd + hooks(cfg).rl_env_args(cfg, st)


#: train_ppo's own (OpenRLHF's) LR-schedule defaults, which the quickstart's defaults equal
TRAIN_PPO_LR_SCHEDULE = ("cosine_with_min_lr", 0.1)


def lr_schedule_args(cfg: QuickstartConfig) -> list[str]:
    """``--actor.lr_scheduler`` / ``--actor.min_lr_ratio`` for ``--rl-lr-scheduler`` / ``--rl-min-lr-ratio``, given
    only where they differ from train_ppo's defaults: a run at the defaults keeps the command it had before these
    options existed, so ``--resume`` still reuses it."""
    if (cfg.rl_lr_scheduler, cfg.rl_min_lr_ratio) == TRAIN_PPO_LR_SCHEDULE:
        return []
    return ["--actor.lr_scheduler", cfg.rl_lr_scheduler, "--actor.min_lr_ratio", str(cfg.rl_min_lr_ratio)]  # --env.kwargs and the env's own training options


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
        run_logged(cmd, con.log_dir / f"rl-{label}.log", env=child_env(), on_progress=con.progress)
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
