"""``python -m labs.release``: the entry point of :mod:`labs.course.release` (where the code lives)."""

from labs.course.release import main

if __name__ == "__main__":
    raise SystemExit(main())
