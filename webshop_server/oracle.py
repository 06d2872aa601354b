"""Oracle value of a WebShop page: the best reward still reachable from it by an agent that knows the goal.

The credit audit (docs/credit_audit.md section 4) scores a step by the change of this value across it. The value
counts what the current page offers going *forward* (never through "Back to Search"), scored by the server's own
reward code (:func:`webshop_server.reward.get_reward`):

- search page: the goal's own product with its best options (the product the goal was drawn from; reward is at
  most 1, so the value is exact whenever that product scores 1, which the tests check for the test catalog);
- search results: the best of the search's results (all of them, the pages behind "Next >" included), each with
  its best options;
- item page and its sub-pages: this product with the options chosen so far kept and the others set best;
- done: the reward paid.

"Best options" is exact: the option term counts the goal options matched by some chosen value, so each value's set
of matched goal options is computed once and the option groups' combinations are searched over those sets (a few
distinct sets per group). A step's progress is value(after) - value(before): a search whose results drop the goal
product, opening a worse product than the best result, or choosing an option that breaks a match are negative;
"Back to Search" from a poor page is positive. Values are cached per (goal, product, chosen options).
"""
from __future__ import annotations

import itertools
import threading
from typing import Any

from webshop_server.engine import Shop, ShopSession
from webshop_server.normalize import normalize_color
from webshop_server.reward import FUZZY_THRESHOLD, _goal_option_items, get_reward, token_set_ratio


class PageOracle:
    """:meth:`value` of a session's page for one :class:`Shop` (thread-safe, with a bounded cache)."""

    def __init__(self, shop: Shop, cache_size: int = 100_000):
        self.shop = shop
        self.cache_size = cache_size
        self._cache: dict = {}
        self._lock = threading.Lock()

    def best_options(self, asin: str, goal: dict, chosen: dict) -> dict:
        """The option values that maximise the reward's option term for product ``asin``, keeping ``chosen``
        (option name -> value) and choosing one value for every other option group of the product."""
        product = self.shop.products[asin]
        wanted = [normalize_color(o) for o in _goal_option_items(goal["goal_options"])]
        if not wanted:
            return dict(chosen)

        def mask(value: Any) -> int:
            v = normalize_color(value)
            return sum(1 << i for i, w in enumerate(wanted) if token_set_ratio(v, w) > FUZZY_THRESHOLD)

        base = 0
        for value in chosen.values():
            base |= mask(value)
        free = [(name, values) for name, values in product["options"].items() if name not in chosen and values]
        # per group, one value per distinct mask (the first in page order): the search runs over masks only
        groups = []
        for name, values in free:
            seen: dict = {}
            for v in values:
                seen.setdefault(mask(v), v)
            groups.append((name, list(seen.items())))
        best, best_pick = -1, ()
        for pick in itertools.product(*(items for _, items in groups)):
            m = base
            for bits, _ in pick:
                m |= bits
            count = bin(m).count("1")
            if count > best:
                best, best_pick = count, pick
                if count == len(wanted):
                    break
        out = dict(chosen)
        out.update({name: v for (name, _), (_, v) in zip(groups, best_pick)})
        return out

    def item_value(self, asin: str, goal_index: int, chosen: dict) -> tuple[float, dict]:
        """(reward of product ``asin`` bought with its best options keeping ``chosen``, those options)."""
        key = (goal_index, asin, tuple(sorted(chosen.items())))
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        goal = self.shop.goals[goal_index]
        options = self.best_options(asin, goal, chosen)
        reward, _ = get_reward(self.shop.products[asin], goal, price=self.shop.prices[asin], options=options)
        out = (float(reward), options)
        with self._lock:
            if len(self._cache) >= self.cache_size:
                self._cache.clear()  # crude bound: the cache only saves time
            self._cache[key] = out
        return out

    def value(self, s: ShopSession) -> dict[str, Any]:
        """``{"value", "page", "basis", "asin", "options"}`` of session ``s``'s current page (see module doc):
        ``basis`` says what the value counts (goal_product, results, item, done), ``asin``/``options`` the
        purchase that reaches it (None on a done page or empty results)."""
        gi = s.goal_index
        if s.page == "done":
            return {"value": float(s.reward or 0.0), "page": s.page, "basis": "done", "asin": s.asin,
                    "options": dict(s.options)}
        if s.page in ("item_page", "item_sub_page"):
            v, opts = self.item_value(s.asin, gi, dict(s.options))
            return {"value": v, "page": s.page, "basis": "item", "asin": s.asin, "options": opts}
        if s.page == "search_results":
            best = (0.0, None, None)
            # the goal's own product first: it usually scores 1, the maximum, which ends the search at once
            goal_asin = s.goal["asin"]
            order = ([goal_asin] if goal_asin in s.results else []) + [a for a in s.results if a != goal_asin]
            for asin in order:
                v, opts = self.item_value(asin, gi, {})
                if v > best[0]:
                    best = (v, asin, opts)
                if v >= 1.0:  # rewards are at most 1
                    break
            return {"value": best[0], "page": s.page, "basis": "results", "asin": best[1], "options": best[2]}
        asin = s.goal["asin"]
        v, opts = self.item_value(asin, gi, {})
        return {"value": v, "page": s.page, "basis": "goal_product", "asin": asin, "options": opts}
