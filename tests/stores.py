"""The tests' view of the queue: every audience's store on one session, as one object named ``Queue``.

The package gives each audience its own store (store/dispatcher.py, webhook.py, levers.py, reports.py,
introspection.py, producers.py); a test sets a scene and looks at it through all of them (enqueue, claim, settle,
list), so the fixture composes them. The package never uses this class: the layout test holds each audience to
its own store.
"""

from __future__ import annotations

from jenkins_dispatch.store.dispatcher import DispatcherStore
from jenkins_dispatch.store.introspection import Introspection
from jenkins_dispatch.store.levers import Levers
from jenkins_dispatch.store.producers import Producers
from jenkins_dispatch.store.webhook import WebhookStore


class Queue(DispatcherStore, WebhookStore, Levers, Producers, Introspection):
    """Every store's methods on one session, under the dispatcher's lease (``Queue(db, lease_seconds=60)``)."""
