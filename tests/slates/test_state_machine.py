"""A Hypothesis state machine of random writes and reads on each policy and both backends.

Writes are appends and overwrites to two text files and ``mergeByKey`` to a JSON file, by two
users of a ``partition: user`` slate (each user's state is modelled apart, so any leak between
them fails). A plain-Python model of the folder predicts every step: after each write the
folder is within its limit, exactly the evicted entries (and overwritten ones) are gone,
evictions follow the policy's order (FIFO: oldest written; LRU: least recently used file
first) and are minimal (one fewer would not have fit), and ``reject`` refuses exactly the
writes that would not fit.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from cairn.slates.errors import SlateEntryTooLarge, SlateLimitExceeded
from cairn.slates.service import Slates
from cairn.store import Store
from tests.slates.conftest import count, folder_slate, fresh_ladder

T = "tenant"
FILES = ["a", "b", "c"]
USERS = ["ann", "bob"]  # the slate is kept per user: their states must never mix
JSON_FILE = "c"  # written only with mergeByKey: a JSON array of {"k", "v"} items


def text_of(file: str, entries: list[str]) -> str:
    if not entries:
        return ""
    return "[" + ", ".join(entries) + "]" if file == JSON_FILE else "\n".join(entries)


def usage_of(model: dict[str, list[str]]) -> int:
    return sum(count(text_of(f, entries)) for f, entries in model.items())


def make_machine(slates: Slates) -> type[RuleBasedStateMachine]:
    class SlateMachine(RuleBasedStateMachine):
        @initialize(
            policy=st.sampled_from(["FIFO", "LRU", "reject"]),
            limit=st.integers(min_value=3, max_value=40),
        )
        def setup(self, policy: str, limit: int) -> None:
            self.policy, self.limit = policy, limit
            self.ladder = fresh_ladder(slates, folder_slate(policy, limit, FILES, partition="user"))
            self.models = {u: {f: [] for f in FILES} for u in USERS}
            self.written_at: dict[str, int] = {}
            self.used = {u: dict.fromkeys(FILES, 0) for u in USERS}
            self.clock = 0

        def victim_order(
            self, user: str, model: dict[str, list[str]], target: str, new: str
        ) -> list[str]:
            alive = [e for f in FILES for e in model[f] if e != new]
            if self.policy == "FIFO":
                return sorted(alive, key=lambda e: self.written_at[e])
            used = {**self.used[user], target: self.clock + 1}
            order = sorted(FILES, key=lambda f: (used[f], FILES.index(f)))
            return [
                e
                for f in order
                for e in sorted(model[f], key=lambda e: self.written_at.get(e, self.clock + 1))
                if e != new
            ]

        @rule(
            user=st.sampled_from(USERS),
            file=st.sampled_from(FILES[:2]),
            words=st.integers(min_value=1, max_value=14),
            overwrite=st.booleans(),
        )
        def write(self, user: str, file: str, words: int, overwrite: bool) -> None:
            self.clock += 1
            text = f"e{self.clock}" + " w" * (words - 1)
            after = {f: list(v) for f, v in self.models[user].items()}
            after[file] = [text] if overwrite else [*after[file], text]
            self.check_write(user, file, text, after, on="overwrite" if overwrite else "append")

        @rule(
            user=st.sampled_from(USERS),
            key=st.integers(min_value=0, max_value=4),
            words=st.integers(min_value=1, max_value=10),
        )
        def merge(self, user: str, key: int, words: int) -> None:
            self.clock += 1
            text = json.dumps({"k": key, "v": f"e{self.clock}" + " w" * (words - 1)})
            after = {f: list(v) for f, v in self.models[user].items()}
            items = after[JSON_FILE]
            same = [i for i, e in enumerate(items) if json.loads(e)["k"] == key]
            if same:
                items[same[0]] = text
            else:
                items.append(text)
            self.check_write(user, JSON_FILE, text, after, on="mergeByKey")

        def check_write(
            self, user: str, file: str, text: str, after: dict[str, list[str]], on: str
        ) -> None:
            fits = usage_of(after) <= self.limit
            try:
                result = slates.write(
                    T, self.ladder, "S", "f", file, text, on=on, key="k", user_id=user
                )
            except SlateEntryTooLarge:
                assert count(text_of(file, [text])) > self.limit
                self.clock -= 1
                return
            except SlateLimitExceeded:
                assert self.policy == "reject" and not fits
                self.clock -= 1
                return
            assert count(text_of(file, [text])) <= self.limit
            assert fits or self.policy != "reject"
            evicted = [(e.file, e.preview) for e in result.evictions]
            expected = self.victim_order(user, after, file, text)
            assert [p for _, p in evicted] == expected[: len(evicted)]
            planned = {f: list(v) for f, v in after.items()}
            for f, p in evicted:
                after[f].remove(p)
            assert usage_of(after) <= self.limit
            if evicted:  # minimal: keeping the last victim would not have fitted
                gone = set(evicted[:-1])
                kept = {f: [e for e in v if (f, e) not in gone] for f, v in planned.items()}
                assert usage_of(kept) > self.limit
            self.models[user] = after
            self.written_at[text] = self.clock
            self.used[user][file] = self.clock
            assert result.usage == usage_of(after)

        @rule(user=st.sampled_from(USERS), file=st.sampled_from(FILES), peek=st.booleans())
        def read(self, user: str, file: str, peek: bool) -> None:
            text = slates.read(T, self.ladder, "S", "f", file, peek=peek, user_id=user)
            assert text == text_of(file, self.models[user][file])
            if not peek:
                self.clock += 1
                self.used[user][file] = self.clock

        @invariant()
        def matches_model_and_limit(self) -> None:
            for user, model in self.models.items():
                tree = slates.inspect(T, self.ladder, "S", user_id=user)
                files = {f["file"]: f["content"] for f in tree["folders"][0]["files"]}
                assert files == {f: text_of(f, v) for f, v in model.items()}
                assert tree["tokens"] == usage_of(model) <= self.limit

    return SlateMachine


def test_state_machine(store: Store) -> None:
    machine = make_machine(Slates(store))
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=25,
            stateful_step_count=14,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
