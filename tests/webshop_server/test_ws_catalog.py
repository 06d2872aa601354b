"""Catalog generation/loading, goals and splits, search."""
import random

import pytest

from webshop_server import catalog as C
from webshop_server import goals as G
from webshop_server.engine import Shop
from webshop_server.records import process_products
from webshop_server.search import SearchEngine, product_text


def test_generated_catalog_is_seeded_and_in_raw_format():
    a, b, c = C.generate_raw(50, seed=3), C.generate_raw(50, seed=3), C.generate_raw(50, seed=4)
    assert a == b and a != c
    item = a["items"][0]
    for key in ("asin", "name", "full_description", "small_description", "pricing", "images", "product_category",
                "customization_options", "category", "query", "average_rating"):
        assert key in item
    assert item["pricing"].startswith("$") and " \u203a " in item["product_category"]
    assert set(a["attributes"][item["asin"]]) == {"attributes", "instruction", "instruction_attributes"}
    h = a["human"][item["asin"]][0]
    assert set(h) == {"asin", "instruction", "instruction_attributes", "instruction_options"}
    assert any(" - $" in it["pricing"] for it in a["items"])  # price ranges exist


def test_raw_files_round_trip_like_webshop_files(tmp_path):
    raw = C.generate_raw(120, seed=1)
    C.write_raw(raw, str(tmp_path))
    from_files = C.load_catalog(str(tmp_path), cache_dir=str(tmp_path / "cache"))
    in_memory = C.Catalog(process_products(raw))
    assert list(from_files.products) == in_memory.products and len(from_files.products) == 120
    p = from_files.products[0]
    assert p["Title"] == p["name"] and isinstance(p["BulletPoints"], list) and p["Price"].startswith("$")
    assert all(v == v.lower() and "/" not in v for vals in p["options"].values() for v in vals)
    first10 = C.load_catalog(str(tmp_path), num_products=10, cache_dir=str(tmp_path / "cache"))
    assert list(first10.products) == in_memory.products[:10]


def test_price_caps_and_goal_shuffle_follow_webshop():
    rng = random.Random(0)
    for price in (3.0, 47.5, 95.0, 985.0, 995.0):
        upper, text = G._price_cap(price, rng)
        cands = [p for p in G.PRICE_RANGE if p > price][:4]
        if len(cands) >= 2:
            assert upper in cands[1:] and text == f", and price lower than {upper:.2f} dollars"
        else:
            assert upper == 1000000 and text == ""
    products = process_products(C.generate_raw(200, seed=2))
    g1, p1 = G.build_goals(products, seed=5)
    g2, p2 = G.build_goals(products, seed=5)
    assert g1 == g2 and p1 == p2
    for g in g1:
        assert g["price_upper"] > p1[g["asin"]]
        assert g["instruction_text"].endswith(f"and price lower than {g['price_upper']:.2f} dollars")
    # same goals as WebShop's order: build unshuffled, then random.seed(233); random.shuffle(goals)
    rng = random.Random(5)
    unshuffled = G.human_goals(products, G.generate_product_prices(products, rng), rng)
    state = random.getstate()
    random.seed(233)
    random.shuffle(unshuffled)
    random.setstate(state)
    assert unshuffled == g1


def test_synthetic_goals_enumerate_option_combinations():
    products = process_products(C.generate_raw(60, seed=2), human_goals=False)
    goals, prices = G.build_goals(products, seed=0, human=False)
    by_asin = {}
    for g in goals:
        by_asin.setdefault(g["asin"], []).append(g)
    for p in products:
        n = 1
        for vals in p["options"].values():
            n *= len(vals)
        assert len(by_asin[p["asin"]]) == n
        g = by_asin[p["asin"]][0]
        assert isinstance(g["goal_options"], dict) and g["name"] == p["Title"]
        if g["goal_options"]:
            k, v = next(iter(g["goal_options"].items()))
            assert f" with {k}: {v}" in g["instruction_text"]
    assert all(0 < g["weight"] <= 1 for g in goals)


def test_splits():
    assert G.split_range("test", 3000) == range(0, 500)
    assert G.split_range("eval", 3000) == range(500, 1500)
    assert G.split_range("train", 3000) == range(1500, 3000)
    assert G.split_range("train", 800) == range(1500, 800)  # empty
    with pytest.raises(KeyError):
        G.split_range("dev", 10)


def test_search_finds_goal_products(shop):
    hits = 0
    for g in shop.goals[:100]:
        results = shop.search_engine.search(g["instruction_text"])
        assert len(results) <= 50 and len(set(results)) == len(results)
        hits += g["asin"] in results[:10]
    assert hits >= 90
    assert shop.search_engine.search("the and of") == []  # stop words only
    assert shop.search_engine.search("zzzqqq") == []


def test_search_indexes_webshop_fields():
    p = {"asin": "B1", "Title": "Alpha", "Description": "beta", "BulletPoints": ["gamma", "delta"],
         "options": {"color": ["red", "blue"], "size": ["xl"]}}
    assert product_text(p) == "alpha beta gamma color: red, blue, and size: xl"
    eng = SearchEngine([p, dict(p, asin="B2", Title="Other", Description="x", BulletPoints=["y"], options={})])
    assert eng.search("blue") == ["B1"] and eng.search("delta") == []  # only the first bullet is indexed


@pytest.mark.slow
def test_100k_catalog_builds():
    import time
    t = time.perf_counter()
    big = Shop(num_products=100_000, seed=0)
    assert len(big.products) == 100_000 and len(big.goals) > 100_000
    assert big.goals[0]["asin"] in big.search_engine.search(big.goals[0]["instruction_text"])
    assert time.perf_counter() - t < 300
