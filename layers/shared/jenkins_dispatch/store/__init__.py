"""The database: the session contract (``session.py``) and the factory that opens the right session (``db.py``);
a store per audience, each a ``runner.Store`` running its engine's statements by name with one runner
(``runner.py``): the dispatcher's (``dispatcher.py``), the webhook's (``webhook.py``), what both share
(``outcomes.py``), pruning (``pruning.py``: the operator's and the pruner duty's), the levers (``levers.py``), the reports (``reports.py``), doctor's (``introspection.py``), the
producers' (``producers.py``) and the schedules' (``schedules.py``); the records they exchange (``queue.py``), the
shapes of the rows they read (``rows.py``), a listing's filters (``filters.py``), the dispatch id's format
(``dispatch_ids.py``), where and how to reach the server (``endpoint.py``); the SQL files read by name
(``statements.py``) and the schema (``migrations.py``). Each engine's session, SQL (``queries/``, a file per
concern), migrations and server policy live in its own folder, ``dialects/<engine>/``.

Must not speak HTTP (no ``requests``, no ``jenkins.client``) nor import ``dispatching/``, ``callbacks/``,
``operating/``, ``runtime`` or the entry points. The only Jenkins knowledge it uses is ``jenkins.jobs`` (pure: to
refuse a job name Jenkins could never run, and to read parameters with their numbers kept as text). Each database
driver is imported in its engine's folder and nowhere else, and only there are engines told apart by name.
"""
