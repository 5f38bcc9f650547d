"""Two-modality image fusion: IDEAL, its baselines and the standard fusion metrics."""
