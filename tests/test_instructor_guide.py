"""The instructor guide's shell and YAML blocks parse, and its job arrays shard what they say.

The guide shows a Slurm array and a Kubernetes Indexed Job for grading a class on many machines,
and the commands for Gradescope and the LMS exports: every ``bash`` block must pass ``bash -n``,
every ``yaml`` block must load, every ``labs-grade``/``labs-release`` command in them must be
accepted by the command's own argument parser, and the job arrays must hand out shards 1..N.
"""

from __future__ import annotations

import re
import shlex
import subprocess

import yaml

from conftest import REPO

GUIDE = REPO / "book" / "appendix" / "instructor-guide.md"
FENCE = re.compile(r"^( *)```(\w+)\n(.*?)^\1```", re.M | re.S)


def blocks(lang: str) -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    return [
        "\n".join(line[len(m.group(1)) :] for line in m.group(3).splitlines())
        for m in FENCE.finditer(text)
        if m.group(2) == lang
    ]


def commands(script: str) -> list[list[str]]:
    """The ``labs-grade``/``labs-release`` commands of a shell block, variables filled in."""
    joined = script.replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        line = line.split(" #")[0].strip()
        line = re.sub(r"\$\(\(.*?\)\)", "1", line)  # arithmetic: any shard index
        line = re.sub(r"\$\{?\w+\}?", "4", line)
        if line.startswith(("labs-grade", "labs-release")):
            out.append(shlex.split(line))
    return out


def test_every_bash_block_parses():
    scripts = blocks("bash")
    assert len(scripts) >= 8
    for script in scripts:
        done = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
        assert done.returncode == 0, f"{script}\n{done.stderr}"


def test_every_yaml_block_loads_and_the_indexed_job_shards_the_class():
    (job,) = [yaml.safe_load(text) for text in blocks("yaml")]
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["template"]["spec"]["restartPolicy"]
    (container,) = spec["template"]["spec"]["containers"]
    command = " ".join(container["command"] + container["args"])
    n = spec["completions"]
    assert f'--shard "$((JOB_COMPLETION_INDEX + 1))/{n}"' in command  # indices 0..N-1 -> 1..N
    mounts = {m["name"] for m in container["volumeMounts"]}
    assert mounts == {v["name"] for v in spec["template"]["spec"]["volumes"]}
    line = container["args"][0]
    (argv,) = commands(line)
    _parse(argv)


def test_the_slurm_array_hands_out_shards_1_to_n():
    (script,) = [s for s in blocks("bash") if "#SBATCH --array" in s]
    first, last = map(int, re.search(r"#SBATCH --array=(\d+)-(\d+)", script).groups())
    n = int(re.search(r"^N=(\d+)$", script, re.M).group(1))
    assert (first, last) == (0, n - 1)
    assert "K=$((SLURM_ARRAY_TASK_ID + 1))" in script and '--shard "$K/$N"' in script


def _parse(argv: list[str]) -> None:
    """Parse ``argv`` with the command's own parser (a usage error exits 2: the test fails)."""
    from labs.course import gradebook, release

    program, rest = argv[0], argv[1:]
    if program == "labs-release":
        parser = release.build_parser()
    elif rest[:1] == ["merge"]:
        parser, rest = gradebook.merge_parser(), rest[1:]
    else:
        parser = gradebook.build_parser()
    try:
        parser.parse_args(rest)
    except SystemExit as err:
        raise AssertionError(f"the guide's command does not parse: {shlex.join(argv)}") from err


def test_every_course_command_in_the_guide_is_accepted_by_its_parser():
    argvs = [argv for script in blocks("bash") for argv in commands(script)]
    assert any(a[:2] == ["labs-grade", "merge"] for a in argvs)
    assert any("--shard" in a for a in argvs) and any("--export" in a for a in argvs)
    assert any("--gradescope" in a for a in argvs)
    for argv in argvs:
        _parse(argv)


def test_the_job_examples_give_every_kernel_its_memory_limit():
    """Red team note: 16 GB for ``--jobs 4`` while each kernel may use 6 GiB; each example must
    give ``jobs`` x the per-kernel limit plus room for the grader."""
    from labs.course.isolation import MEMORY_LIMIT

    (script,) = [s for s in blocks("bash") if "#SBATCH --array" in s]
    jobs = int(re.search(r"#SBATCH --cpus-per-task=(\d+)", script).group(1))
    assert '--jobs "$SLURM_CPUS_PER_TASK"' in script
    slurm = int(re.search(r"#SBATCH --mem=(\d+)G", script).group(1)) * 2**30
    (job,) = [yaml.safe_load(text) for text in blocks("yaml")]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    k8s_jobs = int(re.search(r"--jobs (\d+)", container["args"][0]).group(1))
    k8s = int(container["resources"]["limits"]["memory"].removesuffix("Gi")) * 2**30
    assert slurm >= jobs * MEMORY_LIMIT + 2**32 and k8s >= k8s_jobs * MEMORY_LIMIT + 2**32
