"""Made-up launcher variants (an engine, a job backend, a render target, a GPU vendor, a
framework, a workload), each one module here and one entry-point line in pyproject.toml."""
