"""``python -m gaca_openrlhf.bench.packing`` (see :mod:`gaca_openrlhf.bench.packing.cli`)."""
from gaca_openrlhf.bench.packing.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
