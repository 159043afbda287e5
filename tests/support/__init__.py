"""Test support code: helpers shared by test modules, fuzz cases, chaos runs and the worker scripts
that tests start as separate OS processes. Imported as `support.<module>` (tests/ is on sys.path)."""
