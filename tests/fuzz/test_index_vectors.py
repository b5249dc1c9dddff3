"""Fuzz target: the index and vectors files beside a JSONL log, stateful.

An episode builds a store with records, vectors (a ``HashingEmbedder``, exact and
instant) and an index file, then takes steps: damage the index or vectors file (bits,
cuts, zeros, an older copy, another scope's file), append, retract, tear the tail, cut
the log back, rewrite it in place or replace it. After every step (one case) a new
reader — as a new process would — recalls, and so does the episode's long-lived reader
where the log only grew. Documented result (docs/reference.md#backends): the answers of
a copy of the log with no index file beside it (the no-index recall), or, when that
copy cannot be read either, a typed error of the same class; and every dense score
given is the one the record's own content gives (docs: a row is used only for the very
line it was made from).
"""

from __future__ import annotations

import os
import random
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlib import RecallEngine, RemoteMemoryStore
from memlib.normalize import normalize_recall_query
from memlib.rankers.embeddings import HashingEmbedder
from memlib.sample import SAMPLE_AS_OF, fixed_clock

from . import common

TARGET = "index_vectors"
USER = "alice"
EMBEDDER = HashingEmbedder(32)
RANKERS = ("baseline", "bm25", "bm25+stopwords")
STEPS = 12  # steps of one episode; then a new store


def _item(r: random.Random, tag: str, kind: str = "conversation") -> dict[str, Any]:
    return {
        "kind": kind,
        "memory_id": f"m-{tag}",
        "content": " ".join(common.word(r) for _ in range(r.randint(2, 8))),
        "summary": " ".join(common.word(r) for _ in range(r.randint(1, 3))),
        "source": {
            "source_id": f"s-{r.randint(0, 4)}",
            "source_type": "test",
            "title": "t",
            "captured_at": r.choice(common.TIMESTAMPS_OK),
        },
    }


def _open(path: Path, embedder: Any = None) -> RemoteMemoryStore:
    return RemoteMemoryStore(path, user_id=USER, clock=fixed_clock(), embedder=embedder)


def _answers(store: RemoteMemoryStore, queries: list[str], ranker: str) -> list[str]:
    out = []
    for text in queries:
        try:
            out.append(
                RecallEngine(store, ranker=ranker)
                .recall(text, limit=5, as_of=SAMPLE_AS_OF, query_id="q")
                .to_json()
            )
        except Exception as exc:  # noqa: BLE001 (the caller judges it)
            if not str(exc).startswith("recall query"):
                raise
            out.append(f"refused: {exc}")
    out.append(repr(store.latest_profile()))
    return out


def _dense_problem(store: RemoteMemoryStore, records: Any, text: str) -> str | None:
    """Why a dense score is wrong, or None: each given score is the one the record's
    content gives now (a missing one is allowed: it is embedded again later)."""
    retracted = {r.retracts for r in records if r.retracts}
    live = {
        r.memory_id: r
        for r in records
        if r.kind.value == "conversation" and r.memory_id not in retracted
    }
    query = normalize_recall_query(
        text, user_scope=store.user_scope, limit=5, query_id="q", issued_at=SAMPLE_AS_OF
    )
    vector = EMBEDDER.encode([text])[0]
    scores = store.dense_scores(query, vector, model=EMBEDDER.name, dimension=EMBEDDER.dimension)
    if len(set(scores.ids)) != len(scores.ids):
        return "a record scored twice"
    for memory_id, score in zip(scores.ids, scores.scores.tolist(), strict=True):
        if memory_id not in live:
            return f"a score for {memory_id}, which is not a live conversation record"
        want = float(EMBEDDER.encode([live[memory_id].content])[0] @ vector)
        if not np.isclose(score, want, atol=1e-5):
            return f"a wrong dense score for {memory_id}"
    return None


