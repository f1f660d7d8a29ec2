"""The built-ins a command falls back to, named in one place (the registries hold what they are;
nothing else spells these names: tests/test_builtin_names.py). Standard library only: the
supervisor in an image imports it through the vendors."""

from __future__ import annotations

NATIVE = "native"  # jobs run --runtime: a fresh process per chunk
LOCAL = "local"  # jobs run --backend: this machine
K8S = "k8s"  # jobs render --target: a Kubernetes Indexed Job
AUTO = "auto"  # a profile or a runtime chosen for this host
NONE = "none"  # no framework, no GPU vendor (and `--gpus none`: no GPU for this run)
