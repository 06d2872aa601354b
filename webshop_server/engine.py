"""The shop: catalog + search + goals, and the per-session page state machine of WebShop's text environment.

A session walks WebShop's pages: search (index) -> search results (10 per page of the top 50) -> item page
(options as radio buttons) -> Description/Features/Reviews sub pages -> done (Buy Now, reward). Agents act with
``search[keywords]`` and ``click[text]``; the rules are those of ``WebAgentTextEnv.step`` + ``SimServer.receive``:

* ``search[...]`` with a non-empty argument searches (from any page, as in WebShop), the argument lower-cased
  and split on spaces;
* ``click[x]`` acts only when ``x`` (lower-cased) is one of the page's clickables and is not ``search``;
  ``buy now`` ends the episode with the reward, ``back to search`` resets to the search page, ``next >`` and
  ``< prev`` page through results or go back (sub page -> item page -> results), ``description``/``features``/
  ``reviews`` open sub pages, an ASIN opens its item page, an option value selects that option;
* anything else is a no-op with reward 0.

Observations are WebShop's ``text`` mode: the page's visible strings joined by ``" [SEP] "``. Clickables are
the lower-cased button texts, then the lower-cased product links (ASINs), then option values, in page order.
The HTML templates render the same page models, so people and agents see the same pages.
"""
from __future__ import annotations

import random
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from webshop_server.catalog import Catalog, is_generated, load_catalog
from webshop_server.goals import build_goals, split_range
from webshop_server.reward import get_reward
from webshop_server.search import SEARCH_RETURN_N, SearchEngine

PRODUCT_WINDOW = 10
END_BUTTON = "Buy Now"
NEXT_PAGE = "Next >"
PREV_PAGE = "< Prev"
BACK_TO_SEARCH = "Back to Search"
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")
SEP = " [SEP] "

# WebShop's parse_action: r'(.+)\[(.+)\]' matched at the start (greedy name, so the last "[...]" is the argument)
_ACTION = re.compile(r"(.+)\[(.+)\]")


def parse_action(action: str) -> tuple[str, str | None]:
    m = _ACTION.match(action)
    if m is None:
        return action, None
    return m.group(1), m.group(2)


@dataclass
class Page:
    """A rendered page: template name + context, visible strings (text mode) and clickables."""

    kind: str
    context: dict[str, Any]
    texts: list[str]
    clickables: dict[str, tuple[str, str]]  # text -> (kind, payload): button/product/option
    has_search_bar: bool = False

    @property
    def observation(self) -> str:
        # WebShop's text mode: every text node of the page, stripped, except nodes that are exactly "\n". An
        # empty element has no text node (nothing is shown), but a blank one (" ", "\t") is an empty part.
        return SEP.join(t.strip() for t in self.texts if t != "" and t != "\n")

    def available_actions(self) -> dict[str, Any]:
        return {"has_search_bar": self.has_search_bar, "clickables": list(self.clickables)}


