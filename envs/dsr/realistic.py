"""DSR-Bench-realistic: queue, BST and graph problems retold as short stories with distractors.

Each narrative is a ``generate(rng, size, variant) -> Problem`` keyed by the operation whose
semantics its truth follows: the story's events are exactly that operation's inputs, computed
by the same reference class, only with people or towns named instead of numbered. Distractor
sentences mention extra people, times or places that never enter the structure (someone who
saw the truck but did not join, a road that is only planned). :data:`NARRATIVE_RULES` says how
the story maps onto the structure and what ``final_answer`` must hold; :data:`NARRATIVE_SCHEMAS`
is the JSON schema of that answer (names instead of the operation's integers), and
:data:`NARRATIVE_REPLAYS` recomputes a narrative's truth from its ``data``, by the code the story
takes it from.

As in the public benchmark, the graph story is a depth-first traversal (``graph.dfs``); a
breadth-first retelling ("news spreading") is available as ``graph_story("bfs")``.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from embodia.envs.dsr.core import STR_LIST, Generator, Problem, Replay, Step, list_schema, replay
from embodia.envs.dsr.structures.hierarchical import BST
from embodia.envs.dsr.structures.network import EDGE_PROBABILITY, traversal_replay
from embodia.envs.dsr.structures.temporal import Queue

DISTRACTOR_RATE = 0.3
"""Chance that one event's sentence also mentions a distractor."""

FIRST_NAMES = (
    "Liam", "Noah", "Oliver", "Elijah", "Lucas", "Mason", "Ethan", "Emma", "Ava", "Sophia", "Mia",
    "Amelia", "Harper", "Evelyn", "Aiden", "Chloe", "Ella", "Haruto", "Yuki", "Sakura", "Mei",
    "Ling", "Fatima", "Aisha", "Hassan", "Omar", "Carlos", "Maria", "Sofia", "Mateo", "Diego",
    "Priya", "Arjun", "Nora", "Leo", "Ines", "Tomas", "Greta", "Jonas", "Amara",
)  # fmt: skip
SURNAMES = (
    "Smith", "Johnson", "Brown", "Jones", "Garcia", "Miller", "Davis", "Rodriguez", "Martinez",
    "Lopez", "Wilson", "Anderson", "Taylor", "Moore", "Martin", "Lee", "Perez", "Clark", "Lewis",
    "Walker", "Hall", "Young", "Nguyen", "Chen", "Patel", "Kumar", "Singh", "Wang", "Yamamoto",
    "Fernandez", "Novak", "Okafor",
)  # fmt: skip
EXTRA_FIRST_NAMES = (
    "Brandon", "Sydney", "Kai", "Nia", "Zara", "Ravi", "Leila", "Jasper", "Beatrix", "Orion",
    "Felix", "Iris", "Rowan", "Talia", "Hugo", "Selma",
)  # fmt: skip
EXTRA_SURNAMES = (
    "Owens", "McCarthy", "Bloom", "Choi", "Freeman", "Patterson", "Solomon", "Torres", "Ueda",
    "Ivanov", "Lindqvist", "Moreau",
)  # fmt: skip
"""Distractor people come from pools disjoint from the main ones, so no name is ever both."""

TOWNS = (
    "Ashford", "Bexley", "Brambleton", "Carrow", "Dunmore", "Eastwick", "Elmstead", "Fairhaven",
    "Foxley", "Glenrock", "Greystone", "Harrowgate", "Hollybrook", "Ivydale", "Kestrel", "Kingsbury",
    "Larkfield", "Lowmoor", "Marlow", "Millbrook", "Northam", "Oakridge", "Orchard", "Pebblecombe",
    "Quarry", "Redbank", "Rosedale", "Saltmarsh", "Stonebridge", "Thornbury", "Upwell", "Valewood",
    "Westbury", "Willowby", "Yarrow", "Zennor",
)  # fmt: skip
EXTRA_TOWNS = ("Aldmere", "Blackpool Cove", "Crestfall", "Dunhaven", "Emberly", "Frostholm", "Gildenport")
"""Places that are never on the map (planned roads, washed-away bridges, cheese origins)."""


