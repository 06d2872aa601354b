"""WebShop's product records: one raw product (``items_shuffle*.json`` entry) -> the record ``load_products`` builds.

``Title``, ``Description``, ``BulletPoints``, ``Attributes``, lower-cased ``options`` with "/" -> " | ",
``pricing`` floats and ``Price`` tag, goal fields, ... (raw format: :mod:`webshop_server.catalog`). Used by the
in-memory catalog (:func:`process_products`) and by the one-pass build of the on-disk cache
(:mod:`webshop_server.store`, :func:`process_item` per streamed product).
"""
from __future__ import annotations

import re
from decimal import Decimal
from typing import Any


def _parse_pricing(pricing: Any) -> tuple[list[float], str]:
    if not pricing:
        return [100.0], "$100.0"
    values = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in str(pricing).split("$")[1:]]
    if not values:
        return [100.0], "$100.0"
    if len(values) == 1:
        return values, f"${values[0]}"
    return values[:2], f"${values[0]} to ${values[1]}"


def process_item(p: dict[str, Any], attributes: dict[str, Any], human: dict[str, Any], human_goals: bool,
                 seen: set[str], all_reviews: dict[str, list] | None = None,
                 all_ratings: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """One raw product -> WebShop's record (``load_products``), or None for a bad/duplicate ASIN."""
    asin = p.get("asin")
    if not isinstance(asin, str) or asin == "nan" or len(asin) > 10 or asin in seen:
        return None
    seen.add(asin)
    q: dict[str, Any] = {
        "asin": asin,
        "category": p.get("category"),
        "query": str(p.get("query", "")).lower().strip(),
        "product_category": p.get("product_category", ""),
        "name": p.get("name", ""),
        "Title": p.get("name", ""),
        "Description": p.get("full_description") or "",
    }
    revs = []
    for r in (all_reviews or {}).get(asin, []):
        r = dict(r)
        if "score" not in r:
            r["score"] = r.pop("stars", 0)
        r["body"] = r.pop("review", "") if "body" not in r else r["body"]
        revs.append(r)
    q["Reviews"] = revs
    q["Rating"] = (all_ratings or {}).get(asin, "N.A.")
    small = p.get("small_description")
    q["BulletPoints"] = small if isinstance(small, list) else [small if small is not None else ""]
    q["pricing"], q["Price"] = _parse_pricing(p.get("pricing"))
    options: dict[str, list[str]] = {}
    option_to_image: dict[str, Any] = {}
    for option_name, contents in (p.get("customization_options") or {}).items():
        if contents is None:
            continue
        values = []
        for content in contents:
            value = str(content["value"]).strip().replace("/", " | ").lower()
            values.append(value)
            option_to_image[value] = content.get("image")
        options[option_name.lower()] = values
    q["options"] = options
    q["option_to_image"] = option_to_image
    info = attributes.get(asin) or {}
    q["Attributes"] = info["attributes"] if "attributes" in info else ["DUMMY_ATTR"]
    if human_goals:
        if asin in human:
            q["instructions"] = human[asin]
    else:
        q["instruction_text"] = info.get("instruction")
        q["instruction_attributes"] = info.get("instruction_attributes")
    images = p.get("images") or [""]
    q["MainImage"] = images[0]
    return q


def process_products(raw: dict[str, Any], num_products: int | None = None,
                     human_goals: bool = True, with_reviews: bool = False) -> list[dict[str, Any]]:
    """WebShop's ``load_products`` record building (without its file-system side effects)."""
    attributes = raw.get("attributes") or {}
    human = raw.get("human") or {}
    # WebShop's load_products no longer reads reviews.json (the lines are commented out upstream): every
    # product shows Rating "N.A." and an empty Reviews page. ``with_reviews`` restores the old behaviour.
    all_reviews: dict[str, list] = {}
    all_ratings: dict[str, Any] = {}
    for r in (raw.get("reviews") or []) if with_reviews else []:
        all_reviews[r["asin"]] = r.get("reviews", [])
        all_ratings[r["asin"]] = r.get("average_rating", "N.A.")
    items = raw["items"]
    if num_products is not None:
        items = items[:num_products]
    seen: set[str] = set()
    products = []
    for p in items:
        q = process_item(p, attributes, human, human_goals, seen, all_reviews, all_ratings)
        if q is not None:
            products.append(q)
    return products
