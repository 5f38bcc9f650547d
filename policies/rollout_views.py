"""How a chat policy sees a gymnasium env: chat views, the prompts they make, the samples a policy returns.

**Chat views.** A :class:`ChatView` is the explicit bridge between an env and a chat policy:
``prompt(observation)`` makes the chat request (messages and images) and
``action(reply, observation)`` turns the reply text into the env's action, or an
:class:`InvalidReply` saying why it cannot. :func:`chat_view` picks one for an env id:

- a view registered for the id in :data:`CHAT_VIEWS`: ``embodia/ActiveMappingWaypoint-v0``
  (:class:`WaypointView`: the panorama with numbered candidate markers and a text list of the
  candidates; the reply's number, read by :func:`~embodia.core.parsing.parse_choice`, is the
  candidate index) and ``embodia/LiveGaming-v0`` (:class:`LiveGamingView`: the chunk's last
  frame, the co-caster lines and the viewer's query; the reply is what to say, empty is
  silence);
- otherwise the generic rule (:class:`TextView`), which covers DSR-v0, DSRInteractive-v0,
  Puzzle-v0 and third-party text envs: the observation is a ``Text`` space (the user message
  is the observation), or a ``Dict`` with exactly one ``Text`` entry (the user message) and
  any number of ``(H, W, 3)`` uint8 ``Box`` entries (the images, in key order; other entries
  are not shown). The action space is ``Text`` (the action is the reply) or ``Discrete``
  (the reply's number, by ``parse_choice``).

Anything else (CartPole's ``Box`` observation) is a :class:`RolloutError` naming the env and
why. An :class:`InvalidReply` ends its episode (``ended_by="invalid_reply"``, no reward for
that turn): the env is not stepped with an action the reply did not choose.

:mod:`embodia.policies.rollouts` runs episodes through these views.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium
import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from embodia.core.chat import FinishReason, Message
from embodia.core.parsing import ParseFailure, parse_choice
from embodia.errors import EmbodiaError


class RolloutError(EmbodiaError):
    """An env that cannot be rolled out with a chat policy, or a bad rollout setting."""


# --------------------------------------------------------------------------- policy interface


@dataclass(frozen=True)
class ChatPrompt:
    """One chat request: messages, and RGB images attached to the last user message."""

    messages: tuple[Message, ...]
    images: tuple[NDArray[np.uint8], ...] = ()


@dataclass(frozen=True)
class Sample:
    """One sampled completion of a :class:`ChatPrompt`."""

    prompt_index: int
    """Which prompt of the batch it completes."""
    prompt_ids: list[int]
    """The prompt's token ids as the model read them (chat template, image tokens)."""
    completion_ids: list[int]
    """Generated token ids, the end-of-sequence token included when it was generated."""
    logprobs: list[float]
    """Log-probability of each completion token under the distribution it was sampled from."""
    text: str
    """The decoded completion, special tokens left out."""
    finish_reason: FinishReason
    """``stop`` (end-of-sequence generated) or ``length`` (the token budget ran out)."""


class SamplingPolicy(Protocol):
    """What the engine needs of a policy: batched sampling with per-token logprobs."""

    def sample(
        self, prompts: Sequence[ChatPrompt], *, n: int, max_new_tokens: int, temperature: float
    ) -> list[Sample]:
        """``n`` samples per prompt, prompt-major (``samples[i * n + k]`` completes prompt i).

        The engine always passes every sampling setting, so an implementation's defaults are its own."""
        ...


# --------------------------------------------------------------------------- chat views


@dataclass(frozen=True)
class InvalidReply:
    """A reply that names no action of the env, and why."""

    reason: str


class ChatView(ABC):
    """How a chat policy reads an env's observations and how its reply becomes an action."""

    uses_images: bool = False
    """Whether its prompts carry images (the policy must then take images)."""

    @abstractmethod
    def prompt(self, observation: Any) -> ChatPrompt:
        """The chat request for one observation."""

    @abstractmethod
    def action(self, reply: str, observation: Any) -> Any:
        """The env action the reply chooses, or an :class:`InvalidReply`."""


def _is_picture(space: Any) -> bool:
    return (
        isinstance(space, spaces.Box)
        and space.dtype == np.uint8
        and len(space.shape) == 3
        and space.shape[2] == 3
    )


class _ReplyAction:
    """Reply text to an action for a ``Text`` or ``Discrete`` action space."""

    def __init__(self, env_id: str, action_space: Any) -> None:
        if isinstance(action_space, spaces.Text):
            self.options = 0
        elif isinstance(action_space, spaces.Discrete):
            self.options, self.start = int(action_space.n), int(action_space.start)
        else:
            raise RolloutError(
                f"{env_id}: its action space {action_space} is neither Text (the reply is the action) "
                "nor Discrete (the reply's number is the action), so a chat reply cannot act in it"
            )

    def __call__(self, reply: str) -> Any:
        if not self.options:
            return reply
        chosen = parse_choice(reply, self.options)
        if isinstance(chosen, ParseFailure):
            return InvalidReply(chosen.reason)
        return self.start + chosen


