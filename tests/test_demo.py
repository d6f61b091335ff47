"""``holoxmc demo``'s table: the settings of each model and whether its run converged."""

from holoxmc.cli.demo import DEMO_MODELS, DEMO_SETTINGS, comparison_table, converged


def _report(p1: float, verdict: str) -> dict:
    test = {name: p1 for name in ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5")}
    return {"test": test, "params": {"total": 1000, "output_layer": 100}, "epoch_seconds": [1.0, 3.0],
            "predict_ms_per_point": 0.5, "settings": {"epochs": 8, "lr": 0.01}, "seconds": 9.0, "converged": verdict}


def test_every_demo_model_has_its_own_epochs_and_lr() -> None:
    assert set(DEMO_SETTINGS) == set(DEMO_MODELS)
    for settings in DEMO_SETTINGS.values():
        assert settings["epochs"] >= 1 and settings["lr"] > 0


def test_a_model_still_rising_is_marked_under_trained() -> None:
    assert converged([{"val": {"P@1": 40.0}}, {"val": {"P@1": 45.0}}]) == "no: still rising"
    assert converged([{"val": {"P@1": 40.0}}, {"val": {"P@1": 45.0}}, {"val": {"P@1": 44.0}}]) == "yes"
    assert converged([{"loss": 1.0}]) == "?"


def test_the_table_shows_settings_and_the_verdict() -> None:
    table = comparison_table({"fc": _report(91.5, "yes"), "hrr-fc": _report(92.0, "no: still rising")})
    header, _, fc, hrr = table.splitlines()
    assert "epochs" in header and "lr" in header and "converged" in header
    assert fc.split()[:4] == ["fc", "8", "0.01", "91.50"] and fc.endswith("yes")
    assert hrr.endswith("no: still rising")
