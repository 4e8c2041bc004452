"""The score of the adapters' mutants, written to docs/mutation-adapters.md.

The score is killed / (mutants run - equivalent ones); a timeout counts as killed (see
:mod:`tests.mutation.adapters.run`), an error (a run that proved nothing) and an invalid
mutant (its text the server refused) count as neither and are listed. Equivalent
mutants are the ones ``equivalent.toml`` lists, each with why it behaves like the
original; one listed there that a run kills is reported as stale.
Its ``[escapes]`` table notes, per survivor, which promise it escapes.
"""

from __future__ import annotations

import tomllib
from collections import Counter
from pathlib import Path

from tests.mutation.adapters.mutants import ADAPTERS, ROOT, generate
from tests.mutation.adapters.run import load_results

DOC = ROOT / "docs" / "mutation-adapters.md"
LISTS = Path(__file__).with_name("equivalent.toml")

INTRO = """\
# Mutation testing of the adapters

[Mutation testing](mutation.md) measured the contract suite against the in-memory
reference only. The real adapters keep their rules in server-side code: PL/pgSQL functions,
Lua scripts, MongoDB update filters, S3 conditional requests. Here single-point faults are
planted in that code, one at a time, and each adapter's contract suite runs against a real
server (the embedded PostgreSQL 18, Valkey 9 standalone, nx-27017, moto) to kill it.

## Mutants

Generated from the source text, comments and strings left alone
(`tests/mutation/adapters/mutants.py`), each with a stable id
(`adapter.file.operator.digest`, the digest of the line it changes):

| operator | fault |
|---|---|
| `cmp` | a comparison flipped (`=`/`<>`, `==`/`~=`, `IS [NOT] NULL`, Lua `not`) |
| | or its boundary moved (`>=`/`>`, `<=`/`<`) |
| `drop` | one condition of an `AND` / `OR` chain dropped (`WHERE`, `IF`, `WHEN`, |
| | a parenthesized group): also a key component leaving a predicate |
| `never` | an `IF` (Lua `if`, `elseif`) whose condition never holds: the check dropped |
| `lock` | a `FOR UPDATE` / `FOR SHARE` row lock or an advisory lock removed |
| `key` | a Lua key build without its variable part (`'shared:' .. p` becomes `'shared:'`) |
| `filter` | one field dropped from a MongoDB write's filter document |
| `header` | an S3 `IfMatch` / `IfNoneMatch` precondition not sent |

Each mutant is planted in a throwaway copy of the adapter's package, put first on
`PYTHONPATH` (so the processes the suite starts run it too); the repository is never
edited. The PostgreSQL functions are installed from the copy by the suite's own
`schema install`, the Lua scripts loaded from it.

## How to run

    python3 run.py nox -s mutation-adapters -- --adapter postgres --sample 40
    python3 run.py nox -s mutation-adapters -- --adapter redis --only redis.header.cmp.abc123

Options: `--adapter postgres|redis|mongo|s3` (repeatable), `--sample N` (N mutants drawn
with `--seed`, default 0, so a rerun draws the same ones), `--only ID`, `--profile`
(default `mutation`: quick-sized and derandomized, so a kill reproduces), `--list`,
`--fresh`, `--rerun VERDICT` (run again the mutants with that verdict, e.g. `survived`
after a new test). Mutants run one at a time, each in a fresh pytest process with `-x`
(the first failing test kills it). The unmutated suite runs first and must pass.

PostgreSQL's and Redis's runs share one server (started once, as the mutmut runs do:
`tests/servers/shared.py`) and run, per mutant, only the tests that reach its file,
fastest first. Which tests those are is measured once per change of the suite or the
adapter (`tests/mutation/adapters/probes.py`): a run of the whole suite on a copy with a
counter at the top of every function or script (a PostgreSQL sequence, never rolled back;
a Valkey `INCR`), read by the runner's pytest plugin around each test. A mutant no test
reaches is a survivor without a run. This took the mean cost of a PostgreSQL mutant from
90 s to a few seconds for a kill and to the reaching tests' time for a survivor.

A mutant's limit is three times the time of what it runs (at least 120 s). A **timeout
counts as killed**: a fault that makes the suite run three times longer made some call
hang or spin, which CI's per-test timeout reports as a failure; timeouts are counted apart
below. Results are kept in `tests/mutation/adapters/results/`, a mutant's verdict while
its file is unchanged (a rerun runs only what is new or changed), and this page's score
section is rewritten from them. Equivalent mutants, with why, are listed in
`tests/mutation/adapters/equivalent.toml`.

CI runs a fixed sample: `tests/postgres/test_mutants.py`, `tests/redis/test_redis_mutants.py`,
`tests/mongo/test_mongo_mutants.py` and `tests/s3/test_s3_mutants.py` plant known-killable
mutants and check the tests that should kill them do, so neither the mutator nor the kill
machinery can rot unnoticed.

MongoDB's and S3's suites here add the adapter's race and fault tests to the contract
suite (`tests/mongo/test_mongo_races.py` drives each read-then-conditional-write window
deliberately, by running another writer's steps between one bundle's requests).

mutmut over the adapters' Python is in [Mutation testing](mutation.md#the-files-adapters-python);
this page covers their server-side logic.

## Score
"""


