"""``python -m jaxpriv``: the command line."""

import sys

from jaxpriv.cli import main

if __name__ == "__main__":
    sys.exit(main())
