"""The promises the suite checks, by name. Every test carries ``@promise(name)``.

Names read ``area.subject[.detail]``; a failing test names its promise, so a report
says which sentence of the contract a backend breaks.
"""

from __future__ import annotations

from typing import Any

import pytest

_FENCED_WRITES = {
    "supervision.cas": "supervision.compare_and_swap (False)",
    "recording.put": "recording.put",
    "recording.delete": "recording.delete",
    "state.save": "state.save",
    "state.delete": "state.delete",
    "conversations.append": "conversations.append_messages",
    "conversations.append.lone": "conversations.append_messages of one tool message under "
    "a tail check (the shape an adapter may take a fast path for)",
    "conversations.set_last_turn_status": "conversations.set_last_turn_status",
    "conversations.set_title": "conversations.set_title",
    "conversations.set_metadata": "conversations.set_metadata",
    "conversations.truncate": "conversations.truncate",
    "pause_tokens.put": "pause_tokens.put",
}

_OWNED_WRITES = (
    "supervision.cas",
    "supervision.delete",
    "recording.put",
    "recording.delete",
    "state.save",
    "state.delete",
    "conversations.append",
    "conversations.set_last_turn_status",
    "conversations.set_title",
    "conversations.set_metadata",
    "conversations.share",
    "conversations.unshare",
    "conversations.truncate",
    "conversations.delete",
    "pause_tokens.put",
    "pause_tokens.claim",
    "pause_tokens.abandon",
)

_STORES = ("supervision", "recording", "state", "conversations", "pause_tokens")

