"""When things go wrong (docs/reliability.md): Redis slow, hung, failed over,
resharded or losing data, hostile data and input, fuzzing, ACL, passwords and
TLS, and the chaos soak."""
