"""What the tests share, and no test: a daemon served on its real socket (``served``), the
in-process harness (``harness``), real Unix users (``users``), the workspaces and members
that the tests about who may start from (``tenants``), notifications received
(``notify``), a queue long enough to stream (``long_queue``), ``astra`` in a terminal
(``terminal``) and a pid made to be reused (``pid_reuse``). What only one folder's tests
share lives beside them (tests/unit/planner_builders.py, tests/tui/helpers.py, ...): no
test module imports from another."""
