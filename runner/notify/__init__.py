"""Notifications of a run's events through Apprise URLs, from the store's durable outbox.

``targets`` (the events, the URLs a spec or the config may name, ``#SBATCH --mail-type``),
``outbox`` (what one queued notification holds, its text), ``deliver`` (the Apprise
adapter) and ``sender`` (the worker thread that empties the outbox, with back-off).
"""
