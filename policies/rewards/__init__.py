"""Reward models: CMI-style music reward models (:mod:`embodia.policies.rewards.cmi`)."""
