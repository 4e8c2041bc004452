"""What each shipped distribution is, read from its pyproject: name, version, package, files."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = (
    "packages/agentstores",
    "packages/agentstores-file",
    "packages/agentstores-postgres",
    "packages/agentstores-redis",
    "packages/agentstores-mongo",
    "packages/agentstores-s3",
    "packages/agentstores-langgraph",
    "packages/agentstores-zav",
    "packages/agentstores-openai-agents",
    "packages/agentstores-adk",
    "packages/agentstores-pydantic-ai",
    "packages/agentstores-tools",
    "packages/agentstores-asgi",
    "contract_tests",
)
"""Every distribution that ships (the template is copied, never installed from an index)."""


@dataclass(frozen=True)
class Distribution:
    """One distribution's source tree and the artifact names its build must produce."""

    path: Path
    name: str
    version: str
    package: str
    """The import package, e.g. ``agentstores_file``."""

    @classmethod
    def load(cls, path: str | Path) -> Distribution:
        path = ROOT / path
        data = tomllib.loads((path / "pyproject.toml").read_text())
        (src,) = data["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
        project = data["project"]
        return cls(path, project["name"], project["version"], Path(src).name)

    @property
    def stem(self) -> str:
        """The normalized name artifacts start with (PEP 625 / wheel names)."""
        return re.sub(r"[-_.]+", "_", self.name).lower()

    @property
    def wheel_name(self) -> str:
        """The wheel's file name: pure Python, any platform."""
        return f"{self.stem}-{self.version}-py3-none-any.whl"

    @property
    def sdist_name(self) -> str:
        """The sdist's file name."""
        return f"{self.stem}-{self.version}.tar.gz"

    def source_files(self) -> list[str]:
        """Every file of the import package, relative to ``src/`` (what the wheel must hold)."""
        src = self.path / "src"
        return sorted(
            p.relative_to(src).as_posix()
            for p in (src / self.package).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        )
