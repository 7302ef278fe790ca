"""``hpcpolicy verify``: check a policy folder's signature with the site key."""

from __future__ import annotations

from hpcpolicy.commands._console import console, fail_cleanly, plain
from hpcpolicy.commands.sign import KeyOpt, PolicyArg

__all__ = ["main"]


def main(policy: PolicyArg, key: KeyOpt = None) -> None:
    """Check that POLICY is, file for file, the folder signed with the site key (`hpcpolicy
    sign`); exit 1 with one line naming what changed otherwise.

    Example:

        hpcpolicy verify runs/ppo/policy --key /etc/hpcpolicy/site.key
    """
    from hpcpolicy.signature import verify

    with fail_cleanly():
        files = verify(policy, key)
    console.print(plain(f"verified: {policy} ({len(files)} files, as signed)"))
