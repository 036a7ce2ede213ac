"""`python -m exactly_once.cli`: the same as the `exactly-once` console script."""

import sys

from exactly_once.cli import main

sys.exit(main())
