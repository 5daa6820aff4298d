"""duorl: off-policy RL on thousands of MuJoCo Warp environments, one learner/collector duo per GPU."""

__version__ = "0.1.0"
