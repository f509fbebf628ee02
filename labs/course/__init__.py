"""Course tooling, kept apart from the teaching code.

The assertions of the exercise check cells are :mod:`labs.course.checks`, with
:mod:`labs.course.values` (how values are shown and compared), :mod:`labs.course.plaindata`
(values and their facts as plain data) and :mod:`labs.course.needs` (optional components);
:mod:`labs.course.notebooks` the exercise format (parse a lab, derive the student version);
:mod:`labs.course.setup_cell` the first cell of every lab and :mod:`labs.course.colab` what it
installs on Colab; :mod:`labs.course.release` writes the student notebooks and the answer keys
(``labs-release``).  Grading (``labs-grade``), one direction, stage by stage:
:mod:`labs.course.grade` drives it; :mod:`labs.course.key` the answer key, tamper detection and
the plan of a submission's run; :mod:`labs.course.sealed_labs` the key's copy of ``labs`` without
its forbidden references; :mod:`labs.course.reference` runs the key's solution once per lab in a
trusted kernel to record the expected values; :mod:`labs.course.snippet` (with
:mod:`labs.course.rewrite`, :mod:`labs.course.unused` and :mod:`labs.course.recorder`) what a
kernel computes in place of a check; :mod:`labs.course.sandbox` one sealed kernel per submission,
whose root :mod:`labs.course.rootfs` allow-lists and :mod:`labs.course.jail` builds in Linux
namespaces, :mod:`labs.course.seccomp` confines (no capabilities, a system-call filter) and
:mod:`labs.course.cgroups` limits (memory, processes, CPU); :mod:`labs.course.relay` and
:mod:`labs.course.link` carry its messages within limits and deadlines;
:mod:`labs.course.isolation` says which protections this machine has; :mod:`labs.course.tree`
removes a kernel's folder however deep; :mod:`labs.course.decode` and :mod:`labs.course.verdict`
read the values back and compare them in the grader; :mod:`labs.course.results` what it found;
:mod:`labs.course.gradebook` the command line and class mode, :mod:`labs.course.submissions`
which notebooks it grades; :mod:`labs.course.wrong_answers`
proves that checks reject plausible wrong answers.  For courses: :mod:`labs.course.points` what
each exercise is worth; :mod:`labs.course.feedback` the one escaping function for everything
printed or written; :mod:`labs.course.report` the table and summary;
:mod:`labs.course.gradefile` the CSV and JSON gradebooks; :mod:`labs.course.exports` Canvas and
Moodle imports; :mod:`labs.course.shards` a class on many machines; :mod:`labs.course.bundle`
and :mod:`labs.course.gradescope` Gradescope's autograder.
"""
