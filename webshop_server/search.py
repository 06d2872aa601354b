"""BM25 product search standing in for WebShop's Pyserini/Lucene index.

WebShop indexes, per product, ``lower(Title + " " + Description + " " + BulletPoints[0] + " " + option_text)``
with ``option_text = ", and ".join(f"{name}: {', '.join(values)}")`` and returns the top 50 hits of a
``LuceneSearcher`` (BM25, k1 0.9, b 0.4, Anserini's default English analyzer). This module reproduces that:

* analysis (:func:`analyze`), after Lucene's ``StandardTokenizer`` -> ``EnglishPossessiveFilter`` ->
  ``LowerCaseFilter`` -> ``StopFilter`` (Lucene's 33 English stop words) -> ``PorterStemFilter``: word tokens are
  runs of letters/digits/underscores joined by a "mid" character only where Unicode word-break rules join them
  (``.``, ``'``, ``’``, ``:`` between letters; ``.``, ``,``, ``;``, ``'``, ``’`` between digits), so numbers,
  decimals and single letters are kept ("size 8.5" -> size, 8.5; "usb c cable 6 ft" -> usb, c, cabl, 6, ft);
  a trailing possessive ``'s`` is dropped; stems come from the original Porter algorithm (PyStemmer ``porter``);
* scoring as Lucene's ``BM25Similarity``: ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``,
  ``score = idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))`` summed over query terms (a term repeated in the
  query counts that many times, as Anserini's bag-of-words query), with the document length ``dl`` stored in
  Lucene's one-byte norm encoding (``SmallFloat.intToByte4``: exact below 24, then 4 significant bits) and
  ``avgdl`` the exact mean. Only matching documents are returned; ties keep catalog (index) order.

The index is a term-major sparse matrix of precomputed per-posting scores (numpy), built in one pass over the
catalog and saved/loaded as ``.npy`` files (:meth:`SearchEngine.save` / :meth:`SearchEngine.load`, memory-mapped).
Queries are exact: documents of the rarer query terms are scored in full (the most common terms' scores are
gathered from dense rows) and the common terms' posting lists are skipped whenever their summed maxima cannot
reach the k-th score (MaxScore's bound); otherwise every posting is accumulated.
"""
from __future__ import annotations

import os
import re
import threading
from array import array
from typing import Any, Iterable, Sequence

import numpy as np

try:
    import Stemmer  # PyStemmer
except ImportError:  # pragma: no cover - PyStemmer is in the requirements
    Stemmer = None

SEARCH_RETURN_N = 50
ANALYZER_VERSION = "lucene-std-porter-1"

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (also Anserini's default English analyzer's stop set)
LUCENE_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split())

_L = r"[^\W\d_]"  # a letter
_TOKEN = re.compile(rf"\w+(?:(?:(?<={_L})[.'\u2019:](?={_L})|(?<=\d)[.,;'\u2019](?=\d))\w+)*")


def product_text(p: dict[str, Any]) -> str:
    option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in p.get("options", {}).items())
    bullets = p.get("BulletPoints") or [""]
    return " ".join([p.get("Title") or "", p.get("Description") or "", bullets[0] or "", option_text]).lower()


def tokenize(text: str) -> list[str]:
    """StandardTokenizer-like word tokens, lower-cased, possessive ``'s`` removed (no stop words/stemming)."""
    out = []
    for t in _TOKEN.findall(text.lower()):
        if t.endswith(("'s", "\u2019s")):
            t = t[:-2]
        if t:
            out.append(t)
    return out


