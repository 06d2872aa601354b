"""Raw product -> WebShop's record (webshop_server.records), the rules of WebShop's ``load_products``."""
from webshop_server.records import process_products


def test_process_products_follows_webshop_rules():
    raw = {"items": [
        {"asin": "B000000001", "name": "X", "full_description": "d", "small_description": "one bullet",
         "pricing": "$1,299.50 - $1,400.00", "images": ["u"], "product_category": "A \u203a B", "category": "c",
         "query": " Some Query ", "customization_options": {"Color": [{"value": "Black/White", "image": "i"}],
                                                          "Size": None}},
        {"asin": "B000000001", "name": "duplicate"}, {"asin": "nan"}, {"asin": "TOO_LONG_ASIN_1"},
        {"asin": "B000000002", "name": "Y", "full_description": "", "small_description": ["b"], "pricing": "",
         "images": ["u"], "product_category": "A", "category": "c", "query": "q", "customization_options": None}],
        "attributes": {"B000000001": {"attributes": ["a1"], "instruction": "i", "instruction_attributes": ["a1"]}},
        "human": {}, "reviews": [{"asin": "B000000001", "reviews": [{"title": "t", "stars": "4", "review": "r"}],
                                  "average_rating": 4.0}]}
    ps = process_products(raw)
    assert [p["asin"] for p in ps] == ["B000000001", "B000000002"]
    p, q = ps
    assert p["pricing"] == [1299.5, 1400.0] and p["Price"] == "$1299.5 to $1400.0"
    assert p["options"] == {"color": ["black | white"]} and p["BulletPoints"] == ["one bullet"]
    assert p["query"] == "some query" and p["Reviews"] == [] and p["Rating"] == "N.A."  # WebShop reads no reviews
    assert q["pricing"] == [100.0] and q["Price"] == "$100.0" and q["Attributes"] == ["DUMMY_ATTR"]
    assert q["Rating"] == "N.A."
    with_reviews = process_products(raw, with_reviews=True)[0]
    assert with_reviews["Reviews"][0] == {"title": "t", "score": "4", "body": "r"} and with_reviews["Rating"] == 4.0
