"""`${workspace.current_user.*}` on a laptop: the local user stands for the workspace user.

The user name is `EXACTLY_ONCE_USER_NAME` when set (e.g. `alice@example.com`, to get the same
`short_name` as on the workspace), else the operating system's user name (`getpass.getuser()`).
From it, as the Databricks CLI derives them (libs/iamutil/user.go, libs/textutil):

- `short_name`: the part before `@`, lower-cased, every character that is not a Unicode letter
  or digit replaced by `_`, runs of `_` made one, `_` trimmed from both ends
  (`Test.User+tag@x.com` -> `test_user_tag`);
- `domain_friendly_name`: `short_name` with accents removed (NFD, non-spacing marks dropped)
  and every character that is not an ASCII letter or digit replaced by `-`, lower-cased
  (`tést_üser` -> `test-user`).

`userName` and `displayName` are the user name itself. The workspace user's other fields (id,
groups, emails...) have no local value: a reference to one is an error.
"""

from __future__ import annotations

import getpass
import os
import re
import unicodedata

USER_NAME_ENV = "EXACTLY_ONCE_USER_NAME"


def local_user_name() -> str:
    """The user name `${workspace.current_user.userName}` stands for locally."""
    return os.environ.get(USER_NAME_ENV) or getpass.getuser()


def normalized(text: str) -> str:
    """The CLI's `textutil.NormalizeString`: lower case, each character that is not a letter
    or digit a `_`, runs of `_` one, no `_` at either end."""
    replaced = "".join(c if c.isalpha() or c.isdecimal() else "_" for c in text.lower())
    return re.sub("_+", "_", replaced).strip("_")


def short_name(user_name: str) -> str:
    """The CLI's `GetShortUserName`: the normalized part of `user_name` before `@`."""
    return normalized(user_name.split("@", 1)[0])


def domain_friendly_name(user_name: str) -> str:
    """The CLI's `GetShortUserDomainFriendlyName`: `short_name` with only ASCII letters and
    digits, everything else a `-`."""
    decomposed = unicodedata.normalize("NFD", short_name(user_name))
    unmarked = unicodedata.normalize(
        "NFC", "".join(c for c in decomposed if unicodedata.category(c) != "Mn"))
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in unmarked).lower()


def current_user(user_name: str | None = None) -> dict[str, str]:
    """The fields of `${workspace.current_user}` that have a local value."""
    name = user_name if user_name is not None else local_user_name()
    return {"userName": name, "displayName": name, "short_name": short_name(name),
            "domain_friendly_name": domain_friendly_name(name)}
