"""The labs package of *Deep Learning Systems*.

Each module holds the code behind one part of the book, named after what it holds:

* :mod:`labs.checks` -- the assertions that grade exercises (``with exercise(1) as check: ...``);
* :mod:`labs.notebooks`, :mod:`labs.release`, :mod:`labs.grade` -- the exercise pipeline
  (solution markers, student notebooks, grading with nbval);
* :mod:`labs.memory` -- how many bytes a model needs to serve or to train (Chapter 1);
* :mod:`labs.flops` -- counting and timing matrix multiplications (Chapter 2);
* :mod:`labs.plotting` -- the figure style shared by every chapter.

Import the submodule you need, e.g. ``from labs import flops``.
"""

__version__ = "0.1.0"
