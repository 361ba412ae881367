"""The config file: read, checked key by key (one line per mistake), written back by admin
commands. Imports only ``runner.notify`` and the bottom layers (model, reasons, clock,
durations, …).
"""