def _person(rng: random.Random, used: set[str], firsts: tuple[str, ...], lasts: tuple[str, ...]) -> str:
    while True:
        name = f"{rng.choice(firsts)} {rng.choice(lasts)}"
        if name not in used:
            used.add(name)
            return name


def _extra_person(rng: random.Random) -> str:
    return f"{rng.choice(EXTRA_FIRST_NAMES)} {rng.choice(EXTRA_SURNAMES)}"


def _fill(template: str, **values: str) -> str:
    return template.format(**values)


# --- queue: an ice cream truck ----------------------------------------------------------------

_QUEUE_INTROS = (
    "On a hot afternoon an ice cream truck parked by the park gate, and a line formed at its window. "
    "The vendor serves one person at a time, always whoever is at the front of the line.",
    "The ice cream truck came round the corner playing its tune and stopped next to the playground. "
    "Children line up at its window and are served first come, first served.",
    "An ice cream truck stopped by the beach promenade. There is a single line at its counter, and "
    "the person at the front is always the next one served.",
)
_JOIN = (
    "{name} ran over from the swings and got in line.",
    "{name} heard the truck's chime and joined the back of the line.",
    "Holding a few coins, {name} joined the line.",
    "{name} saw the line growing and quickly joined it.",
    "After a game of football, {name} joined the queue for ice cream.",
)
_JOIN_PREV = (
    "{prev} waved {name} over, and {name} joined the line too.",
    "{name} joined the line after {prev} said the mango flavour was great.",
)
_JOIN_EXTRA = (
    "{name} and {extra} both saw the truck, but only {name} joined the line.",
    "{name} joined the line alone; {extra} said it was too hot to wait and went home.",
    "{extra} walked past the truck without stopping, while {name} got in line.",
    "{name} joined the queue to buy a cone for {extra}, who stayed on the bench.",
    "{extra} thought about joining but had no money, so only {name} got in line.",
)
_SERVE = (
    "The person at the front of the line was served and walked away with a cone.",
    "The vendor handed an ice cream to whoever was first in line, and they left.",
    "The first person in line paid, got a popsicle and left the line.",
    "One more customer at the front was served and stepped out of the line.",
)
_SERVE_EXTRA = (
    "{extra} asked the vendor for directions and walked on; then the person at the front was served "
    "and left.",
)


def _run_queue_story(data: Mapping[str, Any]) -> tuple[Queue, tuple[Step, ...]]:
    """The line after ``data["ops"]`` (``["enqueue", name]``, ``["dequeue"]``), with its steps:
    the ``queue.compound`` reference run on names, which are distinct within a story."""
    queue = Queue()
    _, steps = replay(queue, data["ops"])
    return queue, steps


def _replay_queue_story(data: Mapping[str, Any]) -> list[Any]:
    return _run_queue_story(data)[0].state()


