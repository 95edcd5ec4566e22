"""No code outside the kernels' table asks which kernel it is (issue 33): every consumer reads a hook of the row.

Counted with ``ast`` over the app's code: a comparison (``==``, ``!=``, ``in``, ``not in``) between an expression
that names a kernel (``kernel``, ``trace.kernel``, ``config.kernel``, ...) and a string that is a kernel's name.
"""

from __future__ import annotations

import ast
from pathlib import Path

from mha_core.kernels import KERNELS

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("app.py", "app_pages", "ui", "mha_core", "content")
TABLE = "mha_core/kernels.py"  # the rows themselves


def _names(node: ast.AST) -> set[str]:
    """The kernel names a string constant, or a tuple/list/set of them, holds."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & set(KERNELS)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_names(e) for e in node.elts))
    return set()


def branches_on_kernel_names(source: str) -> list[tuple[int, str]]:
    """(line, code) of every comparison of a kernel-naming expression with a kernel's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
            if not isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn):
                continue
            for subject, other in ((left, right), (right, left)):
                if "kernel" in ast.unparse(subject) and _names(other):
                    found.append((node.lineno, ast.unparse(node)))
                    break
    return found


def app_files() -> list[Path]:
    files = []
    for entry in SCANNED:
        path = ROOT / entry
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return files


def test_the_counter_finds_each_spelling_of_a_branch_on_a_kernel_name():
    source = ("if trace.kernel == 'softmax': pass\n"
              "if 'linear' != config.kernel: pass\n"
              "if kernel in ('differential', 'linear'): pass\n"
              "if step.slug == 'softmax': pass\n"  # a step's slug, not a kernel
              "if config.attention_kernel.variant: pass\n")
    assert [line for line, _ in branches_on_kernel_names(source)] == [1, 2, 3]


def test_no_code_outside_the_table_branches_on_a_kernel_name():
    found = {}
    for path in app_files():
        name = path.relative_to(ROOT).as_posix()
        if name == TABLE:
            continue
        if hits := branches_on_kernel_names(path.read_text(encoding="utf-8")):
            found[name] = hits
    assert found == {}, "ask the kernel's record (mha_core.kernels.Kernel) instead: " + repr(found)
