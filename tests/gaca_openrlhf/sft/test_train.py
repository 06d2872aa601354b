"""The SFT loop: it learns the response (loss masked on the prompt) and saves a loadable model."""
import json

import pytest
import torch

from gaca_openrlhf.models.agent import AgentModelSpec, build_agent_model, ensure_agent_model
from gaca_openrlhf.sft.train import SFTConfig, encode_samples, train_sft

PAIRS = [
    ("Your task is to: put a mug in desk.\nYour admissible actions are: ['go to desk 1', 'go to shelf 2'].",
     "<think>I should go to shelf 2.</think><action>go to shelf 2</action>"),
    ("Your task is to: put a pen in drawer.\nYour admissible actions are: ['go to drawer 3', 'take pen 1 from bed 1'].",
     "<think>I should take pen 1 from bed 1.</think><action>take pen 1 from bed 1</action>"),
]
SPEC = AgentModelSpec(vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return build_agent_model(tmp_path_factory.mktemp("m") / "base", [p for p, _ in PAIRS] + [r for _, r in PAIRS], SPEC)


def test_agent_model_is_cached_by_corpus_and_spec(base, tmp_path):
    texts = ["a b c", "d e f"] * 20
    spec = SPEC
    d = ensure_agent_model(texts, spec, out_dir=tmp_path / "m")
    stamp = (d / "model.safetensors").stat().st_mtime_ns
    assert ensure_agent_model(texts, spec, out_dir=tmp_path / "m") == d
    assert (d / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not rebuilt
    ensure_agent_model(texts + ["g"], spec, out_dir=tmp_path / "m")
    assert json.loads((d / "gaca_agent_model.json").read_text())["corpus_texts"] == len(texts) + 1
    cfg = json.loads((base / "config.json").read_text())
    assert cfg["tie_word_embeddings"] is False and cfg["head_dim"] >= 32


def test_encode_samples_uses_the_rollout_encoding_and_appends_eos(base):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    (p, r), _ = encode_samples(tok, PAIRS, prompt_max_len=2048)
    assert r[-1] == tok.eos_token_id
    assert tok.decode(r[:-1]) == PAIRS[0][1]
    assert tok.decode(p).endswith("<|im_start|>assistant\n")
    (p_short, _), _ = encode_samples(tok, PAIRS, prompt_max_len=10)
    assert p_short == p[-10:]  # left-truncated as the rollout does


def test_sft_learns_the_responses(base, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    stats = train_sft(base, PAIRS, tmp_path / "warm", SFTConfig(epochs=60, batch_size=2, lr=3e-3, warmup_frac=0.0),
                      log=lambda m: None)
    assert stats["loss_last10pct"] < 0.2 * stats["loss_first"]
    tok = AutoTokenizer.from_pretrained(tmp_path / "warm")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "warm")
    for (prompt, response), (ids, _) in zip(PAIRS, encode_samples(tok, PAIRS, 2048)):
        out = model.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False,
                             eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        assert tok.decode(out[0, len(ids):], skip_special_tokens=True) == response
    assert json.loads((tmp_path / "warm" / "gaca_sft.json").read_text())["samples"] == 2


def test_sft_rejects_empty_data(base, tmp_path):
    with pytest.raises(ValueError, match="no SFT samples"):
        train_sft(base, [], tmp_path / "x")


def test_sft_loss_weighs_prompt_tokens_as_defined():
    """Catches: prompt tokens leaking into the weight-0 loss, an unshifted target, or the weight ignored."""
    from gaca_openrlhf.sft.train import sft_loss

    torch.manual_seed(0)
    ids = torch.randint(0, 11, (2, 6))
    logits = torch.randn(2, 6, 11)
    pmask = torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]])
    rmask = torch.tensor([[0, 0, 0, 1, 1, 0], [0, 0, 1, 1, 1, 1]])  # row 0 padded at the end
    logp = torch.log_softmax(logits, -1)
    resp, prm = [], []
    for b in range(2):
        for t in range(1, 6):  # token t is predicted from position t - 1
            nll = -logp[b, t - 1, ids[b, t]].item()
            (resp if rmask[b, t] else prm if pmask[b, t] else []).append(nll)
    want0 = sum(resp) / len(resp)
    assert sft_loss(logits, ids, pmask, rmask, 0.0).item() == pytest.approx(want0, rel=1e-6)
    assert sft_loss(logits, ids, pmask, rmask, 0.3).item() == pytest.approx(want0 + 0.3 * sum(prm) / len(prm), rel=1e-6)
    # weight 0 is exactly the transformers masked-label loss the loop used before
    labels = torch.where(rmask.bool(), ids, torch.full_like(ids, -100))
    from transformers.loss.loss_utils import ForCausalLMLoss

    assert sft_loss(logits, ids, pmask, rmask).item() == pytest.approx(
        ForCausalLMLoss(logits, labels, vocab_size=11).item(), rel=1e-6)


