"""``python -m gaca_openrlhf.memory_plan`` (see :mod:`gaca_openrlhf.memory_plan.cli`)."""
import sys

from gaca_openrlhf.memory_plan.cli import main

if __name__ == "__main__":
    sys.exit(main())
