import sys

from voice.cli import main

sys.exit(main())