def test_sft_applies_the_augmentation(base, tmp_path):
    """Catches: augment_prob ignored (the callable never called) or applied with probability 0."""
    calls = []

    def aug(prompt, response, rng):
        calls.append(prompt)
        return prompt, response

    train_sft(base, PAIRS, tmp_path / "a", SFTConfig(epochs=2, batch_size=2, augment_prob=1.0), log=lambda m: None,
              augment=aug)
    assert len(calls) == 4
    calls.clear()
    train_sft(base, PAIRS, tmp_path / "b", SFTConfig(epochs=2, batch_size=2, augment_prob=0.0), log=lambda m: None,
              augment=aug)
    assert calls == []


def test_upsample_repeats_only_the_named_verbs():
    from gaca_openrlhf.sft.train import upsample_pairs

    pairs = [("p1", "<think>x</think><action>go to desk 1</action>"),
             ("p2", "<think>take it</think><action>take pen 1 from bed 1</action>"),
             ("p3", "<think>y</think><action>move pen 1 to desk 1</action>")]
    out = upsample_pairs(pairs, "take=3, move=2")
    assert [p for p, _ in out] == ["p1", "p2", "p2", "p2", "p3", "p3"]
    assert upsample_pairs(pairs, "") == pairs


def test_upsample_and_copy_check_know_webshop_verbs():
    """WebShop's actions have no space after the verb (``click[b0kqo1hsg6]``). Catches: the verb read as the text
    up to the first space (``click[b0kqo1hsg6]</action>``), so that ``--upsample click=2`` and ``--check-verbs click``
    silently match nothing on WebShop."""
    from gaca_openrlhf.sft.train import action_verb, copy_check, upsample_pairs

    pairs = [("p0 s", "<think>a</think><action>search[baseball cap]</action>"),
             ("p1 c", "<think>b</think><action>click[b0kqo1hsg6]</action>"),
             ("p2 c", "<think>c</think><action>click[buy now]</action>")]
    assert [p for p, _ in upsample_pairs(pairs, "click=2")] == ["p0 s", "p1 c", "p1 c", "p2 c", "p2 c"]
    assert [p for p, _ in upsample_pairs(pairs, "search=3")] == ["p0 s"] * 3 + ["p1 c", "p2 c"]
    got = copy_check(lambda prompt: "<action>click[b0kqo1hsg6]</action>", pairs, "click", 8)
    assert got == {"exact": 0.5, "n": 2, "by_verb": {"click": [1, 2]}}
    assert [action_verb(a) for a in ("go to desk 1", "click[x]", " take a", "", "[x]")] == ["go", "click", "take", "", ""]


@pytest.mark.parametrize("bad", ["take", "take=0", "=2", "take=x", "take=-1"])
def test_upsample_rejects_malformed_entries(bad):
    from gaca_openrlhf.sft.train import parse_upsample

    with pytest.raises(ValueError, match="VERB=TIMES"):
        parse_upsample(bad)


def test_sft_counts_upsampled_samples(base, tmp_path):
    """Catches: SFTConfig.upsample ignored by the training loop."""
    stats = train_sft(base, PAIRS, tmp_path / "u", SFTConfig(epochs=1, batch_size=1, upsample="take=3"),
                      log=lambda m: None)
    assert stats["samples"] == 4 and stats["steps"] == 4


def test_lr_factor_restarts_each_cycle_at_a_decayed_peak():
    from gaca_openrlhf.sft.train import lr_factor

    # one cycle: warmup to 1, cosine to ~0
    assert lr_factor(0, 100, 10) == pytest.approx(0.1)
    assert lr_factor(9, 100, 10) == pytest.approx(1.0)
    assert lr_factor(55, 100, 10) == pytest.approx(0.5)
    assert lr_factor(99, 100, 10) < 0.01
    # second cycle: the same shape at half the peak
    assert lr_factor(109, 100, 10) == pytest.approx(0.5)
    assert lr_factor(155, 100, 10) == pytest.approx(0.25)
    assert lr_factor(155, 100, 10, cycle_decay=1.0) == pytest.approx(0.5)


def test_sft_uses_the_cycles(base, tmp_path, monkeypatch):
    """Catches: SFTConfig.cycles not reaching the schedule (the lr at the restart must jump back up)."""
    import gaca_openrlhf.sft.train as train

    seen = []
    real = train.lr_factor
    monkeypatch.setattr(train, "lr_factor", lambda s, c, w, d=0.5: (seen.append((s, c)), real(s, c, w, d))[1])
    train_sft(base, PAIRS, tmp_path / "c", SFTConfig(epochs=4, batch_size=1, cycles=2), log=lambda m: None)
    assert {c for _, c in seen} == {4}


