"""The one form of a config mistake, shared by every builder that checks one.

Each builder validates its own section of the config where it reads it
(``data`` the dataset and noise, ``objective`` the loss, optimiser and
schedules, ``models`` the model, ``loop`` the loop's own keys and the
workdir), and raises ``ConfigError``; the entry point prints it as one line
and exits with status 2.
"""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
  """A config value that cannot be trained with."""

  @classmethod
  def of(cls, key: str, value: Any, allowed: str) -> "ConfigError":
    """``config.KEY = VALUE: what is allowed``, the form of every message."""
    return cls(f"config.{key} = {value!r}: {allowed}")

