"""Assemble the mutation workspace: the package source, the test command, the config.

The workspace keeps the mutation tool's results between runs, so a run only tests the
mutants of functions that changed since the last one, plus every earlier survivor not
listed as equivalent (a new contract test may kill it now). ``--fresh`` deletes the
workspace first.

The verdicts also live in the repository (``tests/mutation/results/<target>.json``: each
function's source hash and its mutants' exit codes; ``--save`` writes it from the
workspace): a new clone's workspace starts from them, and the tool keeps a verdict only
while its function's hash is unchanged, so a full run spans several sittings.

Two targets, each with a workspace of its own: ``core`` (the reference backend and the
protocol layer, against memory://) and ``file`` (the files adapter's Python, against
file://, core installed unmutated beside it).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import hashlib
import json
import shutil
import tomllib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
"""Committed verdicts per target, which a fresh workspace starts from."""
SURVIVED = 0


@dataclass(frozen=True)
class Target:
    """What one mutation run mutates, and with which test module and config."""

    name: str
    workspace: Path
    package: Path
    """The package's source folder, copied to ``src/<its name>`` in the workspace."""
    suite: Path
    """The test command's only module, copied to ``tests/test_contract.py``."""
    config: Path
    """The mutation tool's config, copied to ``pyproject.toml``."""
    undecorate: frozenset[str] = frozenset()
    """Decorators applied after the definition instead (``f = deco(f)``) in the copy:
    the mutation tool leaves a decorated function unmutated, and the files adapter's
    store methods are all ``@off_loop`` (its read-modify-write helpers
    ``@contextmanager``). The same function object results, so behaviour is unchanged."""
    import_time: frozenset[str] = frozenset()
    """Module-level functions that run only while the package is imported, left unmutated
    (a ``no mutate block`` pragma in the copy): the tool chooses the mutant at call time,
    after the import, so their mutants could never be active."""
    adapter_tests: tuple[Path, ...] = ()
    """The adapter's own test modules (with their package's ``__init__``, ``conftest`` and
    helpers) run beside the contract suite, copied to ``tests/adapter/``: the promises
    only that backend has (crash points, layout, permissions, I/O counts), each fast."""
    server: str | None = None
    """A networked adapter's server (``tests/mutation/serve.py`` starts it once for the
    run). The workspace's ``tests`` is then a package, as in the repository: the server
    helpers go to ``tests/servers/`` and the adapter's own tests to ``tests/<name>/``
    (their conftest hands them the run's server: ``tests/servers/shared.py``)."""
    support: tuple[str, ...] = ()
    """What else the adapter's own tests import, each a file or folder relative to the
    repository, copied to the same place in the workspace (``tests/leaks.py``)."""


ADAPTER_CONFIG = HERE / "mutmut-adapter.toml"
"""Every adapter's mutation config, the package's name in place of ``$package``."""


def _networked(
    name: str,
    package: str,
    undecorate: frozenset[str] = frozenset(),
    import_time: frozenset[str] = frozenset(),
    own_tests: tuple[str, ...] = (),
    helpers: tuple[str, ...] = (),
    support: tuple[str, ...] = (),
) -> Target:
    """A networked adapter: the contract suite against the server the run starts, and
    ``own_tests`` (modules of ``tests/<name>``, each needing one plain server only, with
    the folder's package files, conftest, ``helpers`` (modules beside them) and the
    scripts its tests read; ``undecorate``, ``import_time``, ``support``: see
    :class:`Target`)."""
    folder = ROOT / "tests" / name
    helpers = ("__init__.py", "conftest.py", *helpers) if own_tests else ()
    data = tuple(path.name for path in folder.iterdir() if path.suffix in (".lua", ".sql"))
    return Target(
        name,
        ROOT / f".mutation-{name}",
        ROOT / "packages" / f"agentstores-{name}" / "src" / package,
        HERE / "network_suite_under_mutation.py",
        ADAPTER_CONFIG,
        undecorate,
        import_time,
        adapter_tests=tuple(folder / file for file in (*helpers, *data, *own_tests)),
        server=name,
        support=support,
    )


FILE_TESTS_LEFT_OUT = {
    "test_contract.py": "the workspace runs the contract suite through its own module",
    "test_crash_loop.py": "SIGKILL rounds of about 30 s with random kill moments; the "
    "crash points test stops every write at each of its steps in-process instead",
    "test_race.py": "its workers start as the repository's ``tests.file._worker`` and race "
    "the catalogue's broken variants, neither of which the workspace holds; the suite's "
    "multi-process promises race processes on the mutated package instead",
}
"""The files adapter's test modules a mutant is not run against, and why: every other
``test_*.py`` of ``tests/file`` is, so a new test module cannot be forgotten."""


