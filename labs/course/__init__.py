"""Course tooling, kept apart from the teaching code.

:mod:`labs.course.checks` the assertions of the exercise check cells; :mod:`labs.course.notebooks`
the exercise format (parse a lab, derive the student version); :mod:`labs.course.release` writes the
student notebooks and the answer keys (``labs-release``); :mod:`labs.course.key` the
answer key and tamper detection; :mod:`labs.course.sandbox` one isolated kernel per submission;
:mod:`labs.course.protect` runs the instructor's checks out of the submission's reach;
:mod:`labs.course.grade` grades a submission; :mod:`labs.course.gradebook` the command line and
class mode (``labs-grade``); :mod:`labs.course.wrong_answers` proves that checks reject
plausible wrong answers.
"""