class _Analyzer:
    """tokenize -> stop words -> Porter stems, with a stem cache; PyStemmer objects are per thread."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._cache: dict[str, str] = {}

    def _stemmer(self) -> Any:
        s = getattr(self._local, "stemmer", None)
        if s is None and Stemmer is not None:
            s = self._local.stemmer = Stemmer.Stemmer("porter")
        return s

    def __call__(self, text: str) -> list[str]:
        words = [w for w in tokenize(text) if w not in LUCENE_STOP_WORDS]
        cache = self._cache
        missing = [w for w in words if w not in cache]
        if missing:
            stemmer = self._stemmer()
            stems = stemmer.stemWords(missing) if stemmer is not None else missing
            if len(cache) > 2_000_000:  # bound the cache on open-ended text
                cache.clear()
            cache.update(zip(missing, stems))
        return [cache.get(w) or w for w in words]


analyze = _Analyzer()


# ------------------------------------------------------------------------------------ Lucene norm encoding
def _long_to_int4(i: int) -> int:
    num_bits = i.bit_length()
    if num_bits < 4:
        return i
    shift = num_bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits, shift = i & 0x07, (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_NUM_FREE = 255 - _long_to_int4(2 ** 31 - 1)  # 24


def lucene_length(n: int) -> int:
    """A field length as Lucene's BM25 sees it: ``byte4ToInt(intToByte4(n))``."""
    if n < _NUM_FREE:
        return n
    return _NUM_FREE + _int4_to_long(_long_to_int4(n - _NUM_FREE))


_LENGTH_TABLE = np.array([lucene_length(n) for n in range(4096)], dtype=np.float64)


def _quantized(lengths: np.ndarray) -> np.ndarray:
    out = np.empty(len(lengths), dtype=np.float64)
    small = lengths < len(_LENGTH_TABLE)
    out[small] = _LENGTH_TABLE[lengths[small]]
    for i in np.flatnonzero(~small):
        out[i] = lucene_length(int(lengths[i]))
    return out


