"""Search fidelity to WebShop's Lucene index (pyserini, default English analyzer, BM25 k1 0.9 b 0.4).

The reference here is written independently of ``webshop_server.search`` from Lucene's documented behaviour:
a character-scanning tokenizer with the Unicode word-break joins of ``StandardTokenizer`` for Latin text,
``EnglishPossessiveFilter``, Lucene's English stop set, the Porter stemmer (PyStemmer's ``porter``, the same
algorithm as Lucene's ``PorterStemFilter``; the one shared part) and a dictionary-based BM25 with Lucene's
one-byte length norms. The server's top-10 must agree with it.
"""
import math

import pytest
import Stemmer

from webshop_server import catalog as C
from webshop_server.records import process_products
from webshop_server.search import SearchEngine, analyze, product_text, tokenize

STOP = {"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
        "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to",
        "was", "will", "with"}
_PORTER = Stemmer.Stemmer("porter")


def ref_tokens(text):
    """Word tokens by scanning characters: a mid character joins only letter-letter (. ' ’ :) or digit-digit
    (. , ; ' ’) neighbours, as UAX#29 rules WB6/7 and WB11/12."""
    text = text.lower()
    out, cur = [], ""
    for i, ch in enumerate(text):
        if ch.isalnum() or ch == "_":
            cur += ch
            continue
        prev = text[i - 1] if i else ""
        nxt = text[i + 1] if i + 1 < len(text) else ""
        letters = prev.isalpha() and nxt.isalpha() and ch in ".'\u2019:"
        digits = prev.isdigit() and nxt.isdigit() and ch in ".,;'\u2019"
        if cur and (letters or digits):
            cur += ch
            continue
        if cur:
            out.append(cur)
        cur = ""
    if cur:
        out.append(cur)
    return [t[:-2] if t.endswith(("'s", "\u2019s")) else t for t in out]


def ref_analyze(text):
    return [_PORTER.stemWord(t) for t in ref_tokens(text) if t and t not in STOP]


def lucene_norm_length(n):
    """SmallFloat.byte4ToInt(intToByte4(n)), written from Lucene's javadoc: lengths below 24 are exact,
    above that 24 + (n - 24) rounded down to 4 significant bits."""
    if n < 24:
        return n
    m = n - 24
    if m < 8:
        return 24 + m
    shift = m.bit_length() - 4
    return 24 + ((m >> shift) << shift)


class RefBM25:
    def __init__(self, docs, k1=0.9, b=0.4):
        self.k1, self.b = k1, b
        self.tf = []
        self.len = []
        self.df = {}
        for text in docs:
            toks = ref_analyze(text)
            counts = {}
            for t in toks:
                counts[t] = counts.get(t, 0) + 1
            self.tf.append(counts)
            self.len.append(len(toks))
            for t in counts:
                self.df[t] = self.df.get(t, 0) + 1
        self.n = len(docs)
        self.avgdl = sum(self.len) / self.n

    def top(self, query, k=10):
        q = ref_analyze(query)
        scores = []
        for d, counts in enumerate(self.tf):
            s = 0.0
            for t in q:  # a repeated query term counts again (bag of words with term boosts)
                f = counts.get(t, 0)
                if f:
                    idf = math.log(1 + (self.n - self.df[t] + 0.5) / (self.df[t] + 0.5))
                    s += idf * f / (f + self.k1 * (1 - self.b + self.b * lucene_norm_length(self.len[d]) / self.avgdl))
            if s > 0:
                scores.append((-s, d))
        scores.sort()
        return scores[:k]


@pytest.mark.parametrize("text,tokens", [
    ("size 8.5", ["size", "8.5"]),
    ("usb c cable 6 ft", ["usb", "c", "cabl", "6", "ft"]),
    ("Men's 3.4 fl oz, pack of 2", ["men", "3.4", "fl", "oz", "pack", "2"]),
    ("wi-fi 1,000 lumens", ["wi", "fi", "1,000", "lumen"]),
    ("the U.S.A. a b", ["u.s.a", "b"]),
    ("12:30 x:y", ["12", "30", "x:y"]),
])
def test_analyzer_keeps_numbers_decimals_single_letters(text, tokens):
    assert analyze(text) == tokens
    assert ref_analyze(text) == tokens


def test_tokenizers_agree_on_catalog_text():
    raw = C.generate_raw(300, seed=5)
    texts = [product_text(p) for p in process_products(raw)]
    texts += ["3.4oz e.g. it's 1.5-2 in. 4'11\" a_b c++ 9,5;7 \u2019tis caf\u00e9's x.y.z."]
    for t in texts:
        assert tokenize(t) == ref_tokens(t), t


def test_top10_agrees_with_reference_bm25(record_property):
    raw = C.generate_raw(3000, seed=9)
    products = process_products(raw)
    engine = SearchEngine(products)
    ref = RefBM25([product_text(p) for p in products])
    queries = [h["instruction"] for hs in list(raw["human"].values())[:60] for h in hs[:1]]
    queries += ["size 8.5 running shoes", "usb c cable 6 ft", "3.4 fl oz pack of 1", "x-large black t-shirt",
                "28w x 30l jeans", "16 ounce coffee beans", "queen bed frame", "42-70 inch tv wall mount",
                "pack of 6 green tea", "10 ft hdmi cable", "men's running shoes size 9", "s m l",
                "gluten free protein bars 12 count", "a", "the and of"]
    exact = overlap = 0
    for q in queries:
        want = [products[d]["asin"] for _, d in ref.top(q)]
        got = engine.search(q, 10)
        exact += got == want
        overlap += len(set(got) & set(want)) / max(len(want), 1) if want else float(not got)
    n = len(queries)
    record_property("top10_exact", f"{exact}/{n}")
    print(f"top-10 identical (order included) for {exact}/{n} queries; mean top-10 overlap {overlap / n:.3f}")
    assert exact / n >= 0.95 and overlap / n >= 0.99  # measured: 75/75 identical


