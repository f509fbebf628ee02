"""Every YAML, JSON, TOML, Python and shell block the book shows in its prose parses.

A reader copies a manifest, a configuration or a command from the page and runs it; one that does
not parse (a Kubernetes Deployment with a key at the wrong indentation, a JSON body with a trailing
comma) is a wrong fact. This test reads the fenced blocks of every page's Markdown (chapters,
labs, front matter, appendix with the instructor guide) and of the repository's own guides
(README, CONTRIBUTING, CLAIMS-RULES), and parses each by its language: ``yaml`` with
``yaml.safe_load_all``, ``json`` with ``json.loads``, ``toml`` with ``tomllib``, ``python`` with
``ast.parse`` (``ipython`` after IPython's own transformation of magics and ``!`` lines), ``bash``
/ ``sh`` / ``shell`` with ``bash -n`` (``console`` keeps the lines after a ``$`` prompt). Executed
code cells are not here: the book build runs them. A block that is meant as a fragment is marked
``text``.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import textwrap
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
PAGES = sorted((REPO / "book").rglob("*.md")) + sorted((REPO / "book" / "labs").glob("*.ipynb"))
GUIDES = [REPO / n for n in ("README.md", "CONTRIBUTING.md", "CLAIMS-RULES.md")]
OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\n]*)$")
LANGUAGES = {
    "yaml": "yaml", "yml": "yaml", "json": "json", "toml": "toml", "python": "python",
    "py": "python", "python3": "python", "ipython": "ipython", "ipython3": "ipython",
    "bash": "shell", "sh": "shell", "shell": "shell", "console": "console",
}  # fmt: skip


def blocks(markdown: str) -> list[tuple[int, str, str]]:
    """``[(line, language, code), ...]`` of the fenced blocks of a Markdown text (nested included)."""
    out, lines, i = [], markdown.splitlines(), 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group("fence"), m.group("info").strip(), i
        body, i = [], i + 1
        while i < len(lines) and not re.match(rf"^[ \t]*{re.escape(fence)}[`~]*\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        i += 1
        directive = re.match(r"^\{([\w-]+)\}\s*(\S*)", info)
        if directive and directive.group(1) in ("code-block", "code", "sourcecode"):
            language = directive.group(2)
        elif directive:
            language = ""  # code-cell (executed by the build), bibliography, figure, ...
            if directive.group(1) not in ("code-cell", "literalinclude", "index", "bibliography"):
                out += [(start + 1 + ln, lang, c) for ln, lang, c in blocks("\n".join(body))]
        else:
            language = info.split()[0] if info else ""
        body = [b for b in body if not re.match(r"^\s*:[\w-]+:", b)] if directive else body
        code = textwrap.dedent("\n".join(body))
        if language.lower() in LANGUAGES:
            out.append((start + 1, LANGUAGES[language.lower()], code))
    return out


def parse_error(language: str, code: str) -> str | None:
    """Why ``code`` does not parse as ``language``, or ``None``."""
    try:
        if language == "yaml":
            list(yaml.safe_load_all(code))
        elif language == "json":
            json.loads(code)
        elif language == "toml":
            import tomllib  # Python >= 3.11; the test suite runs on it

            tomllib.loads(code)
        elif language == "python":
            ast.parse(code)
        elif language == "ipython":
            from IPython.core.inputtransformer2 import TransformerManager

            ast.parse(TransformerManager().transform_cell(code))
        else:
            if language == "console":
                code = "\n".join(ln.split("$ ", 1)[1] for ln in code.splitlines() if "$ " in ln)
            r = subprocess.run(["bash", "-n"], input=code, capture_output=True, text=True)
            if r.returncode:
                return r.stderr.strip().replace("bash: ", "")
    except Exception as err:  # noqa: BLE001 - every parser raises its own error type
        return f"{type(err).__name__}: {' '.join(str(err).split())}"
    return None


def _markdown(path: Path) -> list[tuple[str, str]]:
    """``[(where, markdown), ...]``: the file, or each Markdown cell of a page."""
    if path in GUIDES:
        return [(path.name, path.read_text(encoding="utf-8"))]
    nb = jupytext.read(path) if path.suffix == ".md" else nbformat.read(path, as_version=4)
    name = path.relative_to(REPO).as_posix()
    return [
        (f"{name} (cell {i})", c.source)
        for i, c in enumerate(nb.cells)
        if c.cell_type == "markdown"
    ]


def problems(paths: list[Path]) -> list[str]:
    out = []
    for path in paths:
        for where, text in _markdown(path):
            for line, language, code in blocks(text):
                error = parse_error(language, code)
                if error:
                    out.append(f"{where}, block at line {line} ({language}): {error}")
    return out


@pytest.mark.parametrize(
    ("language", "code"),
    [
        ("yaml", "spec:\n  containers:\n    - name: a\n  terminationGracePeriodSeconds: 60\n"
                 "    volumeMounts: []\n"),
        ("json", '{"model": "tiny", }'),
        ("toml", "[project\nname = 'x'"),
        ("python", "def f(x):\nreturn x"),
        ("shell", "if true; then echo x"),
    ],
)  # fmt: skip
def test_a_block_that_does_not_parse_is_caught(language, code):
    assert parse_error(language, code)


def test_blocks_are_found_in_lists_and_directives():
    text = "* item\n\n  ```yaml\n  a: [1\n  ```\n\n````{note}\n```json\n{]\n```\n````\n"
    found = blocks(text)
    assert [lang for _, lang, _ in found] == ["yaml", "json"]
    assert all(parse_error(lang, code) for _, lang, code in found)


def test_the_old_deployment_of_chapter_6_is_caught():
    """The reading of 2026-11-26: Chapter 6's Deployment (347915e) put volumeMounts after the pod's
    terminationGracePeriodSeconds, at the container's indentation: it does not parse."""
    old = textwrap.dedent(
        """\
        ```yaml
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: tiny-gpt}
        spec:
          replicas: 4
          strategy:
            type: RollingUpdate
            rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
          selector: {matchLabels: {app: tiny-gpt}}
          template:
            metadata: {labels: {app: tiny-gpt}}
            spec:
              containers:
                - name: server
                  image: registry.example.com/tiny-gpt-server:1.1     # code only; weights on a volume
                  args: ["--host", "0.0.0.0", "--port", "8000", "--checkpoint", "/models/tiny-gpt.safetensors"]
                  env:
                    - name: DLSYS_API_KEYS
                      valueFrom: {secretKeyRef: {name: tiny-gpt-keys, key: keys}}
                  readinessProbe: {httpGet: {path: /health/ready, port: 8000}, periodSeconds: 5}
                  livenessProbe: {httpGet: {path: /health/live, port: 8000}, periodSeconds: 10}
                  lifecycle: {preStop: {sleep: {seconds: 5}}}     # let the endpoints forget this pod
              terminationGracePeriodSeconds: 60                   # > the longest stream we let finish
                  volumeMounts: [{name: models, mountPath: /models, readOnly: true}]
              volumes:
                - name: models
                  persistentVolumeClaim: {claimName: model-weights}
        ```
        """
    )
    ((_, language, code),) = blocks(old)
    assert parse_error(language, code)


@pytest.mark.parametrize("path", PAGES + GUIDES, ids=lambda p: p.name)
def test_every_block_shown_in_prose_parses(path):
    bad = problems([path])
    assert not bad, "these blocks do not parse; fix them, or mark a fragment `text`:\n" + "\n".join(
        bad
    )
