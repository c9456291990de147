"""``python -m dpcounts ...``: the same command line as the ``dpcounts`` script."""

import sys

from dpcounts.cli import main

sys.exit(main())
