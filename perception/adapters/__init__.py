"""Adapters on frozen vision encoders: MAA (manifold-adversarial adapters) and its baseline."""
