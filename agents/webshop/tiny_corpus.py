"""WebShop-like text for the tiny test model's corpus (:mod:`gaca_openrlhf.models.tiny`): a search-results page, the
admissible actions and an answer in the ``<think>/<action>`` format. Changing it changes the tiny model: bump
``gaca_openrlhf.models.tiny.RECIPE_VERSION``."""
from __future__ import annotations

import random

WORDS = ["women's", "men's", "shoes", "running", "leather", "cotton", "shirt", "dress", "organic", "gluten",
         "free", "snack", "size", "color", "black", "white", "blue", "red", "small", "medium", "large",
         "x-large", "pack", "ounce", "price", "lower", "than", "dollars", "wireless", "bluetooth",
         "headphones", "long", "lasting", "hair", "oil", "natural", "vegan", "chocolate", "coffee", "tea"]


def sample(rng: random.Random) -> tuple[str, str]:
    """One (user prompt, assistant answer) pair, drawn with ``rng``."""
    words = lambda k: " ".join(rng.choices(WORDS, k=k))  # noqa: E731
    instr = f"i need {words(4)}, and price lower than {rng.randint(2, 9)}0.00 dollars"
    results = " [SEP] ".join(
        f"B0{rng.randint(10**7, 10**8 - 1)} [SEP] {words(6).title()} [SEP] ${rng.randint(5, 99)}.99" for _ in range(3))
    obs = (f"Instruction: [SEP] {instr} [SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] "
           f"{results}")
    clickables = ["back to search", "next >"] + [f"b0{rng.randint(10**7, 10**8 - 1)}" for _ in range(3)]
    prompt = (f"You are an expert autonomous agent operating in the WebShop e-commerce platform. Your task is to: "
              f"{instr}.\nYour current observation is: {obs}.\nYour admissible actions of the current situation are: "
              f"['search[<your query>]', {', '.join(repr(f'click[{c}]') for c in clickables)}].\nNow it's your turn "
              f"to take one action for the current step. You should first reason step-by-step about the current "
              f"situation, then think carefully which admissible action best advances the shopping goal. This "
              f"reasoning process MUST be enclosed within <think> </think> tags. Once you've finished your "
              f"reasoning, you should choose an admissible action for current step and present it within "
              f"<action> </action> tags.")
    act = rng.choice([f"search[{words(3)}]", f"click[{rng.choice(clickables)}]", "click[buy now]"])
    answer = f"<think>The instruction asks for {words(3)}. I will {act}.</think><action>{act}</action>"
    return prompt, answer
