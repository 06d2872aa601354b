"""Inner-loop probe for the quickstart warm start: SFT variant -> greedy decoding on train and held-out prompts.

Cheaper than a full evaluation (no vLLM, no environment): it decodes greedily with transformers on 40 sampled
demonstration prompts of each set and counts the expert's exact action and admissible actions per verb
(``go`` / ``open`` / ``take`` / ``move``). ``take`` and ``move`` need the object's name copied from the prompt --
the capability the from-scratch quickstart model acquires last (after ~2000 SFT steps; see
gaca_openrlhf/bench/quickstart/__init__.py's status).

    # demonstrations: <warm start>/demos.jsonl (written by python -m gaca_openrlhf.sft); held-out ones e.g. with
    #   agents.alfworld.demos.alfworld_demos(ROOT, games_of_valid_seen, expert="search") + save_demos
    python examples/cpu/sft_copy_probe.py --demos TRAIN.jsonl --heldout HELD.jsonl --steps 600 \
        --prompt-loss-weight 0.3 --augment-prob 0.8 --out /tmp/probe1
    python examples/cpu/sft_copy_probe.py --demos TRAIN.jsonl --heldout HELD.jsonl --steps 0 --init WARM  # probe only
    # every held-out prompt (the warm starts' copy steps: take / move); HELD.jsonl of the 64 validation games:
    #   save_demos(alfworld_demos(VAL_ROOT, val_panel["games"], expert="search")[0], HELD.jsonl)
    python examples/cpu/sft_copy_probe.py --demos TRAIN.jsonl --heldout HELD.jsonl --steps 0 --init WARM --probe-n 0
    # the SFT's copy gate (gaca_openrlhf.sft.train.copy_check) on a warm start, as its SFT computes it
    python examples/cpu/sft_copy_probe.py --demos WARM/demos.jsonl --heldout HELD.jsonl --steps 0 --init WARM --gate
    # the runs behind the quickstart recipe (no-distractor games; 3000 steps = 1500 + 1500 from the first model):
    python examples/cpu/sft_copy_probe.py --demos TRAIN.jsonl --heldout HELD.jsonl --steps 1500 --upsample take=3,move=3 \
        --prompt-loss-weight 0.3 --augment-prob 0.8 --out /tmp/d
    python examples/cpu/sft_copy_probe.py --demos TRAIN.jsonl --heldout HELD.jsonl --steps 1500 --upsample take=3,move=3 \
        --prompt-loss-weight 0.3 --augment-prob 0.8 --lr 1e-3 --init /tmp/d --out /tmp/f
"""
import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def probe(model_dir, demos, name, n=40, seed=0):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gaca_openrlhf.sft.augment import admissible_items
    from gaca_openrlhf.sft.train import encode_prompt

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    res = {}
    for d in random.Random(seed).sample(demos, min(n, len(demos))) if n else demos:
        ids = torch.tensor([encode_prompt(tok, d.prompt)])
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=48, do_sample=False, eos_token_id=tok.eos_token_id,
                                 pad_token_id=tok.pad_token_id)
        text = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        want = d.response.split("<action>")[1].split("</action>")[0]
        got = text.split("<action>")[-1].split("</action>")[0] if "<action>" in text else None
        c = res.setdefault(want.split()[0], [0, 0, 0])
        c[0] += got == want
        c[1] += got in admissible_items(d.prompt)
        c[2] += 1
    tot = [sum(v[i] for v in res.values()) for i in range(3)]
    print(f"PROBE {name}: exact {tot[0]}/{tot[2]} admissible {tot[1]}/{tot[2]} "
          + " ".join(f"{k} {v[0]}/{v[2]}(adm {v[1]})" for k, v in sorted(res.items())), flush=True)


