"""Throughput of holoxmc's HRR verbs against torchhd's HRR, side by side in one run.

For every op (bind, unbind, projection), dimension d and mode (forward; forward+backward)
both implementations run on the same inputs, alternating within each repeat; the table
reports the median time per call over the repeats and the ratio torchhd / holoxmc
(> 1 means holoxmc is faster). Outputs are checked equal before timing.

torchhd's counterparts: ``HRRTensor.bind`` (complex FFT), unbind as
``s.bind(b.inverse())`` (its documented unbinding), and — torchhd has no projection — the
same π(x) = F⁻¹(F(x)/|F(x)|) written in torchhd's idiom (complex ``fft``/``ifft``, real part).

Usage:
    .venv/bin/pip install -e ".[bench]"
    .venv/bin/python benchmarks/hrr_ops.py [--dims 256 400 1024 3000] [--batch 1024]
        [--repeats 15] [--threads N] [--device cpu] [--json runs/bench/hrr_ops.json]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

from holoxmc import hrr
from holoxmc.io import atomic_write_json

Op = Callable[[Tensor, Tensor], Tensor]


def torchhd_ops() -> dict[str, Op]:
    """torchhd's HRR verbs on ``HRRTensor`` inputs."""
    from torchhd.tensors.hrr import HRRTensor

    def projection(x: Tensor, _: Tensor) -> Tensor:
        f = torch.fft.fft(x)
        return torch.real(torch.fft.ifft(f / f.abs())).as_subclass(HRRTensor)

    return {
        "bind": lambda a, b: a.bind(b),
        "unbind": lambda s, b: s.bind(b.inverse()),
        "projection": projection,
    }


HOLOXMC_OPS: dict[str, Op] = {
    "bind": hrr.bind,
    "unbind": hrr.unbind,
    "projection": lambda x, _: hrr.projection(x),
}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _step(op: Op, a: Tensor, b: Tensor, backward: bool, upstream: Tensor) -> None:
    if backward:
        a.grad = b.grad = None
        op(a, b).backward(upstream)
    else:
        with torch.no_grad():
            op(a, b)


def _time_block(op: Op, a: Tensor, b: Tensor, backward: bool, upstream: Tensor, calls: int) -> float:
    device = a.device
    _sync(device)
    start = time.perf_counter()
    for _ in range(calls):
        _step(op, a, b, backward, upstream)
    _sync(device)
    return (time.perf_counter() - start) / calls


def compare(
    name: str,
    d: int,
    backward: bool,
    *,
    batch: int,
    repeats: int,
    device: torch.device,
    theirs: dict[str, Op],
    generator: torch.Generator,
    min_block_s: float = 0.05,
) -> dict[str, float | int | str]:
    """Median seconds per call of holoxmc and torchhd for one (op, d, mode), interleaved."""
    from torchhd.tensors.hrr import HRRTensor

    a, b = (torch.randn(batch, d, generator=generator) / d**0.5 for _ in range(2))
    upstream = torch.randn(batch, d, generator=generator).to(device)
    ours_in = [t.to(device).requires_grad_(backward) for t in (a, b)]
    theirs_in = [t.to(device).as_subclass(HRRTensor).requires_grad_(backward) for t in (a, b)]
    ours, other = HOLOXMC_OPS[name], theirs[name]
    with torch.no_grad():
        reference = ours(*ours_in)
        torch.testing.assert_close(other(*theirs_in).as_subclass(Tensor), reference, atol=2e-5, rtol=1e-4)
    # Warm up both (allocator, FFT plans), then size a block to last >= min_block_s.
    for op, inputs in ((ours, ours_in), (other, theirs_in)):
        _time_block(op, *inputs, backward, upstream, 3)
    one_call = _time_block(ours, *ours_in, backward, upstream, 3)
    calls = max(1, int(min_block_s / max(one_call, 1e-7)))
    times: dict[str, list[float]] = {"holoxmc": [], "torchhd": []}
    for r in range(repeats):
        order = [("holoxmc", ours, ours_in), ("torchhd", other, theirs_in)]
        for label, op, inputs in order if r % 2 == 0 else order[::-1]:
            times[label].append(_time_block(op, *inputs, backward, upstream, calls))
    ours_s, theirs_s = statistics.median(times["holoxmc"]), statistics.median(times["torchhd"])
    return {
        "op": name,
        "d": d,
        "mode": "forward+backward" if backward else "forward",
        "holoxmc_ms": ours_s * 1e3,
        "torchhd_ms": theirs_s * 1e3,
        "holoxmc_vectors_per_s": batch / ours_s,
        "torchhd_vectors_per_s": batch / theirs_s,
        "speedup": theirs_s / ours_s,
        "calls_per_block": calls,
    }


def machine(device: torch.device) -> dict[str, str | int]:
    """What the numbers were measured on."""
    import torchhd

    cpu = platform.processor() or "unknown"
    if Path("/proc/cpuinfo").exists():
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    info: dict[str, str | int] = {
        "cpu": cpu,
        "cpu_count": os.cpu_count() or 0,
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "torchhd": torchhd.__version__,
        "python": platform.python_version(),
        "device": str(device),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def markdown(rows: list[dict[str, float | int | str]]) -> str:
    """The results as a markdown table."""
    lines = [
        "| op | d | mode | holoxmc ms | torchhd ms | speed-up (torchhd / holoxmc) |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['op']} | {row['d']} | {row['mode']} | {row['holoxmc_ms']:.3f} "
            f"| {row['torchhd_ms']:.3f} | {row['speedup']:.2f}× |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[256, 400, 1024, 3000])
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=15, help="median over this many blocks")
    parser.add_argument("--ops", nargs="+", default=list(HOLOXMC_OPS), choices=list(HOLOXMC_OPS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads", type=int, default=None,
        help="torch CPU threads (default: torch's choice); 1 gives steadier numbers on a shared machine",
    )
    parser.add_argument("--json", type=Path, default=Path("runs/bench/hrr_ops.json"))
    args = parser.parse_args(argv)

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    theirs = torchhd_ops()
    generator = torch.Generator().manual_seed(args.seed)
    rows = []
    for name in args.ops:
        for d in args.dims:
            for backward in (False, True):
                row = compare(
                    name, d, backward, batch=args.batch, repeats=args.repeats,
                    device=device, theirs=theirs, generator=generator,
                )
                rows.append(row)
                print(f"{name:>10} d={d:<5} {row['mode']:<17} {row['speedup']:.2f}×", flush=True)
    info = machine(device)
    print()
    print(f"Machine: {info['cpu']} ({info['cpu_count']} cores, torch threads {info['torch_threads']}), "
          f"device {info['device']}{' ' + str(info['gpu']) if 'gpu' in info else ''}; "
          f"torch {info['torch']}, torchhd {info['torchhd']}; batch {args.batch}, float32, "
          f"median of {args.repeats} interleaved repeats.")
    print()
    print(markdown(rows))
    atomic_write_json(args.json, {"machine": info, "batch": args.batch, "repeats": args.repeats, "results": rows})
    print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
