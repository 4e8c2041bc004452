"""The mutator: every single-point fault it plants in an adapter's server-side logic.

Mutants are generated deterministically from the source text, at token level: comments and
string literals are masked out first, so only code is mutated. Operators:

- ``cmp``: flip a comparison (``=`` / ``<>``, ``==`` / ``~=``, ``IS NULL`` / ``IS NOT
  NULL``) or move its boundary (``>=`` / ``>``, ``<=`` / ``<``). In SQL an ``=`` is only
  mutated inside a condition (``SET a = b`` is an assignment).
- ``drop``: drop one condition of an ``AND`` (or ``OR``) chain in a ``WHERE``, an ``IF``,
  a ``WHEN`` or a parenthesized group: also how a key component leaves a predicate
  (``tenant = t AND session_id = s``).
- ``never``: an ``IF`` (Lua ``if`` / ``elseif``) whose condition is ``false``: the check
  it makes is dropped.
- ``lock``: a ``FOR UPDATE`` / ``FOR SHARE`` row lock or an advisory lock removed.
- ``key``: a Lua key build loses its variable component (``'shared:' .. p`` becomes
  ``'shared:'``).
- ``filter``: one field dropped from a MongoDB write's filter document.
- ``header``: an S3 ``IfMatch`` / ``IfNoneMatch`` precondition not sent.

Each mutant has a stable id (the adapter, the file, the operator and a digest of the line
it changes, so an edit elsewhere in the file keeps it) and a one-line description.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


@dataclass(frozen=True, slots=True)
class Adapter:
    """What one adapter's mutation run needs: where its code is and what tests it."""

    name: str
    package: str
    """The import name; its copy (holding the mutant) is put first on the path."""
    files: tuple[str, ...]
    """Glob patterns, relative to the package folder, of the files mutated."""
    suite: tuple[str, ...]
    """The pytest arguments selecting the adapter's contract suite on one real server, and
    the adapter's own tests of what the suite cannot reach (lost replies, old layouts)."""

    @property
    def src(self) -> Path:
        return ROOT / "packages" / f"agentstores-{self.name}" / "src" / self.package


ADAPTERS: dict[str, Adapter] = {
    a.name: a
    for a in (
        Adapter(
            "postgres",
            "agentstores_postgres",
            ("sql/functions/*.sql",),
            (
                "tests/postgres/test_contract.py::TestPostgresContract",
                "tests/postgres/test_faults.py",
                "-k",
                "not machine",
            ),
        ),
        Adapter(
            "redis",
            "agentstores_redis",
            ("scripts/*.lua", "scripts/include/*.lua"),
            (
                "tests/redis/test_redis_contract.py::TestValkeyStandalone",
                "tests/redis/test_redis_faults.py",
                "tests/redis/test_redis_layout.py",
                "tests/redis/test_redis_clock.py",
                "tests/redis/test_redis_indexes.py",
                "tests/redis/test_redis_scale.py::test_an_append_reads_no_whole_collection",
                "-k",
                "not machine",
            ),
        ),
        Adapter(
            "mongo",
            "agentstores_mongo",
            ("*.py",),
            (
                "tests/mongo/test_mongo_contract.py::TestNx27017",
                "tests/mongo/test_mongo_faults.py",
                "tests/mongo/test_mongo_races.py",
                "tests/mongo/test_mongo_fairness.py::"
                "test_a_turn_is_claimed_only_on_its_key_and_never_from_an_older_loser",
                "tests/mongo/test_mongo_fairness.py::test_a_writer_gives_back_only_its_own_turn",
            ),
        ),
        Adapter(
            "s3",
            "agentstores_s3",
            ("*.py",),
            ("tests/s3/test_s3_contract.py::TestMoto", "tests/s3/test_s3_faults.py"),
        ),
    )
}


@dataclass(frozen=True, slots=True)
class Mutant:
    """One fault: replace ``text[start:end]`` of the file ``path`` with ``replacement``."""

    id: str
    adapter: str
    path: str
    """Relative to the adapter's package folder."""
    line: int
    start: int
    end: int
    replacement: str
    operator: str
    description: str

    def apply(self, text: str) -> str:
        """The file's text with this fault planted."""
        return text[: self.start] + self.replacement + text[self.end :]


# --- masking comments and strings ------------------------------------------------------


