"""Each engine's migrations have one number each: two branches that took the same next number (both applied in
whatever order the names sort, each recorded by name) would leave an upgraded database and a fresh one built in
different orders. Caught here rather than by a reviewer."""

from __future__ import annotations

from collections import Counter

import pytest

from jenkins_dispatch.store.migrations import migration_files


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_every_migration_number_is_taken_once(dialect):
    numbers = Counter(number for number, _name, _path in migration_files(dialect))
    assert [n for n, times in numbers.items() if times > 1] == []
    assert sorted(numbers) == list(range(1, len(numbers) + 1))  # no gap either
