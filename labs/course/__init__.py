"""Course tooling, kept apart from the teaching code.

:mod:`labs.course.checks` the assertions of the exercise check cells; :mod:`labs.course.notebooks`
the exercise format (parse a lab, derive the student version); :mod:`labs.course.setup_cell` the
first cell of every lab and :mod:`labs.course.colab` what it installs on Colab; :mod:`labs.course.release` writes the
student notebooks and the answer keys (``labs-release``); :mod:`labs.course.key` the answer key and
tamper detection.  Grading (``labs-grade``): :mod:`labs.course.isolation` and
:mod:`labs.course.jail` seal each kernel in Linux namespaces with limits;
:mod:`labs.course.sandbox` one sealed kernel per submission; :mod:`labs.course.reference` runs the
key's solution once per lab in a trusted kernel to record the expected values;
:mod:`labs.course.rewrite` turns a check cell into its reference and student versions;
:mod:`labs.course.protect` and :mod:`labs.course.recorder` run them in a kernel and bring the
values back as plain data; :mod:`labs.course.verdict` compares them in the grader;
:mod:`labs.course.grade` grades a submission; :mod:`labs.course.results` what it found;
:mod:`labs.course.gradebook` the command line and class mode; :mod:`labs.course.wrong_answers`
proves that checks reject plausible wrong answers.  For courses: :mod:`labs.course.points` what
each exercise is worth; :mod:`labs.course.feedback` the one escaping function for everything
printed or written; :mod:`labs.course.report` the table and summary;
:mod:`labs.course.gradefile` the CSV and JSON gradebooks; :mod:`labs.course.exports` Canvas and
Moodle imports; :mod:`labs.course.shards` a class on many machines; :mod:`labs.course.bundle`
and :mod:`labs.course.gradescope` Gradescope's autograder.
"""
