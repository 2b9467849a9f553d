"""What load_bandwidth.py and store_bandwidth.py share: arguments, timing, the comparison.

Each measures one Iris kernel (iris.load or iris.store into another rank's heap) and, with
--compare, the same kernel written on aperture.triton directly, on the same heap. Rank 0
moves data; the other ranks wait. On a GPU the times are CUDA-event times; under Triton's
interpreter (no GPU) the numbers say nothing about hardware, only that the program runs.
"""

import argparse
import os
import time

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "int8": torch.int8}


def arguments(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    parser.add_argument("--sizes", default="1M,16M,64M,256M", help="bytes moved per launch, comma-separated (K/M/G)")
    parser.add_argument("--block", type=int, default=4096)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--peer", type=int, default=1, help="the rank whose heap rank 0 reads or writes")
    parser.add_argument("--compare", action="store_true", help="also time the aperture.triton kernel")
    parser.add_argument("--heap-size", type=int, default=None, help="default: twice the largest size, plus 1 MiB")
    args = parser.parse_args()
    args.dtype = DTYPES[args.dtype]
    args.sizes = sorted(parse_bytes(s) for s in args.sizes.split(","))  # the largest last: it is checked
    if args.heap_size is None:
        args.heap_size = 2 * max(args.sizes) + (1 << 20)
    return args


def parse_bytes(text):
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1].upper(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def seconds_per_launch(launch, iters, device):
    launch()  # compile, warm up
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            launch()
        stop.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(stop) / 1e3 / iters
    began = time.perf_counter()
    for _ in range(iters):
        launch()
    return (time.perf_counter() - began) / iters


def report(name, nbytes, seconds, baseline=None):
    line = f"{name:>16} {nbytes:>12} B {nbytes / seconds / 1e9:9.2f} GB/s"
    if baseline is not None:
        line += f"   iris/aperture time {seconds / baseline:.3f}"
    print(line, flush=True)
