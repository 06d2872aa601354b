"""ALFWorld-like text for the tiny test model's corpus (:mod:`gaca_openrlhf.models.tiny`): a room, a task, the
admissible commands and an answer in the ``<think>/<action>`` format. Changing it changes the tiny model: bump
``gaca_openrlhf.models.tiny.RECIPE_VERSION``."""
from __future__ import annotations

import random

RECEPTACLES = ["cabinet", "countertop", "drawer", "fridge", "microwave", "sinkbasin", "shelf", "sidetable", "desk",
               "dresser", "garbagecan", "stoveburner", "toilet", "bathtubbasin", "coffeemachine", "diningtable", "bed",
               "sofa", "armchair", "safe", "laundryhamper", "cart", "toaster", "ottoman", "handtowelholder"]
OBJECTS = ["apple", "mug", "knife", "spatula", "pen", "pencil", "book", "cellphone", "creditcard", "keychain",
           "bowl", "plate", "pot", "pan", "egg", "lettuce", "tomato", "potato", "bread", "cup", "spoon", "fork",
           "soapbar", "cloth", "towel", "candle", "vase", "watch", "laptop", "pillow", "remotecontrol", "desklamp"]


def sample(rng: random.Random) -> tuple[str, str]:
    """One (user prompt, assistant answer) pair, drawn with ``rng``."""
    locs = rng.sample(RECEPTACLES, k=6)
    items = ", ".join(f"a {r} {rng.randint(1, 4)}" for r in locs)
    obj, recep = rng.choice(OBJECTS), rng.choice(locs)
    task = rng.choice([f"put a {obj} in {recep}.", f"put some {obj} on {recep}.",
                       f"heat some {obj} and put it in {recep}.", f"cool some {obj} and put it in {recep}.",
                       f"clean some {obj} and put it in {recep}.",
                       f"look at {obj} under the desklamp.", f"put two {obj} in {recep}."])
    obs = (f"-= Welcome to TextWorld, ALFRED! =- You are in the middle of a room. Looking quickly around you, "
           f"you see {items}. Your task is to: {task}")
    n = rng.randint(1, 4)
    actions = [f"go to {r} {rng.randint(1, 4)}" for r in locs[:3]] + [
        f"take {obj} {n} from {recep} {rng.randint(1, 3)}", f"open {rng.choice(locs)} {rng.randint(1, 3)}",
        f"move {obj} {n} to {recep} {rng.randint(1, 3)}", "look", "inventory", f"examine {recep} 1"]
    prompt = (f"You are an expert agent operating in the ALFRED Embodied Environment. Your task is to: {task}\n"
              f"Your current observation is: {obs}\nYour admissible actions of the current situation are: "
              f"[{', '.join(repr(a) for a in actions)}].\nNow it's your turn to take an action. You should first "
              f"reason step-by-step about the current situation. This reasoning process MUST be enclosed within "
              f"<think> </think> tags. Once you've finished your reasoning, you should choose an admissible action "
              f"for current step and present it within <action> </action> tags.")
    act = rng.choice(actions)
    answer = f"<think>I need to {task[:-1]}. I will {act} first.</think><action>{act}</action>"
    return prompt, answer
