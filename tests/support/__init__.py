"""What the tests share, and no test: a daemon served on its real socket (``served``), the
in-process harness (``harness``), real Unix users (``users``) and the two workspaces with
a member each that the tests about who may start from (``tenants``)."""
