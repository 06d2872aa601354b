"""Entity renaming: consistent in prompt and response, kind-preserving, whole words, list re-sorted."""
import random
import re

from gaca_openrlhf.sft.augment import EntityVocab, Renamer, admissible_items, entity_vocab, rename_entities

PROMPT = ("Your task is to: put some pen on desk.\nYou are now at step 2 and your current observation is: You arrive "
          "at shelf 1. On the shelf 1, you see a pencil 1, and a pen 2.\nYour admissible actions of the current "
          "situation are: ['examine shelf 1'\n 'go to desk 1'\n 'go to shelf 2'\n 'take pen 2 from shelf 1'\n "
          "'take pencil 1 from shelf 1'].\n\nNow it's your turn.")
RESPONSE = "<think>I should take pen 2 from shelf 1.</think><action>take pen 2 from shelf 1</action>"


def test_entity_vocab_splits_objects_and_receptacles():
    v = entity_vocab([PROMPT])
    assert v == EntityVocab(objects=("pen", "pencil"), receptacles=("desk", "shelf"))


def test_rename_is_consistent_kind_preserving_and_keeps_the_list_sorted():
    vocab = EntityVocab(objects=("apple", "mug", "pen", "pencil"), receptacles=("bed", "desk", "fridge", "shelf"))
    changed = 0
    for seed in range(30):
        p, r = rename_entities(PROMPT, RESPONSE, vocab, random.Random(seed))
        action = r.split("<action>")[1].split("</action>")[0]
        items = admissible_items(p)
        assert action in items  # the expert action is still admissible after renaming
        assert items == sorted(items) and len(items) == 5
        assert "\n '" in p  # the list keeps its rendering (numpy's newline separator)
        obj, rec = re.match(r"take (\w+) 2 from (\w+) 1", action).groups()
        assert obj in vocab.objects and rec in vocab.receptacles
        assert f"put some {obj} on" in p and f"you see a" in p and f"a {obj} 2" in p  # same name everywhere
        assert f"I should take {obj} 2 from {rec} 1." in r
        changed += p != PROMPT
    assert changed >= 25


def test_rename_matches_whole_words_only():
    vocab = EntityVocab(objects=("pen", "mug"), receptacles=("shelf", "desk"))
    renamed = [rename_entities(PROMPT, RESPONSE, vocab, random.Random(s))[0] for s in range(10)]
    renamed = [p for p in renamed if "a mug 2" in p]
    assert renamed  # pen -> mug happened for some seed
    for p in renamed:
        assert "pencil 1" in p and "a pen 2" not in p  # "pen" inside "pencil" is not replaced


def test_renamer_leaves_text_without_entities_alone():
    ren = Renamer([PROMPT])
    assert ren("look around", "<action>look</action>", random.Random(0)) == ("look around", "<action>look</action>")
