"""The fit estimate (``holoxmc.limits.estimate_fit``) and the data cache of the command line:
the estimate is finite, positive, grows with the data and is printed before a long fit and by
``holoxmc data info``; a second ``holoxmc train`` on the same files reads them prepared."""

from __future__ import annotations

import itertools
import json
import math

import pytest

import holoxmc.limits as limits
from holoxmc.cli import main
from holoxmc.data import registry
from holoxmc.limits import estimate_fit, rerank_shortlists
from holoxmc.models import thresholds
from holoxmc.models.rerank import fit as rerank_fit
from holoxmc.models.rerank import model as rerank_model

#: (rows, features, nnz, labels, label nnz) of a Bibtex-sized set.
BASE = (5_000, 2_000, 340_000, 160, 12_000)


@pytest.mark.parametrize("head", ["auto", "rerank"])
def test_the_estimate_is_positive_finite_and_grows_with_each_size(head):
    base = estimate_fit(*BASE, head=head)
    assert base is not None
    for value in (base.seconds, base.peak_bytes):
        assert math.isfinite(value) and value > 0
    for position, factor in itertools.product(range(5), (2, 10, 100)):
        grown = list(BASE)
        grown[position] *= factor
        if position in (0, 3):  # more rows or labels hold proportionally more entries
            grown[2 if position == 0 else 4] *= factor
        if position == 0:
            grown[4] *= factor
        bigger = estimate_fit(*grown, head=head)
        assert bigger is not None
        assert bigger.seconds >= base.seconds and bigger.peak_bytes >= base.peak_bytes, (position, factor)
    assert estimate_fit(*[v * 100 for v in BASE], head=head).seconds > base.seconds


def test_sizes_past_the_budget_grow_strictly():
    """Past the time budget (no FC candidate), time grows strictly with rows and labels."""
    sizes = [(n, 50_000, 60 * n, labels, 5 * n) for n, labels in ((20_000, 10_000), (40_000, 10_000),
                                                                  (40_000, 100_000), (400_000, 600_000))]
    seconds = [estimate_fit(*size).seconds for size in sizes]
    assert seconds == sorted(seconds) and len(set(seconds)) == len(seconds)


def test_other_models_have_no_estimate():
    assert estimate_fit(*BASE, head="solar") is None


def test_the_estimate_reads_the_models_own_rules_and_constants():
    """The estimate repeats a few constants of the models (limits imports no model): the same."""
    config = rerank_fit.RerankConfig()
    assert (limits._ALPHA_ROWS, limits._DENSE_UP_TO, limits._POSTINGS, limits._NEGATIVES) == \
        (rerank_fit.ALPHA_ROWS, rerank_model.DENSE_UP_TO, config.postings, config.negatives)
    assert (limits._RULE_ROWS, limits._RULE_ENTRIES, limits._RULE_MIN_ROWS, limits._RULE_PAIRS) == \
        (thresholds.RULE_ROWS, thresholds.RULE_ENTRIES, thresholds.RULE_MIN_ROWS, thresholds.RULE_PAIRS)
    for rows, labels, label_nnz in itertools.product((10, 4_880, 490_449, 3_000_000), (5, 159, 670_091),
                                                     (10, 11_684, 2_673_000, 60_000_000)):
        shortlist = rerank_fit.shortlist_rule(labels, label_nnz / rows)
        assert rerank_shortlists(rows, labels, label_nnz) == \
            (shortlist, rerank_fit.train_shortlist_rule(shortlist, rows))


def test_train_announces_a_long_fit_before_it_starts(toy, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(limits, "ANNOUNCE_SECONDS", 0.0)  # the toy set's fit takes seconds
    assert main(["train", str(toy), "--model", "rerank", "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert "this fit is expected to take about" in err and "peak memory about" in err
    assert main(["train", str(toy), "--model", "rerank", "--out", str(tmp_path / "quiet"), "--quiet"]) == 0
    assert "expected to take" not in capsys.readouterr().err


def test_train_keeps_quiet_about_a_short_fit(toy, tmp_path, capsys):
    assert main(["train", str(toy), "--model", "rerank", "--out", str(tmp_path / "run")]) == 0
    assert "expected to take" not in capsys.readouterr().err


def test_data_info_shows_the_default_fit_estimate(toy, capsys):
    assert main(["data", "info", str(toy)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("default model's fit on the train split") and "peak memory about" in last


def _count_parses(monkeypatch) -> list[str]:
    """The text files parsed from now on (each call of the registry's text reader)."""
    parsed: list[str] = []
    reader = registry._read_text_matrices

    def counting(path, widths):
        parsed.append(path.name)
        return reader(path, widths)

    monkeypatch.setattr(registry, "_read_text_matrices", counting)
    return parsed


def test_a_second_train_on_the_same_files_reads_the_cache(toy, tmp_path, monkeypatch):
    parsed = _count_parses(monkeypatch)
    cache = tmp_path / "cache"
    command = ["train", str(toy), "--model", "rerank", "--cache-dir", str(cache), "--quiet"]
    assert main([*command, "--out", str(tmp_path / "first")]) == 0
    assert sorted(parsed) == ["toy_test.txt", "toy_train.txt"]
    assert len(list(cache.glob("*.npz"))) == 2
    assert main([*command, "--out", str(tmp_path / "second")]) == 0
    assert sorted(parsed) == ["toy_test.txt", "toy_train.txt"]  # nothing parsed again
    scores = [json.loads((tmp_path / run / "metrics.json").read_text())["test"] for run in ("first", "second")]
    assert scores[0] == scores[1]  # the same data, the same model
    assert main(["train", str(toy), "--model", "rerank", "--no-cache", "--quiet", "--out", str(tmp_path / "third")]) == 0
    assert len(parsed) == 4


def test_the_default_cache_folder_is_holoxmc_cache(toy, tmp_path, monkeypatch):
    monkeypatch.setenv("HOLOXMC_CACHE", str(tmp_path / "env-cache"))
    parsed = _count_parses(monkeypatch)
    for _ in range(2):
        assert main(["data", "info", str(toy), "--quiet"]) == 0
    assert len(parsed) == 2 and len(list((tmp_path / "env-cache").glob("*.npz"))) == 2


def test_an_unwritable_cache_folder_warns_and_parses(toy, tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    parsed = _count_parses(monkeypatch)
    assert main(["data", "info", str(toy), "--cache-dir", str(blocker / "cache")]) == 0
    assert "cannot keep prepared data in" in capsys.readouterr().err and len(parsed) == 2


def test_the_estimate_trains_the_fc_candidate_only_where_auto_does():
    """The FC candidate's epochs enter the estimate only at FC_CANDIDATE's labels a row or more
    (``holoxmc.presets.fc_candidate_runs``, as ``head="auto"`` asks), and then in its main
    figure (FC led every recorded selection where it trains)."""
    from holoxmc.presets import FC_CANDIDATE

    rows, least = BASE[0], FC_CANDIDATE["min_labels_per_row"]
    few = estimate_fit(*BASE[:4], int(rows * least) - 1)
    many = estimate_fit(*BASE[:4], int(rows * least) + 1)
    assert few is not None and many is not None
    fc_epochs = 20 * limits._fc_epoch_seconds(limits._Shape(*BASE[:4], int(rows * least) + 1), rows - rows // 10)
    assert many.seconds > few.seconds and many.seconds > fc_epochs  # its 20 epochs are in the figure