class Episode:
    def __init__(self, folder: Path, r: random.Random, number: int) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(mode=0o700)
        (folder / "log").mkdir(mode=0o700)
        self.folder = folder
        self.log = folder / "log" / "records.jsonl"
        self.r = r
        self.tag = number
        self.serial = 0
        store = _open(self.log, EMBEDDER)
        count = r.choice((5, 20, 60, 150, 400, 400))
        items = [self.item() for _ in range(count)]
        for start in range(0, count, 40):
            store.append_many(items[start : start + 40])
        store.append(**self.item("profile"))
        store.retract(items[0]["memory_id"], reason="wrong", source=items[0]["source"])
        store.write_index_file()
        self.copies: list[tuple[bytes, bytes]] = []  # older (index, vectors) bytes
        self.keep()
        self.other = self.foreign(folder)
        self.reader: RemoteMemoryStore | None = _open(self.log)

    def item(self, kind: str = "conversation") -> dict[str, Any]:
        self.serial += 1
        return _item(self.r, f"{self.tag}-{self.serial}", kind)

    def foreign(self, folder: Path) -> tuple[bytes, bytes]:
        """bob's index and vectors files, of a log like this one."""
        (folder / "bob").mkdir(mode=0o700)
        bob = RemoteMemoryStore(folder / "bob" / "records.jsonl", user_id="bob", embedder=EMBEDDER)
        bob.append_many([self.item() for _ in range(5)])
        bob.write_index_file()
        return (bob.index_path.read_bytes(), bob.vectors_path.read_bytes())

    def keep(self) -> None:
        index, vectors = self.log.with_name("records.jsonl.index"), self.vectors()
        self.copies.append(
            (
                index.read_bytes() if index.exists() else b"",
                vectors.read_bytes() if vectors.exists() else b"",
            )
        )

    def vectors(self) -> Path:
        return self.log.with_name("records.jsonl.vectors")

    def damage(self, path: Path, which: int) -> str:
        r = self.r
        data = path.read_bytes() if path.exists() else b""
        roll = r.random()
        if roll < 0.45 or not data:
            new, how = common.mutate_bytes(r, data), "bytes mutated"
        elif roll < 0.6:
            new, how = data[: r.randrange(len(data))], "truncated"
        elif roll < 0.7:
            at = r.randrange(len(data))
            new, how = data[:at] + b"\0" * (len(data) - at), "zeroed from a point"
        elif roll < 0.85:
            new, how = r.choice(self.copies)[which], "an older copy"
        elif roll < 0.95:
            new, how = self.other[which], "bob's file"
        else:
            new, how = b"", "emptied"
        path.write_bytes(new)
        return f"{path.name} {how}"

    def step(self) -> str:
        """One change; returns what it was."""
        r, log = self.r, self.log
        roll = r.random()
        if roll < 0.22:
            return self.damage(log.with_name("records.jsonl.index"), 0)
        if roll < 0.38:
            return self.damage(self.vectors(), 1)
        if roll < 0.5:
            store = _open(log, EMBEDDER if r.random() < 0.7 else None)
            store.append_many([self.item() for _ in range(r.randint(1, 5))])
            return "appended"
        if roll < 0.57:
            store = _open(log, EMBEDDER if r.random() < 0.5 else None)
            live = [rec for rec in store.read_all() if rec.kind.value == "conversation"]
            retracted = {rec.retracts for rec in store.read_all()}
            live = [rec for rec in live if rec.memory_id not in retracted]
            if live:
                target = r.choice(live).memory_id
                store.retract(target, reason="fuzz", source=_item(r, "x")["source"])
                return f"retracted {target}"
            return "nothing to retract"
        if roll < 0.65:
            _open(log).write_index_file()
            self.keep()
            return "index file written"
        if roll < 0.69:
            with open(log, "ab") as handle:
                handle.write(b'{"memory_id":"torn","user_scope"')
            return "torn tail"
        raw = log.read_bytes()
        lines = raw.split(b"\n")[:-1]
        self.reader = None  # a rewrite a long-lived reader may not see (docs/contract.md)
        if roll < 0.75 and len(lines) > 3:
            cut = r.randint(1, len(lines) - 1)
            with open(log, "r+b") as handle:
                handle.truncate(sum(len(line) + 1 for line in lines[:cut]))
            return f"log cut back to {cut} lines"
        if roll < 0.82 and len(lines) > 3:
            body = lines[:]
            r.shuffle(body)
            data = b"\n".join(body) + b"\n" + (raw[len(b"\n".join(lines)) + 1 :])
            if r.random() < 0.5:
                with open(log, "r+b") as handle:  # same inode, same size
                    handle.write(data)
                return "log lines reordered in place"
            temp = log.with_name("new.jsonl")
            temp.write_bytes(data)
            temp.chmod(0o600)
            os.rename(temp, log)
            return "log lines reordered, file replaced"
        if roll < 0.96:
            # Same ids, other words, same length: only the bytes tell the log changed.
            # Sometimes only in the middle, past the windows a reader hashes, and in a
            # new file that the file system gives the inode number the old one had.
            low, high = (0, len(raw)) if r.random() < 0.5 else (8 << 10, len(raw) - (80 << 10))
            data = (
                raw[:low]
                + raw[low:high].replace(b"amber", b"cedar").replace(b"river", b"tiger")
                + raw[max(low, high) :]
            )
            if r.random() < 0.5:
                with open(log, "r+b") as handle:
                    handle.write(data)
                return "log words changed in place"
            before = log.stat().st_ino
            log.unlink()
            log.write_bytes(data)
            log.chmod(0o600)
            same = "same" if log.stat().st_ino == before else "another"
            return f"log words changed in a new file ({same} inode number)"
        with open(log, "r+b") as handle:
            handle.write(common.mutate_bytes(r, raw, keep_newlines=True)[: len(raw)])
        return "log bytes damaged in place"

    def reference(self, queries: list[str], ranker: str) -> tuple[Any, BaseException | None]:
        """The no-index recall: a copy of the log alone, in a folder of its own."""
        folder = self.folder / "reference"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(mode=0o700)
        copy = folder / "records.jsonl"
        copy.write_bytes(self.log.read_bytes())
        copy.chmod(0o600)
        store = _open(copy)
        store.INDEX_WRITE_MIN = 10**12  # the reference never writes an index file
        return common.timed(lambda: (_answers(store, queries, ranker), store.read_all()))


