"""The set-up cell every lab starts with, and the repository setting it installs from.

On Google Colab the cell installs ``labs`` from the book's repository (the URL and branch of
``_config.yml``, the same setting the launch buttons use) and then calls
:func:`labs.course.colab.install_requirements`; anywhere else it does nothing.  ``labs-release``
inserts it as the first code cell of every lab (:mod:`labs.course.release`).
"""

from __future__ import annotations

from labs.course.notebooks import REPO_ROOT, NotebookError

__all__ = ["repository_setting", "setup_cell_source"]


def repository_setting() -> tuple[str, str]:
    """``(url, branch)`` of the book's repository, read from ``_config.yml`` (one setting)."""
    import yaml

    config_path = REPO_ROOT / "_config.yml"
    try:
        config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
        repo = config["repository"]
        return str(repo["url"]).rstrip("/"), str(repo.get("branch", "main"))
    except (OSError, KeyError, TypeError) as err:
        raise NotebookError(
            f"{config_path}: cannot read repository.url ({err}); it configures the launch buttons "
            "and the Colab set-up cell"
        ) from err


def setup_cell_source(url: str | None = None, branch: str | None = None) -> str:
    """The first code cell of every lab: on Colab, install ``labs`` and what the labs need
    (:mod:`labs.course.colab`), keeping Colab's torch; elsewhere, do nothing."""
    if url is None or branch is None:
        url, branch = repository_setting()
    return (
        "# Set-up: on Google Colab, install this book's `labs` package and the packages the labs\n"
        "# need, keeping Colab's own PyTorch. Anywhere else (a laptop, a workstation, the book's\n"
        "# own build) this cell does nothing.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        "    import importlib.metadata\n"
        "    import subprocess\n"
        "\n"
        "    try:\n"
        '        importlib.metadata.version("dlsys-labs")\n'
        "        installed = True\n"
        "    except importlib.metadata.PackageNotFoundError:\n"
        "        installed = False\n"
        "    if not installed:\n"
        f'        package = "dlsys-labs @ git+{url}@{branch}"\n'
        '        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", package]\n'
        "        if subprocess.run(cmd).returncode != 0:\n"
        "            raise RuntimeError(\n"
        '                f"Set-up: could not install {package} (pip\'s message is above); check "\n'
        '                "that the runtime is connected to the internet and run this cell again"\n'
        "            )\n"
        "    from labs.course.colab import install_requirements\n"
        "\n"
        "    install_requirements()  # all but torch; quiet when everything is there"
    )
