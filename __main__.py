"""`python -m tileproof`: the same command as `tileproof`."""

import sys

from .cli import main

sys.exit(main())
