"""Developer tools used by the tests and docs (not part of the installed package)."""
