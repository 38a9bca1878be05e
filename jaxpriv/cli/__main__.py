"""``python -m jaxpriv.cli``: the command line."""

import sys

from jaxpriv.cli import main

if __name__ == "__main__":
    sys.exit(main())