@dataclass
class ShopSession:
    session_id: str
    goal_index: int
    goal: dict[str, Any]
    page: str = "index"
    keywords: list[str] | None = None
    page_num: int | None = None
    asin: str | None = None
    asins: set = field(default_factory=set)
    options: dict[str, str] = field(default_factory=dict)
    sub_page: str | None = None
    results: list[str] = field(default_factory=list)
    done: bool = False
    reward: float | None = None
    reward_info: dict[str, Any] | None = None
    steps: int = 0
    last_seq: Any = None
    last_response: Any = None
    created: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class Shop:
    """Catalog, search index, goals and prices; shared read-only by all sessions."""

    def __init__(self, data_dir: str | None = None, num_products: int | None = None, seed: int = 0,
                 goal_mode: str = "human", show_attrs: bool = False, catalog: str = "auto",
                 cache_dir: str | None = None):
        if goal_mode not in ("human", "synthetic"):
            raise ValueError(f"goal_mode must be human or synthetic, got {goal_mode!r}")
        t0 = time.perf_counter()
        self.catalog: Catalog = load_catalog(data_dir, num_products, seed, human_goals=goal_mode == "human",
                                             catalog=catalog, cache_dir=cache_dir)
        self.products = self.catalog.by_asin
        # generated catalogs are WebShop-format stand-ins: published WebShop numbers are not comparable
        self.generated = is_generated(data_dir)
        prebuilt = getattr(self.catalog, "search_engine", None)
        self.search_engine = prebuilt if prebuilt is not None else SearchEngine(self.catalog.products)
        self.goals, self.prices = build_goals(self.catalog.products, seed=seed, human=goal_mode == "human",
                                              pricing=getattr(self.catalog, "pricing", None),
                                              sources=getattr(self.catalog, "goal_sources", None))
        self.goal_mode = goal_mode
        self.seed = seed
        self.show_attrs = show_attrs
        self._weights = [g["weight"] for g in self.goals]
        self._rng = random.Random(seed + 1)
        self._rng_lock = threading.Lock()
        self.load_seconds = time.perf_counter() - t0

    # ---------------------------------------------------------------------------------------------- goals
    def goal_index(self, split: str | None = None, index: int | None = None, goal_index: int | None = None) -> int:
        """Resolve a reset request to a goal index (``IndexError``/``KeyError`` on bad input)."""
        if goal_index is not None:
            if not 0 <= goal_index < len(self.goals):
                raise IndexError(f"goal_index {goal_index} out of range [0, {len(self.goals)})")
            return goal_index
        if split is not None:
            r = split_range(split, len(self.goals))
            if index is None or not 0 <= index < len(r):
                raise IndexError(f"index {index} out of range for split {split!r} (size {len(r)})")
            return r[index]
        with self._rng_lock:  # WebShop: a goal drawn by weight
            return self._rng.choices(range(len(self.goals)), self._weights)[0]

    def new_session(self, session_id: str, goal_index: int) -> ShopSession:
        s = ShopSession(session_id=session_id, goal_index=goal_index, goal=self.goals[goal_index])
        self.reset_to_search(s)
        return s

    # ---------------------------------------------------------------------------------------------- state
    @staticmethod
    def reset_to_search(s: ShopSession) -> None:
        s.page, s.keywords, s.page_num, s.asin, s.sub_page = "index", None, None, None, None
        s.asins, s.options, s.results = set(), {}, []

    def do_search(self, s: ShopSession, keywords: list[str], page: int = 1) -> None:
        if keywords != s.keywords or not s.results:
            s.results = self.search_engine.search(" ".join(keywords), SEARCH_RETURN_N)
        s.keywords, s.page_num, s.page = keywords, page, "search_results"
        s.asin, s.options, s.sub_page = None, {}, None

    def open_item(self, s: ShopSession, asin: str) -> None:
        s.asin, s.page, s.sub_page = asin, "item_page", None
        s.asins.add(asin)

    def buy(self, s: ShopSession) -> float:
        product = self.products[s.asin]
        reward, info = get_reward(product, s.goal, price=self.prices[s.asin], options=s.options)
        s.done, s.reward, s.reward_info, s.page = True, reward, info, "done"
        return reward

    # ----------------------------------------------------------------------------------------------- step
    def step(self, s: ShopSession, action: str) -> tuple[float, bool, dict[str, Any]]:
        """Apply one agent action; returns (reward, done, info). Unknown/invalid actions are no-ops."""
        s.steps += 1
        if s.done:
            return 0.0, True, {"executed": False, "reason": "episode is over"}
        name, arg = parse_action(action)
        if arg is not None:
            arg = arg.lower()
        if name == "search" and arg:
            self.do_search(s, arg.split(" "))
            return 0.0, False, {"executed": True}
        clickables = self.render(s).clickables if name == "click" else {}
        if name == "click" and arg is not None and arg in clickables and arg != "search":
            return self._click(s, arg, clickables[arg])
        if name == "click":
            return 0.0, False, {"executed": False, "reason": f"not clickable on this page: {arg!r}"}
        if name == "search":
            return 0.0, False, {"executed": False, "reason": "empty search"}
        return 0.0, False, {"executed": False, "reason": "unknown action"}

    def _click(self, s: ShopSession, arg: str, target: tuple[str, str]) -> tuple[float, bool, dict[str, Any]]:
        kind, payload = target
        if arg == END_BUTTON.lower():
            reward = self.buy(s)
            return reward, True, {"executed": True}
        if arg == BACK_TO_SEARCH.lower():
            self.reset_to_search(s)
        elif arg == NEXT_PAGE.lower() and s.page == "search_results":
            self.do_search(s, s.keywords or [], (s.page_num or 1) + 1)
        elif arg == PREV_PAGE.lower() and s.page == "search_results":
            self.do_search(s, s.keywords or [], (s.page_num or 1) - 1)
        elif arg == PREV_PAGE.lower() and s.page == "item_sub_page":
            s.page, s.sub_page = "item_page", None
        elif arg == PREV_PAGE.lower() and s.page == "item_page":
            keep = s.asins
            self.do_search(s, s.keywords or [], s.page_num or 1)
            s.asins = keep
        elif kind == "button" and payload in SUB_PAGES:
            s.page, s.sub_page = "item_sub_page", payload
        elif kind == "product":
            self.open_item(s, payload)
        elif kind == "option":
            s.options[payload] = arg
            s.page, s.sub_page = "item_page", None
        else:  # pragma: no cover - every clickable kind is handled above
            return 0.0, False, {"executed": False, "reason": "unhandled clickable"}
        return 0.0, False, {"executed": True}

    # --------------------------------------------------------------------------------------------- render
    def render(self, s: ShopSession) -> Page:
        instruction = s.goal["instruction_text"]
        if s.page == "index":
            return Page("search_page", {"instruction_text": instruction},
                        ["WebShop", "Instruction:", instruction, "Search"],
                        {"search": ("button", "Search")}, has_search_bar=True)
        if s.page == "search_results":
            return self._render_results(s, instruction)
        if s.page == "item_page":
            return self._render_item(s, instruction)
        if s.page == "item_sub_page":
            return self._render_sub_page(s, instruction)
        if s.page == "done":
            reward = s.reward if s.reward is not None else 0.0
            return Page("done_page", {"reward": reward, "asin": s.asin, "options": s.options,
                                      "reward_info": s.reward_info, "instruction_text": instruction},
                        ["Thank you for shopping with us!", "Your score (min 0.0, max 1.0)", str(reward)], {})
        raise ValueError(f"unknown page {s.page!r}")

    def _render_results(self, s: ShopSession, instruction: str) -> Page:
        page = s.page_num or 1
        total = len(s.results)
        shown = self.catalog.summaries(s.results[(page - 1) * PRODUCT_WINDOW: page * PRODUCT_WINDOW])
        texts = ["Instruction:", instruction, BACK_TO_SEARCH, f"Page {page} (Total results: {total})"]
        clickables: dict[str, tuple[str, str]] = {BACK_TO_SEARCH.lower(): ("button", BACK_TO_SEARCH)}
        # WebShop always shows "Next >" (also on the last page and on empty results: it leads to an empty page)
        has_prev, has_next = page > 1, True
        if has_prev:
            texts.append(PREV_PAGE)
            clickables[PREV_PAGE.lower()] = ("button", PREV_PAGE)
        texts.append(NEXT_PAGE)
        clickables[NEXT_PAGE.lower()] = ("button", NEXT_PAGE)
        for p in shown:
            texts += [p["asin"], p["Title"], p["Price"]]
            clickables[p["asin"].lower()] = ("product", p["asin"])
        ctx = {"instruction_text": instruction, "keywords": s.keywords or [], "page": page, "total": total,
               "products": shown, "has_prev": has_prev, "has_next": has_next}
        return Page("results_page", ctx, texts, clickables)

    def _item_buttons(self) -> list[str]:
        return ["Description", "Features", "Reviews"] + (["Attributes"] if self.show_attrs else [])

    def _render_item(self, s: ShopSession, instruction: str) -> Page:
        p = self.products[s.asin]
        texts = ["Instruction:", instruction, BACK_TO_SEARCH, PREV_PAGE]
        for name, values in p["options"].items():
            texts.append(name)
            texts.extend(values)
        texts += [p["Title"], f"Price: {p['Price']}", f"Rating: {p['Rating']}"]
        texts += self._item_buttons() + [END_BUTTON]
        clickables: dict[str, tuple[str, str]] = {BACK_TO_SEARCH.lower(): ("button", BACK_TO_SEARCH),
                                                   PREV_PAGE.lower(): ("button", PREV_PAGE)}
        for b in self._item_buttons():
            clickables[b.lower()] = ("button", b)
        clickables[END_BUTTON.lower()] = ("button", END_BUTTON)
        for name, values in p["options"].items():
            for v in values:
                clickables[v] = ("option", name)  # a value shared by two groups maps to the later one
        ctx = {"instruction_text": instruction, "product": p, "options": s.options, "keywords": s.keywords or [],
               "page": s.page_num or 1, "asin": s.asin, "sub_pages": self._item_buttons()}
        return Page("item_page", ctx, texts, clickables)

    def _render_sub_page(self, s: ShopSession, instruction: str) -> Page:
        p = self.products[s.asin]
        texts = ["Instruction:", instruction, BACK_TO_SEARCH, PREV_PAGE]
        sub = s.sub_page
        if sub == "Description":
            texts.append(p["Description"])
        elif sub == "Features":
            # WebShop's template renders "<p> {{bullet}}</p>": every bullet is a text node, a blank one an empty part
            texts.extend(" " + str(b) for b in p["BulletPoints"])
        elif sub == "Reviews":  # WebShop lists the reviews and nothing else (no "No reviews" text)
            for r in p["Reviews"]:
                texts += [f"\"{r.get('title', '')}\"", str(r.get("score", "")), str(r.get("body", ""))]
        elif sub == "Attributes":
            texts.extend(p["Attributes"])
        clickables = {BACK_TO_SEARCH.lower(): ("button", BACK_TO_SEARCH), PREV_PAGE.lower(): ("button", PREV_PAGE)}
        ctx = {"instruction_text": instruction, "product": p, "sub_page": sub, "options": s.options,
               "keywords": s.keywords or [], "page": s.page_num or 1, "asin": s.asin}
        return Page("sub_page", ctx, texts, clickables)


def make_shop(**kwargs: Any) -> Shop:
    return Shop(**kwargs)
