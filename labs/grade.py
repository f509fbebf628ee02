"""``python -m labs.grade``: the entry point of :mod:`labs.course.gradebook` (where the code lives)."""

from labs.course.gradebook import main

if __name__ == "__main__":
    raise SystemExit(main())
