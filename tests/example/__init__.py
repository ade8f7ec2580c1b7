"""The example project: its checks and views, and its guided tour in a browser."""