def _mask(text: str, lang: str) -> str:
    """``text`` with comments and string literals blanked (same length, newlines kept)."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        if text.startswith("--", i):
            if lang == "lua" and (long := re.match(r"--\[(=*)\[", text[i:])):
                close = text.find("]" + long[1] + "]", i)
                j = n if close < 0 else close + len(long[1]) + 2
            else:
                j = text.find("\n", i)
                j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text[i] in "'\"" and (lang == "lua" or text[i] == "'"):
            quote, j = text[i], i + 1
            while j < n:
                if lang == "lua" and text[j] == "\\":
                    j += 2
                    continue
                if text[j] == quote:
                    if lang == "sql" and text.startswith("''", j):
                        j += 2
                        continue
                    break
                j += 1
            blank(i + 1, j)  # the quotes stay: a key build is recognized by them
            i = j + 1
        else:
            i += 1
    return "".join(out)


# --- condition chains ------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_SQL_STOPS = frozenset(
    [
        "THEN",
        "LOOP",
        "FOR",
        "RETURNING",
        "ORDER",
        "LIMIT",
        "GROUP",
        "ON",
        "UNION",
        "INTO",
        "DO",
        "WHEN",
        "ELSE",
        "END",
        "SET",
        "VALUES",
        "FROM",
        "SELECT",
        "JOIN",
        "CROSS",
        "LEFT",
        "RIGHT",
        "INNER",
        "WHERE",
        "HAVING",
    ]
)
_LUA_STOPS = frozenset({"then", "do", "end", "local", "return"})


@dataclass(frozen=True, slots=True)
class _Chain:
    start: int
    end: int
    terms: tuple[tuple[int, int], ...]
    joiner: str


def _chain(masked: str, start: int, stops: frozenset[str], lang: str) -> _Chain:
    """The condition starting at ``start``: where it ends (a stop word, ``;`` or a
    closing bracket at depth 0) and its top-level terms."""
    and_, or_ = ("AND", "OR") if lang == "sql" else ("and", "or")
    depth, i, n = 0, start, len(masked)
    splits: dict[str, list[tuple[int, int]]] = {and_: [], or_: []}
    while i < n:
        c = masked[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif c == ";" and depth == 0:
            break
        elif c.isalpha() or c == "_":
            if i > 0 and (masked[i - 1].isalnum() or masked[i - 1] in "_.:"):
                word = _WORD.match(masked, i)
                assert word is not None
                i = word.end()
                continue
            word = _WORD.match(masked, i)
            assert word is not None
            if depth == 0 and word[0] in stops:
                break
            if depth == 0 and word[0] in splits:
                splits[word[0]].append((i, word.end()))
            i = word.end()
            continue
        i += 1
    end = i
    while end > start and masked[end - 1].isspace():
        end -= 1
    joiner = or_ if splits[or_] else and_
    cuts = splits[joiner]
    terms: list[tuple[int, int]] = []
    a = start
    for s, e in [*cuts, (end, end)]:
        b = s
        while b > a and masked[b - 1].isspace():
            b -= 1
        a0 = a
        while a0 < b and masked[a0].isspace():
            a0 += 1
        terms.append((a0, b))
        a = e
    return _Chain(start, end, tuple(terms), joiner)


def _chain_starts(masked: str, lang: str) -> Iterator[tuple[str, int]]:
    """Each condition's opening keyword (or ``(``) and where its text starts."""
    if lang == "sql":
        keys = re.compile(r"\b(WHERE|IF|ELSIF|WHEN)\b|\bON\b(?!\s+CONFLICT)|\(")
    else:
        keys = re.compile(r"\b(if|elseif|while)\b|\(")
    for found in keys.finditer(masked):
        word = found[0]
        if lang == "sql" and word == "IF":
            line_start = masked.rfind("\n", 0, found.start()) + 1
            if masked[line_start : found.start()].strip():
                continue  # END IF, IF EXISTS: not a condition
        yield word, found.end()


# --- operators -------------------------------------------------------------------------

_SQL_CMP = re.compile(r"(?<![<>=!:@|\-])(<>|<=|>=|<|>|=)(?![<>=@])")
_SQL_SWAP = {"=": "<>", "<>": "=", "<": "<=", "<=": "<", ">": ">=", ">=": ">"}
_SQL_NULL = re.compile(r"\bIS\s+(NOT\s+)?(NULL|DISTINCT\s+FROM)\b")
_LUA_CMP = re.compile(r"(==|~=|<=|>=|(?<![<>=~.])<(?![<=])|(?<![<>=~-])>(?![>=]))")
_LUA_SWAP = {"==": "~=", "~=": "==", "<": "<=", "<=": "<", ">": ">=", ">=": ">"}
_SQL_LOCK = re.compile(
    r"\s+FOR\s+(?:NO\s+KEY\s+UPDATE|KEY\s+SHARE|UPDATE|SHARE)(?:\s+OF\s+\w+)?"
    r"(?:\s+(?:SKIP\s+LOCKED|NOWAIT))?"
)
_SQL_ADVISORY = re.compile(r"(?:PERFORM|SELECT)\s+pg_advisory(?:_xact)?_lock\([^;]*\);")
_LUA_KEY = re.compile(r"'[^'\n]*:'\s*\.\.\s*[A-Za-z_][\w.]*(?:\[[^\]\n]*\])?")


