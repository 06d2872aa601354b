from gaca_openrlhf.bench.quickstart import main

if __name__ == "__main__":
    raise SystemExit(main())
