"""`python -m harness.runner`: a run in a child process (harness.runner.child)."""

import sys

from harness.runner.child import main

sys.exit(main())
