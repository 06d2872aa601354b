"""Product catalog: WebShop's raw data files, or a seeded generated catalog in the same raw format.

Raw format (as published with WebShop):

* ``items_shuffle*.json``: list of products ``{asin, name, full_description, small_description: [str],
  pricing: "$12.99" | "$12.99 - $20.00", images: [url], product_category: "A › B › C", average_rating,
  customization_options: {Name: [{value, image}]} | null, category, query, ...}``
* ``items_ins_v2*.json``: ``{asin: {attributes: [str], instruction: str, instruction_attributes: [str]}}``
  (synthetic instructions)
* ``items_human_ins.json``: ``{asin: [{asin, instruction, instruction_attributes, instruction_options}]}``
  (human instructions)
* ``reviews.json`` (optional): ``[{asin, reviews: [{title, stars, review}], average_rating}]``

:func:`webshop_server.records.process_products` turns them into WebShop's in-memory product records, as
``engine.load_products`` does; :func:`load_catalog` serves them (real files from the on-disk cache of
:mod:`webshop_server.store`, a generated catalog in memory). :func:`generate_raw` produces the four structures
from a seed: categories with queries and Amazon-like category paths, titles from brand + attributes + product noun,
descriptions, bullet points, attribute lists, option sets, single prices and price ranges, reviews, one
synthetic instruction per product and 1-5 human instructions per product.
"""
from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from webshop_server.records import process_products
from webshop_server.store import open_catalog

SEP = " \u203a "

# ------------------------------------------------------------------------------------------- vocabulary
# category -> list of (query, product_category path, product noun)
PRODUCT_TYPES: dict[str, list[tuple[str, str, str]]] = {
    "beauty": [
        ("deodorant", "Beauty & Personal Care|Personal Care|Deodorants & Antiperspirants|Deodorants", "Deodorant"),
        ("shampoo", "Beauty & Personal Care|Hair Care|Shampoo & Conditioner|Shampoos", "Shampoo"),
        ("face moisturizer", "Beauty & Personal Care|Skin Care|Face|Creams & Moisturizers|Face Moisturizers",
         "Face Moisturizer"),
        ("lipstick", "Beauty & Personal Care|Makeup|Lips|Lipstick", "Lipstick"),
        ("hair extensions", "Beauty & Personal Care|Hair Care|Hair Extensions, Wigs & Accessories|Hair Extensions",
         "Hair Extension"),
        ("nail polish", "Beauty & Personal Care|Foot, Hand & Nail Care|Nail Art & Polish|Nail Polish", "Nail Polish"),
        ("body wash", "Beauty & Personal Care|Personal Care|Bath & Bathing Accessories|Body Washes", "Body Wash"),
        ("eyeshadow palette", "Beauty & Personal Care|Makeup|Eyes|Eyeshadow", "Eyeshadow Palette"),
    ],
    "electronics": [
        ("bluetooth headphones", "Electronics|Headphones, Earbuds & Accessories|Headphones|Over-Ear Headphones",
         "Headphones"),
        ("phone case", "Cell Phones & Accessories|Cases, Holsters & Sleeves|Basic Cases", "Phone Case"),
        ("hdmi cable", "Electronics|Television & Video|Accessories|Cables|HDMI Cables", "HDMI Cable"),
        ("wireless mouse", "Electronics|Computers & Accessories|Keyboards, Mice & Accessories|Mice", "Mouse"),
        ("security camera", "Electronics|Camera & Photo|Video Surveillance|Surveillance Cameras", "Security Camera"),
        ("usb charger", "Cell Phones & Accessories|Accessories|Chargers & Power Adapters|Wall Chargers", "Charger"),
        ("tv wall mount", "Electronics|Television & Video|Accessories|TV Mounts, Stands & Turntables|TV Wall Mounts",
         "TV Mount"),
        ("portable speaker", "Electronics|Portable Audio & Video|Portable Speakers & Docks|Portable Bluetooth Speakers",
         "Speaker"),
    ],
    "fashion": [
        ("men's running shoes", "Clothing, Shoes & Jewelry|Men|Shoes|Athletic|Running", "Running Shoes"),
        ("women's sweatshirt", "Clothing, Shoes & Jewelry|Women|Clothing|Fashion Hoodies & Sweatshirts",
         "Sweatshirt"),
        ("men's t-shirt", "Clothing, Shoes & Jewelry|Men|Clothing|Shirts|T-Shirts", "T-Shirt"),
        ("women's leggings", "Clothing, Shoes & Jewelry|Women|Clothing|Leggings", "Leggings"),
        ("men's jeans", "Clothing, Shoes & Jewelry|Men|Clothing|Jeans", "Jeans"),
        ("backpack", "Clothing, Shoes & Jewelry|Luggage & Travel Gear|Backpacks|Casual Daypacks", "Backpack"),
        ("women's sandals", "Clothing, Shoes & Jewelry|Women|Shoes|Sandals|Flat Sandals", "Sandals"),
        ("baseball cap", "Clothing, Shoes & Jewelry|Men|Accessories|Hats & Caps|Baseball Caps", "Baseball Cap"),
    ],
    "grocery": [
        ("green tea", "Grocery & Gourmet Food|Beverages|Tea|Green", "Green Tea"),
        ("protein bars", "Grocery & Gourmet Food|Snacks & Sweets|Bars|Protein Bars", "Protein Bar"),
        ("coffee beans", "Grocery & Gourmet Food|Beverages|Coffee, Tea & Cocoa|Coffee|Whole Coffee Beans",
         "Coffee Beans"),
        ("potato chips", "Grocery & Gourmet Food|Snacks & Sweets|Chips & Crisps|Potato Chips", "Potato Chips"),
        ("dark chocolate", "Grocery & Gourmet Food|Snacks & Sweets|Chocolate|Chocolate Bars", "Dark Chocolate"),
        ("olive oil", "Grocery & Gourmet Food|Pantry Staples|Cooking Oils|Olive Oils", "Olive Oil"),
        ("beef jerky", "Grocery & Gourmet Food|Snacks & Sweets|Jerky & Dried Meats|Beef Jerky", "Beef Jerky"),
        ("gummy candy", "Grocery & Gourmet Food|Snacks & Sweets|Candy & Chocolate|Gummy Candies", "Gummy Candy"),
    ],
    "furniture": [
        ("coffee tables", "Home & Kitchen|Furniture|Living Room Furniture|Tables|Coffee Tables", "Coffee Table"),
        ("office chair", "Home & Kitchen|Furniture|Home Office Furniture|Home Office Chairs|Desk Chairs",
         "Office Chair"),
        ("bookshelf", "Home & Kitchen|Furniture|Home Office Furniture|Bookcases", "Bookshelf"),
        ("bed frame", "Home & Kitchen|Furniture|Bedroom Furniture|Beds, Frames & Bases|Bed Frames", "Bed Frame"),
        ("tv stand", "Home & Kitchen|Furniture|Living Room Furniture|Television Stands & Entertainment Centers",
         "TV Stand"),
        ("dining chairs", "Home & Kitchen|Furniture|Kitchen & Dining Room Furniture|Chairs", "Dining Chair"),
        ("nightstand", "Home & Kitchen|Furniture|Bedroom Furniture|Nightstands", "Nightstand"),
        ("floor lamp", "Tools & Home Improvement|Lighting & Ceiling Fans|Lamps & Shades|Floor Lamps", "Floor Lamp"),
    ],
}

