"""Pydantic AI's own message-history tests, run against agentstores-pydantic-ai on every
backend.

The tests are not in any package: ``$AGENTSTORES_PYDANTIC_AI_SRC`` names a checkout of
pydantic/pydantic-ai (its ``tests/`` folder as the repository has it). Its modules
:data:`MODULES` are loaded from there, unchanged but for one name: the
``ModelMessagesTypeAdapter`` they round-trip message lists through is, in this run, the
adapter with each list passed through the bridge (stored with
``AgentStoresHistory.append``, loaded back with ``load``) before it is dumped and after it
is validated. So every history those tests build and check went through a store and back.

Their ``conftest.py`` is not loaded (it needs their recording and HTTP fixtures); the few
helpers the modules import from it are provided here. Tests that cannot run here are
listed in :data:`NOT_APPLICABLE` with the reason, and not collected.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib.util
import os
import sys
import threading
import types
import uuid
from collections.abc import Callable, Coroutine, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pydantic_ai import messages as pai_messages

from agentstores import Stores
from agentstores_pydantic_ai import AgentStoresHistory
from tests.servers.backends import BACKENDS, Servers, fresh_tenant

T = TypeVar("T")
SOURCE_ENV = "AGENTSTORES_PYDANTIC_AI_SRC"
PACKAGE = "pydantic_ai_peer_tests"
MODULES = (
    "test_messages",
    "test_include_binary_content",
    "test_sanitize_messages",
)
"""Modules of the checkout that round-trip histories through the adapter. Not these: its
``test_transcript_repair`` imports a private name 2.78 no longer has (it cannot load), and
``test_run_cancellation`` checks how runs end, not stored histories, through
inline-snapshot's own plugin, whose report cannot name a file outside this project."""

DRIFT = (
    "fails the same on Pydantic AI's own adapter with no store in between: the newest "
    "public checkout (v2.33.0) expects what 2.33 dumped, and the locked 2.78.0 dumps more "
    "fields (model_id, cache_write_1h_tokens, ...) or infers media types differently"
)
WARNING = (
    "fails the same on Pydantic AI's own adapter with no store in between: it expects the "
    "wording of a warning 2.33 gave, and 2.78 words it otherwise"
)
LOGFIRE = "needs the logfire capture fixture (capfire) of their conftest: it checks spans"
OPENAI = "needs the openai package (their skipif): it checks OpenAI's request mapping"
NOT_APPLICABLE: dict[str, str] = {
    "test_messages.test_document_url_invalid": DRIFT,
    "test_messages.test_url_with_query_parameters": DRIFT,
    "test_messages.test_pre_usage_refactor_messages_deserializable": DRIFT,
    "test_messages.test_usage_arbitrary_fields_serialization_roundtrip": DRIFT,
    "test_messages.test_file_part_serialization_roundtrip": DRIFT,
    "test_messages.test_deferred_tool_events_serialization_roundtrip": DRIFT,
    "test_messages.test_tool_return_content_with_explicit_image_url": DRIFT,
    "test_messages.test_tool_return_content_nested_multimodal": DRIFT,
    "test_messages.test_tool_return_part_model_response_str_and_user_content": DRIFT,
    "test_messages.test_args_as_json_str_valid_json_verbatim": DRIFT,
    "test_messages.test_speech_part_serialization_roundtrip": DRIFT,
    "test_messages.test_openai_mapping_of_prepared_speech_history": OPENAI,
    "test_messages.test_unprepared_speech_history_raises": OPENAI,
    "test_include_binary_content.test_redacted_shapes_keep_every_field_but_the_data": DRIFT,
    "test_sanitize_messages.test_sanitize_messages_strips_client_system_prompts": WARNING,
    "test_sanitize_messages.test_sanitize_messages_keeps_resolved_call_exposed_by_dropped_tail": (
        WARNING
    ),
    "test_include_binary_content.test_binary_content_omitted_from_span_attribute": LOGFIRE,
    "test_include_binary_content.test_self_referential_output_is_recorded_without_its_binary": (
        LOGFIRE
    ),
    "test_include_binary_content.test_output_the_walk_cannot_traverse_does_not_crash_the_run": (
        LOGFIRE
    ),
    "test_include_binary_content."
    "test_the_walks_own_failure_does_not_report_a_binary_carrying_message": LOGFIRE,
    "test_include_binary_content.test_binary_nested_in_a_user_type_is_not_redacted": LOGFIRE,
    "test_include_binary_content.test_redacted_tool_return_keeps_the_tools_it_made_available": (
        LOGFIRE
    ),
}
"""``module.test`` -> why it is not run here (also listed in the bridge's README)."""
NOT_APPLICABLE_CASES: dict[str, tuple[str, set[str], str]] = {
    "test_messages.test_tool_return_dict_unhashable_kind_stays_mapping": (
        "kind",
        {"kind-bytearray"},
        "validates a Python bytearray inside a tool return's free-form content, which only "
        "the adapter's Python mode keeps: JSON (the adapter's own dump_json, so any store) "
        "turns it into a string",
    ),
}
"""Parametrized cases not run here: ``module.test`` -> (argument, case ids, why)."""

