"""Visual tokenizers: lookup-free / binary spherical quantisation and its bitwise AR head."""
