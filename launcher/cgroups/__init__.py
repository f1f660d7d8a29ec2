"""A native run's own cgroup: where it goes (placement), and making it (run_cgroup). Used by
the native engine and by an image's entrypoint alike."""
