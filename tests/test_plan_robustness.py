"""The layout-plan commands on bad input: one line, the right exit code, nothing lost.

`--plan @FILE` (read by `dump`, `run`, `bench`), the profiles of `plan`, `autotune`,
`reprice`, `refit` and `bench --calibrate`, the sweep directories `rank` and `reprice`
read, and every output path (`plan --out`, `rank --out`, `refit --out`, `autotune --out`
and `--out-plan`, the calibration's profile): a malformed one is refused with one line
and no traceback or "internal error", before anything is timed or allocated, and a
user's files are left as they were. `rank`'s Markdown escapes what a sweep names.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO_ROOT, run_presk

ATTEND = ("tutorial/03_attention.psk", "--entry", "attend", "--dim", "B=2", "--dim", "T=8")
LINEAR = ("tutorial/01_linear.psk", "--entry", "Linear{3, 2}.apply", "--dim", "B=2")


def one_line_failure(code: int, err: str, expected: int) -> None:
    assert code == expected, err
    assert len(err.strip().splitlines()) == 1, err
    assert "internal error" not in err and "Traceback" not in err and "\x1b" not in err, err


def _write(path: Path, doc: object) -> str:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------- plan files


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"layout": {"scores/%2": {"tile": [1' + "0" * 5000 + ", 4]}}}", "too many digits"),
        ('{"layout": {"scores/%2": {"form": "tiled", "lanes": 0}}}', "at least 1, not 0"),
        ('{"layout": {"scores/%2": {"form": "tiled", "lanes": -4}}}', "at least 1, not -4"),
        ('{"layout": {"scores/%4": {"lanes": 0}}}', "at least 1, not 0"),
        ('{"layout": {"scores/%2": {"kblock": 1' + "0" * 40 + "}}}", "out of range"),
        ('{"layout": {"scores/%2": {"split": {"depth": 1' + "0" * 40 + ', "workers": 2}}}}',
         "out of range"),
        ('{"realization": "f128", "layout": {}}', '`realization` "f128": expected'),
        ('{"realization": {"default": "f32", "zz": 1}, "layout": {}}', "unknown field `zz`"),
    ],
)  # fmt: skip
def test_a_malformed_plan_is_one_line_exit_2(tmp_path: Path, text: str, message: str) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(text, encoding="utf-8")
    code, out, err = run_presk("dump", *ATTEND, "--stage", "kernel", "--plan", f"@{plan}")
    one_line_failure(code, err, 2)
    assert message in err and out == "", err
    assert err.count(str(plan)) == 1, err  # the file named once, not twice


def test_a_plan_site_name_is_shown_escaped(tmp_path: Path) -> None:
    plan = _write(tmp_path / "p.json", {"layout": {"a\x1b[31m\nb/%2": {}}})
    code, _, err = run_presk("dump", *ATTEND, "--stage", "kernel", "--plan", f"@{plan}")
    one_line_failure(code, err, 1)
    assert "a\\x1b[31m\\nb/%2" in err, err


def test_bench_reads_a_plan_as_the_other_commands_do(tmp_path: Path) -> None:
    plan = _write(tmp_path / "p.json", [])
    code, _, err = run_presk("bench", *LINEAR, "--repeat", "1", "--plan", f"@{plan}")
    one_line_failure(code, err, 2)
    good = _write(tmp_path / "good.json", {"layout": {}})
    code, _, err = run_presk(
        "bench", *LINEAR, "--plan", f"@{good}", "--calibrate", str(tmp_path / "c.json")
    )
    one_line_failure(code, err, 2)
    assert "drop --plan" in err and not (tmp_path / "c.json").exists()


# ---------------------------------------------------------------- profiles


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A layout profile of a tiny GEMM, calibrated on one worker."""
    path = tmp_path_factory.mktemp("profile") / "layout.json"
    code, _, err = run_presk(
        "bench", "experiments/gemm.psk", "--entry", "gemm", "--dim", "N=16", "--realize",
        "f32", "--calibrate", str(path), "--space", "calib", "--repeat", "1", "--threads", "1",
    )  # fmt: skip
    assert code == 0, err
    return path


