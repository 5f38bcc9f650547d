"""Non-learned baselines: random walk and frontier exploration."""
