"""``holoxmc data info``: statistics of any input; one line and exit 2 on malformed input."""

from __future__ import annotations

import gzip

from holoxmc.cli import main


def test_info_prints_statistics_of_both_splits(tmp_path, capsys):
    folder = tmp_path / "Toy"
    folder.mkdir()
    (folder / "toy_train.txt").write_bytes(b"2 3 2\n0 0:1\n0,1 2:1\n")
    (folder / "toy_test.txt.gz").write_bytes(gzip.compress(b"1 3 2\n1 1:1\n"))
    assert main(["data", "info", str(folder)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["split", "points", "features", "labels", "labels/point", "points/label"]
    assert out[2].split() == ["train", "2", "3", "2", "1.50", "1.50"]
    assert out[3].split() == ["test", "1", "3", "2", "1.00", "0.50"]
    assert out[4].split() == ["all", "3", "3", "2", "1.33", "2.00"]


def test_info_reads_a_headerless_test_split_at_the_train_widths(tmp_path, capsys):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "plain_train.txt").write_bytes(b"0,3 0:1 8:1\n1 2:1\n")
    (folder / "plain_test.txt").write_bytes(b"0 1:1\n")  # smaller ids than train's largest
    assert main(["data", "info", str(folder)]) == 0
    assert capsys.readouterr().out.splitlines()[3].split() == ["test", "1", "9", "4", "1.00", "0.25"]
    (folder / "plain_test.txt").write_bytes(b"0 1:1\n4 1:1\n")  # a label train does not have
    assert main(["data", "info", str(folder)]) == 2
    assert "plain_test.txt:2: label index 4 >= L=4, the width this file is read at" in capsys.readouterr().err


def test_info_of_synthetic_lists_registry_free_name(capsys):
    assert main(["data", "info", "synthetic"]) == 0
    assert capsys.readouterr().out.splitlines()[2].split()[:4] == ["train", "10000", "5000", "1500"]


def test_malformed_file_gives_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"2 3 2\n0 0:1\n1 7:1\n")
    assert main(["data", "info", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"holoxmc: error: {bad}:3: feature index 7 >= declared D=3\n"
    assert main(["data", "info", "no-such-dataset"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
