"""``python -m gaca_openrlhf.sft``: expert demonstrations -> quickstart model -> SFT warm start, in one command.

    python -m gaca_openrlhf.sft alfworld --data ROOT --split train --out DIR [--model-size small|smoke] [--epochs E]
    python -m gaca_openrlhf.sft webshop --url http://127.0.0.1:PORT --goals 0:32 --out DIR   # train:0 .. train:31

Renders the demonstrations with the training prompts (:mod:`gaca_openrlhf.sft.demos`), builds the model with a
tokenizer trained on them (:mod:`gaca_openrlhf.models.agent`, cached), fine-tunes it (:mod:`gaca_openrlhf.sft.train`)
and saves the warm start to ``--out`` with ``demos.jsonl`` and ``gaca_sft.json`` (stats, recipe, cache key). A
folder whose ``gaca_sft.json`` has the same key (same demonstrations, model and recipe) is reused. The last stdout
line is the JSON of the stats.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

#: MKL's conditional numerical reproducibility, set before torch loads MKL (a user's own ``MKL_CBWR`` wins): fp32
#: GEMMs take MKL's AVX2 code path on every x86 CPU. That is the path MKL already takes on AMD CPUs (the 3101-step
#: ALFWorld SFT came out bitwise the same on AMD AVX2 and AVX512-bf16 VMs, and ``AVX2`` leaves it so), while on
#: Intel AVX512/AMX CPUs MKL picks its own kernels by default, which round differently; over ~3000 SFT steps such
#: differences grow into another warm start (issue 35: 29.7 % vs 52.3 %). Untested on Intel (notebook §11).
MKL_CBWR_DEFAULT = "AVX2"
os.environ.setdefault("MKL_CBWR", MKL_CBWR_DEFAULT)


def _bar(desc: str):
    from tqdm import tqdm

    state = {}

    def update(done: int, total: int, loss: float | None = None) -> None:
        bar = state.get("bar")
        if bar is None or bar.total != total:  # a new bar when the copy gate adds a cycle
            if bar is not None:
                bar.close()
            bar = state["bar"] = tqdm(total=total, desc=desc, file=sys.stderr, dynamic_ncols=True, mininterval=5)
        bar.n = done
        if loss is not None:
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        bar.refresh()
        if done >= total:
            bar.close()
            state["bar"] = None

    return update


def main(argv=None) -> int:
    from agents.base import EnvConfigError
    from agents.registry import specs
    from gaca_openrlhf.models.agent import SIZES
    from gaca_openrlhf.sft.train import SFTConfig

    p = argparse.ArgumentParser(prog="python -m gaca_openrlhf.sft", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="env", required=True)
    by_name = {}
    for spec in specs():  # one subcommand per environment with a demonstrator (EnvSpec.sft_demos)
        if spec.sft_demos is None:
            continue
        s = sub.add_parser(spec.name)
        if spec.add_sft_args is not None:
            spec.add_sft_args(s)
        by_name[spec.name] = (spec, s)
    for spec, s in by_name.values():
        s.add_argument("--out", required=True, help="warm-start model folder to write")
        s.add_argument("--model-size", default="small", choices=sorted(SIZES))
        s.add_argument("--epochs", type=float, default=SFTConfig.epochs)
        s.add_argument("--batch-size", type=int, default=SFTConfig.batch_size)
        s.add_argument("--lr", type=float, default=SFTConfig.lr)
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--history-k", type=int, default=2)
        s.add_argument("--prompt-max-len", type=int, default=SFTConfig.prompt_max_len)
        s.add_argument("--prompt-loss-weight", type=float, default=SFTConfig.prompt_loss_weight,
                       help="weight of the next-token loss on prompt tokens (0: response tokens only)")
        s.add_argument("--augment-prob", type=float, default=SFTConfig.augment_prob,
                       help="probability that a drawn sample has its object/receptacle names renamed "
                            "consistently (gaca_openrlhf.sft.augment; 0: off; environments with entity names only)")
        s.add_argument("--upsample", default=SFTConfig.upsample, metavar="VERB=TIMES,...",
                       help="repeat samples whose action starts with VERB TIMES times, e.g. take=3,move=3")
        s.add_argument("--cycles", type=int, default=SFTConfig.cycles,
                       help="cosine learning-rate cycles with restarts, cycle c peaking at lr * 0.5**c")
        s.add_argument("--max-cycles", type=int, default=SFTConfig.max_cycles,
                       help="the copy gate: add cycles while the copy check fails, up to this many in all "
                            "(<= --cycles: off; SFTConfig.max_cycles)")
        s.add_argument("--check-verbs", default=SFTConfig.check_verbs, metavar="VERB,...",
                       help="the copy check's samples: actions starting with these verbs, e.g. take,move")
        s.add_argument("--check-min", type=float, default=SFTConfig.check_min,
                       help="share of exact greedy actions that passes the copy check")
        s.add_argument("--no-progress", action="store_true")
        s.add_argument("--progress-lines", action="store_true",
                       help="print '[gaca-progress] <stage> done/total' lines on stdout instead of progress bars "
                            "(for a parent process: gaca_openrlhf.progress_lines)")
    args = p.parse_args(argv)

    from gaca_openrlhf.models.agent import ensure_agent_model
    from gaca_openrlhf.sft.demos import save_demos
    from gaca_openrlhf.sft.train import parse_upsample, train_sft

    env = by_name[args.env][0]
    out = Path(args.out)
    def progress_for(stage: str):
        if args.progress_lines:
            from gaca_openrlhf.progress_lines import ProgressLines

            return ProgressLines(stage)
        return None if args.no_progress else _bar(stage)

    progress = progress_for("demonstrations")
    try:
        steps, demo_stats = env.sft_demos(args, progress)
    except EnvConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code
    if not steps:
        print(f"error: no winning demonstrations ({demo_stats})", file=sys.stderr)
        return 1
    spec = SIZES[args.model_size]
    cfg = SFTConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, seed=args.seed,
                    prompt_max_len=args.prompt_max_len, prompt_loss_weight=args.prompt_loss_weight,
                    augment_prob=args.augment_prob if env.sft_augment else 0.0, upsample=args.upsample,
                    cycles=args.cycles, max_cycles=args.max_cycles, check_verbs=args.check_verbs,
                    check_min=args.check_min)
    try:
        parse_upsample(cfg.upsample)
    except ValueError as e:
        print(f"error: --upsample: {e}", file=sys.stderr)
        return 2
    tmp_demos = out.parent / f".{out.name}.demos.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    demos_hash = save_demos(steps, str(tmp_demos))
    key = hashlib.sha256(json.dumps([demos_hash, asdict(spec), asdict(cfg)], sort_keys=True).encode()).hexdigest()[:16]
    meta = out / "gaca_sft.json"
    if meta.is_file():
        try:
            old = json.loads(meta.read_text())
            if old.get("key") == key:
                tmp_demos.unlink(missing_ok=True)
                print(f"warm start {out} is up to date (key {key})", file=sys.stderr)
                print(json.dumps(old))
                return 0
        except json.JSONDecodeError:
            pass
    texts = [s.prompt for s in steps] + [s.response for s in steps]
    base = ensure_agent_model(texts, spec)
    print(f"base model {base}", file=sys.stderr)
    bar = progress_for("SFT-steps")
    augment = None
    if cfg.augment_prob > 0:
        from gaca_openrlhf.sft.augment import Renamer

        augment = Renamer([s.prompt for s in steps])
    stats = train_sft(base, [(s.prompt, s.response) for s in steps], out, cfg, log=lambda m: print(m, file=sys.stderr),
                      progress=bar, augment=augment)
    stats.update(key=key, demos=demo_stats, demos_hash=demos_hash, model_spec=asdict(spec), base_model=str(base),
                 model_size=args.model_size, mkl_cbwr=os.environ.get("MKL_CBWR"))
    meta.write_text(json.dumps(stats, indent=1))
    os.replace(tmp_demos, out / "demos.jsonl")
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