def _short(text: str, limit: int = 70) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


@dataclass(frozen=True, slots=True)
class _Edit:
    start: int
    end: int
    replacement: str
    operator: str
    description: str


def _text_edits(text: str, lang: str) -> Iterator[_Edit]:
    masked = _mask(text, lang)
    stops = _SQL_STOPS if lang == "sql" else _LUA_STOPS
    conditions: list[tuple[int, int]] = []
    seen_drops: set[tuple[int, int]] = set()
    for word, at in _chain_starts(masked, lang):
        chain = _chain(masked, at, stops, lang)
        if chain.end <= chain.start:
            continue
        whole = text[chain.start : chain.end]
        if word != "(":
            conditions.append((chain.start, chain.end))
        if word in ("IF", "ELSIF", "if", "elseif"):
            yield _Edit(
                chain.terms[0][0],
                chain.end,
                "false",
                "never",
                f"{word} {_short(whole)} never holds",
            )
        terms = chain.terms
        if len(terms) < 2:
            continue
        for k, (s, e) in enumerate(terms):
            a, b = (s, terms[1][0]) if k == 0 else (terms[k - 1][1], e)
            if (a, b) in seen_drops:
                continue
            seen_drops.add((a, b))
            yield _Edit(
                a,
                b,
                "",
                "drop",
                f"drop `{_short(text[s:e], 40)}` from `{_short(whole)}`",
            )
    if lang == "sql":
        yield from _sql_cmp(text, masked, conditions)
        for found in _SQL_LOCK.finditer(masked):
            yield _Edit(found.start(), found.end(), "", "lock", f"no {_short(found[0])} lock")
        for found in _SQL_ADVISORY.finditer(masked):
            yield _Edit(found.start(), found.end(), "", "lock", "no advisory lock")
    else:
        for found in _LUA_CMP.finditer(masked):
            op = found[0]
            yield _Edit(
                found.start(),
                found.end(),
                _LUA_SWAP[op],
                "cmp",
                f"`{op}` -> `{_LUA_SWAP[op]}` in `{_short(_line_of(text, found.start()))}`",
            )
        for found in re.finditer(r"\bnot\s+", masked):
            yield _Edit(
                found.start(),
                found.end(),
                "",
                "cmp",
                f"drop `not` in `{_short(_line_of(text, found.start()))}`",
            )
        for found in _LUA_KEY.finditer(text):
            if masked[found.start()] != "'" or ".." not in masked[found.start() : found.end()]:
                continue  # inside a comment or a string
            literal_end = found.start() + masked[found.start() :].index("..")
            while text[literal_end - 1].isspace():
                literal_end -= 1
            yield _Edit(
                literal_end,
                found.end(),
                "",
                "key",
                f"key `{_short(text[found.start() : found.end()])}` without its component",
            )


def _sql_cmp(text: str, masked: str, conditions: list[tuple[int, int]]) -> Iterator[_Edit]:
    def in_condition(at: int) -> bool:
        return any(s <= at < e for s, e in conditions)

    for found in _SQL_CMP.finditer(masked):
        op = found[0]
        if op == "=" and not in_condition(found.start()):
            continue
        yield _Edit(
            found.start(),
            found.end(),
            _SQL_SWAP[op],
            "cmp",
            f"`{op}` -> `{_SQL_SWAP[op]}` in `{_short(_line_of(text, found.start()))}`",
        )
    for found in _SQL_NULL.finditer(masked):
        negated = found[1] is not None
        what = " ".join(found[2].split())
        swapped = f"IS {what}" if negated else f"IS NOT {what}"
        yield _Edit(
            found.start(),
            found.end(),
            swapped,
            "cmp",
            f"`{_short(found[0])}` -> `{swapped}` in `{_short(_line_of(text, found.start()))}`",
        )


def _line_of(text: str, at: int) -> str:
    a = text.rfind("\n", 0, at) + 1
    b = text.find("\n", at)
    return text[a : len(text) if b < 0 else b]


# --- Python: MongoDB filters and S3 conditional headers ---------------------------------

_MONGO_WRITES = frozenset(
    {
        "update_one",
        "update_many",
        "find_one_and_update",
        "find_one_and_replace",
        "find_one_and_delete",
        "replace_one",
        "delete_one",
        "delete_many",
    }
)
_S3_HEADERS = frozenset({"IfMatch", "IfNoneMatch"})


def _offsets(text: str) -> list[int]:
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _span(node: ast.AST, starts: list[int]) -> tuple[int, int]:
    end_line, end_col = node.end_lineno, node.end_col_offset  # type: ignore[attr-defined]
    assert end_line is not None and end_col is not None
    return starts[node.lineno - 1] + node.col_offset, starts[end_line - 1] + end_col  # type: ignore[attr-defined]


