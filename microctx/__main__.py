"""`python -m microctx ...` is the `microctx` command."""

import sys

from microctx.cli import main

if __name__ == "__main__":
    sys.exit(main())
