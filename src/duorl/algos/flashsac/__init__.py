"""FlashSAC (and WarpSAC: FlashSAC with age-biased replay): unit-norm inverted-residual networks,
a twin categorical critic, reward scaling, held exploration noise, warm-up/cosine learning rate."""

from duorl.algos.flashsac.learner import FlashSACLearner

__all__ = ["FlashSACLearner"]
