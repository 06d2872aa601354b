"""``python -m webshop_server``: serve the shop.

    python -m webshop_server --host 127.0.0.1 --port 3000 [--data-dir D [--catalog small|full] | --num-products N]
        [--goal-mode human|synthetic] [--expose-goals] [--production] [--threads 16]

Without ``--data-dir`` a catalog is generated (1000 products by default). ``--production`` serves with waitress
(multi-threaded WSGI; use it for training runs), otherwise Flask's development server runs (threaded).
``--write-data D`` writes the generated catalog as WebShop's raw files and exits.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m webshop_server", description="Local WebShop server")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=3000)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--data-dir", help="directory with WebShop's items_shuffle*.json / items_ins_v2*.json "
                                        "/ items_human_ins.json (optional reviews.json)")
    src.add_argument("--write-data", metavar="DIR", help="write the generated catalog as raw WebShop files, exit")
    ap.add_argument("--catalog", choices=("auto", "full", "small"), default="auto",
                    help="with --data-dir: full = items_shuffle.json + items_ins_v2.json, small = the 1000-product "
                         "files (items_shuffle_1000.json + items_ins_v2_1000.json), auto = full if present")
    ap.add_argument("--index-cache", metavar="DIR", default=None,
                    help="with --data-dir: where the processed catalog + search index are cached "
                         "(default $WEBSHOP_CACHE or $GACA_CACHE/webshop_index)")
    ap.add_argument("--human-fraction", type=float, default=1.0,
                    help="with --write-data: share of products given human instructions (WebShop's real data: "
                         "12087 instructions for 1.18M products, i.e. about 0.01)")
    ap.add_argument("--file-suffix", default="", help="with --write-data: e.g. _1000 for WebShop's small file names")
    ap.add_argument("--num-products", type=int, default=None,
                    help="generated catalog size (default 1000); with --data-dir: use the first N products")
    ap.add_argument("--seed", type=int, default=0, help="seed for the generated catalog and prices/price caps")
    ap.add_argument("--goal-mode", choices=("human", "synthetic"), default="human",
                    help="WebShop goal set: human instructions (default) or synthetic instructions")
    ap.add_argument("--show-attrs", action="store_true", help="show the Attributes tab on item pages")
    ap.add_argument("--expose-goals", action="store_true", help="enable GET /api/goal (expert demos, tests)")
    ap.add_argument("--production", action="store_true", help="serve with waitress instead of the dev server")
    ap.add_argument("--run-token", default=None,
                    help="echoed by /health: the launching run tells its own server from a leftover one on the port")
    ap.add_argument("--threads", type=int, default=16, help="waitress worker threads (--production)")
    ap.add_argument("--max-sessions", type=int, default=20000, help="sessions kept in memory (LRU eviction)")
    ap.add_argument("--session-ttl", type=float, default=3600.0, help="seconds an idle session is kept")
    ap.add_argument("--tagger", choices=("auto", "spacy", "heuristic"), default="auto",
                    help="title-noun tagger for the reward (auto: spaCy en_core_web_sm if installed)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log = logging.getLogger("webshop_server")
    if args.write_data:
        from webshop_server.catalog import write_raw_stream

        paths = write_raw_stream(args.write_data, args.num_products or 1000, args.seed,
                                 human_fraction=args.human_fraction, suffix=args.file_suffix)
        print("\n".join(paths.values()))
        return 0

    from webshop_server.app import create_app
    from webshop_server.engine import Shop
    from webshop_server.reward import get_tagger, load_tagger, set_tagger

    t0 = time.perf_counter()
    set_tagger(load_tagger(args.tagger))
    shop = Shop(data_dir=args.data_dir, num_products=args.num_products, seed=args.seed,
                goal_mode=args.goal_mode, show_attrs=args.show_attrs, catalog=args.catalog,
                cache_dir=args.index_cache)
    app = create_app(shop, expose_goals=args.expose_goals, max_sessions=args.max_sessions,
                     session_ttl=args.session_ttl, run_token=args.run_token)
    log.info("catalog %s: %d products, %d %s goals, tagger %s, ready in %.1fs", shop.catalog.source,
             len(shop.products), len(shop.goals), shop.goal_mode, get_tagger().name, time.perf_counter() - t0)
    if args.production:
        import waitress

        log.info("serving with waitress on http://%s:%d (%d threads)", args.host, args.port, args.threads)
        from webshop_server.app import MAX_BODY_BYTES

        # max_request_body_size: waitress refuses larger bodies (413) before buffering them (default 1 GiB)
        waitress.serve(app, host=args.host, port=args.port, threads=args.threads, connection_limit=1000,
                       channel_timeout=120, ident="webshop", max_request_body_size=MAX_BODY_BYTES)
    else:
        log.info("serving with the Flask development server on http://%s:%d", args.host, args.port)
        app.run(host=args.host, port=args.port, threaded=True, use_reloader=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
