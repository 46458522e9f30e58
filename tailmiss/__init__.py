"""tailmiss: how often group-relative RL updates push probability away from rare-but-correct solutions.

Submodules
----------
analytic
    Closed forms of F-GRPO and BroRL (numpy/scipy).
objectives
    Advantages, focal weight and surrogate/policy losses shared by the simulator and trainers (torch).
sim
    Batched categorical-policy simulator (torch).
figures
    Figure registry and the paper's figures.
"""

__version__ = "0.1.0"
