"""`python -m jenkins_dispatch.cli`: the same as the `jenkins-dispatch` console script."""

import sys

from .main import main

if __name__ == "__main__":  # imported (the tests walk every module), it runs nothing
    sys.exit(main())
