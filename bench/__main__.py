import sys

from bench.load.cli import main

if __name__ == "__main__":  # the harness's worker processes import this module again
    sys.exit(main())
