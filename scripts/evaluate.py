#!/usr/bin/env python
"""Evaluate a checkpoint greedily and print the win rate.

python scripts/evaluate.py --checkpoint results/<run>/models/best --map 3m --episodes 32 --save-replay

The same as ``marl evaluate ...`` (the installed console command).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marl.interrupt import exit_on_interrupt  # noqa: E402

exit_on_interrupt()  # Ctrl-C during the imports below: one line, exit 130
from marl.cli import evaluate_main  # noqa: E402

if __name__ == "__main__":
    evaluate_main()
