"""Look inside built artifacts: ``python -m tests.wheels.contents DIST_DIR DISTRIBUTION...``.

twine checks the metadata renders; this checks what it does not: that each wheel holds
every file of its package (SQL migrations, Lua scripts, ``py.typed``), the LICENSE the
metadata claims, and that each sdist holds what rebuilding the wheel needs. It also keeps
tooling where it belongs: core's wheel holds no bench or drill code, and no wheel but
the tools' own imports them, so a runtime install carries none of it.
"""

from __future__ import annotations

import ast
import sys
import tarfile
import zipfile
from email.parser import Parser
from pathlib import Path, PurePosixPath

from tests.wheels.distributions import Distribution

TOOLS = "agentstores-tools"
"""The distribution that holds the tooling (bench, drill, raw floors)."""
TOOLING_PARTS = {"bench", "drill", "floor", "floors"}
"""Path parts (``.py`` stems included) of tooling code, refused in core's wheel."""
TOOLING_MODULES = ("agentstores_tools", "agentstores.bench", "agentstores.drill")
"""Modules whose import makes a wheel carry tooling."""


def imports(source: str) -> set[str]:
    """Every module ``source`` imports (absolute imports; relative ones stay in-package)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def is_tooling(module: str) -> bool:
    """Whether ``module`` is one of :data:`TOOLING_MODULES` or inside one."""
    return any(module == t or module.startswith(f"{t}.") for t in TOOLING_MODULES)


def tooling_problems(dist: Distribution, wheel: str, files: dict[str, str]) -> list[str]:
    """Tooling found where it must not be: a bench or drill module in core's wheel, or
    any wheel but the tools' own importing tooling. ``files`` maps each ``.py`` file
    of the wheel to its source."""
    if dist.name == TOOLS:
        return []
    problems: list[str] = []
    for name, source in sorted(files.items()):
        path = PurePosixPath(name)
        parts = {*path.parts[:-1], path.stem}
        if dist.name == "agentstores" and parts & TOOLING_PARTS:
            problems.append(f"{wheel}: {name} is tooling, which belongs in {TOOLS}")
        used = sorted(m for m in imports(source) if is_tooling(m))
        if used:
            problems.append(f"{wheel}: {name} imports tooling ({', '.join(used)})")
    return problems


def wheel_problems(dist: Distribution, wheel: Path) -> list[str]:
    """What is wrong with ``wheel``, a build of ``dist``."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = f"{dist.stem}-{dist.version}.dist-info"
        metadata = Parser().parsestr(zf.read(f"{info}/METADATA").decode())
        sources = {n: zf.read(n).decode() for n in names if n.endswith(".py")}
    problems = [
        f"{wheel.name}: {name} missing"
        for name in [*dist.source_files(), f"{dist.package}/py.typed", f"{info}/licenses/LICENSE"]
        if name not in names
    ]
    problems += tooling_problems(dist, wheel.name, sources)
    if metadata.get("License-Expression") != "Apache-2.0":
        problems.append(f"{wheel.name}: License-Expression is {metadata.get('License-Expression')}")
    if not metadata.get_all("Project-URL"):
        problems.append(f"{wheel.name}: no Project-URL")
    if not metadata.get("Requires-Python"):
        problems.append(f"{wheel.name}: no Requires-Python")
    return problems


def sdist_problems(dist: Distribution, sdist: Path) -> list[str]:
    """What is wrong with ``sdist``, a source archive of ``dist``."""
    top = f"{dist.stem}-{dist.version}"
    with tarfile.open(sdist) as tf:
        names = set(tf.getnames())
    wanted = ["pyproject.toml", "README.md", "LICENSE", "PKG-INFO"]
    wanted += [f"src/{name}" for name in dist.source_files()]
    return [f"{sdist.name}: {name} missing" for name in wanted if f"{top}/{name}" not in names]


def problems(dist_dir: Path, paths: list[str]) -> list[str]:
    """Every problem with the artifacts in ``dist_dir`` of the distributions at ``paths``."""
    found: list[str] = []
    expected: set[str] = set()
    for path in paths:
        dist = Distribution.load(path)
        expected |= {dist.wheel_name, dist.sdist_name}
        wheel, sdist = dist_dir / dist.wheel_name, dist_dir / dist.sdist_name
        for artifact, check in ((wheel, wheel_problems), (sdist, sdist_problems)):
            if artifact.exists():
                found += check(dist, artifact)
            else:
                found.append(f"{artifact.name} was not built")
    extra = sorted(p.name for p in dist_dir.iterdir() if p.name not in expected | {".gitignore"})
    found += [f"{name}: not a build of any distribution" for name in extra]
    return found


def main(argv: list[str]) -> int:
    """Print the problems found; exit 1 if there are any."""
    dist_dir, paths = Path(argv[0]), argv[1:]
    found = problems(dist_dir, paths)
    for line in found:
        print(line, file=sys.stderr)
    if not found:
        print(f"{dist_dir}: {2 * len(paths)} artifacts, each complete")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
