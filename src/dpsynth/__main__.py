"""``python -m dpsynth ...``: the same command line as the ``dpsynth`` script."""

import sys

from dpsynth.cli import main

sys.exit(main())