class SearchEngine:
    """BM25 over products (see module doc). Build from products, or :meth:`load` a saved index."""

    FILES = ("indptr.npy", "docs.npy", "scores.npy", "term_max.npy", "dense_ids.npy", "dense.npy")

    def __init__(self, products: Iterable[dict[str, Any]] | None = None, k1: float = 0.9, b: float = 0.4,
                 texts: Iterable[tuple[str, str]] | None = None):
        self.k1, self.b = k1, b
        self.analyze = analyze
        if products is not None:
            texts = ((p["asin"], product_text(p)) for p in products)
        if texts is None:
            return  # filled by load()
        builder = IndexBuilder(k1, b)
        for asin, text in texts:
            builder.add(asin, text)
        self._set(*builder.finish())

    def _set(self, asins: Sequence[str], vocab: dict[str, int], indptr: np.ndarray, docs: np.ndarray,
             scores: np.ndarray, term_max: np.ndarray | None = None, dense_ids: np.ndarray | None = None,
             dense: np.ndarray | None = None) -> None:
        # plain ndarray views of the memory maps: slicing a np.memmap costs ~70 us, an ndarray view ~0.2 us
        indptr, docs, scores = np.asarray(indptr), np.asarray(docs), np.asarray(scores)
        self.asins, self.vocab, self.indptr, self.docs, self.scores = asins, vocab, indptr, docs, scores
        if term_max is None:
            term_max, dense_ids, dense = _extras(len(asins), indptr, docs, scores)
        self.term_max, self.dense_ids, self.dense = np.asarray(term_max), np.asarray(dense_ids), np.asarray(dense)
        # the most common terms also as dense rows: gathered for candidates instead of scanning their postings
        self.dense_rows = {int(t): i for i, t in enumerate(np.asarray(dense_ids).tolist())}
        self._scratch: list[tuple[np.ndarray, np.ndarray]] = []  # see _take_scratch
        self._scratch_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.asins)

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """ASINs of the top ``k`` matching products for a free-text query."""
        return [self.asins[i] for i in self.search_ids(query, k)]

    def search_ids(self, query: str, k: int = SEARCH_RETURN_N) -> list[int]:
        """Document ids of the top ``k`` (exact BM25 order, ties by id)."""
        counts: dict[int, int] = {}
        for t in self.analyze(query):
            tid = self.vocab.get(t)
            if tid is not None:
                counts[tid] = counts.get(tid, 0) + 1
        if not counts or not len(self.asins):
            return []
        terms = sorted(counts.items())
        if len(terms) == 1:
            (tid, w), = terms
            lo, hi = self.indptr[tid], self.indptr[tid + 1]
            return _top(np.asarray(self.docs[lo:hi]), np.asarray(self.scores[lo:hi], dtype=np.float64) * w, k)
        hit = self._maxscore(terms, k)
        if hit is not None:
            return hit
        dense = [(tid, w) for tid, w in terms if tid in self.dense_rows]
        sparse = [(tid, w) for tid, w in terms if tid not in self.dense_rows]
        if dense and sparse:
            hit = self._candidates(sparse, dense, k)
            if hit is not None:
                return hit
        return self._full(terms, k)

    def _score_docs(self, cand: np.ndarray, terms: list[tuple[int, int]]) -> np.ndarray:
        """Exact scores of the (ascending) documents ``cand`` for the query terms."""
        sc = np.zeros(cand.size, dtype=np.float64)
        for tid, w in terms:
            row = self.dense_rows.get(tid)
            if row is not None:
                sc += np.asarray(self.dense[row])[cand] * float(w)
                continue
            lo, hi = self.indptr[tid], self.indptr[tid + 1]
            d = np.asarray(self.docs[lo:hi])
            idx = np.searchsorted(d, cand)
            idx[idx == d.size] = 0
            hit = d[idx] == cand
            sc[hit] += np.asarray(self.scores[lo:hi])[idx[hit]] * float(w)
        return sc

    def _maxscore(self, terms: list[tuple[int, int]], k: int) -> list[int] | None:
        """MaxScore: a lower bound theta of the k-th score comes from the rarest term's documents (scored in
        full); terms whose summed maxima stay below theta are non-essential (a document matching only them
        cannot reach the top k), so the candidates are the essential terms' documents, scored in full.
        None when the rarest term is too common or the candidates too many (the callers then accumulate)."""
        n = len(self.asins)
        df = {tid: int(self.indptr[tid + 1] - self.indptr[tid]) for tid, _ in terms}
        # seed documents: those of the rarest terms, until there are k of them (within a small budget)
        parts, size = [], 0
        for tid in sorted(df, key=df.get):
            if size >= k:
                break
            if size + df[tid] > max(n // 50, 2 * k):
                return None
            parts.append(self.docs[self.indptr[tid]:self.indptr[tid + 1]])
            size += df[tid]
        seed = np.unique(np.concatenate(parts)) if len(parts) > 1 else parts[0]
        theta = 0.0
        if seed.size >= k:
            seed_sc = self._score_docs(seed, terms)
            theta = float(np.partition(seed_sc, seed.size - k)[seed.size - k])
        cum, essential = 0.0, []
        for tid, w in sorted(terms, key=lambda tw: float(self.term_max[tw[0]]) * tw[1]):
            ub = float(self.term_max[tid]) * w
            if not essential and (cum + ub) * (1 + 1e-6) < theta:
                cum += ub
            else:
                essential.append(tid)
        if sum(df[t] for t in essential) > n // 8:
            return None
        parts = [np.asarray(self.docs[self.indptr[t]:self.indptr[t + 1]]) for t in essential]
        cand = np.unique(np.concatenate(parts)) if len(parts) > 1 else parts[0]
        if cand.size == 0:
            return []
        return _top(cand, self._score_docs(cand, terms), k)

    def _full(self, terms: list[tuple[int, int]], k: int) -> list[int]:
        """Accumulate every posting of every query term over all documents."""
        acc = np.zeros(len(self.asins), dtype=np.float64)
        for tid, w in terms:
            row = self.dense_rows.get(tid)
            if row is not None:
                acc += self.dense[row] * float(w)
            else:
                lo, hi = self.indptr[tid], self.indptr[tid + 1]
                acc[self.docs[lo:hi]] += np.asarray(self.scores[lo:hi], dtype=np.float64) * w
        cand = np.flatnonzero(acc > 0)
        return _top(cand, acc[cand], k)

    def _take_scratch(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-document work arrays for one search: an all-zero float64 accumulator and an int32 stamp array.
        Pooled (one per concurrent search, e.g. per waitress thread), so that a query neither allocates nor
        scans arrays of the catalog's size (at 1.18M products that cost more than the scoring itself)."""
        with self._scratch_lock:
            if self._scratch:
                return self._scratch.pop()
        n = len(self.asins)
        return np.zeros(n, dtype=np.float64), np.empty(n, dtype=np.int32)

    def _give_scratch(self, scratch: tuple[np.ndarray, np.ndarray]) -> None:
        with self._scratch_lock:
            self._scratch.append(scratch)

    def _candidates(self, sparse: list[tuple[int, int]], dense: list[tuple[int, int]], k: int) -> list[int] | None:
        """Exact top-k without touching the common (dense) terms' posting lists, or None when that cannot be
        guaranteed: candidates are the documents of the rarer terms, scored in full (dense rows are gathered);
        any other document matches only common terms, so it scores at most the sum of their maxima, and if that
        is below the k-th candidate score no such document can enter the top k (MaxScore's argument)."""
        slices = [(self.indptr[t], self.indptr[t + 1], w) for t, w in sparse]
        total = sum(hi - lo for lo, hi, _ in slices)
        if total > len(self.asins) // 2:
            return None
        acc, stamp = self._take_scratch()
        if len(slices) > 1:
            hit = self._seeded(slices, sparse, dense, k, stamp)
            if hit is not None:
                self._give_scratch((acc, stamp))
                return hit
        # Every document's sum is formed as before: its postings added in query-term order starting from 0.0
        # (np.add.at applies the updates in array order), so scores are bit-identical. The distinct documents
        # come from the stamp array (the position whose write won each document's slot), not from sorting
        # (np.unique was 75% of a query's time at 300k products); their order does not matter (_top orders by
        # (score, id)). np.take/np.add.at: 2-3x faster than fancy indexing on these sizes.
        docs = np.concatenate([self.docs[lo:hi] for lo, hi, _ in slices])
        np.add.at(acc, docs, np.concatenate([self.scores[lo:hi].astype(np.float64) * w for lo, hi, w in slices]))
        pos = np.arange(docs.size, dtype=np.int32)
        stamp[docs] = pos
        cand = docs[np.take(stamp, docs) == pos]
        sc = np.take(acc, cand)
        acc[cand] = 0.0  # the accumulator goes back all-zero
        self._give_scratch((acc, stamp))  # (not given back after an exception: it may be dirty)
        if cand.size < k:
            return None
        for tid, w in dense:
            row = np.take(self.dense[self.dense_rows[tid]], cand)
            # float32 -> float64 is exact, so for w == 1 adding the row is the same as adding row * 1.0
            sc += row if w == 1 else row.astype(np.float64) * w
        kth = np.partition(sc, cand.size - k)[cand.size - k]
        bound = sum(float(self.term_max[tid]) * w for tid, w in dense)
        if bound * (1 + 1e-6) >= kth:
            return None
        return _top(cand, sc, k, kth)

    def _seeded(self, slices: list[tuple[int, int, int]], sparse: list[tuple[int, int]],
                dense: list[tuple[int, int]], k: int, stamp: np.ndarray) -> list[int] | None:
        """The candidate path's answer from the documents of the rarest terms alone, when that is provably the
        same (MaxScore with those as the only essential terms), else None.

        The seed documents (those of the r rarest terms) are scored in full, summing the terms in the order the
        candidate path sums them (sparse terms by id, then dense terms by id; a term a document lacks adds
        +0.0, which changes no sum), so every seed score is bit-identical to the candidate path's. theta, the
        k-th best seed score, bounds the true k-th score from below; a document outside the seed lacks the
        seed terms, so it scores at most the sum of the other terms' maxima; when that is below theta no such
        document can reach (or tie) the top k, and the top k of the seed is the answer. The rarest term alone
        is tried first; when it falls short, its theta tells the smallest r for which the test must pass.
        At 1.18M generated products this answers most goal instructions from 30-60k seed documents instead
        of ~150k scattered postings and ~100k candidates."""
        order = sorted(range(len(slices)), key=lambda i: slices[i][1] - slices[i][0])
        maxima = [float(self.term_max[t]) * w for t, w in sparse]
        others = [sum(maxima) + sum(float(self.term_max[t]) * w for t, w in dense)]
        for i in order[:-1]:  # others[r]: the maxima of every term but the r rarest (one sparse term stays out)
            others.append(others[-1] - maxima[i])
        hit, theta = self._score_seed(slices, dense, order[:1], others[1], k, stamp)
        if hit is not None or theta is None:
            return hit
        r = next((r for r in range(2, len(others)) if others[r] * (1 + 1e-6) < theta), None)
        if r is None:
            return None
        return self._score_seed(slices, dense, order[:r], others[r], k, stamp)[0]

    def _score_seed(self, slices: list[tuple[int, int, int]], dense: list[tuple[int, int]], seed_terms: list[int],
                    others: float, k: int, stamp: np.ndarray) -> tuple[list[int] | None, float | None]:
        """(top k or None, theta or None): the seed = documents of the sparse terms ``seed_terms`` (indices
        into ``slices``), scored in full; the top k when ``others`` (the other terms' summed maxima) is below
        theta, the k-th best seed score."""
        n = len(self.asins)
        seeds = set(seed_terms)
        if len(seeds) == 1:
            (i0,) = seeds
            seed = self.docs[slices[i0][0]:slices[i0][1]]
        else:
            both = np.concatenate([self.docs[slices[i][0]:slices[i][1]] for i in sorted(seeds)])
            pos = np.arange(both.size, dtype=np.int32)
            stamp[both] = pos
            seed = both[np.take(stamp, both) == pos]  # distinct documents (see _candidates)
        m = seed.size
        if m < k or m > n // 8:
            return None, None
        stamp[seed] = np.arange(m, dtype=np.int32)  # stamp[doc] = the doc's seed position (other slots: garbage)
        sc = np.zeros(m, dtype=np.float64)
        for i, (lo, hi, w) in enumerate(slices):
            if i in seeds and len(seeds) == 1:
                sc += self.scores[lo:hi].astype(np.float64) * w
                continue
            d = self.docs[lo:hi]
            at = np.take(stamp, d)
            if i in seeds:
                np.add.at(sc, at, self.scores[lo:hi].astype(np.float64) * w)
                continue
            np.clip(at, 0, m - 1, out=at)
            hit = np.flatnonzero(np.take(seed, at) == d)  # garbage slots point at another seed document
            np.add.at(sc, np.take(at, hit), np.take(self.scores[lo:hi], hit).astype(np.float64) * w)
        if dense and m > 8 * k:
            # The dense (most common) terms add little and their rows are the costliest to gather (a cache miss
            # per document and row): gather them only for seed documents that can still reach the top k. The
            # 4k best by their sparse sum, completed, give theta0 (their k-th best) <= the seed's k-th best
            # score; a document whose sparse sum plus the dense terms' maxima stays below theta0 is dropped,
            # and again after each dense term (largest maximum first) with the maxima of the terms left. These
            # estimates only select documents: the scores below are summed in the candidate path's order.
            probe_n = 4 * k
            best = np.argpartition(sc, m - probe_n)[m - probe_n:]
            probe = np.take(sc, best)
            for tid, w in dense:
                probe = probe + np.take(self.dense[self.dense_rows[tid]], np.take(seed, best)) * float(w)
            theta0 = float(np.partition(probe, probe_n - k)[probe_n - k]) / (1 + 1e-6)  # (rounding margin)
            ranked = sorted(dense, key=lambda tw: -float(self.term_max[tw[0]]) * tw[1])
            rest = sum(float(self.term_max[t]) * w for t, w in ranked)
            alive = np.flatnonzero(sc + rest >= theta0)
            est = np.take(sc, alive)
            for tid, w in ranked[:-1]:
                rest -= float(self.term_max[tid]) * w
                est = est + np.take(self.dense[self.dense_rows[tid]], np.take(seed, alive)) * float(w)
                keep = np.flatnonzero(est + rest >= theta0)
                alive, est = np.take(alive, keep), np.take(est, keep)
            seed, sc = np.take(seed, alive), np.take(sc, alive)
            m = seed.size
        for tid, w in dense:
            row = np.take(self.dense[self.dense_rows[tid]], seed)
            sc += row if w == 1 else row.astype(np.float64) * w
        theta = np.partition(sc, m - k)[m - k]
        if others * (1 + 1e-6) >= theta:
            return None, theta
        return _top(seed, sc, k, theta), theta

    # ------------------------------------------------------------------------------------------ persistence
    def save(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        for name, arr in zip(self.FILES, (self.indptr, self.docs, self.scores, self.term_max, self.dense_ids,
                                          self.dense)):
            np.save(os.path.join(directory, name), np.asarray(arr))
        terms = [""] * len(self.vocab)
        for t, i in self.vocab.items():
            terms[i] = t
        with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(terms))

    @classmethod
    def load(cls, directory: str, asins: Sequence[str], k1: float = 0.9, b: float = 0.4) -> "SearchEngine":
        eng = cls(None, k1, b)
        arrays = [np.load(os.path.join(directory, name), mmap_mode="r") for name in cls.FILES]
        with open(os.path.join(directory, "vocab.txt"), encoding="utf-8") as f:
            terms = f.read().split("\n")
        eng._set(asins, {t: i for i, t in enumerate(terms)}, *arrays)
        return eng


def _top(cand: np.ndarray, sc: np.ndarray, k: int, kth: float | None = None) -> list[int]:
    """The k best (highest score, then lowest id) of candidate ids with their scores (``kth``: the k-th largest
    score when the caller already has it)."""
    if cand.size > k:
        # keep every document tied with the k-th score, then order by (-score, doc id)
        if kth is None:
            kth = np.partition(sc, cand.size - k)[cand.size - k]
        keep = sc >= kth
        cand, sc = cand[keep], sc[keep]
    order = np.lexsort((cand, -sc))[:k]
    return np.asarray(cand)[order].tolist()


DENSE_MAX_TERMS = 128  # at 1.18M products: at most 128 * 4.7 MB on disk (memory-mapped)


def _extras(n_docs: int, indptr: np.ndarray, docs: np.ndarray, scores: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-term maximum posting score, and dense score rows for the most common terms (df >= n/64)."""
    n_terms = len(indptr) - 1
    df = np.diff(indptr)
    term_max = np.zeros(n_terms, dtype=np.float32)
    nonempty = df > 0
    if scores.size:
        term_max[nonempty] = np.maximum.reduceat(np.asarray(scores), np.asarray(indptr[:-1])[nonempty])
    common = np.flatnonzero(df >= max(n_docs // 64, 256))
    dense_ids = common[np.argsort(-df[common], kind="stable")][:DENSE_MAX_TERMS].astype(np.int64)
    dense = np.zeros((len(dense_ids), n_docs), dtype=np.float32)
    for row, t in enumerate(dense_ids):
        lo, hi = indptr[t], indptr[t + 1]
        dense[row, docs[lo:hi]] = scores[lo:hi]
    return term_max, dense_ids, dense


class IndexBuilder:
    """One pass over (asin, text) pairs -> term-major arrays of BM25 posting scores."""

    def __init__(self, k1: float = 0.9, b: float = 0.4):
        self.k1, self.b = k1, b
        self.asins: list[str] = []
        self.vocab: dict[str, int] = {}
        self._terms = array("I")
        self._tfs = array("I")
        self._docs = array("I")
        self._lengths = array("I")

    def add(self, asin: str, text: str) -> None:
        doc = len(self.asins)
        self.asins.append(asin)
        tokens = analyze(text)
        self._lengths.append(len(tokens))
        counts: dict[str, int] = {}
        for t in tokens:
            counts[t] = counts.get(t, 0) + 1
        vocab = self.vocab
        for t, c in counts.items():
            tid = vocab.get(t)
            if tid is None:
                tid = vocab[t] = len(vocab)
            self._terms.append(tid)
            self._tfs.append(c)
        self._docs.extend([doc] * len(counts))

    def finish(self) -> tuple[list[str], dict[str, int], np.ndarray, np.ndarray, np.ndarray]:
        n_docs = len(self.asins)
        terms = np.frombuffer(self._terms, dtype=np.uint32)
        docs = np.frombuffer(self._docs, dtype=np.uint32)
        tfs = np.frombuffer(self._tfs, dtype=np.uint32).astype(np.float64)
        lengths = np.frombuffer(self._lengths, dtype=np.uint32).astype(np.int64)
        df = np.bincount(terms, minlength=len(self.vocab)).astype(np.float64)
        idf = np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
        avgdl = float(lengths.sum()) / max(n_docs, 1)
        norm = self.k1 * (1.0 - self.b + self.b * _quantized(lengths) / max(avgdl, 1e-9))
        scores = (idf[terms] * tfs / (tfs + norm[docs])).astype(np.float32)
        order = np.argsort(terms, kind="stable")  # docs stay ascending within a term
        indptr = np.zeros(len(self.vocab) + 1, dtype=np.int64)
        np.cumsum(df.astype(np.int64), out=indptr[1:])
        result = (self.asins, self.vocab, indptr, docs[order].astype(np.int32), scores[order])
        self._terms = self._tfs = self._docs = self._lengths = array("I")
        return result
