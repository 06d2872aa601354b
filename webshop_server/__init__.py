"""A locally hosted WebShop (princeton-nlp/WebShop behaviour, own implementation).

Modules: :mod:`catalog` (real data files or a generated catalog in the same raw format), :mod:`search` (BM25),
:mod:`goals` (goal sets, price caps, splits), :mod:`reward` (WebShop's reward; CLI), :mod:`engine` (pages and
the text-mode state machine), :mod:`app` (``create_app``: configuration, blueprints, error handlers) with
:mod:`pages` (pages for people) and :mod:`api` (JSON API for agents) over :mod:`state` (one app's shared
state), :mod:`sessions` (bounded session store).
Run with ``python -m webshop_server --port 3000``.
"""
