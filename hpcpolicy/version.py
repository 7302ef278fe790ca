"""The package version, in a module of its own.

Every file hpcpolicy writes records which version wrote it, so the modules of every layer read
the version; the package root (``import hpcpolicy``) is the public entry point above them all
(``hpcpolicy.train``), and re-exports it.

Example:
    >>> __version__
    '0.1.0'
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
