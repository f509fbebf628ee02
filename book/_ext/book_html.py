"""Sphinx extension: the book's fixes to the pages its themes generate.

* Launch buttons open the *student* notebook of a lab, never the solution.  sphinx-book-theme builds
  Colab/Binder links from the page's own path (``book/labs/labNN-x.ipynb``, the solution notebook);
  students should land in ``student/labNN-x.ipynb``, the released copy without solutions.  Chapters
  are MyST Markdown files that Colab cannot open, so their launch buttons are dropped.
* ``book.js`` (``book/assets``) loads before the widget manager, whose icon fonts it points at
  ``_static/widgets/`` (it sets the global the manager reads when its modules first run).
* Solution markers read as a quiet comment: in the book's code,
  ``# BEGIN SOLUTION exercise-N: what`` becomes ``# Exercise N: what`` and ``# END SOLUTION`` goes
  (the markers are for the release tool, which cuts the student version along them).
* Each inline script is emitted once: sphinx-thebe registers its configuration script twice, and
  the second ``const THEBE_JS_URL`` is a JavaScript error in every page's console.
"""

from __future__ import annotations

import re

from docutils import nodes

SOLUTIONS, STUDENTS = "book/labs/", "student/"


def _student_launch_buttons(app, pagename, templatename, context, doctree) -> None:
    buttons = context.get("header_buttons") or []
    for group in list(buttons):
        if group.get("label") != "launch-buttons":
            continue
        if not pagename.startswith(SOLUTIONS):
            buttons.remove(group)
            continue
        for button in group.get("buttons", []):
            if "url" in button:
                button["url"] = button["url"].replace(SOLUTIONS, STUDENTS)
                button["tooltip"] = button.get("tooltip", "") + " (student notebook)"


def _scripts_once(app, pagename, templatename, context, doctree) -> None:
    scripts, seen = context.get("script_files") or [], set()
    for script in list(scripts):
        # the same file and attributes, whatever the priority it was registered with
        key = (
            getattr(script, "filename", script) or "",  # inline scripts: None or ""
            repr(sorted(getattr(script, "attributes", {}).items())),
        )
        if key in seen:
            scripts.remove(script)
        seen.add(key)


BEGIN = re.compile(r"^([ \t]*)# BEGIN SOLUTION exercise-(\d+):\s*(.*)$", re.M)
END = re.compile(r"^[ \t]*# END SOLUTION\b.*\n?", re.M)


def _quiet_markers(app, doctree, docname) -> None:
    for block in doctree.findall(nodes.literal_block):
        text = block.astext()
        if "# BEGIN SOLUTION" not in text and "# END SOLUTION" not in text:
            continue
        text = END.sub("", BEGIN.sub(r"\1# Exercise \2: \3", text)).rstrip("\n")
        block.children = [nodes.Text(text)]
        block.rawsource = text


def setup(app):
    app.add_js_file("book.js", priority=300)  # before the widget manager's scripts (500)
    app.connect("html-page-context", _student_launch_buttons, priority=510)  # after the theme (501)
    app.connect("html-page-context", _scripts_once, priority=900)
    app.connect("doctree-resolved", _quiet_markers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
