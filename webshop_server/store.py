"""WebShop's real data files at full scale: a one-pass build into an on-disk cache, memory-mapped afterwards.

The first start streams ``items_shuffle*.json`` (ijson; the 1.18M-product file is never held in memory), turns
each product into WebShop's record (:func:`webshop_server.records.process_item`, as ``load_products``), appends it
as one JSON line to ``products.jsonl``, feeds the search index and keeps only what goals and prices need. The
cache directory (keyed by the files' paths, sizes and mtimes, ``num_products``, goal mode and the analyzer
version) then holds::

    products.jsonl  offsets.npy  summaries.jsonl  summary_offsets.npy  asins.txt  pricing.npy
    goal_sources.json  meta.json  index/{indptr,docs,scores,term_max,dense_ids,dense}.npy  index/vocab.txt

and a second start only maps these files (a product record is decoded from its line when a page needs it; a
results page decodes only the ``[Title, Price]`` lines of ``summaries.jsonl``, 10-50x shorter than a record).
"""
from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Iterator

import numpy as np

from webshop_server.records import process_item
from webshop_server.search import ANALYZER_VERSION, IndexBuilder, SearchEngine, product_text

log = logging.getLogger(__name__)
STORE_VERSION = "3"  # 3: summaries.jsonl
# keys of a product record that goals need (human goals: instructions; synthetic: instruction_text, options ...)
GOAL_KEYS = ("asin", "category", "query", "name", "Title", "product_category", "instructions", "instruction_text",
             "instruction_attributes", "options")


def default_cache_root() -> str:
    root = os.environ.get("WEBSHOP_CACHE") or os.path.join(
        os.environ.get("GACA_CACHE") or os.path.expanduser("~/.cache/gaca_openrlhf"), "webshop_index")
    return root


def _iter_items(path: str) -> Iterator[dict[str, Any]]:
    try:
        import ijson
    except ImportError:  # pragma: no cover - ijson is in the requirements; json.load holds the whole file
        with open(path, encoding="utf-8") as f:
            yield from json.load(f)
        return
    with open(path, "rb") as f:
        yield from ijson.items(f, "item", use_float=True)


class _Records:
    """Product records in a JSON-lines file, decoded on access (small LRU cache)."""

    def __init__(self, path: str, offsets: np.ndarray):
        self._file = open(path, "rb")
        size = os.fstat(self._file.fileno()).st_size
        self._mm = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        self._offsets = offsets
        self.get = lru_cache(maxsize=8192)(self._decode)

    def _decode(self, i: int) -> dict[str, Any]:
        return json.loads(self._mm[int(self._offsets[i]):int(self._offsets[i + 1])])

    def __len__(self) -> int:
        return len(self._offsets) - 1


class ProductList(Sequence):
    """``catalog.products``: the records in catalog order (decoded lazily)."""

    def __init__(self, records: _Records):
        self._records = records

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self._records.get(j) for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._records.get(i)


class ProductsByAsin(Mapping):
    """``catalog.by_asin``: asin -> record (decoded lazily)."""

    def __init__(self, records: _Records, asins: list[str]):
        self._records = records
        self._index = {a: i for i, a in enumerate(asins)}

    def __getitem__(self, asin: str) -> dict[str, Any]:
        return self._records.get(self._index[asin])

    def __contains__(self, asin: object) -> bool:
        return asin in self._index

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


class DiskCatalog:
    """A catalog served from a cache directory (see module doc); same attributes as ``catalog.Catalog`` plus
    the prebuilt ``search_engine``, ``pricing`` (asin -> WebShop's pricing list) and ``goal_sources``."""

    def __init__(self, cache: str, source: str):
        offsets = np.load(os.path.join(cache, "offsets.npy"))
        with open(os.path.join(cache, "asins.txt"), encoding="utf-8") as f:
            asins = f.read().split("\n") if len(offsets) > 1 else []
        records = _Records(os.path.join(cache, "products.jsonl"), offsets)
        self.products = ProductList(records)
        self.by_asin = ProductsByAsin(records, asins)
        self._summaries = _Records(os.path.join(cache, "summaries.jsonl"),
                                   np.load(os.path.join(cache, "summary_offsets.npy")))
        self.asins = asins
        self.source = source
        self.search_engine = SearchEngine.load(os.path.join(cache, "index"), asins)
        pricing = np.load(os.path.join(cache, "pricing.npy"))  # (n, 3): count, low, high
        self.pricing = _PricingView(asins, pricing)
        with open(os.path.join(cache, "goal_sources.json"), encoding="utf-8") as f:
            self.goal_sources: list[dict[str, Any]] = json.load(f)
        with open(os.path.join(cache, "meta.json"), encoding="utf-8") as f:
            self.meta = json.load(f)

    def summaries(self, asins: Sequence[str]) -> list[dict[str, Any]]:
        """``{"asin", "Title", "Price"}`` of these products: what a results page shows, without decoding the
        full records (at 1.18M products a results page's records were not in the decode cache)."""
        index = self.by_asin._index
        out = []
        for a in asins:
            title, price = self._summaries.get(index[a])
            out.append({"asin": a, "Title": title, "Price": price})
        return out


