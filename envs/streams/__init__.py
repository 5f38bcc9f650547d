"""Proact-VL live game streams: procedural games and video files as 1-second chunks, and the
``embodia/LiveGaming-v0`` env over them (docs/streams.md)."""