def test_repeated_query_terms_count_and_ties_keep_catalog_order():
    ps = [{"asin": f"A{i}", "Title": t, "Description": "", "BulletPoints": [""], "options": {}}
          for i, t in enumerate(["red mug", "blue mug", "red red cup", "blue mug"])]
    engine = SearchEngine(ps)
    assert engine.search("blue mug") == ["A1", "A3", "A0"]  # A1/A3 tie: catalog order
    assert engine.search("red")[:2] == ["A2", "A0"]
    assert engine.search("zzz") == [] and engine.search("the") == []


def test_saved_index_answers_like_the_built_one(tmp_path):
    products = process_products(C.generate_raw(500, seed=2))
    built = SearchEngine(products)
    built.save(str(tmp_path))
    loaded = SearchEngine.load(str(tmp_path), [p["asin"] for p in products])
    for q in ("green tea", "office chair 24 inch", "size 8.5", "nothing matches zzz"):
        assert loaded.search(q) == built.search(q)


def test_candidate_pruning_is_exact():
    """The MaxScore-style shortcut returns exactly what accumulating every posting returns."""
    raw = C.generate_raw(4000, seed=13)
    engine = SearchEngine(process_products(raw))
    assert len(engine.dense_rows) > 10  # common terms have dense rows at this size
    queries = [h["instruction"] for hs in list(raw["human"].values())[:150] for h in hs[:1]]
    queries += ["size color pack", "black large", "green tea size 8.5 black", "walnut 24 inch coffee table"]
    used = 0
    for q in queries:
        counts = {}
        for t in analyze(q):
            if t in engine.vocab:
                counts[engine.vocab[t]] = counts.get(engine.vocab[t], 0) + 1
        terms = sorted(counts.items())
        full = engine._full(terms, 50) if terms else []
        assert engine.search_ids(q, 50) == full, q
        dense = [(t, w) for t, w in terms if t in engine.dense_rows]
        sparse = [(t, w) for t, w in terms if t not in engine.dense_rows]
        used += bool(dense and sparse and engine._candidates(sparse, dense, 50) is not None)
    assert used >= len(queries) // 3  # the shortcut is actually taken (measured: most instruction queries)


def test_maxscore_path_is_exact_and_taken_for_rare_terms():
    products = process_products(C.generate_raw(3000, seed=21))
    for i, p in enumerate(products[:600]):
        p["Title"] += f" zq{i % 10}"  # rarer words: each in 60 products
    engine = SearchEngine(products)
    taken = n = 0
    for i in range(10):
        for q in (f"zq{i} black large size", f"zq{i} zq{(i + 1) % 10} gluten free", f"color zq{i} pack of 6",
                  f"zq{i} shoes", f"green tea zq{i}"):
            counts = {}
            for t in analyze(q):
                if t in engine.vocab:
                    counts[engine.vocab[t]] = counts.get(engine.vocab[t], 0) + 1
            terms = sorted(counts.items())
            assert engine.search_ids(q, 50) == engine._full(terms, 50), q
            taken += engine._maxscore(terms, 50) is not None
            n += 1
    print(f"MaxScore path taken for {taken}/{n} queries")
    assert taken >= n // 2


def test_concurrent_searches_answer_like_sequential_ones():
    """The candidate path's work arrays are pooled per concurrent search: threads searching at once (waitress
    serves with 16) must get the answers of sequential searches (catches a scratch array shared between
    searches, or one given back without being cleared)."""
    from concurrent.futures import ThreadPoolExecutor

    raw = C.generate_raw(4000, seed=17)
    engine = SearchEngine(process_products(raw))
    queries = [h["instruction"] for hs in list(raw["human"].values())[:120] for h in hs[:1]]
    want = [engine._full(_terms(engine, q), 50) if _terms(engine, q) else [] for q in queries]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(3):
            assert list(pool.map(lambda q: engine.search_ids(q, 50), queries)) == want
    assert len(engine._scratch) >= 1  # the pool was used (and its arrays came back)


def _terms(engine, q):
    counts = {}
    for t in analyze(q):
        if t in engine.vocab:
            counts[engine.vocab[t]] = counts.get(engine.vocab[t], 0) + 1
    return sorted(counts.items())


def test_seeded_path_is_exact_for_one_and_several_seed_terms():
    """The candidate path first tries the documents of the rarest term(s) alone (MaxScore with them as the only
    essential terms): whatever it answers must equal accumulating every posting, for a single seed term and for
    the several-term seeds chosen from the first theta (catches a wrong bound, e.g. the seed term's own maximum
    left in the others' sum, or a term skipped when scoring the seed)."""
    raw = C.generate_raw(4000, seed=17)
    engine = SearchEngine(process_products(raw))
    taken = []
    score_seed = engine._score_seed

    def spy(slices, dense, seed_terms, others, k, stamp):
        hit, theta = score_seed(slices, dense, seed_terms, others, k, stamp)
        if hit is not None:
            taken.append(len(seed_terms))
        return hit, theta

    engine._score_seed = spy
    queries = [h["instruction"] for hs in list(raw["human"].values())[:150] for h in hs[:1]]
    for q in queries:
        terms = _terms(engine, q)
        assert engine.search_ids(q, 50) == (engine._full(terms, 50) if terms else []), q
    print(f"seeded answers: {len(taken)}/{len(queries)}, seed sizes {sorted(set(taken))}")
    assert 1 in taken and any(r >= 2 for r in taken) and len(taken) >= 20  # measured: 32, sizes 1..7
