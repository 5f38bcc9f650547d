"""Policy protocol, VLM backends and training recipes."""
