"""The dashboard's tests use the integration tests' real daemon (``served``)."""

from tests.integration.conftest import served  # noqa: F401 (the fixture, re-exported)