def _filter_dicts(tree: ast.AST) -> Iterator[ast.Dict]:
    """The literal filter documents of MongoDB writes, and the ones returned or built by
    a function whose name ends in ``filter``."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MONGO_WRITES
        ):
            first = node.args[0] if node.args else None
            for kw in node.keywords:
                if kw.arg == "filter":
                    first = kw.value
            if isinstance(first, ast.Dict):
                yield first
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.endswith(
            "filter"
        ):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Assign, ast.AnnAssign, ast.Return)) and isinstance(
                    inner.value, ast.Dict
                ):
                    yield inner.value


def _python_edits(text: str, adapter: str) -> Iterator[_Edit]:
    tree = ast.parse(text)
    starts = _offsets(text)
    if adapter == "mongo":
        seen: set[int] = set()
        for d in _filter_dicts(tree):
            if id(d) in seen or len(d.keys) < 2:
                continue
            seen.add(id(d))
            whole = text[slice(*_span(d, starts))]
            for k, key in enumerate(d.keys):
                if key is None:
                    continue
                ks, ke = _span(key, starts)[0], _span(d.values[k], starts)[1]
                if k + 1 < len(d.keys):
                    nxt = d.keys[k + 1] or d.values[k + 1]
                    a, b = ks, _span(nxt, starts)[0]
                    if d.keys[k + 1] is None:
                        b -= 2  # the ** of a spread
                else:
                    prev = d.values[k - 1]
                    a, b = _span(prev, starts)[1], ke
                yield _Edit(
                    a,
                    b,
                    "",
                    "filter",
                    f"filter `{_short(whole, 50)}` without `{_short(text[ks:ke], 30)}`",
                )
    if adapter == "s3":
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(sub := node.targets[0], ast.Subscript)
                and isinstance(sub.slice, ast.Constant)
                and sub.slice.value in _S3_HEADERS
            ):
                a, b = _span(node, starts)
                yield _Edit(a, b, "pass", "header", f"no {sub.slice.value} sent")
            elif isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg in _S3_HEADERS:
                        a, b = _span(kw, starts)
                        yield _Edit(a, b, "_unused=None", "header", f"no {kw.arg} sent")


# --- all mutants of an adapter ---------------------------------------------------------


def _files(adapter: Adapter) -> list[Path]:
    found: set[Path] = set()
    for pattern in adapter.files:
        found.update(adapter.src.glob(pattern))
    return sorted(found)


def generate(adapter: Adapter | str) -> list[Mutant]:
    """Every mutant of ``adapter``, in file order; ids are unique and stable."""
    if isinstance(adapter, str):
        adapter = ADAPTERS[adapter]
    mutants: list[Mutant] = []
    for path in _files(adapter):
        text = path.read_text("utf-8")
        relative = path.relative_to(adapter.src).as_posix()
        if path.suffix == ".sql":
            edits: Iterable[_Edit] = _text_edits(text, "sql")
        elif path.suffix == ".lua":
            edits = _text_edits(text, "lua")
        else:
            edits = _python_edits(text, adapter.name)
        mutants.extend(_identify(adapter.name, relative, text, edits))
    return mutants


def _identify(adapter: str, relative: str, text: str, edits: Iterable[_Edit]) -> list[Mutant]:
    out: list[Mutant] = []
    used: dict[str, int] = {}
    seen: set[tuple[int, int, str]] = set()
    stem = Path(relative).stem
    for e in sorted(edits, key=lambda e: (e.start, e.end, e.operator, e.replacement)):
        if (e.start, e.end, e.replacement) in seen or text[e.start : e.end] == e.replacement:
            continue
        seen.add((e.start, e.end, e.replacement))
        basis = "\0".join(
            (
                relative,
                e.operator,
                _line_of(text, e.start).strip(),
                text[e.start : e.end],
                e.replacement,
            )
        )
        n = used.get(basis, 0)
        used[basis] = n + 1
        digest = hashlib.sha256(f"{basis}\0{n}".encode()).hexdigest()[:6]
        out.append(
            Mutant(
                id=f"{adapter}.{stem}.{e.operator}.{digest}",
                adapter=adapter,
                path=relative,
                line=text.count("\n", 0, e.start) + 1,
                start=e.start,
                end=e.end,
                replacement=e.replacement,
                operator=e.operator,
                description=e.description,
            )
        )
    return out


def by_id(adapter: Adapter | str, mutant_id: str) -> Mutant:
    """The mutant ``mutant_id`` of ``adapter``; KeyError when the source no longer has it."""
    for m in generate(adapter):
        if m.id == mutant_id:
            return m
    raise KeyError(f"no mutant {mutant_id} in the current source")
