"""What ``learner.pad_to_compiled`` saves in a real run: ``benchmarks/flag_ab.py`` with that setting, its
results in ``benchmarks/results/compiled_lengths.md``.

    python benchmarks/compiled_lengths.py --map 3m --t-max 150000 --seeds 0 1
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from flag_ab import main  # noqa: E402

if __name__ == "__main__":
    main(command="compiled_lengths.py")
