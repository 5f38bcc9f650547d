"""Active-mapping gymnasium environments over any simulator backend."""
