#!/usr/bin/env python
"""Developer entry point for the benchmark suite: the same runner as ``lodarrow bench``.

    python benchmarks/run.py --quick
    python benchmarks/run.py --ops pool --peers numpy,numba --json bench-results/pool.json

Every option of ``python -m lodarrow bench --help`` is accepted.  Run from a source checkout
(the repository root is put on ``sys.path`` so the in-place build is used).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lodarrow._cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
