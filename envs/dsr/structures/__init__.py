"""Pure-Python reference implementations of the DSR-Bench data structures, one module per category.

Importing a module registers its operations in :data:`embodia.envs.dsr.core.OPERATIONS`.
"""
