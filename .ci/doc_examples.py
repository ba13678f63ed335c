"""Write the README's and the documents' examples as Python files for the type checkers.

The examples are the README's ```python blocks (one program, in order) and every document's
```pycon blocks (the ``>>>`` / ``...`` lines, outputs dropped; tests/test_docs.py runs them):
the blocks of a document build on each other.  The documents' ```python blocks are
fragments (signatures, a step of a longer program) and are not checked.  A ```python block
that is not Python (operators.md's signature notation, ``f(x) -> (out, length)``) is left out
and named.  Usage: ``python .ci/doc_examples.py OUTDIR``; prints the files written.
"""

import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(python|pycon)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def pycon_source(block):
    lines = []
    for line in block.splitlines():
        if line.startswith((">>> ", "... ")) or line in (">>>", "..."):
            lines.append(line[4:])
    return "\n".join(lines)


def main(outdir):
    outdir = pathlib.Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        parts = {"python": [], "pycon": []}
        text = doc.read_text()
        for match in FENCE.finditer(text):
            kind, block = match.groups()
            if kind == "python" and doc.name != "README.md":
                continue
            source = pycon_source(block) if kind == "pycon" else block
            try:
                ast.parse(source)
            except SyntaxError:
                line = text.count("\n", 0, match.start()) + 1
                print(f"not Python, left out: {doc.relative_to(ROOT)}:{line}", file=sys.stderr)
                continue
            parts[kind].append(source)
        for kind, blocks in parts.items():
            if blocks:
                path = outdir / f"{doc.stem.lower().replace('-', '_')}_{kind}.py"
                path.write_text(f"# the {kind} examples of {doc.relative_to(ROOT)}\n"
                                + "\n".join(blocks) + "\n")
                print(path)


if __name__ == "__main__":
    main(sys.argv[1])
