import sys

from gaca_openrlhf.diagnostics.cli import main

if __name__ == "__main__":  # vLLM starts its engine in a spawned process: keep the guard
    sys.exit(main())
