"""Astraeus's faces: the ``astra`` CLI and the Textual dashboard. They talk to the daemon
through ``astraeus_tui.client`` only, never through its internals (``pyproject.toml``'s
contract); they may use ``runner``'s schema, model, spec and config.
"""
