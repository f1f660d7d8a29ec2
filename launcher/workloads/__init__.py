"""The workload catalog (built-in and user YAML) and the reference workloads."""