def one_case(episode: Episode, number: int, failures: common.Failures) -> None:
    r = common.rng(TARGET, number)
    done, exc = common.timed(episode.step)
    what = done if exc is None else "step"
    queries = [" ".join(common.word(r) for _ in range(r.randint(1, 3))) for _ in range(2)]
    ranker = r.choice(RANKERS)
    detail = f"episode {episode.tag}, after {what}: {queries}, {ranker}"

    def fail(kind: str, error: BaseException | None = None, about: str = "") -> None:
        failures.add(
            common.signature(f"{what.split(' ')[0]}..: {kind}", error),
            number,
            f"{detail}{about} -> {error!r}" if error else f"{detail}{about}",
            size=0,
        )

    if exc is not None:
        problem = common.typed_problem(exc)
        if problem is not None:
            fail(f"the step itself: {problem}", exc)
        return
    expected, ref_error = episode.reference(queries, ranker)
    failures.note(
        f"{what.split(' ')[0]}: {'ok' if ref_error is None else type(ref_error).__name__}"
    )
    readers = [("new reader", _open(episode.log))]
    if episode.reader is not None:
        readers.append(("long-lived reader", episode.reader))
    for name, store in readers:
        got, error = common.timed(partial(_answers, store, queries, ranker))
        if error is not None:
            problem = common.typed_problem(error)
            if problem is not None:
                fail(f"{name}: {problem}", error)
            elif ref_error is None:
                fail(f"{name}: refused a log the no-index recall reads", error)
            elif type(error) is not type(ref_error):
                fail(f"{name}: another error class than the no-index recall", error)
        elif ref_error is not None:
            fail(f"{name}: answered where the no-index recall raised", ref_error)
        elif got != expected[0]:
            fail(f"{name}: answers differ from the no-index recall")
    if ref_error is None:
        dense = _open(episode.log, EMBEDDER)
        problem, error = common.timed(lambda: _dense_problem(dense, expected[1], queries[0]))
        if error is not None:
            typed = common.typed_problem(error)
            fail(f"dense scores: {typed or 'refused a readable log'}", error)
        elif problem is not None:
            kind, _, record = problem.partition(" for ")
            fail(f"dense scores: {kind}", about=f" ({record})" if record else "")


def _run(tmp_path: Path, *, stress: bool) -> None:
    # On the disk, not tmpfs: tmpfs never gives a freed inode number to the next file,
    # and a log replaced under its old inode number is one of the changes to survive.
    base = tmp_path
    episode: Episode | None = None
    try:
        with common.Run(TARGET) as run:
            for number in common.cases(100, 12_000, stress=stress):
                if episode is None or number % STEPS == 0 or common.ONLY is not None:
                    first = number - number % STEPS
                    episode = Episode(base / "episode", common.rng(TARGET, first), first)
                    if common.ONLY is not None:  # replay the episode's steps before it
                        for _earlier in range(first, number):
                            episode.step()
                one_case(episode, number, run.failures)
                run.count += 1
        run.check()
    finally:
        shutil.rmtree(base / "episode", ignore_errors=True)


def test_index_vectors_sample(tmp_path: Path) -> None:
    _run(tmp_path, stress=False)


@pytest.mark.stress
def test_index_vectors_full(tmp_path: Path) -> None:
    _run(tmp_path, stress=True)
