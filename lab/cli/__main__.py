"""``python -m lab.cli``: the ``lab`` command."""

import sys

from lab.cli import main

if __name__ == "__main__":  # importing the module (a walk over the package) runs nothing
    sys.exit(main())