PROMISES: dict[str, str] = {
    # keys
    "keys.validation": "empty, NUL-bearing and over-long ids raise InvalidKeyError in every store",
    "keys.max_length": "ids of exactly MAX_ID_BYTES bytes work in every store",
    "keys.isolation": "distinct keys (near-collisions included) never see each other's writes",
    "keys.tenant_scope": "a tenant's listing never includes another tenant's conversations",
    "keys.siblings": "a heartbeat, takeover, release or erasure of one key moves no other "
    "key's row, fence, pause tokens or messages (siblings in its tenant, its session id in "
    "another tenant, leased at the same epoch), and an owner's counts are per tenant",
    # two replicas
    "replicas.visibility": "every write through one bundle (claims, snapshots, state, "
    "messages, titles, metadata, shares, truncation, erasure, pause tokens, OAuth records) "
    "is what another bundle of the same store reads next, cleared fields included",
    # hostile input, refused with UsageError before any backend sees it
    "input.json_depth": "JSON nested deeper than MAX_JSON_DEPTH is a UsageError in every "
    "store that takes JSON and changes nothing; exactly that depth round-trips",
    "input.unicode": "a lone surrogate in any string (id, title, JSON key or value, "
    "metadata name, OAuth field) is a UsageError and changes nothing",
    "input.times": "a naive datetime, or one past either end of the UTC range, is a "
    "UsageError wherever a store takes one, and changes nothing",
    "input.cursor": "a forged listing cursor (numbers out of range, a bad session id, deep, "
    "huge or not JSON) is a UsageError",
    "input.sweep_rules": "a sweep rule out of range (OverCap.keep not an int in 0..2**63 - 1, "
    "IdleFor.duration not a timedelta in (0, MAX_IDLE]) is a UsageError and erases nothing",
    # URLs
    "urls.unknown_option": "a URL option the backend does not know is refused with UsageError "
    "naming it, when the bundle is made (before any connection)",
    # supervision
    "supervision.model": "supervision store behaves as the sequential model",
    "supervision.cas.create": "CAS expecting None creates once; expecting an epoch never creates",
    "supervision.delete.guarded": "delete removes the row only for its exact message_id and epoch",
    "supervision.cas.race": "of many concurrent CAS with one expectation exactly one wins",
    "supervision.linearizable": "concurrent CAS/read/delete histories are linearizable",
    "supervision.cas_many.rows": "compare_and_swap_many gives each row the outcome its single "
    "CAS would (swapped, lost, fenced, erased, NotOwnedError) and writes as it would",
    "supervision.cas_many.validation": "a malformed batch (or one key twice) is a UsageError "
    "and changes nothing",
    "supervision.cas_many.race": "of many concurrent batches with one expectation per key "
    "exactly one row per key wins",
    "supervision.cas_many.linearizable": "batch rows, single CAS and reads on one key are "
    "linearizable",
    # recording
    "recording.model": "recording store behaves as the sequential model",
    "recording.monotonic": "late flushes never roll the snapshot back",
    "recording.delete.guarded": "recording.delete removes the record only for its message_id",
    # state
    "state.model": "agent state store behaves as the sequential model",
    "state.large_blob": "8 MiB state blobs round-trip",
    "state.linearizable": "concurrent fenced saves and loads are linearizable",
    # conversations
    "conversations.model": "conversation store behaves as the sequential model",
    "conversations.content": "any JSON content and metadata round-trip, every role",
    "conversations.order": "seq counts from 0; created_at never goes backwards",
    "conversations.append.idempotent": "re-appending present ids is a no-op, before the tail check",
    "conversations.append.conditional": "a conditional append on a wrong tail is StaleWriteError",
    "conversations.append.batch": "a batch lands whole or not at all",
    "conversations.append.create_if_absent": (
        "create_if_absent=False on a missing key creates nothing"
    ),
    "conversations.append.total_size": "one append carries at most MAX_APPEND_BYTES of "
    "encoded content and metadata; one byte over is a UsageError and changes nothing",
    "conversations.append.race": "of concurrent appends on one expected tail exactly one wins",
    "conversations.append.no_lost_updates": "concurrent unconditional appends all land, in order",
    "conversations.append.idempotent_race": "one message id appended concurrently lands once",
    "conversations.linearizable": "concurrent conditional appends and tail reads are linearizable",
    "conversations.metadata": "conversation metadata follows the writes",
    "conversations.metadata.default": (
        "a conversation's metadata starts empty and is returned by get_conversation, "
        "list_conversations and the handle's info"
    ),
    "conversations.metadata.merge": (
        "set_metadata shallow-merges: named keys replaced, None removes a key, others kept; "
        "it moves updated_at"
    ),
    "conversations.metadata.append": (
        "append_messages(metadata=) merges in the same commit as the messages (the initial "
        "value on create); a refused or idempotent append changes none of it"
    ),
    "conversations.metadata.exact": (
        "metadata values keep every JSON type, number, key and character exactly"
    ),
    "conversations.metadata.limits": (
        "bad metadata (not a mapping, bad names, non-JSON values, over the byte limit, "
        "merged or not) is a UsageError and changes nothing; exactly the limit is accepted"
    ),
    "conversations.metadata.visibility": (
        "only the owner writes metadata; readers it is shared with see it, others see an "
        "absent conversation"
    ),
    "conversations.metadata.lifecycle": (
        "branch copies the metadata (then each side changes alone), truncate keeps it, "
        "erasure removes it"
    ),
    "conversations.metadata.durable": "metadata is there after the bundle is reopened",
    "conversations.metadata.ambient": (
        "set_metadata and append(metadata=) inside a lease carry its epoch and are fenced "
        "after a takeover"
    ),
    "conversations.long": "a transcript grown past every length the backend declares "
    "(transcript_thresholds, at least 128) in batches of every awkward size answers every "
    "read, re-append, conditional append, branch, truncate and erasure as the reference does",
    "conversations.speakers": "a message appended alone under a tail check is found by its "
    "speaker (recent, get_transcript by speaker and index), and a time window honours limit",
    "conversations.truncate": "truncate at a user message removes it; at others keeps it",
    "conversations.truncate.cut": (
        "truncate with cut='before' removes the message and all after, 'after' keeps it and "
        "removes all after, whatever its role; an unknown cut is a UsageError"
    ),
    "conversations.truncate.expected_tail": (
        "truncate with expected_tail on another tail is StaleWriteError naming the tail it "
        "found, checked after owner and fence and before the message, and removes nothing; "
        "on the current tail it cuts"
    ),
    "conversations.truncate.pop_race": (
        "pops (tail(1), then truncate(last, cut='before', expected_tail=last), again when "
        "stale) racing appends lose no appended message and remove each popped one once"
    ),
    "conversations.tail": (
        "tail gives the metadata and the last rows of any role, ending at its tail; None "
        "for an absent or invisible conversation"
    ),
    "conversations.tail.snapshot": (
        "tail under concurrent appends and truncates is always one snapshot: its rows are "
        "contiguous and end at the tail and count its metadata names"
    ),
    "conversations.branch": "branch copies the prefix with fresh ids into a caller-owned key",
    "conversations.history": "history starts at the latest compaction message",
    "conversations.recent": "recent gives the last user/assistant messages, oldest first",
    "conversations.list": "keyset listing: newest-updated first, no duplicates or misses",
    "conversations.sweep": "sweep rules match on the store clock and re-check at erase",
    "transcript.query": "get_transcript index/speaker/time range/limit semantics",
    "transcript.usage_errors": "index with time_range, or an unknown speaker, is a UsageError",
    # pause tokens
    "pause_tokens.model": "pause token store behaves as the sequential model",
    "pause_tokens.scoping": "tokens are scoped to key and owner; single use; abandon is final",
    "pause_tokens.claim_once": "of concurrent claims of one token exactly one gets the payload",
    # oauth
    "oauth.model": "OAuth repository behaves as last-write-wins CRUD",
    "oauth.pending_state": "find_by_pending_state finds across tenants and users",
    "oauth.isolation": "OAuth records of near-colliding tenants, users and servers stay apart",
    # fencing
    **{f"fencing.{name}": f"{what} refuses a stale epoch" for name, what in _FENCED_WRITES.items()},
    "fencing.cross_store": "an epoch written through any store fences every store of the key",
    "fencing.unfenced": "a write without epoch is neither checked nor raises the fence",
    "fencing.read_fence": "supervision.read reports the fence, kept after the row is deleted",
    # ownership and visibility
    **{f"ownership.{name}": f"{name} by a non-owner is refused" for name in _OWNED_WRITES},
    "ownership.claimed_elsewhere": "a key owned through one store refuses others in every store",
    **{
        f"visibility.{name}": f"{name} reads leak nothing to unshared principals"
        for name in _STORES
    },
    "visibility.listing": "listings show only the principal's own conversations",
    "sharing.read_only": "sharing grants reads only, and unsharing takes them back",
    # erasure
    "erasure.cascade": "delete removes every store's data for the key",
    "erasure.tombstone": "after erasure every late write is refused and reads stay absent",
    "erasure.absent": "deleting an absent key returns False and leaves no tombstone",
    "erasure.model": "all stores together, with erasure, behave as the sequential model",
    # races of multi-record operations
    "races.erasure.writes": (
        "erasure racing writes to every store is linearizable and leaves nothing behind"
    ),
    "races.truncate.appends": "truncate racing appends is linearizable; indexes stay consistent",
    "races.branch.source": "a branch racing source writes copies a prefix the source once had",
    "races.sweep.touch": "a sweep racing a touch never erases what the touch kept alive",
    "races.sharing.reads": "share and unshare racing the other principal's reads are linearizable",
    "multiprocess.erasure.appends": "erasure racing appends across OS processes leaves nothing",
    # multi-process
    "multiprocess.supervision.cas": "CAS across OS processes: exactly one winner per round",
    "multiprocess.conversations.append": "conditional appends across OS processes: one per tail",
    "durability.restart": "acknowledged writes are there after the writing process exits",
    # clock
    "clock.stamps": "stored times come from the store clock",
    "clock.expiry": "expiry is decided on the store clock",
    # generator regions and metadata side effects
    "principals.confusables": (
        "principals differing only by normalization, case, width or invisible characters "
        "are distinct owners and readers"
    ),
    "fencing.large_epochs": (
        "epochs and indexes up to 2**63 - 1 compare exactly in every store; beyond, UsageError"
    ),
    "json.exact": "JSON keeps every number's type and bits and every key, in every store",
    "conversations.updated_at": (
        "accepted writes move updated_at; reads, shares and refused writes leave it"
    ),
    "conversations.branch.metadata": (
        "a branch starts with fresh stamps, no shares, status or expiry; its source is unchanged"
    ),
    # lifetimes, on the store clock
    "lifetimes.tombstone": (
        "a tombstone refuses every late write in every store until tombstone_ttl has passed; "
        "from then on the key is used afresh"
    ),
    "lifetimes.pause_token": (
        "a pause token is claimable before expires_at and ExpiredError from it on; "
        "claimed or abandoned stays AlreadyClaimedError"
    ),
    "lifetimes.expired": "Expired() sweeps from the latest expires_at on, never before",
    "lifetimes.idle": "IdleFor(d) sweeps only once updated_at (the last write) < now - d",
    "lifetimes.oauth_pending": (
        "a pending OAuth authorization is live before expires_at and gone from it on"
    ),
    "lifetimes.liveness": (
        "a running turn is live while now - heartbeat_at <= dead_after, then taken over"
    ),
    # outcomes pinned by mutation testing
    "fencing.every_write": "every fenced write raises the key's fence to its epoch",
    "erasure.erased_error": (
        "a write on an erased key raises ErasedError, not a plain absence; its until is the "
        "erase time + tombstone_ttl (UTC, store clock) and its message names it"
    ),
    "erasure.default_lifetime": "a bundle opened without options keeps a tombstone for the "
    "documented default, DEFAULT_TOMBSTONE_TTL (30 days) on the store clock",
    "erasure.spares_others": "deleting a key erases what it has and no other key's data",
    "conversations.truncate_views": "after truncate, speaker views and recent hold what is left",
    "listing.last_page": "a listing's last page has no cursor",
    "conversations.branch_stamps": "a branch carries its own creation and update stamps",
    "sweep.over_cap_scope": "over-cap ranks one owner's conversations within one tenant",
    "visibility.supervision_now": "an invisible supervision read still reports the store clock",
    "oauth.filters": "OAuth listings keep to the named servers, sorted by server name",
    "upserts.replace": "a save replaces the whole record: what it leaves out or clears (a "
    "state or snapshot field, a client info entry, a token, a pending authorization or its "
    "resource, a title, a metadata name) reads back gone",
    "protocol.lease.bounds": "LeaseConfig refuses non-positive timings and counts",
    "protocol.lease.lost": "a lost lease keeps why, tells every on_lost callback, stops beating "
    "and refuses later calls",
    "protocol.lease.lifecycle": "seal, release, the context and run move a lease and its row as "
    "documented",
    "protocol.lease.writes": "a lease's writes reach the store under its key, principal and epoch",
    "protocol.sweep.bounds": "a Sweeper refuses empty batches and schedules, and runs its rules",
    "protocol.sweep.report": "a sweep report counts batches, erasures and survivors exactly",
    "protocol.sweep.schedule": "run_forever sweeps until stopped and records a failed sweep",
    # the turn protocol on the backend (protocol.py)
    "protocol.claim.exclusive": "of producers racing to claim one turn, at most one can write",
    "protocol.claim.busy": "a live turn refuses another message with BusyError naming it",
    "protocol.takeover.dead": "a producer silent past dead_after (store clock) is taken over "
    "at epoch+1",
    "protocol.heartbeat.refresh": "a heartbeat restamps heartbeat_at on the store clock",
    "protocol.heartbeat.lost": "a refused heartbeat stops the producer",
    "protocol.fencing.paused_producer": "a producer paused past a takeover lands no write "
    "in any store",
    "protocol.turn.stale_guard": "start_turn claims first; a wrong tail is StaleWriteError "
    "and releases the turn",
    "protocol.sweep.touched_survives": "a conversation touched mid-sweep survives it",
    "protocol.sweep.cascade": "the sweeper erases every store's data and leaves a tombstone",
    "protocol.rehydrate": "rehydrate gives the last N user/assistant turns that carry text, "
    "oldest first, skipping blank and tool-call-only messages",
    # the conversation handle and its turns (turns.py)
    "handle.reads": "a conversation handle reads, shares, truncates, branches and erases "
    "exactly what the store API does, as its principal",
    "protocol.turn.lifecycle": "a clean turn appends the user message and the streamed answer "
    "under its id, records complete, seals done and drops the recording",
    "protocol.turn.errored": "a turn that raises keeps the user message, records and seals "
    "errored and drops the recording",
    "protocol.turn.throttle": "a turn's stream and checkpoint write at most once per interval "
    "and flush the latest value when the interval ends",
    "handle.arguments": "every argument of a conversation handle's calls reaches the store",
    "protocol.turn.arguments": "conv.turn passes its title, expiry, tail, intervals and lease "
    "through, refuses bad ones, and a reply carries metadata and is appended once",
    "protocol.turn.ambient_epoch": "inside a turn, store writes without an epoch carry the "
    "lease's (tasks it starts too); after a takeover they are fenced and land nothing",
    # following a running turn (follow.py)
    "protocol.follow.catch_up": "a follower started at 0 mid-turn gets the message from its "
    "start, then only what is new, then the final answer",
    "protocol.follow.start_index": "a follower started at start_index jumps to the present: it "
    "yields only what lies beyond start_index",
    "protocol.follow.takeover": "a takeover mid-follow continues the stream without rollback, "
    "though the new producer resumes from an older checkpoint",
    "protocol.follow.done": "a follow of a turn sealed done ends done with the final transcript "
    "message, also when it started after the seal",
    "protocol.follow.errored": "a follow of a turn sealed errored ends errored",
    "protocol.follow.gone": "a follow ends gone with no turn, when the key is erased, and for a "
    "principal the key is not visible to",
    "protocol.follow.dead": "a follow of a producer dead past the grace, with no takeover, ends "
    "dead; its partial snapshot is streamed only with partial=True",
    "protocol.follow.arguments": "follow refuses a bad start_index, poll, safety_poll, "
    "dead_after, grace or message_id with a UsageError naming it (bools, infinities and NaN "
    "are not seconds)",
    "protocol.follow.counts": "FollowEnd counts each distinct snapshot behind the stream and each "
    "malformed or non-extending one once, however often it is polled; another message's "
    "snapshot is ignored",
    "protocol.follow.final_message": "the final message is found by id when it is not the "
    "transcript's tail, and its text is yielded at the epoch last seen (0 if none)",
    "protocol.follow.wakes": "a follower whose polls are far apart sees each snapshot, the "
    "seal and the final message at once: the write wakes it (a write through its own "
    "bundle always; through another bundle where the backend pushes, wakeups.remote)",
    "protocol.follow.faulty_wakeups": "wake-ups dropped, repeated, late or out of order "
    "change nothing a follower yields: every update extends the last, the text arrives "
    "whole, once, and the follow ends done with the final message",
}


def promise(name: str) -> pytest.MarkDecorator:
    """Mark a test (or a ``pytest.param``) with the promise it checks."""
    if name not in PROMISES:
        raise KeyError(f"unknown promise {name!r}")
    return pytest.mark.promise(name)


def promises_of(item: Any) -> list[str]:
    """The promise names on a collected test item."""
    return [m.args[0] for m in item.iter_markers("promise") if m.args]


def register_promise(name: str, description: str) -> str:
    """Add a promise of a contract area written outside this package (a third party's own
    mixin); this package's promises are all in :data:`PROMISES` above."""
    existing = PROMISES.setdefault(name, description)
    if existing != description:
        raise ValueError(f"promise {name!r} is already registered as {existing!r}")
    return name
