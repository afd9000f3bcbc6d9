"""Ship the top-level notebooks/ and sweeps/ inside the wheel as microctx/reports/notebooks/ and
microctx/tuning/sweeps/ (pyproject has the rest)."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildWithNotebooks(build_py):
    def run(self):
        super().run()
        if self.editable_mode:  # an editable install reads notebooks/ in the checkout
            return
        target = Path(self.build_lib) / "microctx" / "reports" / "notebooks"
        target.mkdir(parents=True, exist_ok=True)
        for notebook in sorted((HERE / "notebooks").glob("*.ipynb")):
            shutil.copyfile(notebook, target / notebook.name)
        sweeps = Path(self.build_lib) / "microctx" / "tuning" / "sweeps"
        sweeps.mkdir(parents=True, exist_ok=True)
        for sweep in sorted((HERE / "sweeps").glob("*.toml")):
            shutil.copyfile(sweep, sweeps / sweep.name)


setup(cmdclass={"build_py": BuildWithNotebooks})
