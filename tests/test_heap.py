"""Freed CPU memory kept mapped while training (holoxmc.train.heap)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import holoxmc.train.heap as heap
from holoxmc.errors import InputError
from holoxmc.train import TrainConfig, Trainer
from holoxmc.train.heap import _USER_SETTINGS, ENV_VAR, reuse_freed_memory

from test_trainer import CONFIG, TinyNetwork, assert_same_weights, make_data, weights

LARGE = 256 * 2**20 // 4  # float32 elements of 256 MiB: above glibc's largest mmap threshold (32 MiB) and the free top of heap it may keep (64 MiB)


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mallinfo2():
    libc = ctypes.CDLL(None)
    if not sys.platform.startswith("linux") or not hasattr(libc, "mallinfo2"):
        pytest.skip("needs glibc >= 2.33 (mallinfo2) to see where memory comes from")
    libc.mallinfo2.restype = MallInfo2
    return libc.mallinfo2


def mapped_blocks_while_holding(n_floats: int) -> int:
    """How many more mmap-ed blocks the allocator holds while a tensor of ``n_floats`` lives."""
    mallinfo2 = _mallinfo2()
    before = mallinfo2().hblks
    tensor = torch.ones(n_floats)
    during = mallinfo2().hblks
    del tensor
    return during - before


def resident_bytes() -> int:
    """This process's resident memory, from ``/proc/self/statm``."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def heap_bytes() -> int:
    """Bytes of the allocator's main heap (taken with sbrk), free chunks included."""
    return _mallinfo2()().arena


