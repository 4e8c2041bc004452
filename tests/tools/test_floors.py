"""Finding a backend's raw floor: the project's own by name, a third party's through the
``agentstores.floors`` entry-point group (neither core nor the tools know it), and a clear
refusal when a floor's adapter is not installed or two distributions claim one backend."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import pytest

from agentstores.errors import UsageError
from agentstores_tools.bench.floor import FLOOR_GROUP, FLOORS, floor_path, load_floor
from agentstores_tools.floors.memory import MemoryFloor
from tests.core._support import make_plugin_dir, run_python

GOOD_FLOOR = """
    from agentstores_tools.floors.memory import MemoryFloor

    class GoodFloor(MemoryFloor):
        name = "the good backend's own floor"
"""


def _declare_floors(root: Path, dist: str, floors: dict[str, str]) -> None:
    """A distribution ``dist`` on ``root`` declaring ``floors`` (backend -> path)."""
    info = root / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = [f"[{FLOOR_GROUP}]"] + [f"{name} = {path}" for name, path in floors.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


def test_every_floor_of_the_project_is_a_module_of_the_tools() -> None:
    for backend, path in FLOORS.items():
        module, _, attr = path.partition(":")
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None, path
        assert module == f"agentstores_tools.floors.{backend}"
        assert f"class {attr}(RawFloor):" in Path(spec.origin).read_text(), path


def test_a_floor_is_found_by_its_backends_name() -> None:
    assert floor_path("memory") == "agentstores_tools.floors.memory:MemoryFloor"
    assert isinstance(load_floor("memory"), MemoryFloor)
    assert floor_path("nothing") is None and load_floor("nothing") is None


def test_a_third_party_floor_is_found_through_the_entry_point_group(tmp_path: Path) -> None:
    """The ``good`` backend and its floor come from a distribution core and the tools
    have never heard of; the bench measures the adapter beside that floor."""
    root = make_plugin_dir(tmp_path)
    (root / "good_floor.py").write_text(textwrap.dedent(GOOD_FLOOR))
    _declare_floors(root, "thirdparty_good_bench", {"good": "good_floor:GoodFloor"})
    args = ["bench", "--url", "good://bench", "--clients", "1", "--seconds", "0.1"]
    args += ["--warmup", "0.01", "--rounds", "1", "--ops", "cas", "--lengths", "none"]
    args += ["--json", "--quiet"]
    out = run_python(
        f"from agentstores.cli import main; raise SystemExit(main({args!r}))", path=root
    )
    # Exit 1 would be a failed operation; 0 here although other plugins there are broken.
    assert out.returncode == 0, out.stderr
    (run,) = json.loads(out.stdout)["runs"]
    assert run["backend"] == "good" and run["floor"]["name"] == "the good backend's own floor"
    assert run["floor"]["cas"]["ops"] > 0


def test_two_floors_for_one_backend_are_refused(tmp_path: Path) -> None:
    _declare_floors(tmp_path, "one", {"good": "one:Floor"})
    _declare_floors(tmp_path, "two", {"good": "two:Floor"})
    code = """
        from agentstores.errors import UsageError
        from agentstores_tools.bench.floor import floor_path
        try:
            floor_path("good")
        except UsageError as exc:
            print(exc)
    """
    out = run_python(code, path=tmp_path)
    assert "more than one floor is declared for backend 'good'" in out.stdout, out.stderr
    assert "one:Floor, two:Floor" in out.stdout


def test_the_floor_of_an_adapter_that_is_not_installed_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "agentstores_tools.floors.postgres", raising=False)
    monkeypatch.setitem(sys.modules, "agentstores_postgres", None)  # "not installed"
    with pytest.raises(UsageError, match="pip install agentstores-postgres") as caught:
        load_floor("postgres")
    assert "agentstores_tools.floors.postgres:PostgresFloor needs agentstores_postgres" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("path", "refusal"),
    [
        ("agentstores_tools.bench.floor", "must be named 'module:callable'"),
        ("agentstores_tools.bench.floor:NO_SUCH_FLOOR", "names no callable"),
        ("agentstores_tools.bench.floor:FLOOR_GROUP", "names no callable"),
        ("builtins:dict", "returned dict, not a RawFloor"),
    ],
)
def test_a_floor_path_that_makes_no_raw_floor_is_refused(
    monkeypatch: pytest.MonkeyPatch, path: str, refusal: str
) -> None:
    monkeypatch.setitem(FLOORS, "memory", path)
    with pytest.raises(UsageError, match=refusal):
        load_floor("memory")
