import sys

from mlfuse.cli import main

sys.exit(main())
