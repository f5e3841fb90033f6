"""``python -m mlfuse.ptx_report FILE.fuse ...``: every kernel of a program compiled for
the H100 by ptxas, with its registers, spills and shared memory, no GPU needed. The
command the contraction issue names; the tool lives in mlfuse/tools/ptx_report.py (its
options there)."""
from __future__ import annotations

import sys

from mlfuse.tools.ptx_report import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
