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
