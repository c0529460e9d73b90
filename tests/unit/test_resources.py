"""Where presk finds its C text: the checkout's trees, else the wheel's presk/_data."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from presk import resources

REPO = Path(__file__).resolve().parents[2]


def _installed_at(site: Path):  # type: ignore[no-untyped-def]
    """resources.py as a wheel lays it out under `site`, imported from there."""
    package = site / "presk"
    package.mkdir(parents=True)
    shutil.copy(resources.__file__, package / "resources.py")
    spec = importlib.util.spec_from_file_location("resources_copy", package / "resources.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_empty_directories_of_the_same_names_beside_the_package_are_not_the_runtime(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.delenv("PRESK_DATA", raising=False)
    site = tmp_path / "site-packages"
    module = _installed_at(site)
    for tree in ("templates/c", "runtime/c", "libm/musl"):  # someone else's, in site-packages
        (site / tree).mkdir(parents=True)
        shutil.copytree(REPO / tree, site / "presk" / "_data" / tree)
    assert module.root() == site / "presk" / "_data"


def test_the_checkout_s_trees_are_found_first(monkeypatch) -> None:
    monkeypatch.delenv("PRESK_DATA", raising=False)
    resources.root.cache_clear()
    try:
        assert resources.root() == REPO
    finally:
        resources.root.cache_clear()
