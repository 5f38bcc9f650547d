"""Environments and the simulators under them.

``envs.sim`` is the embedded CPU simulator (the default backend); ``envs.habitat`` wraps
``habitat_sim`` behind the same protocol and is imported lazily.
"""
