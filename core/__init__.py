"""The floor every room stands on: the chat contract and its types (:mod:`~embodia.core.chat`),
reply parsing (:mod:`~embodia.core.parsing`), the shared text and timing scores
(:mod:`~embodia.core.scores`), run-folder I/O (:mod:`~embodia.core.runs`) and input limits
(:mod:`~embodia.core.limits`).

Nothing here imports another embodia room except :mod:`embodia.errors`.
"""
