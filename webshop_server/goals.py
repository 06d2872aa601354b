"""Goals, prices and splits as WebShop builds them (``engine/goal.py``, ``engine/engine.py``, ``envs``).

* Product prices: the single price, or ``uniform(low, high)`` for a price range, 100.0 without pricing.
  (WebShop draws them from the unseeded global RNG; here from ``random.Random(seed)``.)
* Price caps: the first four of 10, 20, ..., 990 above the price; two are sampled and the larger is kept,
  ``", and price lower than {cap:.2f} dollars"`` is appended to the instruction; no cap (1000000) when fewer
  than two exist.
* Human goals (default): one goal per human instruction with attributes (instructions without attributes are
  skipped), ``goal_options`` the instruction's option list, weight 1.
* Synthetic goals: per product with a synthetic instruction, one goal per combination of its option values
  (option names sorted), ``" with name: value, and name: value"`` appended, ``goal_options`` a dict, weight the
  mean inverse frequency of its attributes.
* Goals are shuffled with ``random.seed(233)`` as WebShop does; splits: test 0-499, eval 500-1499, train 1500+.
"""
from __future__ import annotations

import itertools
import random
from collections import defaultdict
from typing import Any, Iterable

PRICE_RANGE = [10.0 * i for i in range(1, 100)]
GOAL_SHUFFLE_SEED = 233
SPLITS = {"test": (0, 500), "eval": (500, 1500), "train": (1500, None)}


def generate_product_prices(products: Iterable[dict[str, Any]], rng: random.Random) -> dict[str, float]:
    return prices_from_pricing(((p["asin"], p["pricing"]) for p in products), rng)


def prices_from_pricing(pairs: Iterable[tuple[str, list[float]]], rng: random.Random) -> dict[str, float]:
    """(asin, pricing list) pairs in catalog order -> product prices (a range draws uniformly, in order)."""
    prices: dict[str, float] = {}
    for asin, pricing in pairs:
        if not pricing:
            price = 100.0
        elif len(pricing) == 1:
            price = pricing[0]
        else:
            price = rng.uniform(*pricing[:2])
        prices[asin] = price
    return prices


def _price_cap(price: float, rng: random.Random) -> tuple[float, str]:
    candidates = [p for p in PRICE_RANGE if p > price][:4]
    if len(candidates) >= 2:
        _, upper = sorted(rng.sample(candidates, 2))
        return upper, f", and price lower than {upper:.2f} dollars"
    return 1000000, ""


def human_goals(products: list[dict[str, Any]], prices: dict[str, float] | None, rng: random.Random) -> list[dict]:
    goals = []
    for item in products:
        if "instructions" not in item:
            continue
        asin = item["asin"]
        for ins in item["instructions"]:
            attributes = ins["instruction_attributes"]
            if len(attributes) == 0:
                continue
            if prices is not None:
                upper, price_text = _price_cap(prices[asin], rng)
            else:
                upper, price_text = 1000000, ""
            goals.append({
                "asin": asin,
                "category": item["category"],
                "query": item["query"],
                "name": item["name"],
                "product_category": item["product_category"],
                "instruction_text": ins["instruction"].strip(".") + price_text,
                "attributes": attributes,
                "price_upper": upper,
                "goal_options": ins["instruction_options"],
                "weight": 1,
            })
    return goals


def synthetic_goals(products: list[dict[str, Any]], prices: dict[str, float] | None,
                    rng: random.Random) -> list[dict]:
    goals = []
    counts: dict[str, int] = defaultdict(int)
    for product in products:
        if product.get("instruction_text") is None:
            continue
        asin = product["asin"]
        attributes = product["instruction_attributes"]
        if not attributes:
            continue
        if prices is not None:
            upper, price_text = _price_cap(prices[asin], rng)
        else:
            upper, price_text = 1000000, ""
        options = product["options"]
        names = sorted(options)
        for combination in itertools.product(*(options[n] for n in names)):
            goal_options = dict(zip(names, combination))
            option_text = ", and ".join(f"{k}: {v}" for k, v in goal_options.items())
            option_text = " with " + option_text if option_text else ""
            goals.append({
                "asin": asin,
                "category": product["category"],
                "query": product["query"],
                "name": product["Title"],
                "product_category": product["product_category"],
                "instruction_text": f"{product['instruction_text']}{option_text}{price_text}",
                "attributes": attributes,
                "price_upper": upper,
                "goal_options": goal_options,
            })
            for att in attributes:
                counts[att] += 1
    for goal in goals:
        goal["weight"] = sum(1.0 / counts[a] for a in goal["attributes"]) / len(goal["attributes"])
    return goals


def build_goals(products: Any, seed: int = 0, human: bool = True, pricing: Any = None, sources: Any = None
                ) -> tuple[list[dict], dict[str, float]]:
    """(shuffled goals, product prices); every draw comes from ``seed`` and the fixed shuffle seed 233.

    ``pricing`` ((asin, pricing) pairs in catalog order) and ``sources`` (the records that carry instructions)
    replace ``products`` where a catalog provides them (the on-disk catalog does).
    """
    rng = random.Random(seed)
    prices = prices_from_pricing(pricing if pricing is not None else ((p["asin"], p["pricing"]) for p in products),
                                 rng)
    sources = sources if sources is not None else products
    goals = human_goals(sources, prices, rng) if human else synthetic_goals(sources, prices, rng)
    random.Random(GOAL_SHUFFLE_SEED).shuffle(goals)
    return goals, prices


def split_range(split: str, n_goals: int) -> range:
    if split not in SPLITS:
        raise KeyError(split)
    lo, hi = SPLITS[split]
    hi = n_goals if hi is None else min(hi, n_goals)
    return range(min(lo, n_goals), hi)


def public_goal(goal: dict[str, Any]) -> dict[str, Any]:
    """The goal with WebShop's field names, JSON-serialisable."""
    keys = ("asin", "instruction_text", "attributes", "goal_options", "price_upper", "query", "name",
            "category", "product_category", "weight")
    return {k: goal.get(k) for k in keys}
