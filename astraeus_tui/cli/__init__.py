"""The ``astra`` command: typer commands, and ``cli/fast`` for those people run often."""
