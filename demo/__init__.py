"""`make demo`: see __main__.py."""
