"""``python -m webshop_server.supervise``: run the shop server and restart it when it dies.

    python -m webshop_server.supervise [--max-restarts 20] [--pid-file F] -- --port 3000 --production ...

Everything after ``--`` is passed to ``python -m webshop_server``. When the server exits on its own (crash,
OOM kill, ``kill -9``) it is started again after a short back-off; when the supervisor gets SIGTERM/SIGINT it
stops the server and exits. A restarted server does not know the sessions of its previous life: their next step
is answered 410 ``server_restarted``, so the client fails exactly those episodes (with that reason) while new
episodes run on the new server. ``--pid-file`` always holds the current server's pid (used by the failure drill).
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    server_args: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, server_args = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(prog="python -m webshop_server.supervise", description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-restarts", type=int, default=20, help="give up after this many restarts (exit 1)")
    ap.add_argument("--backoff", type=float, default=1.0, help="seconds before a restart (doubles, max 30)")
    ap.add_argument("--pid-file", help="file holding the current server pid")
    args = ap.parse_args(argv)

    stopping = False
    child: subprocess.Popen | None = None

    def on_signal(signum, _frame):  # stop the server, then exit
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.terminate()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    restarts, backoff = 0, args.backoff
    while True:
        started = time.monotonic()
        child = subprocess.Popen([sys.executable, "-m", "webshop_server", *server_args])
        if args.pid_file:
            with open(args.pid_file + ".tmp", "w") as f:
                f.write(str(child.pid))
            os.replace(args.pid_file + ".tmp", args.pid_file)
        rc = child.wait()
        if stopping:
            return 0
        if rc == 0:
            print("[supervise] webshop server exited normally", file=sys.stderr, flush=True)
            return 0
        if restarts >= args.max_restarts:
            print(f"[supervise] webshop server died (rc {rc}); giving up after {restarts} restarts",
                  file=sys.stderr, flush=True)
            return 1
        if time.monotonic() - started > 60:
            backoff = args.backoff  # it ran for a while: a fresh failure, not a crash loop
        restarts += 1
        print(f"[supervise] webshop server died (rc {rc}); restart {restarts}/{args.max_restarts} in "
              f"{backoff:.0f}s (episodes in flight fail with 'server_restarted')", file=sys.stderr, flush=True)
        time.sleep(backoff)
        if stopping:
            return 0
        backoff = min(backoff * 2, 30.0)


if __name__ == "__main__":
    sys.exit(main())
