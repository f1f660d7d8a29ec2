"""Hardware profiles: schema, YAML loading with line numbers, `extends`."""

from launcher.profiles.loader import Profile, available, load_profile, locate

__all__ = ["Profile", "available", "load_profile", "locate"]
