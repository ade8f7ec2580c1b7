"""Primitives against Python models of them, driven by hypothesis state machines:
Redis must agree with the model after every step."""
