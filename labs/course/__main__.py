"""``python -m labs.course grade ...`` and ``python -m labs.course release ...``.

The same commands as the console scripts ``labs-grade`` and ``labs-release`` that installing the
package declares (``pyproject.toml``); use this form where the scripts are not on ``PATH``.
"""

from __future__ import annotations

import sys

USAGE = "usage: python -m labs.course {grade,release} [options]   (see --help of each)"


def main(argv: list[str] | None = None) -> int:
    """Dispatch to :func:`labs.course.gradebook.main` or :func:`labs.course.release.main`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "grade":
        from labs.course.gradebook import main as run
    elif command == "release":
        from labs.course.release import main as run
    else:
        print(f"labs.course: unknown command {command!r}; {USAGE}", file=sys.stderr)
        return 2
    return run(rest)


if __name__ == "__main__":
    sys.exit(main())
