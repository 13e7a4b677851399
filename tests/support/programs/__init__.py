"""Small programs the tests run in a child process (an import that must not monkey-patch the test
process, a check of what a fresh interpreter loads). Kept as files so ruff and mypy read them."""
