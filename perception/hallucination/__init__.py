"""Object-hallucination detection in VLM captions: InsLen, HaloProbe and their baselines."""
