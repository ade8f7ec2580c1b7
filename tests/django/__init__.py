"""The Django layer: settings and system checks, the registry and its connections,
the kinds, ``@with_resource`` and ``ResourceMiddleware``, the management
commands, metrics, the Tasks backend, and each primitive configured in Django."""
