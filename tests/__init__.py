"""The project's tests (a regular package: verl's wheel installs a top-level ``tests`` package
that would otherwise shadow this one)."""