def _own_tests(folder: Path, left_out: dict[str, str]) -> tuple[str, ...]:
    """Every test module of ``folder`` but those ``left_out`` names."""
    missing = set(left_out) - {path.name for path in folder.glob("test_*.py")}
    if missing:
        raise SystemExit(f"left out but not in {folder}: {sorted(missing)}")
    return tuple(sorted(p.name for p in folder.glob("test_*.py") if p.name not in left_out))


TARGETS = {
    "core": Target(
        "core",
        ROOT / ".mutation",
        ROOT / "packages" / "agentstores" / "src" / "agentstores",
        HERE / "suite_under_mutation.py",
        HERE / "mutmut.toml",
    ),
    "file": Target(
        "file",
        ROOT / ".mutation-file",
        ROOT / "packages" / "agentstores-file" / "src" / "agentstores_file",
        HERE / "file_suite_under_mutation.py",
        ADAPTER_CONFIG,
        frozenset({"off_loop", "contextmanager"}),
        frozenset({"off_loop", "_make_encode", "_load_syncfs"}),
        tuple(
            ROOT / "tests" / "file" / name
            for name in (
                "__init__.py",
                "conftest.py",
                "_verify.py",
                *_own_tests(ROOT / "tests" / "file", FILE_TESTS_LEFT_OUT),
            )
        ),
    ),
    "postgres": _networked(
        "postgres",
        "agentstores_postgres",
        import_time=frozenset({"_load"}),  # the shipped SQL, read once: DEFINITIONS, STEPS
        own_tests=(
            "test_append_paths.py",
            "test_cli_check.py",
            "test_connect_and_translate.py",
            "test_erasure.py",
            "test_faults.py",
            "test_fence.py",
            "test_held_connections.py",
            "test_install.py",
            "test_push.py",
            "test_reconcile.py",
            "test_secrets.py",
        ),
        helpers=("faultproxy.py",),
        support=("tests/leaks.py", "tests/postgres/previous_layout"),
    ),
    "redis": _networked(
        "redis",
        "agentstores_redis",
        import_time=frozenset({"load_script"}),  # lua.py's module-level Script objects
        own_tests=(
            "test_redis_client_paths.py",
            "test_redis_clock.py",
            "test_redis_decoding.py",
            "test_redis_faults.py",
            "test_redis_indexes.py",
            "test_redis_keys.py",
            "test_redis_layout.py",
            "test_redis_packing.py",
            "test_redis_push_link.py",
            "test_redis_scripts.py",
            "test_redis_secrets.py",
            "test_redis_store_edges.py",
            "test_redis_unencodable.py",
        ),
        helpers=("helpers.py",),
        support=("tests/leaks.py",),
    ),
    "mongo": _networked(
        "mongo",
        "agentstores_mongo",
        frozenset({"resent", "snapshot_read"}),
        frozenset({"resent", "snapshot_read"}),  # decorators: applied while importing
        own_tests=(
            "test_mongo_erasure.py",
            "test_mongo_fairness.py",
            "test_mongo_faults.py",
            "test_mongo_push.py",
            "test_mongo_races.py",
            "test_mongo_schema.py",
            "test_mongo_secrets.py",
            "test_mongo_snapshot_reads.py",
            "test_mongo_supervision_row.py",
        ),
        helpers=("faultproxy.py",),
        support=("tests/leaks.py", "tests/tombstone_ttls.py"),
    ),
    "s3": _networked(
        "s3",
        "agentstores_s3",
        frozenset({"off_loop"}),
        frozenset({"off_loop"}),  # a decorator: applied while importing
        own_tests=(
            "test_s3_erasure.py",
            "test_s3_expect.py",
            "test_s3_faults.py",
            "test_s3_guesses.py",
            "test_s3_if_match.py",
            "test_s3_large_state.py",
            "test_s3_pause_tokens.py",
            "test_s3_runner.py",
            "test_s3_secrets.py",
        ),
        support=("tests/leaks.py", "tests/tombstone_ttls.py"),
    ),
}
WORKSPACE = TARGETS["core"].workspace
PACKAGE = TARGETS["core"].package


def _sync_file(source: Path, target: Path, prepare: Target | None = None) -> bool:
    """Copy when the content differs (whether it did); the fresh mtime marks the file for
    re-mutation. ``prepare``: the target whose rewrites a Python file gets on its way."""
    content = source.read_bytes()
    if prepare is not None and source.suffix == ".py":
        text = undecorated(content.decode(), prepare.undecorate)
        content = unmutated(text, prepare.import_time).encode()
    if target.exists() and target.read_bytes() == content:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    return True


