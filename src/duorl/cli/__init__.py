"""The command-line layer: `duorl` and its commands (train, play, resume, export, bench, ...)."""