ATTRIBUTES: dict[str, list[str]] = {
    "beauty": ["long lasting", "paraben free", "cruelty free", "sensitive skin", "natural ingredients",
               "travel size", "fragrance free", "dermatologist tested", "easy apply", "hair growth", "dry skin",
               "alcohol free", "vegan", "non toxic", "high quality"],
    "electronics": ["high definition", "easy install", "fast charging", "noise cancelling", "wireless bluetooth",
                    "water resistant", "usb port", "long battery life", "plug and play", "high speed", "easy use",
                    "stereo sound", "ultra hd", "aluminum alloy", "heavy duty"],
    "fashion": ["machine wash", "slip resistant", "rubber sole", "long sleeve", "button closure", "relaxed fit",
                "classic fit", "high waist", "elastic waist", "moisture wicking", "quick drying", "lace up",
                "cotton spandex", "daily wear", "non slip"],
    "grocery": ["gluten free", "low sugar", "sugar free", "non gmo", "keto friendly", "high protein",
                "low calorie", "dairy free", "natural flavors", "caffeine free", "ready eat", "individually wrapped",
                "kosher certified", "plant based", "usda organic"],
    "furniture": ["easy assemble", "storage space", "solid wood", "wood finish", "living room", "space saving",
                  "metal legs", "mid century", "memory foam", "engineered wood", "assembly required",
                  "lumbar support", "steel frame", "easy clean", "height adjustable"],
}

