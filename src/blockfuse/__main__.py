import sys

from blockfuse.cli import main

sys.exit(main())