def _profile(profile: Path, tmp_path: Path, change: str) -> str:
    doc = json.loads(profile.read_text(encoding="utf-8"))
    doc["samples"] = doc["samples"][:3]
    match change:
        case "pi0":
            doc["fit"]["pi"] = {g: 0 for g in doc["fit"]["pi"]}
        case "rho-":
            doc["fit"]["rho"] = {g: -1e9 for g in doc["fit"]["rho"]}
        case "q0":
            doc["fit"]["q"] = 0
        case "beta0":
            doc["fit"]["beta_mem"] = 0
        case "u-":
            doc["u"] = -1
        case "sample-":
            doc["samples"][0]["measured_us"] = -5
        case "workers0":
            doc["machine"]["workers"] = 0
        case "l2-0":
            doc["machine"]["l2"] = 0
        case "roofline":
            doc["kind"] = "roofline"
    return _write(tmp_path / f"{change}.json", doc)


BAD_PROFILES = ["pi0", "rho-", "q0", "beta0", "u-", "sample-", "workers0", "l2-0"]


@pytest.mark.parametrize("change", BAD_PROFILES)
def test_a_profile_the_model_cannot_divide_by_is_refused(
    profile: Path, tmp_path: Path, change: str
) -> None:
    bad = _profile(profile, tmp_path, change)
    code, _, err = run_presk("plan", *ATTEND, "--profile", bad)
    one_line_failure(code, err, 1)
    assert bad in err
    code, _, err = run_presk("refit", bad, "--combine", "sum", "--out", str(tmp_path / "o.json"))
    one_line_failure(code, err, 1)
    assert not (tmp_path / "o.json").exists()


def test_a_profile_of_another_machine_is_said_to_be_one(profile: Path, tmp_path: Path) -> None:
    code, out, _ = run_presk("plan", *ATTEND, "--profile", str(profile))
    assert code == 0 and "another machine" not in out
    doc = json.loads(profile.read_text(encoding="utf-8"))
    doc["machine"]["l2"] //= 2
    other = _write(tmp_path / "other.json", doc)
    code, out, _ = run_presk("plan", *ATTEND, "--profile", other)
    assert code == 0
    (note,) = [line for line in out.splitlines() if "another machine" in line]
    half = f"{doc['machine']['l2'] >> 10} KiB there, {doc['machine']['l2'] >> 9} KiB here"
    assert f"l2 {half}" in note


@pytest.mark.parametrize("change", ["pi0", "roofline"])
def test_autotune_refuses_its_profile_before_the_sweep(
    profile: Path, tmp_path: Path, change: str
) -> None:
    day = tmp_path / "day"
    bad = _profile(profile, tmp_path, change)
    code, _, err = run_presk("autotune", *LINEAR, "--out", str(day), "--profile", bad)
    one_line_failure(code, err, 1)
    assert not day.exists()


def test_a_calibration_refuses_a_broken_profile_before_timing(
    profile: Path, tmp_path: Path
) -> None:
    bad = _profile(profile, tmp_path, "sample-")
    before = Path(bad).read_bytes()
    code, out, err = run_presk("bench", *LINEAR, "--calibrate", bad, "--space", "calib")
    one_line_failure(code, err, 1)
    assert out == "" and Path(bad).read_bytes() == before


# ---------------------------------------------------------------- output paths


@pytest.mark.parametrize("where", [".", "mine", "missing/p.json", ""])
def test_an_output_file_is_checked_before_any_work(
    profile: Path, tmp_path: Path, where: str
) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep", encoding="utf-8")
    source = [str(REPO_ROOT / a) if a.endswith(".psk") else a for a in LINEAR]
    runs = [
        ("bench", *source, "--calibrate", where),
        ("autotune", *source, "--out", "day", "--out-plan", where),
        ("plan", *source, "--profile", str(profile), "--out", where),
        ("refit", str(profile), "--combine", "sum", "--out", where),
    ]
    for argv in runs:
        code, out, err = run_presk(*argv, cwd=tmp_path)
        one_line_failure(code, err, 2)
        assert out == "", argv
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]