COLORS = ["Black", "White", "Navy Blue", "Grey", "Red", "Dark Green", "Beige", "Light Pink", "Brown",
          "Black/White", "Burgundy", "Sky Blue", "Olive", "Multicolor", "Rose Gold", "Charcoal", "Purple",
          "Teal", "Ivory", "Walnut"]
OPTIONS: dict[str, dict[str, list[str]]] = {
    "beauty": {
        "Scent": ["Bright Citrus", "Calming Lavender", "Ginger Fresh", "Simply Unscented", "Coconut Vanilla",
                  "Sea Salt", "Eucalyptus Mint", "Rose Petal"],
        "Size": ["1.7 Fl Oz (Pack of 1)", "3.4 Fl Oz (Pack of 1)", "3 Ounce (Pack of 2)", "Travel Set (4-Pack)",
                 "8 Fl Oz", "16 Fl Oz"],
        "Color": ["Nude", "Coral", "Plum", "Berry Red", "Natural Black", "Light Brown", "Mauve", "Peach"],
    },
    "electronics": {
        "Color": COLORS[:10],
        "Style": ["Standard", "Pro", "With Charging Case", "2-Pack", "Gen 2", "Bundle"],
        "Size": ["3 ft", "6 ft", "10 ft", "15 ft", "32-55 inch", "42-70 inch"],
    },
    "fashion": {
        "Color": COLORS,
        "Size": ["Small", "Medium", "Large", "X-Large", "XX-Large", "7", "8", "8.5", "9", "10", "11", "12",
                 "28W x 30L", "32W x 32L", "34W x 30L"],
        "Fit Type": ["Men", "Women", "Big & Tall", "Slim"],
    },
    "grocery": {
        "Flavor Name": ["Chocolate", "Peanut Butter", "Vanilla", "Sea Salt", "Original", "Honey", "Jasmine",
                        "Mint", "Strawberry", "Barbecue", "Teriyaki", "Caramel"],
        "Size": ["4 Ounce (Pack of 1)", "12 Count (Pack of 1)", "Pack of 6", "16 Ounce", "1 Pound (Pack of 2)",
                 "24 Count"],
    },
    "furniture": {
        "Color": ["Black", "White", "Walnut", "Espresso", "Natural Oak", "Grey", "Rustic Brown", "Navy"],
        "Size": ["Small", "Large", "24 Inch", "36 Inch", "Queen", "Full", "Twin", "King"],
        "Style": ["Modern", "Farmhouse", "Industrial", "Mid-Century", "Classic"],
    },
}

BRANDS = ["Acme", "Lumio", "Nordvik", "Orbit", "Terra", "Kinto", "Velora", "Brightway", "Cobalt", "Driftwood",
          "Everly", "Fablewood", "Glimmer", "Harbor", "Ironleaf", "Juniper", "Kestrel", "Larkspur", "Meridian",
          "Northstar", "Oakhaven", "Pinecrest", "Quill", "Redwood", "Solace", "Tidewater", "Umbra", "Vantage",
          "Willow", "Zenith", "Aurora", "Bramble", "Cascade", "Dovetail", "Ember", "Falcon", "Granite Peak",
          "Halcyon", "Indigo Bay", "Jasper"]
TITLE_SUFFIXES = [", Classic", ", Pro", ", Lite", ", Premium", " - New Edition", " (Pack of 2)", ", Everyday",
                  " for Home and Travel", ", 2024 Model", ""]
REVIEW_TITLES = ["Love it", "Works as described", "Great value", "Not what I expected", "Five stars",
                 "Decent for the price", "Would buy again", "Disappointed", "Exactly what I needed", "Pretty good"]
REVIEW_BODIES = ["The {noun} arrived quickly and the quality is {q}.", "I use this {noun} every day; {q} overall.",
                 "Compared with other brands this {noun} is {q}.", "Bought it as a gift, the {noun} looks {q}."]
QUALITY = ["excellent", "good", "fine", "okay", "great", "solid", "average"]
FILLER = ["Designed for everyday use.", "Backed by a 30-day satisfaction guarantee.",
          "Carefully packed and shipped from our warehouse.", "Customers love its reliable quality.",
          "A thoughtful gift for friends and family.", "Made with attention to detail."]


