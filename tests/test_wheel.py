"""The package installs whole: a wheel, in a fresh venv, runs natively and exports from anywhere.

The wheel is built from a copy of the sources (so that the checkout gets no build/),
without build isolation (offline: the current environment's setuptools), and installed
with --no-deps into a venv that borrows this environment's site-packages for numpy,
cffi and the rest through a .pth file; a directory named in a .pth is not a site
directory, so this environment's editable presk is not seen there. Then, in a
directory that is not the checkout and with no PRESK_* variable set,
`presk run --backend native` and `presk export` + `make -C DIR check` must work.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from conftest import REPO_ROOT

pytestmark = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                                reason="no C compiler or make")

SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "presk", "templates",
           "runtime", "libm")
PROGRAM = "tutorial/03_attention.psk"
ENTRY = ("--entry", "attend", "--dim", "B=1", "--dim", "T=3")


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
    return done


def test_a_wheel_in_a_fresh_venv_runs_and_exports_from_anywhere(tmp_path: Path) -> None:
    pytest.importorskip("setuptools")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PRESK") and k not in ("PYTHONPATH", "PYTHONHOME")}
    source = tmp_path / "src"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "_data", "*.pyc")
    for name in SOURCES:
        path = REPO_ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=ignore)
        else:
            shutil.copy2(path, source / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
          "--no-index", "-q", "-w", str(tmp_path / "dist"), str(source)], tmp_path, env)
    (wheel,) = (tmp_path / "dist").glob("presk-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in ("presk/_data/templates/c/Makefile.j2", "presk/_data/templates/c/scop/driver.c.j2",
                 "presk/_data/runtime/c/presk_rt.h", "presk/_data/libm/musl/presk_libm.c"):
        assert data in names, data
    assert not [n for n in names if n.startswith("presk/_data/libm/") and n.endswith(".py")]

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
          "--no-index", str(wheel)], tmp_path, env)
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                tmp_path, env).stdout.strip()
    Path(site, "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    away = tmp_path / "elsewhere"
    away.mkdir()
    shutil.copy(REPO_ROOT / PROGRAM, away / "attention.psk")
    where = _run([str(python), "-c", "import presk.resources as r; print(r.root())"], away, env)
    assert where.stdout.strip() == str(Path(site, "presk", "_data"))
    presk = str(venv / "bin" / "presk")
    ran = _run([presk, "run", "attention.psk", *ENTRY, "--backend", "native"], away, env)
    assert ran.stdout.startswith("ℝ[batch: 1, heads: 2, seq: 3, hd: 4] = ")
    _run([presk, "export", "attention.psk", "--target", "c", *ENTRY, "-o", "out"], away, env)
    checked = _run(["make", "-s", "-C", "out", "check", f"PRESK={presk}"], away, env)
    assert "the outputs are the native backend's, bit for bit" in checked.stdout
    assert "against the exact reference:" in checked.stdout


def test_the_export_extra_installs_every_package_the_onnx_export_asks_for() -> None:
    import tomllib

    from presk.commands.export_onnx import PACKAGES

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extra = project["project"]["optional-dependencies"]["export"]
    named = {requirement.split("=")[0].split("[")[0].strip() for requirement in extra}
    assert set(PACKAGES) <= named, "the message says pip install 'presk[export]'"
