"""SAC / FastSAC: tanh-Gaussian actor, twin C51 distributional critics, learned temperature.

Import the learner from `duorl.algos.sac.learner`: the package itself stays empty so that its
submodules (networks, categorical) can be used by `duorl.algos.sac_family` without a cycle.
"""
