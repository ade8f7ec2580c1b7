"""The admin dashboard: who may see and do what, its actions, what its pages show,
Redis unreachable, paging, its extension point, charts, and a real browser."""