REAL = pai_messages.ModelMessagesTypeAdapter


# --- the bridge, from synchronous code ---------------------------------------------------


class BridgeLoop:
    """Stores on one backend, opened on an event loop of their own in a thread, so the
    (mostly synchronous) peer tests can pass histories through the bridge."""

    def __init__(self, servers: Servers, backend: str) -> None:
        # A server starts outside any event loop (a test's may be running here).
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(servers.url, backend).result()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self._stack = contextlib.AsyncExitStack()
        self.stores: Stores = self.call(self._stack.enter_async_context(servers.open(backend)))
        self.history = AgentStoresHistory(self.stores, tenant=fresh_tenant(), principal="peer")
        self.round_trips = 0

    def call(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout=60)

    def round_trip(self, messages: Sequence[pai_messages.ModelMessage]) -> list[Any]:
        """``messages`` stored as a new session's history and loaded back."""

        async def through() -> list[Any]:
            session = uuid.uuid4().hex
            start = await self.history.load(session)
            await self.history.append(session, list(messages), after=start)
            return list(await self.history.load(session))

        self.round_trips += 1
        return self.call(through())

    def close(self) -> None:
        self.call(self._stack.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class BridgedAdapter:
    """``ModelMessagesTypeAdapter`` whose message lists go through the bridge: a dump
    stores the list and dumps what loads back; a validation stores what it validated and
    returns what loads back. Everything else is the real adapter's."""

    bridge: BridgeLoop | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(REAL, name)

    def _through(self, messages: Any) -> Any:
        if self.bridge is None or not isinstance(messages, list) or not messages:
            return messages
        return self.bridge.round_trip(messages)

    def validate_python(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        return self._through(REAL.validate_python(data, *args, **kwargs))

    def validate_json(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        return self._through(REAL.validate_json(data, *args, **kwargs))

    def validate_strings(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        return self._through(REAL.validate_strings(data, *args, **kwargs))

    def dump_python(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return REAL.dump_python(self._through(messages), *args, **kwargs)

    def dump_json(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return REAL.dump_json(self._through(messages), *args, **kwargs)


ADAPTER = BridgedAdapter()


# --- the peer's modules, loaded from the checkout -----------------------------------------


@contextlib.contextmanager
def _try_import() -> Generator[Callable[[], bool]]:
    done = False
    try:
        yield lambda: done
    except ImportError:
        pass
    else:
        done = True


def _message(messages: Sequence[Any], message_type: type[T], *, index: int = 0) -> T:
    found = messages[index]
    assert isinstance(found, message_type)
    return found


def _message_part(
    messages: Sequence[Any], part_type: type[T], *, message_index: int = 0, part_index: int = 0
) -> T:
    found = messages[message_index].parts[part_index]
    assert isinstance(found, part_type)
    return found


def _iter_message_parts(
    messages: Sequence[Any], message_type: type[Any], part_type: type[T]
) -> Iterator[T]:
    for found in messages:
        if isinstance(found, message_type):
            yield from (part for part in found.parts if isinstance(part, part_type))


def _conftest_stand_in() -> types.ModuleType:
    """What the modules import from the peer's ``conftest.py``."""
    from dirty_equals import IsDatetime, IsNow, IsStr

    class IsSameStr(IsStr):  # type: ignore[misc]
        """A string, the same one at every place it is used."""

        first: str | None = None

        def equals(self, other: Any) -> bool:
            if self.first is None:
                if not super().equals(other):
                    return False
                self.first = other
            return bool(other == self.first)

    module = types.ModuleType(f"{PACKAGE}.conftest")
    module.IsDatetime = IsDatetime  # type: ignore[attr-defined]
    module.IsNow = IsNow  # type: ignore[attr-defined]
    module.IsStr = IsStr  # type: ignore[attr-defined]
    module.IsSameStr = IsSameStr  # type: ignore[attr-defined]
    module.iter_message_parts = _iter_message_parts  # type: ignore[attr-defined]
    module.try_import = _try_import  # type: ignore[attr-defined]
    module.message = _message  # type: ignore[attr-defined]
    module.message_part = _message_part  # type: ignore[attr-defined]
    return module


def _source() -> Path:
    root = os.environ.get(SOURCE_ENV)
    if not root:
        raise RuntimeError(f"set ${SOURCE_ENV} to a checkout of pydantic/pydantic-ai")
    tests = Path(root) / "tests"
    if not (tests / "test_messages.py").is_file():
        raise RuntimeError(f"${SOURCE_ENV}={root} holds no tests/test_messages.py")
    return tests


def _load(tests: Path, name: str) -> types.ModuleType:
    if PACKAGE not in sys.modules:
        package = types.ModuleType(PACKAGE)
        package.__path__ = [str(tests)]
        sys.modules[PACKAGE] = package
        sys.modules[f"{PACKAGE}.conftest"] = _conftest_stand_in()
    spec = importlib.util.spec_from_file_location(f"{PACKAGE}.{name}", tests / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.ModelMessagesTypeAdapter = ADAPTER  # type: ignore[attr-defined]  # the one change
    return module


def _without_cases(test: Any, argument: str, ids: set[str]) -> Any:
    """A copy of ``test`` whose parametrization of ``argument`` leaves out the cases ``ids``."""
    copy = types.FunctionType(
        test.__code__, test.__globals__, test.__name__, test.__defaults__, test.__closure__
    )
    copy.__dict__.update(test.__dict__)
    marks = []
    for mark in test.pytestmark:
        if mark.name == "parametrize" and mark.args[0] == argument:
            kept = [case for case in mark.args[1] if getattr(case, "id", None) not in ids]
            assert len(kept) == len(mark.args[1]) - len(ids), f"{test.__name__}: {ids}"
            mark = pytest.mark.parametrize(argument, kept, **mark.kwargs).mark
        marks.append(mark)
    copy.pytestmark = marks
    return copy


def _collect() -> dict[str, Any]:
    tests = _source()
    found: dict[str, Any] = {}
    listed = {*NOT_APPLICABLE, *NOT_APPLICABLE_CASES}
    for name in MODULES:
        module = _load(tests, name)
        missing = [
            t for t in listed if t.startswith(f"{name}.") and t[len(name) + 1 :] not in vars(module)
        ]
        assert not missing, f"not in the checkout: {missing}"
        for attr, value in vars(module).items():
            if not attr.startswith("test_") or not callable(value):
                continue
            if f"{name}.{attr}" in NOT_APPLICABLE:
                continue
            if f"{name}.{attr}" in NOT_APPLICABLE_CASES:
                value = _without_cases(value, *NOT_APPLICABLE_CASES[f"{name}.{attr}"][:2])
            found[f"test_{name.removeprefix('test_')}__{attr.removeprefix('test_')}"] = value
    return found


PEER_TESTS = _collect()
globals().update(PEER_TESTS)


@pytest.fixture(scope="module", params=BACKENDS)
def bridged(request: pytest.FixtureRequest, bridge_servers: Servers) -> Iterator[BridgeLoop]:
    bridge = BridgeLoop(bridge_servers, str(request.param))
    try:
        yield bridge
    finally:
        bridge.close()


@pytest.fixture
def tiny_audio() -> pai_messages.BinaryContent:
    """A few bytes of audio (their conftest's fixture of that name)."""
    return pai_messages.BinaryContent(data=b"\x10\x11\x12", media_type="audio/mpeg")


@pytest.fixture(autouse=True)
def through_the_bridge(bridged: BridgeLoop) -> Iterator[None]:
    """Every peer test here runs with the adapter's lists going through ``bridged``."""
    ADAPTER.bridge = bridged
    try:
        yield
    finally:
        ADAPTER.bridge = None


def test_the_peer_tests_are_here_and_go_through_the_bridge(bridged: BridgeLoop) -> None:
    """The checkout's modules were found, and their round trips reach the store."""
    assert len(PEER_TESTS) > 50
    before = bridged.round_trips
    message = pai_messages.ModelRequest([pai_messages.UserPromptPart("hi")])
    assert ADAPTER.validate_json(REAL.dump_json([message])) == [message]
    assert bridged.round_trips == before + 1
