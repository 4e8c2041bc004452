"""The artifact checker of the build session finds what twine does not: a file left out."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

from tests.wheels.contents import TOOLS, problems, sdist_problems, wheel_problems
from tests.wheels.distributions import Distribution

POSTGRES = "packages/agentstores-postgres"
CORE = "packages/agentstores"
METADATA = (
    "Metadata-Version: 2.4\nName: agentstores-postgres\nVersion: 0.1.0\n"
    "Requires-Python: >=3.11,<3.14\nLicense-Expression: Apache-2.0\n"
    "Project-URL: Repository, https://example.invalid/repo\n"
)


def _wheel(
    tmp_path: Path, dist: Distribution, leave_out: str = "", add: dict[str, str] | None = None
) -> Path:
    info = f"{dist.stem}-{dist.version}.dist-info"
    path = tmp_path / dist.wheel_name
    with zipfile.ZipFile(path, "w") as zf:
        for name in [*dist.source_files(), f"{info}/licenses/LICENSE"]:
            if name != leave_out:
                zf.writestr(name, "x")
        for name, text in (add or {}).items():
            zf.writestr(name, text)
        zf.writestr(f"{info}/METADATA", METADATA)
    return path


def _sdist(tmp_path: Path, dist: Distribution, leave_out: str = "") -> Path:
    top = f"{dist.stem}-{dist.version}"
    path = tmp_path / dist.sdist_name
    names = ["pyproject.toml", "README.md", "LICENSE", "PKG-INFO"]
    names += [f"src/{name}" for name in dist.source_files()]
    with tarfile.open(path, "w:gz") as tf:
        for name in names:
            if name != leave_out:
                info = tarfile.TarInfo(f"{top}/{name}")
                info.size = 1
                tf.addfile(info, io.BytesIO(b"x"))
    return path


def test_complete_artifacts_pass(tmp_path: Path) -> None:
    dist = Distribution.load(POSTGRES)
    _wheel(tmp_path, dist)
    _sdist(tmp_path, dist)
    assert problems(tmp_path, [POSTGRES]) == []


def test_a_wheel_without_its_sql_migrations_is_caught(tmp_path: Path) -> None:
    dist = Distribution.load(POSTGRES)
    sql = next(name for name in dist.source_files() if name.endswith(".sql"))
    found = wheel_problems(dist, _wheel(tmp_path, dist, leave_out=sql))
    assert found == [f"{dist.wheel_name}: {sql} missing"]


def test_a_wheel_without_its_license_is_caught(tmp_path: Path) -> None:
    dist = Distribution.load(POSTGRES)
    license_file = f"{dist.stem}-{dist.version}.dist-info/licenses/LICENSE"
    found = wheel_problems(dist, _wheel(tmp_path, dist, leave_out=license_file))
    assert found == [f"{dist.wheel_name}: {license_file} missing"]


def test_an_sdist_without_its_license_is_caught(tmp_path: Path) -> None:
    dist = Distribution.load(POSTGRES)
    found = sdist_problems(dist, _sdist(tmp_path, dist, leave_out="LICENSE"))
    assert found == [f"{dist.sdist_name}: LICENSE missing"]


def test_a_missing_or_foreign_artifact_is_caught(tmp_path: Path) -> None:
    dist = Distribution.load(POSTGRES)
    _wheel(tmp_path, dist)
    (tmp_path / "stray-1.0.tar.gz").write_bytes(b"")
    assert problems(tmp_path, [POSTGRES]) == [
        f"{dist.sdist_name} was not built",
        "stray-1.0.tar.gz: not a build of any distribution",
    ]


def test_bench_or_drill_code_in_cores_wheel_is_caught(tmp_path: Path) -> None:
    dist = Distribution.load(CORE)
    added = {"agentstores/drill/runner.py": "import asyncio\n", "agentstores/cli/bench.py": ""}
    found = wheel_problems(dist, _wheel(tmp_path, dist, add=added))
    assert found == [
        f"{dist.wheel_name}: agentstores/cli/bench.py is tooling, which belongs in {TOOLS}",
        f"{dist.wheel_name}: agentstores/drill/runner.py is tooling, which belongs in {TOOLS}",
    ]


def test_an_adapter_wheel_importing_tooling_is_caught(tmp_path: Path) -> None:
    dist = Distribution.load(POSTGRES)
    floor = "from agentstores_tools.bench.floor import RawFloor\n"
    added = {"agentstores_postgres/floor.py": floor}
    found = wheel_problems(dist, _wheel(tmp_path, dist, add=added))
    assert found == [
        f"{dist.wheel_name}: agentstores_postgres/floor.py imports tooling "
        "(agentstores_tools.bench.floor, agentstores_tools.bench.floor.RawFloor)"
    ]


def test_the_tools_wheel_may_hold_and_import_tooling(tmp_path: Path) -> None:
    dist = Distribution.load("packages/agentstores-tools")
    assert any(name.startswith("agentstores_tools/drill/") for name in dist.source_files())
    added = {"agentstores_tools/extra.py": "from agentstores_tools.drill import run_drill\n"}
    assert wheel_problems(dist, _wheel(tmp_path, dist, add=added)) == []