def queue_story(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    """``queue.compound`` as an ice cream line: ``size`` events, join w.p. 0.7 else serve."""
    waiting = 0
    people: list[str] = []
    used: set[str] = set()
    distractors: list[str] = []
    lines = [rng.choice(_QUEUE_INTROS)]
    ops: list[list[Any]] = []
    for _ in range(size):
        extra = rng.random() < DISTRACTOR_RATE
        if not waiting or rng.random() < 0.7:
            name = _person(rng, used, FIRST_NAMES, SURNAMES)
            if extra:
                distractors.append(_extra_person(rng))
                text = _fill(rng.choice(_JOIN_EXTRA), name=name, extra=distractors[-1])
            elif people and rng.random() < 0.3:
                text = _fill(rng.choice(_JOIN_PREV), name=name, prev=rng.choice(people))
            else:
                text = _fill(rng.choice(_JOIN), name=name)
            waiting += 1
            people.append(name)
            ops.append(["enqueue", name])
        else:
            waiting -= 1
            if extra:
                distractors.append(_extra_person(rng))
                text = _fill(rng.choice(_SERVE_EXTRA), extra=distractors[-1])
            else:
                text = rng.choice(_SERVE)
            ops.append(["dequeue"])
        lines.append(text)
    lines.append("")
    lines.append("Q: Who is still waiting in line, in order from the front to the back?")
    data = {"ops": ops, "distractors": sorted(set(distractors))}
    queue, steps = _run_queue_story(data)
    return Problem("\n".join(lines), queue.state(), data, steps, [])


# --- BST: a clinic's appointment schedule ---------------------------------------------------------

_BST_INTROS = (
    "The receptionist at Dr. Rivera's clinic keeps the day's appointments in a binary search tree "
    "ordered by appointment time, earlier times to the left. At the start of the morning the schedule "
    "is empty.",
    "A small dental practice files every appointment in a binary search tree keyed by its time of day "
    "(an earlier time is a smaller key). The schedule starts out empty.",
    "The community clinic's booking system stores appointments in a binary search tree, comparing "
    "them by appointment time. Nothing is booked yet.",
)
_BOOK = (
    "{name} booked an appointment at {time}.",
    "{name} called the clinic and was given the {time} slot.",
    "The receptionist scheduled {name} for {time}.",
    "{name} booked a check-up for {time}.",
)
_BOOK_EXTRA = (
    "{name} and {extra} both called; only {name} booked, at {time}.",
    "{extra} asked whether {other} was free but did not book; {name} took the {time} slot.",
    "{name} booked {time}; their friend {extra} came along but did not need an appointment.",
    "{extra} wanted {other} but hung up before booking, and then {name} booked {time}.",
)
_CANCEL = (
    "{name} cancelled their appointment.",
    "{name} called to say they could not come, and their appointment was removed.",
    "{name}'s appointment was cancelled.",
)
_CANCEL_EXTRA = (
    "{name} cancelled; {extra}, who had been thinking of booking, decided not to.",
    "{extra} asked to be put on a waiting list, which the clinic does not keep, and {name} cancelled "
    "their appointment.",
)
_DAY_START, _DAY_END = 8 * 60, 16 * 60 + 59


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _minutes(clock: str) -> int:
    hours, minutes = clock.split(":")
    return int(hours) * 60 + int(minutes)


class AppointmentBook:
    """The ``bst.compound`` reference tree keyed by appointment time, each time naming who booked it;
    the state is the pre-order as ``[name, "HH:MM"]`` pairs."""

    def __init__(self) -> None:
        self.tree = BST()  # keys are minutes after midnight, distinct within a story
        self.booked: dict[str, int] = {}
        self.owner: dict[int, str] = {}

    def insert(self, name: str, clock: str) -> None:
        minutes = _minutes(clock)
        self.tree.insert(minutes)
        self.booked[name], self.owner[minutes] = minutes, name

    def delete(self, name: str) -> None:
        self.tree.remove(self.booked.pop(name))

    def state(self) -> list[list[str]]:
        return [[self.owner[minutes], _clock(minutes)] for minutes in self.tree.preorder()]


def _run_bst_story(data: Mapping[str, Any]) -> tuple[AppointmentBook, tuple[Step, ...]]:
    """The book after ``data["ops"]`` (``["insert", name, "HH:MM"]``, ``["delete", name]``), with
    its steps."""
    book = AppointmentBook()
    _, steps = replay(book, data["ops"])
    return book, steps


def _replay_bst_story(data: Mapping[str, Any]) -> list[list[str]]:
    return _run_bst_story(data)[0].state()


def bst_story(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    """``bst.compound`` as appointments keyed by time: ``size`` events, book w.p. 0.7 else cancel."""
    times: set[int] = set()
    booked: set[str] = set()
    used: set[str] = set()
    distractors: list[str] = []
    lines = [rng.choice(_BST_INTROS)]
    ops: list[list[Any]] = []

    def fresh_time() -> int:
        while True:
            minutes = rng.randint(_DAY_START, _DAY_END)
            if minutes not in times:
                times.add(minutes)
                return minutes

    for _ in range(size):
        extra = rng.random() < DISTRACTOR_RATE
        if not booked or rng.random() < 0.7:
            name, minutes = _person(rng, used, FIRST_NAMES, SURNAMES), fresh_time()
            if extra:
                distractors.append(_extra_person(rng))
                template = rng.choice(_BOOK_EXTRA)
                other = _clock(fresh_time()) if "{other}" in template else ""  # a time never booked
                text = _fill(template, name=name, time=_clock(minutes), extra=distractors[-1], other=other)
            else:
                text = _fill(rng.choice(_BOOK), name=name, time=_clock(minutes))
            booked.add(name)
            ops.append(["insert", name, _clock(minutes)])
        else:
            name = rng.choice(sorted(booked))
            booked.remove(name)
            if extra:
                distractors.append(_extra_person(rng))
                text = _fill(rng.choice(_CANCEL_EXTRA), name=name, extra=distractors[-1])
            else:
                text = _fill(rng.choice(_CANCEL), name=name)
            ops.append(["delete", name])
        lines.append(text)
    lines.append("")
    lines.append("Q: What is the pre-order traversal of the appointment tree after all these changes?")
    data = {"ops": ops, "distractors": sorted(set(distractors))}
    book, steps = _run_bst_story(data)
    return Problem("\n".join(lines), book.state(), data, steps, [])


# --- graph: towns and roads ---------------------------------------------------------------------

_GRAPH_INTROS = {
    "dfs": (
        "A road inspector has to check every town she can reach by road, starting from {source}. From "
        "the town she is in, she always drives next to the alphabetically first neighbouring town she "
        "has not inspected yet; when every neighbour of her current town is inspected, she drives back "
        "to the town she came from and carries on from there."
    ),
    "bfs": (
        "News of the harvest festival starts in {source}. Towns pass the news on in the order they heard "
        "it: when a town's turn comes, it tells every neighbouring town that has not heard yet, in "
        "alphabetical order."
    ),
}
_MAP = "The county map shows the towns {towns}."
_ROAD = (
    "A road runs between {a} and {b}.",
    "{a} and {b} are connected by a highway.",
    "There is a bridge between {a} and {b}.",
    "A mountain pass links {a} with {b}.",
    "You can drive from {a} to {b} and back along the coast road.",
)
_ROAD_EXTRA = (
    "A road from {a} to {extra} is planned but has not been built yet.",
    "The old bridge between {a} and {extra} was washed away years ago.",
    "The market in {a} sells cheese brought from {extra}.",
)
_NO_ROAD = ("{a} and {b} are only a few miles apart, but no road connects them.",)
_GRAPH_QUESTIONS = {
    "dfs": "Q: In what order does the inspector inspect the towns, starting from {source}?",
    "bfs": "Q: In what order do the towns hear the news, starting from {source}?",
}


def graph_story(kind: str) -> Generator:
    """``graph.dfs`` (or ``graph.bfs``) over ``size`` towns joined by G(size, 0.3) roads."""
    if kind not in _GRAPH_INTROS:
        raise ValueError(f"unknown traversal {kind!r}: expected dfs or bfs")
    truth_of = traversal_replay("bfs" if kind == "bfs" else "dfs")

    def generate(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
        # The graph reference traverses the towns by name: smallest-label-first is alphabetical.
        towns = sorted(rng.sample(TOWNS, size))
        pairs = [(i, j) for i in range(size) for j in range(i + 1, size)]
        edges = [[i, j] for i, j in pairs if rng.random() < EDGE_PROBABILITY]
        source = rng.randrange(size)
        shown = list(towns)
        rng.shuffle(shown)
        lines = [
            _fill(_GRAPH_INTROS[kind], source=towns[source]),
            _fill(_MAP, towns=", ".join(shown[:-1]) + " and " + shown[-1]),
        ]
        told = [[towns[i], towns[j]] if rng.random() < 0.5 else [towns[j], towns[i]] for i, j in edges]
        rng.shuffle(told)
        distractors: list[str] = []
        linked = {(i, j) for i, j in edges}
        missing = [pair for pair in pairs if pair not in linked]
        for a, b in told:
            lines.append(_fill(rng.choice(_ROAD), a=a, b=b))
            if rng.random() < DISTRACTOR_RATE:
                distractors.append(rng.choice(EXTRA_TOWNS))
                lines.append(_fill(rng.choice(_ROAD_EXTRA), a=rng.choice(towns), extra=distractors[-1]))
            elif missing and rng.random() < DISTRACTOR_RATE / 2:
                i, j = rng.choice(missing)
                lines.append(_fill(rng.choice(_NO_ROAD), a=towns[i], b=towns[j]))
        lines.append("")
        lines.append(_fill(_GRAPH_QUESTIONS[kind], source=towns[source]))
        data = {
            "nodes": towns,
            "edges": told,
            "source": towns[source],
            "distractors": sorted(set(distractors)),
        }
        return Problem("\n".join(lines), truth_of(data), data)

    return generate


NARRATIVES: dict[str, Generator] = {
    "queue.compound": queue_story,
    "bst.compound": bst_story,
    "graph.dfs": graph_story("dfs"),
}

NARRATIVE_REPLAYS: dict[str, Replay] = {
    "queue.compound": _replay_queue_story,
    "bst.compound": _replay_bst_story,
    "graph.dfs": traversal_replay("dfs"),
}
"""The truth of a narrative recomputed from its ``data`` (names, not the operation's integers)."""

NARRATIVE_RULES: dict[str, str] = {
    "queue.compound": (
        "The story is a queue: each person who joins the line is enqueued at the back, and each time "
        "someone at the front is served, the front person is dequeued. People who are only mentioned "
        "(who saw the truck, went home, walked past or are waiting elsewhere) never join. Give "
        "final_answer as the list of the full names of the people still in line, from the front to the "
        'back, each written exactly as in the story (e.g. ["Emma Jones", "Liam Chen"]); [] if nobody '
        "is left."
    ),
    "bst.compound": (
        "The schedule is a binary search tree keyed by appointment time (an earlier time is a smaller "
        "key): a booking inserts that appointment and a cancellation deletes that person's appointment, "
        "following the BST rules above. Only bookings and cancellations change the tree; people or "
        "times that are only mentioned do not. Give final_answer as the pre-order traversal of the "
        "final tree, as a list of [name, time] pairs of strings, the time as HH:MM exactly as in the "
        'story (e.g. [["Emma Jones", "09:05"], ["Liam Chen", "08:40"]]); [] if nothing is booked.'
    ),
    "graph.dfs": (
        "The story is an undirected graph: each town on the map is a node and each existing road, "
        "highway, bridge or pass between two towns on the map is an edge. Planned or destroyed roads, "
        "towns said not to be connected, and places not on the map are not part of the graph. A town's "
        "smallest neighbour is the one whose name comes first alphabetically. Give final_answer as the "
        "list of town names in the order they are first visited, starting with the source; towns that "
        "cannot be reached from it are left out."
    ),
}

NARRATIVE_SCHEMAS: dict[str, dict[str, Any]] = {
    "queue.compound": STR_LIST,
    "bst.compound": list_schema({"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2}),
    "graph.dfs": STR_LIST,
}
"""The JSON schema of ``final_answer`` per narrative (names, not the operation's integers)."""
