"""The repository around the package: its architecture, the docs and their
samples, the release artifacts, the alerting rules, the dev script and the
test harness itself."""
