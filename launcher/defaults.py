"""The built-ins a command falls back to, named in one place (the registries hold what they are;
nothing else spells these names)."""

from __future__ import annotations

NATIVE = "native"  # jobs run --runtime: a fresh process per chunk
LOCAL = "local"  # jobs run --backend: this machine
AUTO = "auto"  # a profile or a runtime chosen for this host
NONE = "none"  # no framework, no GPU vendor
