"""Execute one page of the book (a MyST Markdown chapter or a lab notebook) as the build would.

Usage: ``.venv/bin/python tools/run_page.py book/chapters/ch10-inference.md [--save OUT.ipynb]``

Runs every code cell in a fresh kernel from the page's own folder, prints the slowest cells and the
total time, and exits 1 on the first error (with the traceback).  Authors use it to keep each page
well under the build's per-page budget without building the whole book.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("--save", type=Path, help="write the executed notebook here")
    parser.add_argument("--timeout", type=int, default=300, help="per-cell timeout in seconds")
    args = parser.parse_args(argv)
    path = args.page.resolve()
    nb = jupytext.read(path) if path.suffix == ".md" else nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=args.timeout,
        kernel_name="python3",
        resources={"metadata": {"path": path.parent}},
    )
    times: list[tuple[float, int]] = []
    start = time.perf_counter()
    status = 0
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            t0 = time.perf_counter()
            try:
                client.execute_cell(cell, index)
            except CellExecutionError as err:
                print(f"cell {index} failed:\n{err}", file=sys.stderr)
                status = 1
                break
            times.append((time.perf_counter() - t0, index))
    total = time.perf_counter() - start
    for seconds, index in sorted(times, reverse=True)[:5]:
        first = nb.cells[index].source.strip().splitlines()[:1]
        print(f"  {seconds:6.1f} s  cell {index}: {first[0][:70] if first else ''}")
    print(f"{path.name}: {'FAILED' if status else 'ok'} in {total:.1f} s ({len(times)} cells)")
    if args.save:
        nbformat.write(nb, args.save)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