def _sync_text(text: str, target: Path) -> None:
    if not target.exists() or target.read_text() != text:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def undecorated(source: str, names: frozenset[str]) -> str:
    """``source`` with every function whose decorators are all bare names among ``names``
    defined undecorated and rebound right after its body: ``f = a(b(f))`` for ``@a`` over
    ``@b``, which is what the decorator lines do. Each decorator's line becomes a comment,
    so the function's lines keep their numbers."""
    lines = source.splitlines(keepends=True)
    edits: list[tuple[list[int], int, list[str], str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.decorator_list:
            continue
        decorators = node.decorator_list
        if all(isinstance(d, ast.Name) and d.id in names for d in decorators):
            assert node.end_lineno is not None
            applied = [d.id for d in decorators if isinstance(d, ast.Name)]
            edits.append(([d.lineno for d in decorators], node.end_lineno, applied, node.name))
    for deco_lines, end, applied, function in sorted(edits, key=lambda e: e[1], reverse=True):
        first = lines[deco_lines[0] - 1]
        indent = first[: len(first) - len(first.lstrip())]
        call = function
        for name in reversed(applied):
            call = f"{name}({call})"
        lines.insert(end, f"{indent}{function} = {call}\n")
        for line, name in zip(deco_lines, applied, strict=True):
            lines[line - 1] = f"{indent}# @{name}: applied below\n"
    return "".join(lines)


def unmutated(source: str, names: frozenset[str]) -> str:
    """``source`` with the module-level functions ``names`` marked for the mutation tool to
    leave alone (the pragma ends the line of the signature's colon)."""
    lines = source.splitlines(keepends=True)
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            colon = node.body[0].lineno - 2
            assert lines[colon].rstrip().endswith(":"), (node.name, lines[colon])
            lines[colon] = lines[colon].rstrip() + "  # pragma: no mutate block\n"
    return "".join(lines)


def _sync_tree(source: Path, target: Path, prepare: Target | None = None) -> None:
    wanted = {
        path.relative_to(source)
        for path in source.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    for relative in sorted(wanted):
        _sync_file(source / relative, target / relative, prepare)
    if target.exists():
        for path in target.rglob("*"):
            if path.is_file() and path.relative_to(target) not in wanted:
                path.unlink()


NO_TESTS = (5, 33)
"""The mutation tool's exit codes for a mutant no test calls (a new test may call it)."""


def _retest_unkilled(
    mutants: Path, only: Sequence[str] = (), equivalent: Collection[str] = ()
) -> int:
    """Mark every surviving mutant, and every one no test called, as not yet checked
    (only those whose names match one of ``only``, when given: the run tests no other);
    return how many. A survivor listed as ``equivalent`` keeps its verdict unless ``only``
    names it: the listing reasons about its function's code, and a change of that code
    discards the verdict anyway (a new hash), so re-running it only spends the time."""
    count = 0
    for meta in mutants.rglob("*.meta"):
        data = json.loads(meta.read_text())
        codes = data["exit_code_by_key"]
        unkilled = [
            name
            for name, code in codes.items()
            if code in (SURVIVED, *NO_TESTS)
            and (
                any(fnmatch.fnmatchcase(name, glob) for glob in only)
                if only
                else name not in equivalent
            )
        ]
        for name in unkilled:
            codes[name] = None
        if unkilled:
            meta.write_text(json.dumps(data, indent=4))
            count += len(unkilled)
    return count


def config_digest(config: str) -> str:
    """What a verdict depends on in the mutation config: its ``[tool.mutmut]`` table (which
    mutants exist and how they are numbered), not its comments."""
    settings = tomllib.loads(config)["tool"]["mutmut"]
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


def _rendered_config(target: Target) -> str:
    return Template(target.config.read_text()).safe_substitute(package=target.package.name)


def _function_and_number(mutant: str) -> tuple[str, int]:
    """``pkg.mod.xǁClsǁf__mutmut_12`` -> (``xǁClsǁf``, 12): the tool's own naming."""
    qualified, _, number = mutant.rpartition("__mutmut_")
    return qualified.rpartition(".")[2], int(number)


def save_results(target: Target) -> Path:
    """Write the workspace's verdicts to the repository: per meta file (one per source
    module), each function's hash and its mutants' exit codes in mutant order (``null``:
    not run). Compact and stable, so a diff shows what a run changed."""
    kept: dict[str, dict[str, list[object]]] = {}
    for meta in sorted((target.workspace / "mutants").rglob("*.meta")):
        data = json.loads(meta.read_text())
        hashes: dict[str, str] = data["hash_by_function_name"]
        codes: dict[str, dict[int, int | None]] = {}
        for mutant, code in data["exit_code_by_key"].items():
            function, number = _function_and_number(mutant)
            codes.setdefault(function, {})[number] = code
        module = meta.relative_to(target.workspace / "mutants").as_posix()
        kept[module] = {
            function: [digest, [codes[function].get(n) for n in range(1, 1 + max(codes[function]))]]
            for function, digest in sorted(hashes.items())
            if function in codes
        }
    path = RESULTS / f"{target.name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["{", f' "config": "{config_digest(_rendered_config(target))}",']
    modules = [(m, f) for m in sorted(kept) for f in kept[m]]
    for i, (module, function) in enumerate(modules):
        comma = "," if i < len(modules) - 1 else ""
        key = json.dumps(f"{module}::{function}", ensure_ascii=False)
        lines.append(f" {key}: {json.dumps(kept[module][function])}{comma}")
    path.write_text("\n".join([*lines, "}"]) + "\n")
    return path


def _restore_results(target: Target, mutants: Path) -> int:
    """Fill the workspace's unchecked verdicts from the committed ones whose function hash
    the workspace's meta file names too (or write the meta file the tool will merge from
    when the workspace has none); return how many verdicts were taken."""
    path = RESULTS / f"{target.name}.json"
    if not path.exists():
        return 0
    by_module: dict[str, dict[str, list[object]]] = {}
    kept = json.loads(path.read_text())
    if kept.pop("config", None) != config_digest(_rendered_config(target)):
        print(f"{path.name} was made under another mutation config: not taken")
        return 0
    for key, value in kept.items():
        module, _, function = key.partition("::")
        by_module.setdefault(module, {})[function] = value
    taken = 0
    for module, functions in by_module.items():
        meta = mutants / module
        prefix = module.removesuffix(".py.meta").replace("/", ".").removeprefix("src.")
        prefix = prefix.removesuffix(".__init__")
        if meta.exists():
            data = json.loads(meta.read_text())
        else:  # the tool's own meta file, as it writes one (it merges from it)
            data = {
                "exit_code_by_key": {},
                "hash_by_function_name": {f: v[0] for f, v in functions.items()},
                "type_check_error_by_key": {},
                "durations_by_key": {},
                "estimated_durations_by_key": {},
            }
        hashes = data["hash_by_function_name"]
        codes = data["exit_code_by_key"]
        for function, (digest, verdicts) in functions.items():
            if hashes.get(function) != digest:
                continue
            for number, code in enumerate(verdicts, start=1):
                name = f"{prefix}.{function}__mutmut_{number}"
                if code is not None and codes.get(name) is None:
                    codes[name] = code
                    taken += 1
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps(data, indent=4))
    return taken


def assemble(
    *,
    fresh: bool,
    target: Target = TARGETS["core"],
    only: Sequence[str] = (),
    retest: bool = True,
) -> Path:
    """Bring the workspace up to date with the repository (``fresh``: from nothing), take
    the committed verdicts, and (``retest``) mark the earlier survivors, or those of
    ``only``, for testing again."""
    workspace = target.workspace
    if fresh and workspace.exists():
        shutil.rmtree(workspace)
    _sync_tree(target.package, workspace / "src" / target.package.name, target)
    changed = _sync_file(target.suite, workspace / "tests" / "test_contract.py")
    adapter = workspace / "tests" / (target.server or "adapter")
    if target.server is not None:
        _sync_text("", workspace / "tests" / "__init__.py")
    wanted = {path.name for path in target.adapter_tests}
    for path in target.adapter_tests:
        changed = _sync_file(path, adapter / path.name) or changed
    if adapter.exists():
        for path in adapter.glob("*.*"):
            if path.name not in wanted:
                path.unlink()
    config = _rendered_config(target)
    mutants = workspace / "mutants"
    previous = workspace / "pyproject.toml"
    if previous.exists() and config_digest(previous.read_text()) != config_digest(config):
        # Mutants are numbered under the config: a verdict kept across a change of it
        # would belong to another mutant with the same name.
        shutil.rmtree(mutants, ignore_errors=True)
        print("the mutation config changed: every mutant is made and run anew")
    _sync_text(config, previous)
    if target.server is not None:
        _sync_tree(ROOT / "tests" / "servers", workspace / "tests" / "servers")
    for relative in target.support:
        source = ROOT / relative
        if source.is_dir():
            _sync_tree(source, workspace / relative)
        else:
            changed = _sync_file(source, workspace / relative) or changed
    stats = mutants / "mutmut-stats.json"
    if changed and stats.exists():
        # The tool re-maps only tests it has not seen: a test that changed would keep
        # its old map of the functions it calls, and a mutant it now reaches survive.
        stats.unlink()
        print("the tests changed: which test calls which function is mapped anew")
    if not fresh:
        print(f"{_restore_results(target, mutants)} verdicts taken from {RESULTS.name}/")
    if mutants.exists() and retest:
        from tests.mutation.score import equivalents  # score imports this module

        retested = _retest_unkilled(mutants, only, equivalents(target=target.name))
        print(f"re-testing {retested} earlier survivors and untested mutants")
    return workspace


def _verdicts(mutants: Path) -> dict[str, int | None]:
    codes: dict[str, int | None] = {}
    for meta in sorted(mutants.rglob("*.meta")):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    return codes


GENERATE = (
    "import os\n"
    "from mutmut.__main__ import create_mutants\n"
    "from mutmut.mutation.trampoline import set_mutant_under_test\n"
    "from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir, setup_source_paths\n"
    "set_mutant_under_test('mutant_generation')\n"
    "os.makedirs('mutants', exist_ok=True)\n"
    "copy_src_dir(); copy_also_copy_files(); setup_source_paths(); create_mutants(2)\n"
)
"""The mutation tool's own first step of ``mutmut run`` (writing the mutants and their meta
files, merging the verdicts kept there), without the test runs: the steps of mutmut 3.8's
``_run`` up to the stats, as uv.lock pins it. A later run finds the mutants up to date."""

SAMPLE = "sample.txt"
"""In a workspace: the names of the mutants its last ``--sample`` drew, one a line."""
TO_RUN = "to-run.txt"
"""In a workspace: the drawn mutants without a verdict (or with a survivor's not listed as
equivalent), which the run tests; the rest keep theirs."""


def _rank(seed: int, name: str) -> bytes:
    return hashlib.sha256(f"{seed}:{name}".encode()).digest()


def draw_sample(target: Target, size: int, seed: int) -> tuple[list[str], list[str]]:
    """Generate the workspace's mutants and draw ``size`` of them uniformly with ``seed``:
    the ``size`` whose names hash lowest under the seed (a random order no name's
    neighbours change, so a change of one function changes the sample only where that
    function's mutants come or go, and a sample's verdicts carry over between sittings);
    write them to ``SAMPLE`` and those the run must test to ``TO_RUN``; return both."""
    import subprocess
    import sys

    from tests.mutation.score import equivalents  # score imports this module

    made = subprocess.run(
        [sys.executable, "-c", GENERATE], cwd=target.workspace, capture_output=True, text=True
    )
    if made.returncode:
        raise SystemExit(f"making the mutants failed:\n{made.stdout}{made.stderr}")
    mutants = target.workspace / "mutants"
    ranked = sorted(_verdicts(mutants), key=lambda name: _rank(seed, name))
    drawn = sorted(ranked[:size])
    listed = equivalents(target=target.name)
    _retest_unkilled(mutants, [name for name in drawn if name not in listed])
    codes = _verdicts(mutants)
    to_run = [name for name in drawn if codes[name] is None]
    for path, listed in ((SAMPLE, drawn), (TO_RUN, to_run)):
        (target.workspace / path).write_text("".join(f"{name}\n" for name in listed))
    return drawn, to_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fresh", action="store_true", help="delete earlier results first")
    parser.add_argument("--adapter", choices=sorted(TARGETS), default="core")
    parser.add_argument("--save", action="store_true", help="write the verdicts to the repo")
    parser.add_argument(
        "--only", action="append", default=[], help="the run's mutant globs (re-test only these)"
    )
    parser.add_argument(
        "--sample", type=int, default=0, help=f"draw this many mutants (names in {SAMPLE})"
    )
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed")
    args = parser.parse_args()
    target = TARGETS[args.adapter]
    if args.save:
        print(f"verdicts kept in {save_results(target).relative_to(ROOT)}")
        return
    workspace = assemble(fresh=args.fresh, target=target, only=args.only, retest=not args.sample)
    print(f"mutation workspace: {workspace}")
    if args.sample:
        drawn, to_run = draw_sample(target, args.sample, args.seed)
        print(f"drew {len(drawn)} mutants (seed {args.seed}): {len(to_run)} to test")


if __name__ == "__main__":
    main()