_ASIN_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _asin(rng: random.Random, used: set[str]) -> str:
    """A fresh 10-character ASIN-like id ("B0" + 8 base-36 characters), one RNG draw per try."""
    while True:
        n = rng.getrandbits(42) % 36 ** 8
        chars = []
        for _ in range(8):
            n, r = divmod(n, 36)
            chars.append(_ASIN_ALPHABET[r])
        a = "B0" + "".join(chars)
        if a not in used:
            used.add(a)
            return a


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _synthetic_instruction(rng: random.Random, noun: str, attrs: list[str]) -> str:
    noun = noun.lower()
    a = " and ".join(attrs)
    templates = [
        f"i need {_article(noun)} {noun} that is {a}",
        f"find me {', '.join(attrs)} {noun}",
        f"i am looking for {_article(attrs[0])} {' '.join(attrs)} {noun}",
        f"i want {_article(noun)} {noun} which is {a}",
    ]
    return rng.choice(templates)


def _human_instruction(rng: random.Random, noun: str, attrs: list[str], opt_phrases: list[str]) -> str:
    noun = noun.lower()
    a = " and ".join(attrs)
    opts = (" in " + " and ".join(opt_phrases)) if opt_phrases else ""
    templates = [
        f"i'm looking for {_article(attrs[0])} {a} {noun}{opts}",
        f"i want to buy {_article(noun)} {noun} that is {a}{opts}",
        f"please find me {_article(attrs[0])} {a} {noun}{opts}",
        f"i need {a} {noun}{opts}",
        f"looking for {noun} that's {a}{opts}",
    ]
    return rng.choice(templates)


def _human_variant(rng: random.Random, attr: str) -> str:
    """Human-written attribute spellings vary (hyphens), as in WebShop's human instructions."""
    if " " in attr and rng.random() < 0.25:
        return attr.replace(" ", "-", 1)
    return attr


def iter_raw_products(num_products: int, seed: int = 0, human_fraction: float = 1.0
                      ) -> Iterator[tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]] | None, dict[str, Any]]]:
    """Generated products one at a time: ``(item, items_ins_v2 entry, human instructions or None, reviews)``.

    ``human_fraction`` < 1 keeps human instructions for that share of the products only (WebShop's real data has
    12,087 human instructions for 1.18M products); the choice uses its own RNG, so the catalog is the same.
    """
    rng = random.Random(seed)
    keep_rng = random.Random(seed + 7919)
    used: set[str] = set()
    categories = sorted(PRODUCT_TYPES)
    for _ in range(num_products):
        category = rng.choice(categories)
        query, path, noun = rng.choice(PRODUCT_TYPES[category])
        brand = rng.choice(BRANDS)
        attrs = rng.sample(ATTRIBUTES[category], rng.randint(2, 4))
        title_attrs = attrs[: rng.randint(1, min(2, len(attrs)))]
        title = f"{brand} {' '.join(a.title() for a in title_attrs)} {noun}{rng.choice(TITLE_SUFFIXES)}"
        asin = _asin(rng, used)
        # options: 0-2 option groups, 2-5 values each, values unique within the product
        option_names = rng.sample(sorted(OPTIONS[category]), rng.choice([0, 1, 1, 2, 2, 2]))
        customization: dict[str, list[dict[str, Any]]] = {}
        seen_values: set[str] = set()
        for name in option_names:
            pool = [v for v in OPTIONS[category][name] if v.lower() not in seen_values]
            values = rng.sample(pool, min(len(pool), rng.randint(2, 5)))
            seen_values.update(v.lower() for v in values)
            customization[name] = [{"value": v, "image": None} for v in values]
        # price: single value or a range
        base = round(rng.uniform(4.0, 600.0 if category == "furniture" else 250.0), 2)
        if rng.random() < 0.2:
            pricing = f"${base:.2f} - ${base * rng.uniform(1.1, 1.6):.2f}"
        else:
            pricing = f"${base:.2f}"
        bullets = [f"{a.capitalize()}: this {noun.lower()} is {a}, tested for quality." for a in attrs]
        bullets.append(rng.choice(FILLER))
        description = (f"{brand} {noun.lower()} with {', '.join(attrs)}. {rng.choice(FILLER)} "
                       f"{rng.choice(FILLER)}")
        n_reviews = rng.randint(0, 3)
        prod_reviews = [{"title": rng.choice(REVIEW_TITLES), "stars": str(rng.randint(1, 5)),
                         "review": rng.choice(REVIEW_BODIES).format(noun=noun.lower(), q=rng.choice(QUALITY))}
                        for _ in range(n_reviews)]
        avg = round(sum(int(r["stars"]) for r in prod_reviews) / n_reviews, 1) if n_reviews else "N.A."
        item = {
            "asin": asin,
            "name": title,
            "full_description": description,
            "small_description": bullets,
            "pricing": pricing,
            "images": ["/static/img/product.svg"],
            "product_category": SEP.join(path.split("|")),
            "average_rating": avg,
            "customization_options": customization or None,
            "category": category,
            "query": query,
            "page": 1,
        }
        review = {"asin": asin, "reviews": prod_reviews, "average_rating": avg}
        ins_attrs = rng.sample(attrs, rng.randint(1, min(2, len(attrs))))
        attr_entry = {
            "attributes": attrs,
            "instruction": _synthetic_instruction(rng, noun, ins_attrs),
            "instruction_attributes": ins_attrs,
        }
        human_list = []
        seen_instructions: set[str] = set()
        for _h in range(rng.randint(1, 5)):
            h_attrs = rng.sample(attrs, rng.randint(1, min(3, len(attrs))))
            h_opts: list[str] = []
            opt_phrases: list[str] = []
            for name, contents in customization.items():
                if rng.random() < 0.8:
                    raw_value = rng.choice(contents)["value"].strip().lower()
                    h_opts.append(raw_value.replace("/", " | "))  # as shown on the item page
                    opt_phrases.append(f"{raw_value} {name.lower()}" if name.lower() in ("color", "size", "scent")
                                       else raw_value)
            variants = [_human_variant(rng, a) for a in h_attrs]
            text = _human_instruction(rng, noun, variants, opt_phrases)
            if text in seen_instructions:
                continue
            seen_instructions.add(text)
            human_list.append({"asin": asin, "instruction": text, "instruction_attributes": variants,
                               "instruction_options": h_opts})
        keep = human_fraction >= 1.0 or keep_rng.random() < human_fraction
        yield item, attr_entry, (human_list if keep else None), review