def gate(model_dir, demos):
    """The copy gate's check (SFTConfig defaults, the quickstart's verbs and renaming) of ``model_dir``."""
    import json

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gaca_openrlhf.bench.quickstart.config import PRESETS
    from gaca_openrlhf.sft.augment import Renamer
    from gaca_openrlhf.sft.train import SFTConfig, copy_check, encode_samples, greedy_responder

    cfg, q = SFTConfig(), PRESETS["full"]
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    pairs = [(d.prompt, d.response) for d in demos]
    longest = max(len(r) for _, r in encode_samples(tok, pairs, cfg.prompt_max_len))
    check = copy_check(greedy_responder(model, tok, cfg.prompt_max_len, longest + 8), pairs, q.sft_check_verbs,
                       cfg.check_samples, Renamer([p for p, _ in pairs]))
    print("GATE", model_dir, json.dumps(check), "passes" if check["exact"] >= cfg.check_min else "fails", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demos", required=True)
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--steps", type=int, default=300, help="SFT steps (0: probe --init as it is)")
    ap.add_argument("--prompt-loss-weight", type=float, default=0.0)
    ap.add_argument("--augment-prob", type=float, default=0.0)
    ap.add_argument("--upsample", default="", help="e.g. take=3,move=3 (sft --upsample)")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--model-size", default="small")
    ap.add_argument("--init", default="", help="start from this model folder (default: a fresh quickstart model)")
    ap.add_argument("--copy-steps", type=int, default=0, help="synthetic copy pre-training steps before SFT")
    ap.add_argument("--out", default="")
    ap.add_argument("--probe-n", type=int, default=40, help="prompts probed per set (0: every one)")
    ap.add_argument("--gate", action="store_true",
                    help="with --steps 0: print the SFT copy gate's check of --init (the quickstart's settings)")
    a = ap.parse_args()
    from gaca_openrlhf.models.agent import SIZES, ensure_agent_model
    from gaca_openrlhf.sft.augment import Renamer
    from gaca_openrlhf.sft.demos import load_demos
    from gaca_openrlhf.sft.train import SFTConfig, train_sft

    train, held = load_demos(a.demos), load_demos(a.heldout)
    model = a.init
    if a.steps:
        if not a.out:
            ap.error("--out is needed to train")
        base = a.init or str(ensure_agent_model([s.prompt for s in train] + [s.response for s in train],
                                                SIZES[a.model_size]))
        pairs = [(s.prompt, s.response) for s in train]
        if a.copy_steps and not a.init:
            from transformers import AutoTokenizer

            from gaca_openrlhf.sft.copy_pretrain import CopyPretrainConfig, copy_pretrain
            from gaca_openrlhf.sft.train import encode_prompt

            tok = AutoTokenizer.from_pretrained(base)
            pool = {t for p, r in pairs[:200] for t in encode_prompt(tok, p) + tok(r)["input_ids"]}
            t0 = time.time()
            copy_pretrain(base, pool, a.out + "-copy", CopyPretrainConfig(steps=a.copy_steps),
                          progress=lambda i, n, loss: print(f"copy step {i}/{n} loss {loss:.3f} "
                                                            f"{time.time() - t0:.0f}s", flush=True)
                          if i % 50 == 0 or i == n else None)
            base = a.out + "-copy"
        from gaca_openrlhf.sft.train import upsample_pairs

        n = len(upsample_pairs(pairs, a.upsample))
        cfg = SFTConfig(epochs=a.steps / -(-n // a.batch_size), lr=a.lr, batch_size=a.batch_size,
                        prompt_loss_weight=a.prompt_loss_weight, augment_prob=a.augment_prob, upsample=a.upsample)
        t0 = time.time()
        train_sft(base, pairs, a.out, cfg, augment=Renamer([p for p, _ in pairs]) if a.augment_prob else None,
                  progress=lambda i, n, loss: print(f"step {i}/{n} loss {loss:.3f} {time.time() - t0:.0f}s",
                                                    flush=True) if i % 50 == 0 or i == n else None)
        model = a.out
    if a.gate:
        gate(model, train)
        return
    probe(model, train, "train", n=a.probe_n)
    probe(model, held, "heldout", n=a.probe_n)


if __name__ == "__main__":
    main()
