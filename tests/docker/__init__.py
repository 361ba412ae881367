"""Tests of the Docker executor against a real engine (see setup.sh)."""