def generate_raw(num_products: int = 1000, seed: int = 0, human_fraction: float = 1.0) -> dict[str, Any]:
    """A catalog in WebShop's raw file format: ``{items, attributes, human, reviews}`` (see module doc)."""
    items: list[dict[str, Any]] = []
    attributes: dict[str, dict[str, Any]] = {}
    human: dict[str, list[dict[str, Any]]] = {}
    reviews: list[dict[str, Any]] = []
    for item, attr_entry, human_list, review in iter_raw_products(num_products, seed, human_fraction):
        items.append(item)
        attributes[item["asin"]] = attr_entry
        if human_list is not None:
            human[item["asin"]] = human_list
        reviews.append(review)
    return {"items": items, "attributes": attributes, "human": human, "reviews": reviews}


def write_raw_stream(data_dir: str, num_products: int, seed: int = 0, human_fraction: float = 1.0,
                     suffix: str = "", reviews: bool = True) -> dict[str, str]:
    """Generate and write a catalog as WebShop's files without holding it in memory (any size, e.g. 1.18M).

    ``suffix="_1000"`` names the files as WebShop's small set (``items_shuffle_1000.json`` ...); the human
    instructions file has no suffix, as in WebShop.
    """
    os.makedirs(data_dir, exist_ok=True)
    paths = {"items": os.path.join(data_dir, f"items_shuffle{suffix}.json"),
             "attributes": os.path.join(data_dir, f"items_ins_v2{suffix}.json"),
             "human": os.path.join(data_dir, "items_human_ins.json")}
    if reviews:
        paths["reviews"] = os.path.join(data_dir, "reviews.json")
    files = {k: open(v + ".tmp", "w", encoding="utf-8") for k, v in paths.items()}
    try:
        for f, opening in zip(files.values(), ("[", "{", "{", "[")):
            f.write(opening)
        n_human = 0
        for i, (item, attr_entry, human_list, review) in enumerate(
                iter_raw_products(num_products, seed, human_fraction)):
            sep = "," if i else ""
            files["items"].write(sep + json.dumps(item))
            files["attributes"].write(f"{sep}{json.dumps(item['asin'])}: {json.dumps(attr_entry)}")
            if human_list is not None:
                files["human"].write(f"{',' if n_human else ''}{json.dumps(item['asin'])}: {json.dumps(human_list)}")
                n_human += 1
            if reviews:
                files["reviews"].write(sep + json.dumps(review))
        for f, closing in zip(files.values(), ("]", "}", "}", "]")):
            f.write(closing)
    finally:
        for f in files.values():
            f.close()
    for v in paths.values():
        os.replace(v + ".tmp", v)
    mark_generated(data_dir, num_products=num_products, seed=seed, human_fraction=human_fraction)
    return paths


