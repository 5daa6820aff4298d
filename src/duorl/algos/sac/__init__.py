"""SAC / FastSAC: tanh-Gaussian actor, twin C51 distributional critics, learned temperature."""

from duorl.algos.sac.learner import SACLearner

__all__ = ["SACLearner"]
