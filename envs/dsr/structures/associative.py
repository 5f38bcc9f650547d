"""Associative structures: hashmap (separate chaining), trie, suffix tree."""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol, Self, TypeVar

from embodia.envs.dsr.core import (
    INT,
    LENGTHS,
    STR_LIST,
    Op,
    Operation,
    Problem,
    Step,
    empty_question,
    from_empty,
    insert_delete_ops,
    list_schema,
    op_label,
    register,
    replay,
)


def size_level(size: int) -> str:
    """The length level whose size range holds ``size``; sizes outside every range clamp to the nearest.

    The reference ties instance parameters (bucket count, word lengths...) to the level, while
    ``generate`` only receives the size.
    """
    for name, (_, high) in LENGTHS.items():
        if size <= high:
            return name
    return list(LENGTHS)[-1]


# ---------------------------------------------------------------------------------------------------------
# Hashmap


class HashMap:
    """Separate chaining with ``bucket = key % buckets``; each bucket keeps its pairs in insertion order."""

    def __init__(self, buckets: int) -> None:
        if buckets < 1:
            raise ValueError(f"a hashmap needs at least one bucket, got {buckets}")
        self.buckets: list[list[list[int]]] = [[] for _ in range(buckets)]

    def bucket_of(self, key: int) -> int:
        return key % len(self.buckets)

    def add(self, key: int, value: int) -> None:
        """Insert the pair, or overwrite the value in place when the key is already stored."""
        bucket = self.buckets[self.bucket_of(key)]
        for pair in bucket:
            if pair[0] == key:
                pair[1] = value
                return
        bucket.append([key, value])

    def remove(self, key: int) -> bool:
        """Remove the key's pair; a key that is not stored leaves the map unchanged (returns False)."""
        bucket = self.buckets[self.bucket_of(key)]
        for index, pair in enumerate(bucket):
            if pair[0] == key:
                del bucket[index]
                return True
        return False

    def get(self, key: int) -> int | None:
        for stored, value in self.buckets[self.bucket_of(key)]:
            if stored == key:
                return value
        return None

    def state(self) -> list[dict[str, Any]]:
        """Every bucket, empty ones included, by number: ``{"number": i, "contents": [{"key", "value"}]}``."""
        return [
            {"number": number, "contents": [{"key": key, "value": value} for key, value in bucket]}
            for number, bucket in enumerate(self.buckets)
        ]


_HASHMAP_BUCKETS = {"short": 10, "medium": 20, "long": 30}


def buckets_by_number(answer: Any) -> Any:
    """The reference's evaluator sorts a hashmap answer's buckets by their number before comparing."""
    if isinstance(answer, list) and all(
        isinstance(b, dict) and isinstance(b.get("number"), int) for b in answer
    ):
        return sorted(answer, key=lambda bucket: bucket["number"])
    return answer


def _hashmap_label(op: Op) -> str:
    """``(add, (key, value))``, ``(remove, key)``: the reference's wording."""
    return op_label("add", f"({op[1]}, {op[2]})") if op[0] == "add" else op_label(*op)


def _run_hashmap(data: Mapping[str, Any]) -> tuple[HashMap, tuple[Step, ...]]:
    """The hashmap of ``data["buckets"]`` buckets after ``data["ops"]``, with the ops' steps."""
    hashmap = HashMap(data["buckets"])
    _, steps = replay(hashmap, data["ops"], label=_hashmap_label)
    return hashmap, steps


def _question_hashmap(data: Mapping[str, Any]) -> str:
    buckets = data["buckets"]
    labels = ", ".join(_hashmap_label(op) for op in data["ops"])
    return (
        f"You are given an empty hashmap with {buckets} buckets initially. The hash function you will use is "
        f"bucket = key % bucket_number. Bucket number is indexed from 0 to {buckets - 1}. Q: What is the "
        f"state of the hashmap after the following operations: {labels}?"
    )