def test_extended_lr_factor_is_the_planned_schedule_then_decayed_cycles():
    from gaca_openrlhf.sft.train import extended_lr_factor, lr_factor

    for step in (0, 9, 55, 150, 199):  # the planned 2 cycles of 100 steps: unchanged
        assert extended_lr_factor(step, 200, 100, 10, 2) == lr_factor(step, 100, 10)
    # the gate's first extra cycle starts at step 200 and peaks at 0.5 ** 2, the second at 0.5 ** 3
    assert extended_lr_factor(200, 200, 100, 10, 2) == pytest.approx(0.25 * 0.1)
    assert extended_lr_factor(209, 200, 100, 10, 2) == pytest.approx(0.25)
    assert extended_lr_factor(255, 200, 100, 10, 2) == pytest.approx(0.125)
    assert extended_lr_factor(309, 200, 100, 10, 2) == pytest.approx(0.125)


def test_copy_check_scores_the_exact_actions_of_the_check_verbs_on_renamed_samples():
    from gaca_openrlhf.sft.train import copy_check

    pairs = [(f"p{i} {v}", f"<think>t</think><action>{v} x{i}</action>")
             for i, v in enumerate(["take", "move", "go", "take", "move", "open", "take"])]
    asked = []

    def generate(prompt):  # right on take, wrong on move
        asked.append(prompt)
        verb, i = prompt.split()[1], prompt.split()[0][1:].rstrip("R")
        return f"<action>{verb} x{i}</action>" if verb == "take" else "<action>go</action>"

    def rename(prompt, response, rng):
        return prompt.replace(" ", "R ", 1), response
    got = copy_check(generate, pairs, "take, move", 10, augment=rename)
    assert got["n"] == 5 and got["by_verb"] == {"take": [3, 3], "move": [0, 2]}
    assert got["exact"] == pytest.approx(3 / 5)
    assert all("R " in a for a in asked) and not any(" go" in a or " open" in a for a in asked)
    assert copy_check(generate, pairs, "take", 2)["n"] == 2  # at most n samples
    assert copy_check(generate, pairs, "click", 8) == {"exact": 1.0, "n": 0, "by_verb": {}}  # nothing to check


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_copy_gate_adds_cycles_while_the_check_fails(base, tmp_path):
    """Catches: the gate not extending the run, extending past max_cycles, or not recording its checks."""
    cfg = SFTConfig(epochs=4, batch_size=1, cycles=2, max_cycles=4, check_verbs="take", check_min=1.01)
    stats = train_sft(base, PAIRS, tmp_path / "g", cfg, log=lambda m: None)
    assert stats["cycles_run"] == 4 and stats["steps"] == 8 + 2 * 4  # 8 planned steps, cycles of 4
    assert [c["cycles"] for c in stats["copy_checks"]] == [2, 3, 4]
    assert [c["step"] for c in stats["copy_checks"]] == [8, 12, 16] and stats["copy_checks"][0]["n"] == 1


def test_copy_gate_stops_at_the_first_passing_check(base, tmp_path, monkeypatch):
    import gaca_openrlhf.sft.train as train

    scores = iter([0.5, 0.95, 0.2])
    monkeypatch.setattr(train, "copy_check", lambda *a, **k: {"exact": next(scores), "n": 1, "by_verb": {}})
    cfg = SFTConfig(epochs=4, batch_size=1, cycles=2, max_cycles=5, check_verbs="take")
    stats = train_sft(base, PAIRS, tmp_path / "g", cfg, log=lambda m: None)
    assert stats["cycles_run"] == 3 and stats["steps"] == 12 and len(stats["copy_checks"]) == 2


def test_copy_gate_that_passes_at_once_leaves_the_warm_start_bitwise_unchanged(base, tmp_path):
    """Catches: the gate changing the planned run (its schedule, its step loop, its random draws) or the model before
    it is saved; the records before the gate rest on this (quickstart config.IMPLICIT_BEFORE)."""
    from gaca_openrlhf.sft.augment import Renamer

    ren = Renamer([p for p, _ in PAIRS])
    plain = SFTConfig(epochs=4, batch_size=1, cycles=2, augment_prob=0.5)
    gated = SFTConfig(epochs=4, batch_size=1, cycles=2, augment_prob=0.5, max_cycles=3, check_verbs="take,go",
                      check_min=0.0)
    a = train_sft(base, PAIRS, tmp_path / "a", plain, log=lambda m: None, augment=ren)
    b = train_sft(base, PAIRS, tmp_path / "b", gated, log=lambda m: None, augment=ren)
    assert b["cycles_run"] == 2 and a["steps"] == b["steps"] == 8 and "copy_checks" not in a
    wa, wb = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
