"""``embodia view``: a local web page over run folders (what an agent saw, mapped, decided
and said), served from 127.0.0.1 with no external assets."""