def _replay_hashmap(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    return _run_hashmap(data)[0].state()


def _hashmap_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    buckets = _HASHMAP_BUCKETS[size_level(size)]
    # As in the reference: add w.p. 0.7 (always when empty), else remove a key drawn from every key added so
    # far, so a remove can name a key that is already gone (a no-op).
    added: list[int] = []
    stored: set[int] = set()
    ops: list[list[Any]] = []
    for _ in range(size):
        if not stored or rng.random() < 0.7:
            key, value = rng.randint(0, 99), rng.randint(0, 99)
            stored.add(key)
            added.append(key)
            ops.append(["add", key, value])
        else:
            key = rng.choice(added)
            stored.discard(key)
            ops.append(["remove", key])
    data = {"buckets": buckets, "ops": ops}
    hashmap, steps = _run_hashmap(data)
    return Problem(_question_hashmap(data), hashmap.state(), data, steps, HashMap(buckets).state())


_PAIR = {
    "type": "object",
    "properties": {"key": INT, "value": INT},
    "required": ["key", "value"],
    "additionalProperties": False,
}
_BUCKET = {
    "type": "object",
    "properties": {"number": INT, "contents": list_schema(_PAIR)},
    "required": ["number", "contents"],
    "additionalProperties": False,
}

# ---------------------------------------------------------------------------------------------------------
# Trie


class TrieNode:
    __slots__ = ("children", "is_end")

    def __init__(self) -> None:
        self.children: dict[str, TrieNode] = {}
        self.is_end = False


class TreeNode(Protocol):
    """A node of a tree whose children are keyed by a character."""

    children: dict[str, Self]


class WordNode(TreeNode, Protocol):
    """A node of a character trie: its children by character, and whether a stored word ends here."""

    is_end: bool


Node = TypeVar("Node", bound=WordNode)
Tree = TypeVar("Tree", bound=TreeNode)


def labelled_preorder(root: Tree, label: Callable[[str, Tree], str]) -> Iterator[tuple[str, Tree]]:
    """(path from the root, node) in pre-order, children in order of their keys; a child's path is
    its parent's followed by ``label(key, child)``."""
    stack: list[tuple[str, Tree]] = [("", root)]
    while stack:
        path, node = stack.pop()
        yield path, node
        for key in sorted(node.children, reverse=True):
            child = node.children[key]
            stack.append((path + label(key, child), child))


def insert_word(root: Node, word: str, new_node: Callable[[], Node]) -> list[Node]:
    """Add ``word`` below ``root``, creating the missing nodes, and mark its end; the nodes on its
    path from the root."""
    path = [root]
    for char in word:
        child = path[-1].children.get(char)
        if child is None:
            child = path[-1].children[char] = new_node()
        path.append(child)
    path[-1].is_end = True
    return path


def delete_word(root: Node, word: str) -> list[Node] | None:
    """Unmark ``word``'s end and prune, bottom-up, the nodes no longer on any stored word; the nodes
    on its path from the root, or None (and nothing changes) when the word is not stored."""
    path = [root]
    for char in word:
        child = path[-1].children.get(char)
        if child is None:
            return None
        path.append(child)
    if not path[-1].is_end:
        return None
    path[-1].is_end = False
    for depth in range(len(word), 0, -1):
        node = path[depth]
        if node.is_end or node.children:
            break
        del path[depth - 1].children[word[depth - 1]]
    return path


class Trie:
    """A character trie; deleting a word prunes the nodes that no longer lie on any stored word."""

    def __init__(self) -> None:
        self.root = TrieNode()

    def insert(self, word: str) -> None:
        insert_word(self.root, word, TrieNode)

    def delete(self, word: str) -> bool:
        """Unmark the word's end and prune bottom-up; a word that is not stored is a no-op (False)."""
        return delete_word(self.root, word) is not None

    def contains(self, word: str) -> bool:
        node = self.root
        for char in word:
            child = node.children.get(char)
            if child is None:
                return False
            node = child
        return node.is_end

    def words(self) -> list[str]:
        """The stored words in lexicographic order."""
        return [prefix for prefix, node in self.nodes() if node.is_end]

    def nodes(self) -> Iterator[tuple[str, TrieNode]]:
        """(prefix, node) in pre-order, children in lexicographic order."""
        return labelled_preorder(self.root, lambda char, _: char)

    def state(self) -> list[str]:
        """Pre-order of the node characters, children in lexicographic order, the root as ``""``."""
        out: list[str] = []

        def visit(char: str, node: TrieNode) -> None:
            out.append(char)
            for key in sorted(node.children):
                visit(key, node.children[key])

        visit("", self.root)
        return out


_TRIE_WORD_LENGTHS = {"short": (8, 12), "medium": (18, 22), "long": (28, 32)}


def _trie_word(rng: random.Random, length: int, words: list[str]) -> str:
    """A word of ``length`` letters reusing a random-length prefix of a stored word, as the reference does."""
    prefix = ""
    if words:
        prefix = rng.choice(words)[: rng.randint(0, length)]
    return prefix + "".join(rng.choices(string.ascii_lowercase, k=length - len(prefix)))


_question_trie = empty_question("trie", "the final state of the trie")


def _trie_compound(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    low, high = _TRIE_WORD_LENGTHS[size_level(size)]
    # The words present are kept in a list, in insertion order (a set's order would follow str hashing,
    # which is randomised per process).
    ops = insert_delete_ops(
        rng, size, lambda words: _trie_word(rng, rng.randint(low, high), words), lambda draw: draw < 0.3
    )
    trie = Trie()
    return from_empty(trie, ops, _question_trie, [""])


def _replay_trie(data: Mapping[str, Any]) -> list[str]:
    trie = Trie()
    replay(trie, data["ops"])
    return trie.state()


# ---------------------------------------------------------------------------------------------------------
# Suffix tree


class SuffixTreeNode:
    __slots__ = ("children", "label")

    def __init__(self, label: str) -> None:
        self.label = label
        """The label of the edge from the parent into this node (``""`` for the root)."""
        self.children: dict[str, SuffixTreeNode] = {}
        """Child nodes by the first character of their edge label."""


class SuffixTree:
    """The compressed suffix tree of ``text + "$"``, built by inserting the suffixes longest first."""

    def __init__(self, text: str) -> None:
        if "$" in text:
            raise ValueError(f"the text must not contain the terminator '$': {text!r}")
        self.text = text + "$"
        self.root = SuffixTreeNode("")
        for start in range(len(self.text)):
            self._insert(self.text[start:])

    def _insert(self, suffix: str) -> None:
        node = self.root
        while True:
            child = node.children.get(suffix[0])
            if child is None:
                node.children[suffix[0]] = SuffixTreeNode(suffix)
                return
            label = child.label
            common = 0
            while common < min(len(label), len(suffix)) and label[common] == suffix[common]:
                common += 1
            if common == len(label):
                node, suffix = child, suffix[common:]
                continue
            # The suffix leaves the edge part-way: split it with a new internal node. The terminator
            # guarantees no suffix ends inside an edge, so the new leaf label is never empty.
            middle = SuffixTreeNode(label[:common])
            child.label = label[common:]
            middle.children[child.label[0]] = child
            middle.children[suffix[common]] = SuffixTreeNode(suffix[common:])
            node.children[suffix[0]] = middle
            return

    def edges(self) -> Iterator[tuple[str, SuffixTreeNode]]:
        """(path label from the root, node) in pre-order, children in order ('$' sorts before letters)."""
        return labelled_preorder(self.root, lambda _, child: child.label)

    def state(self) -> list[str]:
        """The edge labels in pre-order (the root has none), children by first character, '$' first."""
        return [node.label for _, node in self.edges()][1:]


_SUFFIX_ALPHABET = "abc"


def _replay_suffix_tree(data: Mapping[str, Any]) -> list[str]:
    return SuffixTree(data["string"]).state()


def _question_suffix_tree(data: Mapping[str, Any]) -> str:
    return f"Q: Given a word {data['string']}$, what does its suffix tree look like?"


def _suffix_tree_construct(rng: random.Random, size: int, variant: Mapping[str, Any]) -> Problem:
    # A three-letter alphabet (the reference draws from a-z) so repeats, hence internal nodes, are common.
    text = "".join(rng.choices(_SUFFIX_ALPHABET, k=size))
    data = {"string": text}
    return Problem(_question_suffix_tree(data), _replay_suffix_tree(data), data)


register(
    Operation(
        structure="hashmap",
        name="compound",
        category="associative",
        display="hashmap",
        description=(
            "A hashmap stores key-value pairs in a fixed number of buckets, indexed from 0. It uses "
            "separate chaining: each bucket is a list of (key, value) pairs kept in the order they were "
            "added. The bucket of a key is bucket = key % bucket_number. (add, (key, value)): find the key's "
            "bucket and scan it; if the key is already there, overwrite its value in place (the pair keeps "
            "its position), otherwise append the pair at the end of the bucket. (remove, key): find the "
            "key's bucket and delete the pair with that key from the list; the later pairs move up one "
            "place. Removing a key that is not in the hashmap changes nothing. A key that is removed and "
            "added again is appended at the end of its bucket."
        ),
        rules=(
            "The hash function is bucket = key % bucket_number. Updating an existing key keeps its position "
            "in the bucket; a newly added key goes to the end of its bucket; removing an absent key does "
            "nothing. final_answer is the final hashmap as a list of ALL buckets, empty ones included, in "
            'increasing bucket number: [{"number": 0, "contents": [{"key": k, "value": v}, ...]}, {"number": '
            '1, "contents": []}, ...], each bucket\'s pairs in their order in the bucket.'
        ),
        answer_schema=list_schema(_BUCKET),
        generate=_hashmap_compound,
        prepare=buckets_by_number,
        replay=_replay_hashmap,
        question=_question_hashmap,
    ),
    Operation(
        structure="trie",
        name="compound",
        category="associative",
        display="trie",
        description=(
            "A trie stores words by sharing common prefixes. The root holds no character; every other node "
            "holds one character, and the path from the root to a node spells a prefix. A node is marked "
            "when a stored word ends there. (insert, word): start at the root; for each character of the "
            "word, move to the child with that character, creating it if it does not exist; mark the last "
            "node as a word end. (delete, word): follow the word's characters from the root and unmark the "
            "last node; then walk back up towards the root, removing each node that is now unmarked and has "
            "no children, and stop at the first node that is marked or still has children. Deleting a word "
            "that is not stored changes nothing."
        ),
        rules=(
            "final_answer is the final trie as its pre-order traversal: a list of the node characters, the "
            'root first as the empty string "", visiting the children of each node in lexicographic '
            '(alphabetical) order of their characters. An empty trie is [""].'
        ),
        answer_schema=STR_LIST,
        generate=_trie_compound,
        replay=_replay_trie,
        question=_question_trie,
    ),
    Operation(
        structure="suffix_tree",
        name="construct",
        category="associative",
        display="suffix tree",
        description=(
            "A suffix tree compactly represents all suffixes of a string s that ends with the terminator $ "
            "(which occurs nowhere else). A string of length n (with $) has n suffixes, and each path from "
            "the root to a leaf spells exactly one of them, so there are n leaves. Edges are labelled with "
            "substrings of s; the children of a node start with pairwise different characters, and every "
            "internal node other than the root has at least two children (a chain of single-child edges is "
            "merged into one edge whose label is the concatenation). The tree can be built by inserting the "
            "suffixes one by one from the longest: walk down from the root matching the suffix against edge "
            "labels; where the suffix stops matching in the middle of an edge, split that edge at that point "
            "with a new internal node and hang the rest of the suffix from it as a new leaf; where it stops "
            "matching at a node, add the rest of the suffix as a new leaf edge of that node."
        ),
        rules=(
            "final_answer is the pre-order traversal of the suffix tree as the flat list of edge labels met "
            "along the way (the root has no label): at each node, first output the label of the edge to a "
            "child, then that child's subtree, and only then the next child. Visit the children of every "
            "node in lexicographic order of the first character of their edge labels, with the '$' edge "
            "before any other character. Leaf labels include the final '$'."
        ),
        answer_schema=STR_LIST,
        generate=_suffix_tree_construct,
        replay=_replay_suffix_tree,
        question=_question_suffix_tree,
    ),
)
