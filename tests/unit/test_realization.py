"""Realizations: the JSON object of `--realize @FILE`, its refusals, and a mixed run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_presk

from presk.host.realization import Realization, RealizationError, from_object, parse


def test_uniform_spellings() -> None:
    assert parse("f32") == Realization("f32")
    assert parse("bf16").site("loss", 6) == "bf16"


def test_object_maps_sites_and_params() -> None:
    r = from_object({"default": "f32", "storage": {"loss/%6": "f64"}, "params": {"w": "bf16"}})
    assert r.site("loss", 6) == "f64" and r.site("loss", 5) == "f32"
    assert r.param("w") == "bf16" and r.param("b") == "f32"


@pytest.mark.parametrize(
    "doc",
    [
        {"default": "f32", "accum": {"loss/%6": "f64"}},  # another type than the storage's
        {"default": "bf16", "accum": {"loss/%6": "bf16"}},  # bf16 sums in f32
        {"order": {"kind": "interleaved", "partials": 8}},  # reassociates
    ],
)
def test_refusals_are_e7002(doc: object) -> None:
    with pytest.raises(RealizationError) as error:
        from_object(doc)
    assert error.value.code == "E7002"


@pytest.mark.parametrize("doc", [[], {"default": "f16"}, {"storage": []}, {"colour": 1}])
def test_malformed_objects_are_usage_errors(doc: object) -> None:
    with pytest.raises(RealizationError) as error:
        from_object(doc)
    assert error.value.code is None


def test_blocked_order_and_matching_accum_run() -> None:
    r = from_object({"default": "bf16", "accum": {"x/%1": "f32"}, "order": {"kind": "blocked"}})
    assert r.default == "bf16"


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_mixed_realization_runs_inside_the_bands(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PRESK_CACHE", str(tmp_path / "cache"))
    spec = tmp_path / "r.json"
    spec.write_text(json.dumps({"default": "f32", "storage": {"loss/%6": "f64"}}))
    args = ("run", "tutorial/04_grad.psk", "--entry", "loss", "--dim", "D=3", "--dim", "B=2",
            "--digits", "17")
    exact = float(run_presk(*args)[1].split("= ")[1])
    code, out, err = run_presk(*args, "--backend", "native", "--realize", f"@{spec}")
    assert code == 0, err
    mixed = float(out.split("= ")[1])
    assert abs(mixed - exact) <= 2**-15 * (abs(exact) + 2**-20)
    refused = tmp_path / "bad.json"
    refused.write_text(json.dumps({"accum": {"loss/%6": "f32"}}))
    code, _, err = run_presk(*args, "--backend", "native", "--realize", f"@{refused}")
    assert code == 1 and err.startswith("[E7002]")


def test_kernel_dump_of_a_mixed_realization(tmp_path: Path) -> None:
    spec = tmp_path / "r.json"
    spec.write_text(json.dumps({"default": "f32", "storage": {"loss/%6": "f64"}}))
    args = ("dump", "tutorial/04_grad.psk", "--stage", "kernel", "--entry", "loss",
            "--dim", "D=3", "--dim", "B=2")
    code, out, err = run_presk(*args, "--realize", f"@{spec}")
    assert code == 0, err
    assert out.splitlines()[0] == f"-- 4 kernels, 4 launches, @{spec} (default f32)"
    # The mean is the site stored in f64; it reads the f32 squares.
    assert "kernel mean (%0 : f32[batch: 2, 1]) -> %1 : f64[] {" in out
    refused = tmp_path / "bad.json"
    refused.write_text(json.dumps({"accum": {"loss/%6": "f32"}}))
    code, out, err = run_presk(*args, "--realize", f"@{refused}")
    assert code == 1 and err.startswith("[E7002]") and out == ""
