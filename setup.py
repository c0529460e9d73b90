"""Packs the fixed C text into the wheel: templates/, runtime/ and libm/musl as presk/_data/.

The directories stay at the repository's root, where the editable checkout, the
Makefile, the conformance scripts and the tests find them; presk/resources.py
looks there first and then in presk/_data/. libm's Python checking scripts are
not package data: only the C text is copied.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA = (("templates", "*.j2"), ("runtime", "*.[ch]"), ("libm/musl", "*.[ch]"))


class BuildWithData(build_py):
    """build_py, then the data files under build_lib/presk/_data/."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads them where they are
            return
        for folder, pattern in DATA:
            for source in sorted((ROOT / folder).rglob(pattern)):
                target = Path(self.build_lib, "presk", "_data", source.relative_to(ROOT))
                self.mkpath(str(target.parent))
                self.copy_file(str(source), str(target))


setup(cmdclass={"build_py": BuildWithData})
