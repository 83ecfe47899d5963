"""The tests' view of the queue: every audience's store on one session, as one object named ``Queue``.

The package gives each audience its own store (store/dispatcher.py, webhook.py, levers.py, reports.py,
introspection.py, producers.py); a test sets a scene and looks at it through all of them (enqueue, claim, settle,
list), so the fixture composes them. The package never uses this class: the layout test holds each audience to
its own store.
"""

from __future__ import annotations

from typing import Any

from jenkins_dispatch.store.dispatcher import DispatcherStore
from jenkins_dispatch.store.introspection import Introspection
from jenkins_dispatch.store.levers import Levers
from jenkins_dispatch.store.producers import Producers
from jenkins_dispatch.store.webhook import WebhookStore


class _Composed(type):
    """A method set on the composite (``monkeypatch.setattr(Queue, "record_heartbeat", refuse)``) is set on the
    store that defines it, where the package's own store objects meet it too, as they met it when the package's
    class was the tests' ``Queue``. Deleting it (monkeypatch's undo of a name the composite does not hold itself)
    puts the store's own back."""

    _replaced: dict[tuple[type, str], Any] = {}

    def __setattr__(cls, name: str, value: Any) -> None:
        owner = next((base for base in cls.__mro__[1:] if name in base.__dict__), None)
        if owner is None or owner is object:
            super().__setattr__(name, value)
            return
        _Composed._replaced.setdefault((owner, name), owner.__dict__[name])
        setattr(owner, name, value)

    def __delattr__(cls, name: str) -> None:
        for (owner, replaced), original in list(_Composed._replaced.items()):
            if replaced == name:
                setattr(owner, name, original)
                del _Composed._replaced[(owner, name)]
                return
        super().__delattr__(name)


class Queue(DispatcherStore, WebhookStore, Levers, Producers, Introspection, metaclass=_Composed):
    """Every store's methods on one session, under the dispatcher's lease (``Queue(db, lease_seconds=60)``)."""