def write_raw(raw: dict[str, Any], data_dir: str) -> dict[str, str]:
    """Write a raw catalog as WebShop's files (``items_shuffle.json`` etc.) into ``data_dir``."""
    os.makedirs(data_dir, exist_ok=True)
    paths = {
        "items": os.path.join(data_dir, "items_shuffle.json"),
        "attributes": os.path.join(data_dir, "items_ins_v2.json"),
        "human": os.path.join(data_dir, "items_human_ins.json"),
        "reviews": os.path.join(data_dir, "reviews.json"),
    }
    for key, path in paths.items():
        with open(path, "w", encoding="utf-8") as f:
            json.dump(raw[key], f)
    mark_generated(data_dir, num_products=len(raw["items"]))
    return paths


GENERATED_MARKER = "GENERATED_CATALOG.json"


def mark_generated(data_dir: str, **info: Any) -> None:
    """Files written by the generator carry this marker: a server on them reports ``generated: true``."""
    with open(os.path.join(data_dir, GENERATED_MARKER), "w", encoding="utf-8") as f:
        json.dump({"generator": "webshop_server.catalog", **info}, f)


def is_generated(data_dir: str | None) -> bool:
    return data_dir is None or os.path.exists(os.path.join(data_dir, GENERATED_MARKER))


CATALOG_FILES = {
    "full": ("items_shuffle.json", "items_ins_v2.json"),
    "small": ("items_shuffle_1000.json", "items_ins_v2_1000.json"),
}


def data_files(data_dir: str, catalog: str = "auto") -> tuple[str, str, str | None, str | None]:
    """(items, items_ins_v2, items_human_ins or None, reviews or None) of WebShop's data folder.

    ``catalog``: ``full`` (items_shuffle.json + items_ins_v2.json), ``small`` (the 1000-product files, as
    WebShop's ``setup.sh -d small`` and verl-agent's small setting), or ``auto`` (full when present, else small).
    """
    if catalog not in ("auto", "full", "small"):
        raise ValueError(f"catalog must be auto, full or small, got {catalog!r}")
    choices = [catalog] if catalog != "auto" else ["full", "small"]
    for choice in choices:
        items, attrs = (os.path.join(data_dir, n) for n in CATALOG_FILES[choice])
        if os.path.exists(items) and os.path.exists(attrs):
            break
    else:
        wanted = " or ".join(" + ".join(CATALOG_FILES[c]) for c in choices)
        raise FileNotFoundError(f"{data_dir}: need {wanted}")
    human = os.path.join(data_dir, "items_human_ins.json")
    reviews = os.path.join(data_dir, "reviews.json")
    return items, attrs, human if os.path.exists(human) else None, reviews if os.path.exists(reviews) else None


def read_raw(data_dir: str, catalog: str = "auto") -> dict[str, Any]:
    """Read WebShop's data files from ``data_dir`` into memory (see :func:`data_files`)."""
    items_path, attr_path, human_path, review_path = data_files(data_dir, catalog)

    def load(p: str | None, default: Any) -> Any:
        if p is None:
            return default
        with open(p, encoding="utf-8") as f:
            return json.load(f)

    return {"items": load(items_path, []), "attributes": load(attr_path, {}), "human": load(human_path, {}),
            "reviews": load(review_path, [])}


@dataclass
class Catalog:
    products: list[dict[str, Any]]
    by_asin: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = "generated"

    def __post_init__(self) -> None:
        if not self.by_asin:
            self.by_asin = {p["asin"]: p for p in self.products}

    def summaries(self, asins: Sequence[str]) -> list[dict[str, Any]]:
        """The products a results page shows (``asin``, ``Title``, ``Price`` are read from them)."""
        return [self.by_asin[a] for a in asins]


def load_catalog(data_dir: str | None = None, num_products: int | None = None, seed: int = 0,
                 human_goals: bool = True, catalog: str = "auto", cache_dir: str | None = None) -> Any:
    """Real WebShop files from ``data_dir`` (first ``num_products`` if given; ``catalog`` full/small/auto),
    served from the on-disk cache (:mod:`webshop_server.store`, built on first use); else a generated catalog
    held in memory."""
    if data_dir:
        items, attrs, human, _ = data_files(data_dir, catalog)
        return open_catalog(items, attrs, human, num_products, human_goals, cache_root=cache_dir,
                            source=f"files:{os.path.abspath(data_dir)}:{os.path.basename(items)}")
    raw = generate_raw(num_products or 1000, seed)
    return Catalog(process_products(raw, None, human_goals), source=f"generated:{num_products or 1000}:seed{seed}")