class _PricingView:
    """(asin, pricing list) pairs in catalog order, as ``generate_product_prices`` consumes them."""

    def __init__(self, asins: list[str], arr: np.ndarray):
        self.asins, self.arr = asins, arr

    def __iter__(self) -> Iterator[tuple[str, list[float]]]:
        counts = self.arr[:, 0].astype(np.int64).tolist()
        lows, highs = self.arr[:, 1].tolist(), self.arr[:, 2].tolist()
        for asin, n, lo, hi in zip(self.asins, counts, lows, highs):
            yield asin, ([] if n == 0 else [lo] if n == 1 else [lo, hi])


def cache_key(files: list[str], num_products: int | None, human_goals: bool) -> str:
    h = hashlib.sha1()
    for p in files:
        st = os.stat(p)
        h.update(f"{os.path.abspath(p)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    h.update(f"{num_products}|{human_goals}|{ANALYZER_VERSION}|{STORE_VERSION}".encode())
    return h.hexdigest()[:20]


def build_cache(items_path: str, attr_path: str, human_path: str | None, cache: str,
                num_products: int | None, human_goals: bool) -> None:
    """One pass over the raw files into ``cache`` (written to a temporary folder, renamed when complete)."""
    t0 = time.perf_counter()
    tmp = cache + f".tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    with open(attr_path, encoding="utf-8") as f:
        attributes = json.load(f)
    human: dict[str, Any] = {}
    if human_path:
        with open(human_path, encoding="utf-8") as f:
            human = json.load(f)
    builder = IndexBuilder()
    offsets = [0]
    summary_offsets = [0]
    pricing: list[tuple[float, float, float]] = []
    sources: list[dict[str, Any]] = []
    seen: set[str] = set()
    pos = spos = 0
    with open(os.path.join(tmp, "products.jsonl"), "wb") as out, \
            open(os.path.join(tmp, "summaries.jsonl"), "wb") as sout:
        for n, raw in enumerate(_iter_items(items_path)):
            if num_products is not None and n >= num_products:
                break
            q = process_item(raw, attributes, human, human_goals, seen)
            if q is None:
                continue
            line = (json.dumps(q, ensure_ascii=False) + "\n").encode("utf-8")
            out.write(line)
            pos += len(line)
            offsets.append(pos)
            line = (json.dumps([q["Title"], q["Price"]], ensure_ascii=False) + "\n").encode("utf-8")
            sout.write(line)
            spos += len(line)
            summary_offsets.append(spos)
            builder.add(q["asin"], product_text(q))
            pr = q["pricing"]
            pricing.append((len(pr), pr[0] if pr else 0.0, pr[1] if len(pr) > 1 else 0.0))
            if "instructions" in q or q.get("instruction_text") is not None:
                sources.append({k: q[k] for k in GOAL_KEYS if k in q})
            if len(offsets) % 100000 == 1:
                log.info("indexed %d products (%.0fs)", len(offsets) - 1, time.perf_counter() - t0)
    del attributes, human, seen
    asins, vocab, indptr, docs, scores = builder.finish()
    eng = SearchEngine(None)
    eng._set(asins, vocab, indptr, docs, scores)
    eng.save(os.path.join(tmp, "index"))
    del eng, indptr, docs, scores, vocab
    np.save(os.path.join(tmp, "offsets.npy"), np.asarray(offsets, dtype=np.int64))
    np.save(os.path.join(tmp, "summary_offsets.npy"), np.asarray(summary_offsets, dtype=np.int64))
    np.save(os.path.join(tmp, "pricing.npy"), np.asarray(pricing, dtype=np.float64).reshape(-1, 3))
    with open(os.path.join(tmp, "asins.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(asins))
    with open(os.path.join(tmp, "goal_sources.json"), "w", encoding="utf-8") as f:
        json.dump(sources, f)
    with open(os.path.join(tmp, "meta.json"), "w", encoding="utf-8") as f:
        json.dump({"items": items_path, "attributes": attr_path, "human": human_path, "products": len(asins),
                   "build_seconds": time.perf_counter() - t0}, f)
    shutil.rmtree(cache, ignore_errors=True)
    os.replace(tmp, cache)
    log.info("catalog cache %s: %d products in %.0fs", cache, len(asins), time.perf_counter() - t0)


def open_catalog(items_path: str, attr_path: str, human_path: str | None, num_products: int | None,
                 human_goals: bool, cache_root: str | None = None, source: str = "") -> DiskCatalog:
    """The cached catalog for these files, built first when missing or stale."""
    files = [p for p in (items_path, attr_path, human_path) if p]
    cache = os.path.join(cache_root or default_cache_root(), cache_key(files, num_products, human_goals))
    if not os.path.exists(os.path.join(cache, "meta.json")):
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        log.info("building the catalog cache %s (first start for these files)", cache)
        build_cache(items_path, attr_path, human_path, cache, num_products, human_goals)
    return DiskCatalog(cache, source or f"files:{os.path.dirname(os.path.abspath(items_path))}")
