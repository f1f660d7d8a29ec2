"""Names launcher gives to things on the host: a run's or a job's name becomes a folder and a
container name, so it follows Docker's container-name rule."""

from __future__ import annotations

import re

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
NAME_RULE = "letters, digits, '.', '_' or '-', starting with a letter or digit"
