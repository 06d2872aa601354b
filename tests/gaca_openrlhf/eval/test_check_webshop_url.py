"""The WebShop health URL is built from the user's --webshop-url with any trailing '/' removed.

Catches: dropping or changing ``rstrip("/")`` (a trailing-slash URL would ask ``//health``, which Flask/werkzeug
answer with 404; Python's http.server hides it by collapsing slashes, so the URL is recorded here instead).
"""
import io
import json
import urllib.request

from agents.webshop.spec import health
from gaca_openrlhf.eval import session


def check_webshop(*args, **kwargs):
    """The session's WebShop server check: the spec's health check, an unreachable server ending the run (exit 3)."""
    return session.checked(health, *args, **kwargs)


class _Answer(io.BytesIO):
    status = 200

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_trailing_slashes_are_removed_before_health(monkeypatch):
    asked = []

    def urlopen(url, timeout):
        asked.append((url, timeout))
        return _Answer(json.dumps({"generated": True}).encode())

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    assert check_webshop("http://127.0.0.1:3000/", timeout=2.5) == {"generated": True}
    assert check_webshop("http://127.0.0.1:3000//") == {"generated": True}
    assert check_webshop("http://127.0.0.1:3000") == {"generated": True}
    assert check_webshop("http://127.0.0.1:3000/shopX/") == {"generated": True}  # only '/' is stripped
    assert asked == [("http://127.0.0.1:3000/health", 2.5), ("http://127.0.0.1:3000/health", 10.0),
                     ("http://127.0.0.1:3000/health", 10.0), ("http://127.0.0.1:3000/shopX/health", 10.0)]
