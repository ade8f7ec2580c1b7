"""What the tests share: fixtures beside the harness's own, helpers, models, and
the test apps (see docs/testing.md, "The layout of tests/")."""
