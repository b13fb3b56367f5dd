"""`python -m ttfat` is `ttfat`."""

import sys

from ttfat.cli import main

sys.exit(main())
