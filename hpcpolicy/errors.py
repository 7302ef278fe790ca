"""The exceptions hpcpolicy raises on purpose.

Every message says what is wrong, where (file, line, column or job), and how to fix it. The
command layer catches :class:`HpcPolicyError` only, prints the message and exits with code 1;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

__all__ = [
    "ArtifactError",
    "ConfigError",
    "HpcPolicyError",
    "InputFormatError",
    "OutputBusyError",
    "SchemaValidationError",
    "SimulationError",
    "SlurmError",
]


class HpcPolicyError(Exception):
    """Base class: an error the user can fix, with a message that says how."""


class InputFormatError(HpcPolicyError):
    """An input file cannot be read as the format it claims (or was detected) to be."""


class SchemaValidationError(HpcPolicyError):
    """A table or document does not match its versioned schema."""


class ConfigError(HpcPolicyError):
    """An option, config field or cluster spec is invalid or conflicts with another."""


class OutputBusyError(ConfigError):
    """An output is being written by another run (the message names it and that run's pid)."""


class ArtifactError(HpcPolicyError):
    """A policy artifact is missing, of an unsupported kind, or of another version."""


class SimulationError(HpcPolicyError):
    """The simulator met a state it cannot continue from (the message names event and time)."""


class SlurmError(HpcPolicyError):
    """A Slurm command failed, is missing, or lacks a feature (the message names the command)."""
