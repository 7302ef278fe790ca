"""``hpcpolicy sign``: sign a policy folder with a site key kept outside it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hpcpolicy.commands._console import console, fail_cleanly, plain

__all__ = ["KeyOpt", "PolicyArg", "main"]

PolicyArg = Annotated[Path, typer.Argument(help="The policy folder (runs/NAME/policy).",
                                           show_default=False)]
KeyOpt = Annotated[Path | None, typer.Option(
    "--key", envvar="HPCPOLICY_SIGNING_KEY", show_default=False,
    help="The site key file (at least 32 bytes, outside any policy folder; make one with "
         "`head -c 32 /dev/urandom > site.key`). Default: $HPCPOLICY_SIGNING_KEY.")]


def main(policy: PolicyArg, key: KeyOpt = None) -> None:
    """Sign POLICY with the site key: writes POLICY/signature.json, an HMAC-SHA256 over the
    SHA-256 of every file in the folder (manifest, card, model files).

    The hashes inside a policy folder only show that its files belong together: anyone who can
    change the folder can recompute them. A signature needs the key, so check a policy (its
    card, a what-if report), then sign it where the key is kept. With HPCPOLICY_SIGNING_KEY set,
    simulate, evaluate, whatif, advise and train --init-from refuse a folder that is not signed
    with that key, or was changed after signing.

    Example:

        hpcpolicy sign runs/ppo/policy --key /etc/hpcpolicy/site.key
    """
    from hpcpolicy.signature import sign

    with fail_cleanly():
        written = sign(policy, key)
    console.print(plain(f"signed: {written}"))

