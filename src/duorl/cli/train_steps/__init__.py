"""The steps of `duorl train`, one module each, in the order cli/train.py runs them: the checks
(`checks.py`, with `resume.py` and `memory.py`), the run directory (`run_dir.py`), the learner
(`learner.py`), the duo with its reporting (`duo.py`, `reporting.py`, `manifest.py`), and the outcome
(`finish.py`, `after_training.py`).

Each step takes the run's one RunContext (cli/run_context.py), reads what the steps before it set, sets
its own part and calls the layers below it directly, so the run goes down from each step and comes back to
cli/train.py only for the next (docs/design.md §1 "The run context").
"""
