"""`python -m voice.cli` is `ttfat`."""

import sys

from voice.cli import main

sys.exit(main())
