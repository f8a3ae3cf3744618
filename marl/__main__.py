"""``python -m marl <command>``: the ``marl`` command without its console script."""

import sys

from marl.cli import main

if __name__ == "__main__":
    sys.exit(main())