def test_an_output_file_is_not_the_program_it_reads(profile: Path, tmp_path: Path) -> None:
    program = tmp_path / "linear.psk"
    program.write_bytes((REPO_ROOT / LINEAR[0]).read_bytes())
    source = (str(program), *LINEAR[1:])
    runs = [
        ("plan", *source, "--profile", str(profile), "--out", str(program)),
        ("plan", *source, "--profile", str(profile), "--out", str(profile)),
        ("autotune", *source, "--out", str(tmp_path / "day"), "--out-plan", str(program)),
    ]
    before = profile.read_bytes()
    for argv in runs:
        code, out, err = run_presk(*argv)
        assert out == ""
        one_line_failure(code, err, 2)
        assert "the file the command reads" in err
    assert program.read_bytes() == (REPO_ROOT / LINEAR[0]).read_bytes()
    assert profile.read_bytes() == before and not (tmp_path / "day").exists()


def test_autotune_leaves_a_directory_with_its_own_meta_json(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.json").write_text('{"rows": 3}', encoding="utf-8")
    (data / "epilogues.jsonl").write_text('{"a": 1}\n', encoding="utf-8")
    code, _, err = run_presk("autotune", *LINEAR, "--repeat", "1", "--out", str(data))
    one_line_failure(code, err, 1)
    assert (data / "meta.json").read_text(encoding="utf-8") == '{"rows": 3}'
    assert (data / "epilogues.jsonl").read_text(encoding="utf-8") == '{"a": 1}\n'


def test_autotune_counts_the_nests_buffers_before_drawing_them(tmp_path: Path) -> None:
    day = tmp_path / "day"
    code, _, err = run_presk(
        "autotune", *LINEAR[:3], "--dim", "B=100000000000", "--inputs", "drawn",
        "--out", str(day),
    )  # fmt: skip
    one_line_failure(code, err, 1)
    assert "E7001" in err and "this machine has" in err and not day.exists()


# ---------------------------------------------------------------- sweeps


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small sweep of Linear at B=0 (its empty product joins its add, as an epilogue)."""
    path = tmp_path_factory.mktemp("sweep") / "day"
    code, out, err = run_presk(
        "autotune", *LINEAR[:3], "--dim", "B=0", "--repeat", "1", "--inputs", "drawn",
        "--out", str(path),
    )  # fmt: skip
    assert code == 0, err
    assert "as its epilogue" in out
    return path


def _mutated(day: Path, tmp_path: Path, change: str) -> Path:
    copy = tmp_path / change
    shutil.copytree(day, copy)
    nest = copy / "Linear.apply__3.jsonl"
    lines = [json.loads(x) for x in nest.read_text(encoding="utf-8").splitlines()]
    match change:
        case "not-utf8":
            nest.write_bytes(nest.read_bytes() + b"\xff\xfe\n")
            return copy
        case "a-list":
            lines.append([1, 2])
        case "nan":
            lines[0]["median_us"] = float("nan")
        case "a-string":
            lines[0]["median_us"] = "fast"
        case "no-point":
            del lines[0]["point"]
        case "no-median":
            del lines[-1]["median_us"]
        case "two-nests":
            lines[1]["nest"] = "Linear.apply/%5"
        case "no-entry":
            meta = json.loads((copy / "meta.json").read_text(encoding="utf-8"))
            del meta["entry"]
            _write(copy / "meta.json", meta)
    nest.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return copy


@pytest.mark.parametrize(
    "change",
    ["not-utf8", "a-list", "nan", "a-string", "no-point", "no-median", "two-nests", "no-entry"],
)
def test_a_malformed_sweep_is_one_line(
    profile: Path, day: Path, tmp_path: Path, change: str
) -> None:
    bad = _mutated(day, tmp_path, change)
    code, _, err = run_presk("rank", str(day), str(bad))
    one_line_failure(code, err, 1)
    code, _, err = run_presk("reprice", str(bad), "--profile", str(profile))
    one_line_failure(code, err, 1)


def test_rank_out_is_checked_and_its_markdown_escaped(day: Path, tmp_path: Path) -> None:
    code, _, err = run_presk("rank", str(day), str(day), "--out", str(tmp_path))
    one_line_failure(code, err, 2)
    code, _, err = run_presk("rank", str(day), str(day), "--out", str(tmp_path / "no" / "r.md"))
    one_line_failure(code, err, 2)
    odd = tmp_path / "odd"
    shutil.copytree(day, odd)
    meta = json.loads((odd / "meta.json").read_text(encoding="utf-8"))
    _write(odd / "meta.json", {**meta, "entry": "a|b`c\nd", "dims": {"B|x": "0\n|"}})
    for nest in odd.glob("Linear*.jsonl"):
        lines = [json.loads(x) for x in nest.read_text(encoding="utf-8").splitlines()]
        text = "".join(json.dumps({**x, "nest": x["nest"] + "|`x`"}) + "\n" for x in lines)
        nest.write_text(text, encoding="utf-8")
    report = tmp_path / "rank.md"
    code, _, err = run_presk("rank", str(odd), str(odd), "--out", str(report))
    assert code == 0, err
    rows = [r for r in report.read_text(encoding="utf-8").splitlines() if r.startswith("|")]
    # Every row of a table has its header's cells: no name's pipe splits one.
    cells = [len(re.findall(r"(?<!\\)\|", r)) for r in rows]
    assert set(cells) <= {5, 8}, rows
    assert "a\\|b" in report.read_text(encoding="utf-8")


def test_a_sweep_reads_and_replaces_only_the_files_its_meta_names(
    profile: Path, day: Path, tmp_path: Path
) -> None:
    again = tmp_path / "again"
    shutil.copytree(day, again)
    meta = json.loads((again / "meta.json").read_text(encoding="utf-8"))
    ours = sorted(meta["nests"])
    assert ours == sorted(p.name for p in again.glob("*.jsonl") if p.name != "epilogues.jsonl")
    # A nest file an earlier sweep wrote (its meta.json named it), and a user's file.
    stale = json.loads((again / ours[0]).read_text(encoding="utf-8").splitlines()[0])
    stale_line = json.dumps({**stale, "nest": "gone/%9"}) + "\n"
    (again / "gone__9.jsonl").write_text(stale_line, encoding="utf-8")
    (again / "notes.jsonl").write_text(stale_line, encoding="utf-8")
    _write(again / "meta.json", {**meta, "nests": [*ours, "gone__9.jsonl"]})
    code, _, err = run_presk("reprice", str(again), "--profile", str(profile))
    assert code == 1 and "gone/%9" in err, err  # read: its meta.json names it
    _write(again / "meta.json", meta)
    code, out, err = run_presk("rank", str(again), str(day))
    assert code == 0 and "gone" not in out, err  # a file the meta.json does not name
    _write(again / "meta.json", {**meta, "nests": [*ours, "gone__9.jsonl"]})
    code, _, err = run_presk(
        "autotune", *LINEAR[:3], "--dim", "B=0", "--repeat", "1", "--inputs", "drawn",
        "--out", str(again),
    )  # fmt: skip
    assert code == 0, err
    assert not (again / "gone__9.jsonl").exists()  # the earlier sweep's, replaced
    assert (again / "notes.jsonl").read_text(encoding="utf-8") == stale_line
    for listed in (["../x.jsonl"], "all", [3]):
        _write(again / "meta.json", {**meta, "nests": listed})
        code, _, err = run_presk("rank", str(again), str(day))
        one_line_failure(code, err, 1)


def test_a_key_named_twice_is_refused(tmp_path: Path) -> None:
    plan = tmp_path / "twice.json"
    plan.write_text('{"layout": {"scores/%2": {"lanes": 4, "lanes": 1}}}', encoding="utf-8")
    code, _, err = run_presk("dump", *ATTEND, "--stage", "kernel", "--plan", f"@{plan}")
    one_line_failure(code, err, 2)
    assert 'the key "lanes" twice' in err, err


def test_the_reference_checks_a_plans_sites_as_the_native_backend_does(tmp_path: Path) -> None:
    wrong = _write(tmp_path / "wrong.json", {"layout": {"nosuch/%9": {"lanes": 1}}})
    right = _write(tmp_path / "right.json", {"layout": {"Linear.apply/%3": {"tile": [1, 4]}}})
    for backend in ("interp", "native"):
        code, out, err = run_presk("run", *LINEAR, "--backend", backend, "--plan", f"@{wrong}")
        one_line_failure(code, err, 1)
        assert "`nosuch/%9`, which is no nest of" in err and out == "", err
        code, out, err = run_presk("run", *LINEAR, "--backend", backend, "--plan", f"@{right}")
        assert code == 0 and out.startswith("ℝ[B: 2, 2]"), err


def test_a_sweep_stopped_while_writing_leaves_no_new_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from presk.tune import sweep

    line = {"nest": "f/%1", "index": 0, "point": {}, "median_us": 1.0, "mad_us": 0.0}
    line |= {"predicted_us": None, "same": True}
    nests = {"f/%1": [line], "f/%2": [{**line, "nest": "f/%2"}]}
    meta = {"file": "f.psk", "entry": "f", "dims": {}, "space": "small", "repeat": 1}
    calls = []

    def failing(path: str, data: bytes) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise KeyboardInterrupt
        Path(path).write_bytes(data)

    monkeypatch.setattr(sweep, "write_atomically", failing)
    with pytest.raises(KeyboardInterrupt):
        sweep.write_lines(str(tmp_path / "day"), meta, nests)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    paths = sweep.write_lines(str(tmp_path / "day"), meta, nests)
    assert sorted(Path(p).name for p in paths) == ["f__1.jsonl", "f__2.jsonl"]
    assert sorted(sweep.read_day(str(tmp_path / "day")).nests) == ["f/%1", "f/%2"]
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "day").stat().st_mode & 0o777 == 0o777 & ~mask  # not mkdtemp's 0o700


@pytest.mark.parametrize("where", ["", "  "])
def test_a_sweep_without_a_directory_name_is_refused(tmp_path: Path, where: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    source = [str(REPO_ROOT / a) if a.endswith(".psk") else a for a in LINEAR]
    code, _, err = run_presk("autotune", *source, "--repeat", "1", "--out", where, cwd=work)
    one_line_failure(code, err, 1)
    assert "an empty name" in err
    assert [p.name for p in tmp_path.iterdir()] == ["work"] and not any(work.iterdir())


def test_a_sweep_is_repriced_from_any_directory(profile: Path, tmp_path: Path) -> None:
    day = tmp_path / "day"
    code, _, err = run_presk("autotune", *LINEAR, "--repeat", "1", "--out", str(day))
    assert code == 0, err  # LINEAR's file is relative to the checkout, where it ran
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code, out, err = run_presk("reprice", str(day), "--profile", str(profile), cwd=elsewhere)
    assert code == 0, err
    assert "nothing measured" in out


def test_a_long_site_name_keeps_its_own_column(profile: Path) -> None:
    tiny = ("--const", "V=8", "--const", "D=8", "--const", "H=2", "--const", "L=1")
    code, out, err = run_presk(
        "plan", "tests/ad/minigpt_grad.psk", "--entry", "loss_grad", *tiny, "--dim", "B=2",
        "--dim", "T=4", "--realize", "f32", "--profile", str(profile),
    )  # fmt: skip
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("PositionEmbedding"))
    assert row.split()[:2] == ["PositionEmbedding.apply.fwd/%3", "[4,"]


@pytest.mark.parametrize("extra", [(), ("--calibrate", "p.json")])
def test_combine_without_a_layout_calibration_is_refused(tmp_path: Path, extra: tuple) -> None:
    source = (str(REPO_ROOT / LINEAR[0]), *LINEAR[1:])
    code, out, err = run_presk("bench", *source, "--combine", "sum", *extra, cwd=tmp_path)
    one_line_failure(code, err, 2)
    assert out == "" and "--combine" in err and list(tmp_path.iterdir()) == []
