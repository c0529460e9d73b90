"""`python -m presk`: the command line, as the `presk` script runs it."""

import sys

from presk.cli import main

sys.exit(main())
