"""jenkins-dispatch: every Jenkins job queued in a database table triggered exactly once, and seen to finish."""

__version__ = "0.1.0"