def lists() -> tuple[dict[str, str], dict[str, str]]:
    """(equivalent mutant id -> why, survivor id -> the promise it escapes)."""
    data = tomllib.loads(LISTS.read_text()) if LISTS.exists() else {}
    return dict(data.get("equivalent", {})), dict(data.get("escapes", {}))


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def score_section() -> tuple[str, list[str]]:
    """The score section's Markdown, and the problems (stale equivalents, errors)."""
    equivalent, escapes = lists()
    out: list[str] = []
    problems: list[str] = []
    summary = [
        "| adapter | generated | run | killed (by timeout) | equivalent | survivors | errors"
        " | score |",
        "|---|---|---|---|---|---|---|---|",
    ]
    details: list[str] = []
    for name, adapter in ADAPTERS.items():
        results = load_results(adapter)
        if not results:
            continue
        current = {m.id for m in generate(adapter)}
        results = {k: v for k, v in results.items() if k in current}
        verdicts = Counter(str(v["verdict"]) for v in results.values())
        equiv = {k for k, v in results.items() if k in equivalent and v["verdict"] == "survived"}
        for k, v in results.items():
            if k in equivalent and v["verdict"] in ("killed", "timeout"):
                problems.append(f"{k} is listed as equivalent but was killed")
        killed = verdicts["killed"] + verdicts["timeout"]
        survivors = sorted(
            (k for k, v in results.items() if v["verdict"] == "survived" and k not in equiv),
            key=lambda k: (results[k]["path"], results[k]["line"]),
        )
        errors = sorted(k for k, v in results.items() if v["verdict"] == "error")
        invalid = sorted(k for k, v in results.items() if v["verdict"] == "invalid")
        problems += [f"{k}: the run errored" for k in errors]
        scored = killed + len(survivors)
        pct = f"{100 * killed / scored:.1f}%" if scored else "n/a"
        profiles = sorted({str(v.get("profile")) for v in results.values()})
        summary.append(
            f"| {name} | {len(current)} | {len(results)} | {killed} ({verdicts['timeout']}) "
            f"| {len(equiv)} | {len(survivors)} | {len(errors)} | **{killed} / {scored} = {pct}** |"
        )
        details.append(f"### {name}\n")
        details.append(
            f"{len(results)} of {len(current)} mutants run (profile {', '.join(profiles)}): "
            f"{killed} killed ({verdicts['timeout']} by timeout), {len(equiv)} equivalent, "
            f"{len(survivors)} survivors, {len(errors)} errors, {len(invalid)} invalid (the "
            "server refused the mutated text at install or load: not counted).\n"
        )
        if survivors:
            details.append("Survivors (and the promise each escapes, where noted):\n")
            details.append("| mutant | where | fault | escapes |\n|---|---|---|---|")
            for k in survivors:
                v = results[k]
                details.append(
                    f"| `{k}` | {v['path']}:{v['line']} | {_cell(v['description'])} "
                    f"| {_cell(escapes.get(k, ''))} |"
                )
            details.append("")
        if equiv:
            details.append("Equivalent:\n")
            for k in sorted(equiv):
                details.append(f"- `{k}` ({_cell(results[k]['description'])}): {equivalent[k]}")
            details.append("")
        killers = [k for k, v in results.items() if v["verdict"] in ("killed", "timeout")]
        if killers:
            details.append("Killed, and by what (the first failing test):\n")
            details.append("| mutant | where | fault | killed by |\n|---|---|---|---|")
            for k in sorted(killers, key=lambda k: (results[k]["path"], results[k]["line"])):
                v = results[k]
                by = "timeout" if v["verdict"] == "timeout" else str(v["by"]).split("::")[-1]
                details.append(
                    f"| `{k}` | {v['path']}:{v['line']} | {_cell(v['description'])} | {_cell(by)} |"
                )
            details.append("")
        if errors:
            listed = ", ".join(f"`{k}`" for k in errors)
            details.append(f"Errors (runs that proved nothing): {listed}\n")
    out.append("\n".join(summary) + "\n")
    out.append("\n".join(details))
    return "\n".join(out), problems


def write_report() -> list[str]:
    """Rewrite docs/mutation-adapters.md from the kept results; returns the problems."""
    section, problems = score_section()
    DOC.write_text(INTRO + "\n" + section.rstrip() + "\n")
    for p in problems:
        print(f"problem: {p}")
    return problems


if __name__ == "__main__":
    write_report()
