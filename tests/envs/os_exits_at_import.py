"""A task module that calls os._exit(0) at import (issue #39: before, duorl ended with exit 0 and trained nothing)."""

import os

os._exit(0)
