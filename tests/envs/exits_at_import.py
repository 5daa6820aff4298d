"""A task module that calls sys.exit at import (issue #39: duorl must report it as the task's, exit 2)."""

import sys

sys.exit(3)
