"""The dispatch ids each dialect's claim statement makes have the one documented format (store/dispatch_ids.py),
so the webhook's parse reads the row id back out of them."""

import re

import pytest

from jenkins_dispatch.store.dispatch_ids import PREFIX, RANDOM_HEX_DIGITS, row_id_hint

pytestmark = pytest.mark.both_engines


def test_the_claim_statement_makes_ids_of_the_documented_format(queue):
    ids = [queue.enqueue("deploy", parameters={"N": n}).id for n in range(3)]
    claimed = queue.claim_batch(10)
    assert sorted(job.id for job in claimed) == ids
    for job in claimed:
        assert re.fullmatch(rf"{PREFIX}{job.id}-[0-9a-f]{{{RANDOM_HEX_DIGITS}}}", job.dispatch_id), job.dispatch_id
        assert row_id_hint(job.dispatch_id) == job.id
        assert queue.get(job.id)["dispatch_id"] == job.dispatch_id
