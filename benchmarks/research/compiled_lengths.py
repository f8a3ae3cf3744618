"""What ``learner.pad_to_compiled`` saves in a real run: ``flag_ab.py`` (this folder) with that setting, its
results in ``benchmarks/results/compiled_lengths.md``.

    python benchmarks/research/compiled_lengths.py --map 3m --t-max 150000 --seeds 0 1
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: marl, benchmarks

from benchmarks.research.flag_ab import main  # noqa: E402

if __name__ == "__main__":
    main(command=__file__)