class TextView(ChatView):
    """The generic rule of the module docstring: one text part, optional pictures."""

    def __init__(
        self,
        env_id: str,
        observation_space: Any,
        action_space: Any,
        *,
        images: bool = True,
        system: str | None = None,
    ) -> None:
        self.system = system
        self.text_key: str | None = None
        self.image_keys: tuple[str, ...] = ()
        if isinstance(observation_space, spaces.Dict):
            texts = [k for k, s in observation_space.spaces.items() if isinstance(s, spaces.Text)]
            if len(texts) != 1:
                found = f"{len(texts)} text entries ({', '.join(texts)})" if texts else "no text entry"
                raise RolloutError(
                    f"{env_id}: a chat policy cannot read its observations: the Dict observation has "
                    f"{found}, and the generic rule needs exactly one (no chat view is registered for it)"
                )
            self.text_key = texts[0]
            if images:
                self.image_keys = tuple(k for k, s in observation_space.spaces.items() if _is_picture(s))
        elif not isinstance(observation_space, spaces.Text):
            raise RolloutError(
                f"{env_id}: a chat policy cannot read its observations: {observation_space} is neither "
                "text nor a Dict with one text entry (and no chat view is registered for it)"
            )
        self.uses_images = bool(self.image_keys)
        self._action = _ReplyAction(env_id, action_space)

    def prompt(self, observation: Any) -> ChatPrompt:
        text = observation if self.text_key is None else observation[self.text_key]
        messages: list[Message] = [{"role": "system", "content": self.system}] if self.system else []
        messages.append({"role": "user", "content": str(text)})
        images = tuple(np.asarray(observation[k], dtype=np.uint8) for k in self.image_keys)
        return ChatPrompt(tuple(messages), images)

    def action(self, reply: str, observation: Any) -> Any:
        return self._action(reply)


WAYPOINT_SYSTEM = (
    "You control a robot that maps a house. Each turn you see a 360-degree panorama with numbered "
    "waypoints on the floor. Pick the waypoint that reveals the most unexplored space. "
    "Answer with the waypoint's number only, e.g. Answer: 2"
)


def shown_gain_m2(observation: Any, number: int) -> int:
    """Candidate ``number``'s estimated unseen area as the waypoint view's text shows it: whole
    square metres (half to even), so a reader of the text can tell exactly which one is largest."""
    return round(float(observation["candidate_gain_m2"][number]))


def listing_order(observation: Mapping[str, Any]) -> list[int]:
    """The shown candidates' numbers in the order the waypoint view lists them: the largest
    unseen area as the text shows it (:func:`shown_gain_m2`) first, ties by number; number order
    for an observation without that estimate."""
    shown = [int(number) for number in np.flatnonzero(np.asarray(observation["candidate_mask"]))]
    if "candidate_gain_m2" not in observation:
        return shown
    return sorted(shown, key=lambda number: (-shown_gain_m2(observation, number), number))


