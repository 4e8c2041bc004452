"""The Lua scripts, loaded from the package's ``scripts/*.lua`` files: one per mutating
operation, plus the reads that need a consistent view.

Every script touches only keys passed in ``KEYS`` that share one hash tag, so it runs
unchanged on a cluster. Writing scripts start with ``#!lua`` (the server refuses them
whole when out of memory, instead of failing half-way) and check everything (tombstone,
owner, fence, preconditions) before their first write, because Redis does not roll a
script back. Read-only ones start with ``#!lua flags=no-writes``. Times come from
``TIME`` inside the script, in microseconds. Each file's comment says its ``KEYS``,
``ARGV`` and replies; the header hash fields are described in ``include/header.lua``.

Refusals are replied as ``{'<Refusal value>', ...}`` (``{'fenced', fence}``,
``{'erased', until}``, ``{'stale_tail', tail}``, ``{'not_owned'}``...), which
:func:`._base.raise_for` maps through :func:`agentstores.errors.refusal_error`.

Shared fragments: a line ``--! include <name>.lua`` is replaced by the text of
``scripts/include/<name>.lua``. Only script files include, fragments do not, and each
script names every fragment it uses, in order, so what the server runs is explicit.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from .client import Script

_SCRIPTS = resources.files(__package__).joinpath("scripts")
_INCLUDE = re.compile(r"^--! include (?P<name>[a-z_]+\.lua)$", re.MULTILINE)
_WRITE = "#!lua"
_READ = "#!lua flags=no-writes"


@cache
def _fragment(name: str) -> str:
    text = _SCRIPTS.joinpath("include", name).read_text("utf-8")
    if _INCLUDE.search(text):
        raise RuntimeError(f"Lua fragment {name} includes another; only scripts include")
    return text.rstrip("\n")


def load_script(name: str) -> Script:
    """The script in ``scripts/<name>.lua``, its fragments included; whether it writes
    comes from its first line."""
    text = _SCRIPTS.joinpath(f"{name}.lua").read_text("utf-8")
    shebang, _, body = text.partition("\n")
    if shebang not in (_WRITE, _READ):
        raise RuntimeError(f"{name}.lua must start with {_WRITE!r} or {_READ!r}")
    body = _INCLUDE.sub(lambda found: _fragment(found["name"]), body)
    return Script(name, f"{shebang}\n{body}", write=shebang == _WRITE)


# --- supervision ---------------------------------------------------------------------
SV_CAS = load_script("sv_cas")
SV_CAS_MANY = load_script("sv_cas_many")
SV_READ = load_script("sv_read")
SV_DELETE = load_script("sv_delete")

# --- recording -----------------------------------------------------------------------
REC_PUT = load_script("rec_put")
REC_READ = load_script("rec_read")
REC_DELETE = load_script("rec_delete")

# --- agent state ---------------------------------------------------------------------
ST_SAVE = load_script("st_save")
ST_LOAD = load_script("st_load")
ST_DELETE = load_script("st_delete")

# --- pause tokens --------------------------------------------------------------------
PT_PUT = load_script("pt_put")
PT_CLAIM = load_script("pt_claim")
PT_ABANDON = load_script("pt_abandon")
PT_RECONCILE = load_script("pt_reconcile")

# --- any write: reconciling a lost reply ---------------------------------------------
RECONCILE = load_script("reconcile")

# --- conversations (KEYS: every key of one conversation, keys.CONV_PARTS order) -------
CONV_APPEND = load_script("conv_append")
CONV_STATUS = load_script("conv_status")
CONV_TITLE = load_script("conv_title")
CONV_METADATA = load_script("conv_metadata")
CONV_SHARE = load_script("conv_share")
CONV_TRUNCATE = load_script("conv_truncate")
CONV_BRANCH = load_script("conv_branch")
CONV_ERASE = load_script("conv_erase")
CONV_UPGRADE = load_script("conv_upgrade")

# --- conversation reads --------------------------------------------------------------
CONV_INFO = load_script("conv_info")
CONV_TRANSCRIPT = load_script("conv_transcript")
CONV_MESSAGES = load_script("conv_messages")
CONV_PREFIX = load_script("conv_prefix")

# --- cross-conversation indexes (slots of their own) ---------------------------------
IX_PAGE = load_script("ix_page")
IX_FIX = load_script("ix_fix")

# --- OAuth ---------------------------------------------------------------------------
HASH_SWAP = load_script("hash_swap")

ALL_SCRIPTS: tuple[Script, ...] = (
    SV_CAS,
    SV_CAS_MANY,
    SV_READ,
    SV_DELETE,
    REC_PUT,
    REC_READ,
    REC_DELETE,
    ST_SAVE,
    ST_LOAD,
    ST_DELETE,
    PT_PUT,
    PT_CLAIM,
    PT_ABANDON,
    PT_RECONCILE,
    RECONCILE,
    CONV_APPEND,
    CONV_STATUS,
    CONV_TITLE,
    CONV_METADATA,
    CONV_SHARE,
    CONV_TRUNCATE,
    CONV_BRANCH,
    CONV_ERASE,
    CONV_UPGRADE,
    CONV_INFO,
    CONV_TRANSCRIPT,
    CONV_MESSAGES,
    CONV_PREFIX,
    IX_PAGE,
    IX_FIX,
    HASH_SWAP,
)

__all__ = ["ALL_SCRIPTS", "load_script"]
