"""Which cells of a course notebook its exercises need: a static analysis of the names each code cell binds, changes
and reads.

An assignment holds the notebook's setup cell, the cells that give the exercise cells the names they read (in their
code, and in their stub's comments where a name is written as code, ``features.index(...)``), then the exercises. A
name read by a cell comes from the last earlier cell that binds it, plus every cell in between that changes it in
place (``W[0, 1] = 5.0``, ``model.eval()``); the cells found bring in the names they read, and so on.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from dataclasses import dataclass, field

BUILTINS = frozenset(dir(builtins)) | {"display", "get_ipython", "__name__", "__file__"}
# methods that change their object in place (besides PyTorch's trailing-underscore ones, such as ``zero_``)
MUTATORS = frozenset(
    "append extend insert remove pop clear update setdefault add discard sort reverse eval train to cuda cpu "
    "load_state_dict register_buffer register_parameter apply requires_grad_ manual_seed".split()
)
CODE_NAME = re.compile(r"(?<![.\w])([A-Za-z_][A-Za-z0-9_]*)(?=[.\[(])")


@dataclass
class CellNames:
    """What one code cell does with module-level names."""

    binds: set[str] = field(default_factory=set)  # assigned, imported, defined (def, class) at module level
    changes: set[str] = field(default_factory=set)  # changed in place: item or attribute stores, method calls
    reads: set[str] = field(default_factory=set)  # read at module level or as a global inside a function
    modules: set[str] = field(default_factory=set)  # names bound by an import statement


def _referenced_globals(table: symtable.SymbolTable, top: bool) -> set[str]:
    found = set()
    for symbol in table.get_symbols():
        if not symbol.is_referenced():
            continue
        if top or symbol.is_global():
            found.add(symbol.get_name())
    for child in table.get_children():
        found |= _referenced_globals(child, top=False)
    return found


def _base_name(node: ast.AST) -> str | None:
    """``x`` for ``x``, ``x.a``, ``x[0]``, ``x.a[1].b``."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _bound_targets(target: ast.AST, names: CellNames) -> None:
    if isinstance(target, ast.Name):
        names.binds.add(target.id)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            _bound_targets(element, names)
    elif isinstance(target, ast.Starred):
        _bound_targets(target.value, names)
    elif isinstance(target, (ast.Attribute, ast.Subscript)):
        base = _base_name(target)
        if base is not None:
            names.changes.add(base)


def _statement_names(statement: ast.stmt, names: CellNames) -> None:
    """The module-level bindings and in-place changes of one top-level statement (and of the blocks inside it)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names.binds.add(statement.name)
        return
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            bound = alias.asname or alias.name.split(".")[0]
            names.binds.add(bound)
            names.modules.add(bound)
        return
    if isinstance(statement, ast.ImportFrom):
        for alias in statement.names:
            if alias.name != "*":
                names.binds.add(alias.asname or alias.name)
        return
    if isinstance(statement, ast.Assign):
        for target in statement.targets:
            _bound_targets(target, names)
    elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
        _bound_targets(statement.target, names)
    elif isinstance(statement, (ast.For, ast.AsyncFor)):
        _bound_targets(statement.target, names)
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        for item in statement.items:
            if item.optional_vars is not None:
                _bound_targets(item.optional_vars, names)
    elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        function = statement.value.func
        if isinstance(function, ast.Attribute) and (function.attr in MUTATORS or function.attr.endswith("_")):
            base = _base_name(function.value)  # x.append(1), model.eval(), w.zero_(): a call that changes x
            if base is not None:
                names.changes.add(base)
    for node in ast.walk(statement):  # names bound by walrus anywhere in the statement, at module level
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            names.binds.add(node.target.id)
    for block in ("body", "orelse", "finalbody"):
        for inner in getattr(statement, block, []):
            _statement_names(inner, names)
    for handler in getattr(statement, "handlers", []):
        if handler.name:
            names.binds.add(handler.name)
        for inner in handler.body:
            _statement_names(inner, names)


def _global_reads(code: str) -> set[str]:
    return _referenced_globals(symtable.symtable(code, "<cell>", "exec"), top=True) - BUILTINS


def _read_before_bound(statements: list[ast.stmt], names: CellNames) -> None:
    """Add to ``names.reads`` the names each statement reads before the statements before it bind them; blocks
    (if, for, while, with, try) are followed statement by statement."""
    for statement in statements:
        headers: list[ast.AST] = []
        if isinstance(statement, (ast.If, ast.While)):
            headers = [statement.test]
        elif isinstance(statement, (ast.For, ast.AsyncFor)):
            headers = [statement.iter]
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            headers = [item.context_expr for item in statement.items]
        elif not isinstance(statement, ast.Try):
            names.reads |= _global_reads(ast.unparse(statement)) - names.binds
            if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
                names.reads |= {statement.target.id} - names.binds  # x += 1 reads x (symtable says only "assigned")
            _statement_names(statement, names)
            continue
        for header in headers:
            names.reads |= _global_reads(ast.unparse(header)) - names.binds
        if isinstance(statement, (ast.For, ast.AsyncFor)):
            _bound_targets(statement.target, names)
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            for item in statement.items:
                if item.optional_vars is not None:
                    _bound_targets(item.optional_vars, names)
        _read_before_bound(statement.body, names)
        for handler in getattr(statement, "handlers", []):
            if handler.name:
                names.binds.add(handler.name)
            _read_before_bound(handler.body, names)
        _read_before_bound(getattr(statement, "orelse", []), names)
        _read_before_bound(getattr(statement, "finalbody", []), names)


def cell_names(source: str) -> CellNames:
    """The module-level names a code cell binds, changes in place and reads before binding them itself (``x`` in
    ``x += 1`` or ``x[0] = 1``, not in ``x = 1; print(x)``). Raises SyntaxError for invalid code."""
    names = CellNames()
    _read_before_bound(ast.parse(source).body, names)
    return names


def code_hints(source: str) -> set[str]:
    """Names a stub's comments show as code: an identifier followed by ``.``, ``[`` or ``(``, and not itself an
    attribute (in "edit a copy (w_q.clone()), e.g. w_q[features.index(...)]": w_q and features)."""
    found: set[str] = set()
    for line in source.splitlines():
        if "#" in line:
            comment = re.sub(r"\b(?:e\.g|i\.e|etc)\.", " ", line.split("#", 1)[1])
            found |= set(CODE_NAME.findall(comment))
    return found


def needed_cells(sources: list[str | None], targets: dict[int, set[str]]) -> set[int]:
    """The indices of the code cells that the cells ``targets`` need, these included.

    ``sources``: every cell of the notebook, None for a Markdown cell. ``targets``: index of a cell -> extra names it
    needs besides those its code reads (names its stub shows in comments); a name no earlier cell binds is ignored."""
    analysed = {i: cell_names(s) for i, s in enumerate(sources) if s is not None}
    modules = set().union(*(names.modules for names in analysed.values()))
    for names in analysed.values():
        names.changes -= modules  # torch.manual_seed(0) does not make a cell the maker of `torch`
    chosen: set[int] = set()
    pending: list[tuple[int, str]] = []

    def take(index: int) -> None:
        if index in chosen:
            return
        chosen.add(index)
        pending.extend((index, name) for name in analysed[index].reads)

    for index, extra in targets.items():
        take(index)
        pending.extend((index, name) for name in extra)
    while pending:
        before, name = pending.pop()
        for earlier in range(before - 1, -1, -1):
            names = analysed.get(earlier)
            if names is None:
                continue
            if name in names.binds:
                take(earlier)
                break
            if name in names.changes:
                take(earlier)
    return chosen
