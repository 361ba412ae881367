"""The daemon's HTTP API on its Unix socket (aiohttp): routes that translate requests into
service calls and answers into the wire objects of ``runner.schema``. No rule lives here.
May import the service and the layers below it (``pyproject.toml``'s layers contract).
"""