def in_fresh_process(body: str, **env: str) -> None:
    """Run ``body`` (with ``mapped_blocks_while_holding`` and ``reuse_freed_memory`` in scope)
    in a new interpreter: a heap grown by earlier tests would serve large blocks from its
    free chunks, and say nothing about where glibc's defaults put them."""
    _mallinfo2()
    clean = {k: v for k, v in os.environ.items() if k not in (*_USER_SETTINGS, ENV_VAR)}
    setup = "import sys; sys.path.insert(0, {!r}); from test_heap import *\n".format(str(Path(__file__).parent))
    done = subprocess.run([sys.executable, "-c", setup + textwrap.dedent(body)], env=clean | env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_large_blocks_come_from_the_heap_inside_and_from_mmap_outside():
    in_fresh_process("""
        assert mapped_blocks_while_holding(LARGE) == 1
        with reuse_freed_memory(True) as applied:
            assert applied
            assert mapped_blocks_while_holding(LARGE) == 0
            with reuse_freed_memory(True):
                pass
            assert mapped_blocks_while_holding(LARGE) == 0  # an inner block leaves the outer one's setting
            kept = resident_bytes()  # the freed block's pages stay mapped inside
        assert kept - resident_bytes() > 0.9 * 4 * LARGE  # ... and go back to the system on leaving
        # glibc's defaults are back: a block larger than the whole heap is mmap-ed again. (One of
        # LARGE may still land in the free hole the trimmed heap keeps, if anything lies above it.)
        assert mapped_blocks_while_holding(heap_bytes() // 4 + LARGE) == 1
    """)


def test_after_the_block_blocks_up_to_32_mib_stay_on_the_heap():
    """Leaving cannot restore glibc's dynamic thresholds (any mallopt turns them off), so it
    leaves them where they would grow to: a score-buffer-sized block (8 MiB) comes from the
    heap afterwards and freeing it trims nothing, so once warm, filling another faults no page in;
    a block above 32 MiB is mmap-ed again."""
    in_fresh_process("""
        import resource

        def faults_while_filling(n_floats):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            tensor = torch.ones(n_floats)
            del tensor
            return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

        medium = 8 * 2**20 // 4  # 2,048 pages
        with reuse_freed_memory(True):
            pass
        assert mapped_blocks_while_holding(medium) == 0
        # small allocations between fills can split the freed chunk, so the heap grows a few
        # times before a hole fits the block: up to the 5th fill in 100 runs (torch 2.2 and 2.13)
        warm_up = [faults_while_filling(medium) for _ in range(6)]
        faults = [faults_while_filling(medium) for _ in range(4)]
        assert max(faults) < 100, (warm_up, faults)
        assert mapped_blocks_while_holding(64 * 2**20 // 4) == 1
    """)


def test_disabled_or_user_settings_leave_the_allocator_alone():
    body = """
        with reuse_freed_memory(enabled={}) as applied:
            assert not applied and mapped_blocks_while_holding(LARGE) == 1
    """
    in_fresh_process(body.format(False))
    in_fresh_process(body.format(True), MALLOC_MMAP_MAX_="65536")


def test_training_results_do_not_depend_on_it_and_runs_resume_across_it(tmp_path):
    X, Y = make_data()
    runs = {}
    for reuse in (True, False):
        network = TinyNetwork(X.shape[1], Y.shape[1])
        result = Trainer(TrainConfig(**CONFIG, reuse_memory=reuse)).fit(network, X, Y, run_dir=tmp_path / str(reuse))
        runs[reuse] = (network, result)
    assert [h["val"] for h in runs[True][1].history] == [h["val"] for h in runs[False][1].history]
    assert_same_weights(weights(runs[True][0]), weights(runs[False][0]))
    resumed = Trainer(TrainConfig(**CONFIG, reuse_memory=False)).fit(
        TinyNetwork(X.shape[1], Y.shape[1]), X, Y, run_dir=tmp_path / "True", resume=True
    )  # the checkpoint's configuration leaves the setting out
    assert resumed.history == runs[True][1].history


class FakeLibc:
    """Stands in for glibc: records the ``mallopt`` calls instead of making them."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def mallopt(self, option: int, value: object) -> int:
        self.calls.append(option)
        return 1

    def malloc_trim(self, pad: object) -> int:
        return 0


@pytest.fixture
def libc(monkeypatch: pytest.MonkeyPatch) -> FakeLibc:
    fake = FakeLibc()
    monkeypatch.setattr(heap, "_glibc", lambda: fake)
    monkeypatch.delenv(ENV_VAR, raising=False)
    return fake


def fit(tmp_path: Path, **options: object) -> None:
    X, Y = make_data(n=64)
    config = TrainConfig(**CONFIG | {"epochs": 1}, **options)  # type: ignore[arg-type]
    Trainer(config).fit(TinyNetwork(X.shape[1], Y.shape[1]), X, Y, run_dir=tmp_path / "run")


def test_training_leaves_the_allocator_alone_by_default(libc: FakeLibc, tmp_path: Path) -> None:
    fit(tmp_path)
    assert libc.calls == []
    with reuse_freed_memory() as applied:
        assert not applied
    assert libc.calls == []


@pytest.mark.parametrize("value", ["1", "true", "ON"])
def test_the_environment_variable_opts_in(
    libc: FakeLibc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    fit(tmp_path)
    assert libc.calls[:2] == [heap._M_MMAP_MAX, heap._M_TRIM_THRESHOLD]  # on entering; restored on leaving


def test_the_config_field_overrides_the_environment_variable(
    libc: FakeLibc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fit(tmp_path / "on", reuse_memory=True)
    assert libc.calls
    libc.calls.clear()
    monkeypatch.setenv(ENV_VAR, "1")
    fit(tmp_path / "off", reuse_memory=False)
    assert libc.calls == []


@pytest.mark.parametrize("value", ["2", "maybe"])
def test_a_malformed_environment_variable_is_one_input_error_before_training(
    libc: FakeLibc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ENV_VAR, value)
    with pytest.raises(InputError, match=f"{ENV_VAR} must be 1 .on. or 0 .off., got '{value}'"):
        fit(tmp_path)
    assert not (tmp_path / "run").exists() and libc.calls == []


def test_a_setting_that_is_not_a_bool_is_refused(libc: FakeLibc) -> None:
    with pytest.raises(InputError, match="reuse_memory must be True, False or None, got 'yes'"):
        with reuse_freed_memory("yes"):  # type: ignore[arg-type]
            pass
    assert libc.calls == []
