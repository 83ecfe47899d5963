"""The dispatch id's format, and its one parse.

A dispatch id names one attempt of one row: the claim statement writes it into the row and the dispatcher sends
it to Jenkins as the DISPATCH_ID parameter, which comes back in the build's notifications. Two forms exist:

- ``jd-<row id>-<10 lowercase hex digits>``: what every claim makes, in each dialect's claim statement
  (``store/dialects/<engine>/queries/claim.sql``, ``claim_batch``): the row's id, so a callback can update its row by
  primary key at once, then 10 hex digits of the MD5 of a random UUID, so each claim of the same row (a retry, a
  release) draws a new id and a late callback of an earlier attempt is told apart (stale).
- ``legacy-<row id>``: rows a worker of the old schema held when the cutover migration ran.

Any other text is a dispatch id we did not make (hand-made, or from an older format): it names no row id, and
the webhook looks its row up by value. The row id read here is only a hint: updates still match the whole id.
"""

from __future__ import annotations

import re

PREFIX = "jd-"
LEGACY_PREFIX = "legacy-"
RANDOM_HEX_DIGITS = 10  # what the claim statements append (substr / LEFT of an md5)

# Hex digits: any count, so that a change of RANDOM_HEX_DIGITS never stops older ids from parsing.
_DISPATCH_ID = re.compile(rf"{PREFIX}(\d{{1,18}})-[0-9a-f]+|{LEGACY_PREFIX}(\d{{1,18}})")


def row_id_hint(dispatch_id: str) -> int | None:
    """The row id a dispatch id was made from, if it has one of our forms (a hint: the fence decides)."""
    match = _DISPATCH_ID.fullmatch(dispatch_id)
    if match is None:
        return None
    return int(match.group(1) or match.group(2))
