"""WebShop's real data files: --catalog small/full, the streamed generator, the on-disk catalog cache."""
import json
import os

import pytest

from webshop_server import catalog as C
from webshop_server.engine import Shop, ShopSession


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("wsdata")
    C.write_raw_stream(str(d), 300, seed=4)                       # items_shuffle.json ... (full names)
    C.write_raw_stream(str(d), 60, seed=8, suffix="_1000", reviews=False)  # the small set's names
    return d


def test_streamed_files_equal_the_in_memory_generator(tmp_path):
    paths = C.write_raw_stream(str(tmp_path), 150, seed=2, human_fraction=1.0)
    raw = C.generate_raw(150, seed=2)
    for key, path in paths.items():
        with open(path) as f:
            assert json.load(f) == raw[key], key
    few = C.generate_raw(2000, seed=2, human_fraction=0.01)
    assert 5 <= len(few["human"]) <= 40 and few["items"] == C.generate_raw(2000, seed=2)["items"]


def test_catalog_choice_small_full_auto(data_dir, tmp_path):
    full = C.data_files(str(data_dir), "full")
    small = C.data_files(str(data_dir), "small")
    assert os.path.basename(full[0]) == "items_shuffle.json" and os.path.basename(full[1]) == "items_ins_v2.json"
    assert os.path.basename(small[0]) == "items_shuffle_1000.json"
    assert os.path.basename(small[1]) == "items_ins_v2_1000.json"
    assert small[2] == full[2] and os.path.basename(small[2]) == "items_human_ins.json"
    assert C.data_files(str(data_dir), "auto")[0] == full[0]
    shop_small = Shop(data_dir=str(data_dir), catalog="small", cache_dir=str(tmp_path))
    shop_full = Shop(data_dir=str(data_dir), catalog="full", cache_dir=str(tmp_path))
    assert len(shop_small.products) == 60 and len(shop_full.products) == 300
    with open(small[0]) as f:
        assert [p["asin"] for p in json.load(f)] == [p["asin"] for p in shop_small.catalog.products]
    with pytest.raises(FileNotFoundError, match="items_shuffle_1000.json"):
        C.data_files(str(tmp_path), "small")
    with pytest.raises(ValueError):
        C.data_files(str(data_dir), "medium")


def test_cache_is_reused_and_invalidated(data_dir, tmp_path):
    first = Shop(data_dir=str(data_dir), catalog="full", cache_dir=str(tmp_path), seed=3)
    (entry,) = os.listdir(tmp_path)
    meta = os.path.join(tmp_path, entry, "meta.json")
    built_at = os.stat(meta).st_mtime_ns
    again = Shop(data_dir=str(data_dir), catalog="full", cache_dir=str(tmp_path), seed=3)
    assert os.stat(meta).st_mtime_ns == built_at  # loaded, not rebuilt
    assert again.goals == first.goals and again.prices == first.prices
    memory = Shop(num_products=300, seed=4)  # same generated catalog, built in memory
    assert [p["asin"] for p in memory.catalog.products] == [p["asin"] for p in again.catalog.products]
    for g in again.goals[:30]:
        q = g["instruction_text"]
        assert again.search_engine.search(q) == memory.search_engine.search(q)
    # another num_products, or changed files, get their own cache entry
    Shop(data_dir=str(data_dir), catalog="full", num_products=100, cache_dir=str(tmp_path))
    assert len(os.listdir(tmp_path)) == 2
    items = C.data_files(str(data_dir), "full")[0]
    os.utime(items, ns=(built_at, built_at + 10**9))
    Shop(data_dir=str(data_dir), catalog="full", cache_dir=str(tmp_path))
    assert len(os.listdir(tmp_path)) == 3


def test_generated_files_say_so_and_real_looking_files_do_not(data_dir, tmp_path):
    assert Shop(data_dir=str(data_dir), cache_dir=str(tmp_path)).generated is True  # the generator's marker
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("items_shuffle.json", "items_ins_v2.json", "items_human_ins.json"):
        (plain / name).write_bytes((data_dir / name).read_bytes())
    assert Shop(data_dir=str(plain), cache_dir=str(tmp_path / "c")).generated is False
    assert Shop(num_products=50).generated is True


def test_results_page_from_the_cached_summaries_shows_each_products_record(data_dir, tmp_path):
    """A cached catalog's results page reads asin/Title/Price from summaries.jsonl, not the records: they must be
    the records' own fields (catches a summary written from the wrong field or read at the wrong offset)."""
    shop = Shop(data_dir=str(data_dir), catalog="full", cache_dir=str(tmp_path))
    s = ShopSession(session_id="t", goal_index=0, goal={"instruction_text": "buy"})
    shown = 0
    for query in ("black", "size large", shop.catalog.products[123]["Title"]):
        for page in (1, 2):
            shop.do_search(s, query.split(" "), page)
            texts = shop.render(s).texts[6 if page > 1 else 5:]
            asins = s.results[(page - 1) * 10: page * 10]
            want = [v for a in asins for v in (a, shop.products[a]["Title"], shop.products[a]["Price"])]
            assert texts == want and len(set(want[1::3])) > 1
            shown += len(asins)
    assert shown >= 40
