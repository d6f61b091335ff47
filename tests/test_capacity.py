"""The capacity experiment (HRR paper Fig. 1, App. D.1–D.2) at smoke size: its outputs,
and the paper's qualitative claims that already hold at small sizes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from holoxmc.cli import main
from holoxmc.errors import InputError
from holoxmc.experiments import capacity as capacity_module
from holoxmc.experiments.capacity import (
    CapacityConfig,
    capacity_curve,
    response_statistics,
    retrieval_error_rates,
    run_capacity,
    sqrt2_grid,
    summary_table,
    write_capacity_outputs,
)
from holoxmc.experiments.vsa import VSAS

SMOKE = CapacityConfig.smoke()


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    return run_capacity(SMOKE, seed=0)


@pytest.fixture(scope="module")
def out_dir(results: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("capacity")
    write_capacity_outputs(results, out)
    return out


def _resolve(tree: dict[str, Any], dotted: str) -> Any:
    for key in dotted.split("."):
        tree = tree[key]
    return tree


def test_sqrt2_grid_is_rounded_powers_of_sqrt2() -> None:
    grid = sqrt2_grid(1024)
    assert grid[:8] == [1, 2, 3, 4, 6, 8, 11, 16]
    assert grid[-1] == 1024 and len(grid) == len(set(grid))
    assert all(round(math.sqrt(2) ** math.log(n, math.sqrt(2))) == n for n in grid)


def test_json_has_the_agreed_dotted_keys_aligned_with_their_axes(out_dir: Path) -> None:
    data = json.loads((out_dir / "capacity.json").read_text())
    terms = _resolve(data, "fig1.terms")
    assert terms == list(SMOKE.fig1_terms)
    for method in ("projected", "naive"):
        for stat in ("present_mean", "present_std", "absent_mean", "absent_std"):
            values = _resolve(data, f"fig1.{method}.{stat}")
            assert len(values) == len(terms) and all(math.isfinite(v) for v in values)
            assert len(_resolve(data, f"fig7.{method}.{stat}")) == len(_resolve(data, "fig7.n"))
    dims = _resolve(data, "capacity.dims")
    assert dims == list(SMOKE.capacity_dims)
    for method in ("hrr", "hrr_projected", "map_c", "vtb"):
        values = _resolve(data, f"capacity.{method}")
        assert len(values) == len(dims) and all(isinstance(v, int) and v >= 0 for v in values)


def test_outputs_are_complete_files_with_no_temporaries(out_dir: Path, results: dict[str, Any]) -> None:
    names = sorted(p.name for p in out_dir.iterdir())
    assert names == sorted(
        [
            "capacity.json", "fig1.csv", "fig7.csv", "capacity.csv", "retrieval_errors.csv",
            "fig1_response.png", "fig5_capacity.png", "fig6_retrieval_error.png",
            "fig7_response_range.png",
        ]
    )
    for png in out_dir.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig1_rows = (out_dir / "fig1.csv").read_text().splitlines()
    assert fig1_rows[0] == "method,case,n,mean,std"
    assert len(fig1_rows) == 1 + 2 * 2 * len(SMOKE.fig1_terms)
    capacity_rows = (out_dir / "capacity.csv").read_text().splitlines()
    assert capacity_rows[0] == "method,d,capacity,interpolated,censored"
    assert len(capacity_rows) == 1 + len(SMOKE.methods) * len(SMOKE.capacity_dims)
    vtb_first = next(row.split(",") for row in capacity_rows if row.startswith("vtb,"))
    assert int(vtb_first[1]) == SMOKE.capacity_dims[0]
    assert int(vtb_first[2]) == results["capacity"]["vtb"][0]


def test_projected_responses_stay_near_one_and_zero_with_smaller_spread(results: dict[str, Any]) -> None:
    fig1 = results["fig1"]
    last = len(fig1["terms"]) - 1
    terms, d = fig1["terms"][last], fig1["dim"]
    projected, naive = fig1["projected"], fig1["naive"]
    assert abs(projected["present_mean"][last] - 1) < 0.3
    assert abs(projected["absent_mean"][last]) < 0.3
    for case in ("present", "absent"):
        assert projected[f"{case}_std"][last] < naive[f"{case}_std"][last]
        # Each of T unit-norm cross terms adds variance 1/d: std ≈ sqrt(T / d).
        assert projected[f"{case}_std"][last] == pytest.approx(math.sqrt(terms / d), rel=0.15)
    # With a single bound pair the projected response is (almost) exact.
    assert projected["present_std"][0] < 0.1 and abs(projected["present_mean"][0] - 1) < 0.05


def test_projected_capacity_beats_naive_and_grows_with_dimension(results: dict[str, Any]) -> None:
    capacity = results["capacity"]
    for i in range(len(capacity["dims"])):
        assert capacity["hrr_projected"][i] >= capacity["hrr"][i]
    assert capacity["hrr_projected"][-1] > capacity["hrr"][-1]
    for method in ("hrr_projected", "vtb", "map_c"):
        assert capacity[method][-1] > capacity[method][0]
        curve = capacity["error_curves"][method][str(capacity["dims"][-1])]
        assert curve["error_mean"][-1] >= SMOKE.capacity_stop_error  # curve ran past capacity


def test_interpolated_capacity_lies_between_last_pass_and_first_failure(results: dict[str, Any]) -> None:
    capacity = results["capacity"]
    for method, per_dim in capacity["error_curves"].items():
        for i, d in enumerate(capacity["dims"]):
            curve, grid_capacity = per_dim[str(d)], capacity[method][i]
            interpolated = capacity["interpolated"][method][i]
            if capacity["censored"][method][i]:
                assert interpolated == grid_capacity
                continue
            first_failure = next(
                n for n, e in zip(curve["n"], curve["error_mean"]) if e > capacity["threshold"]
            )
            assert grid_capacity <= interpolated < first_failure


def test_retrieval_error_rate_is_zero_when_easy_and_high_when_overloaded() -> None:
    vsa = VSAS["hrr_projected"]
    easy = retrieval_error_rates(vsa, 256, 2, trials=4, generator=torch.Generator().manual_seed(0))
    hard = retrieval_error_rates(vsa, 16, 64, trials=4, generator=torch.Generator().manual_seed(0))
    assert easy.shape == (4,) and float(easy.max()) == 0.0
    assert float(hard.mean()) > 0.5


def test_memory_chunking_does_not_change_results(monkeypatch: pytest.MonkeyPatch) -> None:
    def rates() -> torch.Tensor:
        return retrieval_error_rates(VSAS["vtb"], 64, 23, trials=6, generator=torch.Generator().manual_seed(3))

    def responses() -> dict[str, list[float]]:
        return response_statistics(
            VSAS["hrr"], 64, [4, 32], trials=6, queries=16, generator=torch.Generator().manual_seed(3)
        )

    whole_rates, whole_responses = rates(), responses()
    monkeypatch.setattr(capacity_module, "_CHUNK_ELEMENTS", 1)  # one trial per chunk
    torch.testing.assert_close(rates(), whole_rates)
    chunked = responses()
    for key, values in whole_responses.items():
        assert chunked[key] == pytest.approx(values, rel=1e-4, abs=1e-5)


def test_capacity_curve_is_reproducible_and_censored_when_no_failure() -> None:
    def curve(max_n: int) -> dict[str, Any]:
        return capacity_curve(
            VSAS["map_c"], 144, trials=3, threshold=0.03, max_n=max_n, stop_error=0.5,
            generator=torch.Generator().manual_seed(7),
        )

    assert curve(64) == curve(64)
    small = curve(2)
    assert small["censored"] and small["capacity"] == 2 and small["n"] == [1, 2]


def test_config_rejects_unknown_methods_and_bad_threshold() -> None:
    with pytest.raises(InputError, match="unknown methods"):
        CapacityConfig(methods=("hrr", "fhrr"))
    with pytest.raises(InputError, match="capacity_threshold"):
        CapacityConfig(capacity_threshold=1.5)


def test_summary_table_reports_largest_terms_and_every_dimension(results: dict[str, Any]) -> None:
    table = summary_table(results)
    assert f"T={SMOKE.fig1_terms[-1]}" in table
    for d in SMOKE.capacity_dims:
        assert f"\n| {d} | " in table


def test_cli_runs_the_experiment_and_writes_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The CLI's --quick path, at smoke size so the test stays fast.
    monkeypatch.setattr(CapacityConfig, "quick", classmethod(lambda cls: SMOKE))
    assert main(["experiment", "capacity", "--quick", "--seed", "0", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "Capacity" in printed and "wrote 9 files" in printed
    data = json.loads((tmp_path / "capacity.json").read_text())
    assert data["seed"] == 0 and data["config"]["capacity_dims"] == list(SMOKE.capacity_dims)


def test_cli_rejects_an_output_path_that_is_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_folder = tmp_path / "capacity.json"
    not_a_folder.write_text("{}")
    assert main(["experiment", "capacity", "--quick", "--out", str(not_a_folder)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("holoxmc: error: --out") and "not a directory" in error
    assert "\n" not in error and not_a_folder.read_text() == "{}"


#: Seconds-long sizes with a single capacity dimension (no linear fit is determined).
TINY = CapacityConfig(
    fig1_terms=(1, 4), fig1_trials=1, capacity_dims=(64,), capacity_trials=2, capacity_max_n=8,
    fig7_n=(1, 4), fig7_trials=1, queries=4, methods=("hrr", "vtb"),
)


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    error = capsys.readouterr().err.strip()
    assert error.startswith("holoxmc: error: ") and "\n" not in error
    return error


def test_cli_checks_the_output_folder_before_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def never(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("the experiment ran before --out was checked")

    monkeypatch.setattr(capacity_module, "run_capacity", never)
    (tmp_path / "afile").write_text("x")
    occupied = tmp_path / "occupied"
    (occupied / "capacity.json").mkdir(parents=True)
    for out, fault in ((tmp_path / "afile" / "sub", "is not a folder"), (occupied, "is a folder")):
        assert main(["experiment", "capacity", "--quick", "--out", str(out)]) == 2
        assert fault in _one_line_error(capsys)
    assert sorted(p.name for p in occupied.iterdir()) == ["capacity.json"]


def test_cli_removes_the_folders_it_created_when_the_run_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise InputError("simulated failure")

    monkeypatch.setattr(capacity_module, "run_capacity", fail)
    assert main(["experiment", "capacity", "--quick", "--out", str(tmp_path / "new" / "sub")]) == 2
    assert "simulated failure" in _one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_outputs_are_all_or_nothing(
    results: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_plot(capacity: dict[str, Any], *args: Any) -> bytes:
        raise InputError("simulated plot failure")

    with monkeypatch.context() as patch:  # a late file fails: none is written
        patch.setattr(capacity_module, "_plot_errors", broken_plot)
        with pytest.raises(InputError, match="simulated plot failure"):
            write_capacity_outputs(results, tmp_path / "a")
    assert not (tmp_path / "a").exists()

    out = tmp_path / "b"
    replace = capacity_module.os.replace

    def failing_move(src: Any, dst: Any) -> None:  # the last move into place fails
        if Path(dst) == out / "capacity.json":
            raise OSError(28, "No space left on device")
        replace(src, dst)

    monkeypatch.setattr(capacity_module.os, "replace", failing_move)
    with pytest.raises(InputError, match="No space left"):
        write_capacity_outputs(results, out)
    assert not out.exists()


def test_a_negative_or_fractional_seed_is_one_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(CapacityConfig, "quick", classmethod(lambda cls: TINY))
    out = tmp_path / "out"
    assert main(["experiment", "capacity", "--quick", "--seed", "-1", "--out", str(out)]) == 2
    assert "--seed" in _one_line_error(capsys) and not out.exists()
    for seed in (-1, 1.5, True):
        with pytest.raises(InputError, match="seed must be an integer >= 0"):
            run_capacity(TINY, seed=seed)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"fig1_terms": ()}, "fig1_terms must not be empty"),
        ({"fig7_n": 64}, "fig7_n must be a sequence"),
        ({"capacity_dims": ()}, "capacity_dims must not be empty"),
        ({"capacity_dims": (0,)}, "capacity_dims must hold integers >= 1"),
        ({"capacity_dims": (64, 64)}, "capacity_dims must not repeat"),
        ({"capacity_dims": (64.0,)}, "capacity_dims must hold integers"),
        ({"fig1_dim": 0}, "fig1_dim must be >= 1"),
        ({"methods": ()}, "methods must not be empty"),
        ({"methods": "hrr"}, "methods must be a sequence"),
        ({"capacity_trials": 2.5}, "capacity_trials must be an int"),
        ({"queries": "8"}, "queries must be an int"),
        ({"capacity_dims": (64, 50)}, "vtb needs perfect-square capacity_dims, got 50"),
        ({"capacity_stop_error": 0.03}, "capacity_stop_error must be above capacity_threshold"),
    ],
)
def test_config_refuses_bad_fields(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        CapacityConfig(**fields)


def test_config_takes_any_sequence_and_non_square_dims_without_vtb() -> None:
    config = CapacityConfig(fig1_terms=[1, 2], capacity_dims=[50, 100], methods=["hrr"])  # type: ignore[arg-type]
    assert config.fig1_terms == (1, 2) and config.capacity_dims == (50, 100) and config.methods == ("hrr",)
    assert hash(config) == hash(CapacityConfig(fig1_terms=(1, 2), capacity_dims=(50, 100), methods=("hrr",)))


def test_chunking_does_not_change_results_when_d_is_not_a_multiple_of_16(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def responses() -> dict[str, list[float]]:
        return response_statistics(
            VSAS["hrr"], 20, [3], trials=3, queries=2, generator=torch.Generator().manual_seed(0)
        )

    whole = responses()
    monkeypatch.setattr(capacity_module, "_CHUNK_ELEMENTS", 1)  # one trial per chunk
    assert responses() == whole


@pytest.mark.filterwarnings("error")
def test_a_single_dimension_reports_no_linear_fit(tmp_path: Path) -> None:
    results = run_capacity(TINY, seed=0)
    assert results["capacity"]["linear_fit"] == {"hrr": None, "vtb": None}
    written = write_capacity_outputs(results, tmp_path)
    assert [p.name for p in written] == list(capacity_module.OUTPUT_FILES)
    text = (tmp_path / "capacity.json").read_text()
    data = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in capacity.json"))
    assert data["capacity"]["linear_fit"] == {"hrr": None, "vtb": None}
    assert "| slope per d (R²) | — | — |" in summary_table(results)