class WaypointView(ChatView):
    """``embodia/ActiveMappingWaypoint-v0`` with ``action_type="index"``: the action is a candidate number.

    The prompt lists the candidates (number, bearing in the panorama, range from the depth
    image, and the unseen area the env estimates around each, ``candidate_gain_m2``) and, with
    ``images``, shows the panorama with the numbered markers the env draws.
    The list is ordered by that estimate, largest first (ties by number), as a retriever ranks
    its hits: a small model can learn to trust the first line without learning to compare every
    number, and the numbers still name the markers in the picture.
    A number outside the shown candidates is an :class:`InvalidReply`.
    """

    def __init__(
        self, env_id: str, observation_space: Any, action_space: Any, *, images: bool = True
    ) -> None:
        if not isinstance(action_space, spaces.Discrete):
            raise RolloutError(
                f"{env_id}: a chat policy picks a numbered candidate, so make it with action_type='index' "
                f"(its action space is {action_space})"
            )
        self.uses_images = images

    @staticmethod
    def _shown(observation: Mapping[str, Any]) -> list[tuple[int, int, int]]:
        """(number, row, col) of the candidates present in the observation."""
        mask = np.asarray(observation["candidate_mask"])
        pixels = np.asarray(observation["candidates"])
        return [(i, int(pixels[i, 0]), int(pixels[i, 1])) for i in range(len(mask)) if mask[i]]

    def prompt(self, observation: Any) -> ChatPrompt:
        from embodia.perception.waypoints import WaypointCandidate, draw_candidates

        by_number = {candidate[0]: candidate for candidate in self._shown(observation)}
        shown = [by_number[number] for number in listing_order(observation)]
        rgb = np.asarray(observation["rgb"], dtype=np.uint8)
        depth = np.asarray(observation["depth"])
        width = rgb.shape[1]
        lines = []
        for number, row, col in shown:
            # Column 0 is straight behind, the centre column straight ahead (the panorama's yaw).
            bearing = (col + 0.5) / width * 360.0 - 180.0
            side = "ahead" if abs(bearing) < 1 else ("right" if bearing > 0 else "left")
            metres = float(depth[row, col])
            line = f"{number}: {abs(bearing):.0f} degrees {side}, {metres:.1f} m away"
            if "candidate_gain_m2" in observation:
                line += f", about {shown_gain_m2(observation, number)} m2 unseen around it"
            lines.append(line)
        listed = "\n".join(lines) if lines else "(none)"
        text = f"Waypoints:\n{listed}\nWhich waypoint next?"
        images: tuple[NDArray[np.uint8], ...] = ()
        if self.uses_images:
            # Only index, row and col are drawn; the world point and gain are not in the observation.
            markers = [
                WaypointCandidate(number, row, col, np.full(3, np.nan), math.nan, math.nan, math.nan)
                for number, row, col in shown
            ]
            images = (draw_candidates(rgb, markers),)
        return ChatPrompt(
            ({"role": "system", "content": WAYPOINT_SYSTEM}, {"role": "user", "content": text}), images
        )

    def action(self, reply: str, observation: Any) -> Any:
        shown = [number for number, _, _ in self._shown(observation)]
        if not shown:
            return InvalidReply("no waypoint candidates are shown")
        chosen = parse_choice(reply, max(shown) + 1)
        if isinstance(chosen, ParseFailure):
            return InvalidReply(chosen.reason)
        if chosen not in shown:
            return InvalidReply(f"waypoint {chosen} is not among the candidates shown")
        return chosen


LIVE_SYSTEM = (
    "You are a live game commentator. Each turn shows the newest frame of one second of play. "
    "Reply with one short line to say now, or with an empty reply to stay silent."
)


class LiveGamingView(ChatView):
    """``embodia/LiveGaming-v0``: the last frame of the chunk, co-caster lines, the query; reply = speech."""

    def __init__(
        self, env_id: str, observation_space: Any, action_space: Any, *, images: bool = True
    ) -> None:
        self.uses_images = images
        self._action = _ReplyAction(env_id, action_space)

    def prompt(self, observation: Any) -> ChatPrompt:
        second = int(np.asarray(observation["second"]))
        history = str(observation["history"]) or "(none)"
        query = str(observation["query"]) or "(none)"
        text = f"Second {second}.\nCo-caster lines:\n{history}\nViewer query: {query}\nWhat do you say?"
        frames = np.asarray(observation["frames"], dtype=np.uint8)
        images = (frames[-1],) if self.uses_images and len(frames) else ()
        return ChatPrompt(
            ({"role": "system", "content": LIVE_SYSTEM}, {"role": "user", "content": text}), images
        )

    def action(self, reply: str, observation: Any) -> Any:
        return self._action(reply.strip())


class ViewFactory(Protocol):
    """How a chat view is made for an env id (a :class:`ChatView` subclass is one)."""

    def __call__(
        self, env_id: str, observation_space: Any, action_space: Any, *, images: bool = True
    ) -> ChatView: ...


CHAT_VIEWS: dict[str, ViewFactory] = {
    "embodia/ActiveMappingWaypoint-v0": WaypointView,
    "embodia/LiveGaming-v0": LiveGamingView,
}
"""Views for env ids the generic rule does not fit; every other id gets :class:`TextView`."""


def registered_spec(env_id: str) -> Any:
    """The gymnasium spec of ``env_id``; a :class:`RolloutError` listing embodia's ids if unknown."""
    try:
        return gymnasium.spec(env_id)
    except gymnasium.error.Error as error:
        known = sorted(i for i in gymnasium.registry if i.startswith("embodia/"))
        raise RolloutError(
            f"env id {env_id!r} is not registered with gymnasium ({error}); embodia's ids: {', '.join(known)}"
        ) from None


def chat_view(env_id: str, observation_space: Any, action_space: Any, *, images: bool = True) -> ChatView:
    """The chat view for an env id and its spaces (see the module docstring); without
    ``images`` it shows the text alone (a text-only model can then play an env with pictures)."""
    factory = CHAT_VIEWS.get(env_id, TextView)
    return factory(env_id, observation_space, action_space, images=images)
