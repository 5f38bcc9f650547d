"""embodia/LiveGaming-v0: causality, token cap, rewards, real-time drops, registration."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from streams import FlashSource, flash_stream

import embodia.envs  # noqa: F401  (registers the ids)
from embodia.envs.streams.core import Annotation, Chunk, Line, Stream, StreamError, read_annotations
from embodia.envs.streams.env import CausalityError, ChunkFeed, LiveGamingEnv, cap_tokens


def test_chunks_hold_the_frames_of_their_own_second_only() -> None:
    stream = flash_stream(20)
    chunk = stream.chunk(3)
    assert chunk.frame_times == (3.0, 3.5)
    expected = FlashSource(20.0).frames_at([3.0, 3.5])
    assert all(np.array_equal(a, b) for a, b in zip(chunk.frames, expected, strict=True))
    # A chunk is plain data: nothing in it leads back to the stream or its labels.
    assert {f.name for f in dataclasses.fields(Chunk)} == {
        "second",
        "frames",
        "frame_times",
        "history",
        "query",
        "hud",
    }
    assert chunk.hud == {"clock": 3, "score": 0}


def test_the_feed_refuses_the_future() -> None:
    feed = ChunkFeed(flash_stream(20))
    assert feed.read(0).second == 0
    with pytest.raises(CausalityError, match="future"):
        feed.read(1)
    feed.advance(1)
    chunk = feed.read(1)
    with pytest.raises(ValueError):  # frames handed out are read-only
        chunk.frames[0][0, 0, 0] = 1


def test_an_agent_that_peeks_sees_nothing_ahead() -> None:
    """Everything the env hands an agent (observation, info) is from seconds <= t."""
    env = LiveGamingEnv(stream=flash_stream(20))
    observation, info = env.reset(seed=0)
    for t in range(20):
        assert int(observation["second"]) == t == info["chunk"].second
        assert all(ft < t + 1 for ft in info["chunk"].frame_times)
        assert "label" not in info and "pred" not in info
        # The env's own feed cannot be asked for the next second before the step.
        with pytest.raises(CausalityError):
            env._feed.read(t + 1)
        observation, _, terminated, _, info = env.step("")
        if terminated:
            break
    assert terminated and "label" in info  # the truth only once the clip is over


def test_token_cap_rewards_and_final_prediction() -> None:
    env = LiveGamingEnv(stream=flash_stream(12), token_cap=4)
    env.reset()
    rewards = []
    for t in range(12):
        action = "one two three four five six" if t in (3, 4) else ""
        _, reward, terminated, _, info = env.step(action)
        rewards.append(reward)
    assert terminated
    assert info["pred"] == {3: "one two three four", 4: "one two three four"}
    assert rewards[3] == 1.0 and rewards[4] == -0.5 and sum(rewards) == 0.5
    assert cap_tokens("  a  b c ", 2) == "a b"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_realtime_drops_late_decisions_and_skips_missed_chunks() -> None:
    clock = FakeClock()
    env = LiveGamingEnv(stream=flash_stream(20), realtime=True, clock=clock, sleep=clock.sleep)
    _, info = env.reset()
    seen = []
    thinking = {0: 0.2, 1: 0.5, 2: 2.5, 5: 1.2}  # seconds of wall time per decision
    while True:
        second = info["chunk"].second
        seen.append(second)
        clock.now += thinking.get(second, 0.1)
        decided = clock.now
        _, _, terminated, _, info = env.step("now")
        # From the chunk being complete (chunk t is complete at 100 + t on this clock), so a chunk
        # handed out late behind a slow decision counts its lateness too.
        assert info["decision_s"] == pytest.approx(decided - (100 + second))
        assert info["decision_s"] >= thinking.get(second, 0.1) - 1e-9
        assert info["agent_s"] == pytest.approx(thinking.get(second, 0.1))
        if terminated:
            break
    # Chunk 2 took 2.5 s: its decision is late (chunk 3 was out at +1 s), and chunk 3 is
    # overtaken as well; chunk 5 (1.2 s) is late but overtakes nothing whole.
    assert 3 not in seen and seen[:4] == [0, 1, 2, 4]
    assert env.dropped == 2 and env.skipped == 1
    assert sorted(info["pred"]) == [s for s in seen if s not in (2, 5)]


def test_realtime_on_the_wall_clock() -> None:
    env = LiveGamingEnv(stream=flash_stream(8), realtime=True, time_scale=0.05)
    _, info = env.reset()
    started = time.monotonic()
    while True:
        if info["chunk"].second == 3:
            time.sleep(0.12)  # a slow decision: more than two chunks' worth of wall time
        _, _, terminated, _, info = env.step("x")
        if terminated:
            break
    assert env.dropped >= 1 and env.skipped >= 1
    assert time.monotonic() - started >= 0.05 * 6  # the env waited for chunks to arrive


def test_registered_env_passes_the_checker_and_is_deterministic() -> None:
    env = gymnasium.make("embodia/LiveGaming-v0", source="procedural:arena,seed=1,duration=12")
    check_env(env.unwrapped, skip_render_check=True)

    def rollout() -> list[bytes]:
        e = gymnasium.make("embodia/LiveGaming-v0", source="procedural:dungeon,seed=2,duration=10")
        obs, _ = e.reset(seed=0)
        out = [obs["frames"].tobytes()]
        done = False
        while not done:
            obs, _, done, _, _ = e.step("")
            out.append(obs["frames"].tobytes())
        return out

    assert rollout() == rollout()


def test_bad_input_is_named() -> None:
    with pytest.raises(StreamError, match="scenario"):
        LiveGamingEnv(stream=flash_stream(5), scenario="karaoke")
    with pytest.raises(StreamError, match="token_cap"):
        LiveGamingEnv(stream=flash_stream(5), token_cap=0)
    env = LiveGamingEnv(stream=flash_stream(5))
    with pytest.raises(StreamError, match="before reset"):
        env.step("")
    env.reset()
    with pytest.raises(StreamError, match="str"):
        env.step(3)  # type: ignore[arg-type]
    source = FlashSource(10.0)
    ann = Annotation("x.mp4", 0, 30, 30, {"name": "CASTER"}, [], {})
    with pytest.raises(StreamError, match="only 10.0 s"):
        Stream(source, ann)


def test_annotation_records_round_trip_and_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    stream = flash_stream(20, scenario="guidance")
    record = stream.annotation.to_record()
    again = Annotation.from_record(record)
    assert again.to_record() == record
    assert again.label() == {
        3: "what a flash at 3",
        6: "go left",
        10: "what a flash at 10",
        17: "what a flash at 17",
    }
    assert [q.text for q in again.queries()] == ["where now?"]
    assert stream.chunk(5).query == "where now?"
    path = tmp_path / "ann.jsonl"
    path.write_text(json.dumps(record) + "\nnot json\n")
    with pytest.raises(StreamError, match="line 2 is not JSON"):
        read_annotations(path)
    bad = dict(
        record, annotations=[{"role": "assistant", "speaker": "CASTER", "start": 1.5, "end": 2, "text": "x"}]
    )
    with pytest.raises(StreamError, match="integer second"):
        Annotation.from_record(bad)
    bad = dict(record, annotations=[{"role": "user", "speaker": "user", "start": 1, "end": 2, "text": "x"}])
    with pytest.raises(StreamError, match="'query'"):
        Annotation.from_record(bad)
    assert Line("user", "user", 1, 1, "q").to_record()["query"] == "q"


def test_realtime_never_skips_past_the_end_of_the_clip() -> None:
    clock = FakeClock()
    env = LiveGamingEnv(stream=flash_stream(10), realtime=True, clock=clock, sleep=clock.sleep)
    _, info = env.reset()
    seen = []
    while True:
        seen.append(info["chunk"].second)
        clock.now += 6.0 if info["chunk"].second == 7 else 0.1
        _, _, terminated, _, info = env.step("x")
        if terminated:
            break
    # Second 7 took 6 s: the clip's last chunk (9) is still offered, only 8 was overtaken; the
    # stream ended before 9 was decided, so that decision is late too.
    assert seen[-2:] == [7, 9] and env.skipped == 1 and env.dropped == 2
    assert info["said"] == "" and info["late"]


def test_annotations_that_are_not_text_or_not_seconds_are_named(tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes('{"video_path": "caf\xe9.mp4"}\n'.encode("latin-1"))
    with pytest.raises(StreamError, match=f"{latin1} is not UTF-8 text"):
        read_annotations(latin1)
    record = flash_stream(5).annotation.to_record()
    for bad in (float("nan"), float("inf"), -1):
        with pytest.raises(StreamError, match="video_begin must be an integer second from 0"):
            Annotation.from_record(dict(record, video_begin=bad))
