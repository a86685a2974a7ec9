"""GR-MC1000 in PyTorch (nshepperd/gumbel-rao-pytorch) timed like scripts/bench_estimators.py.

The comparison quoted in docs/benchmarks.md: one forward + backward of a linear
loss of the sample, logits (B, 60, 16), tau = 0.5, K = 1000, median of
--repeats after warm-up, on the GPU when there is one. The PyTorch
implementation is not part of this project; clone it and put it on the path:

  git clone https://github.com/nshepperd/gumbel-rao-pytorch
  PYTHONPATH=gumbel-rao-pytorch python -m scripts.bench_pytorch_reference
"""

import argparse
import statistics
import time

import torch
from gumbel_rao import gumbel_rao  # nshepperd/gumbel-rao-pytorch: gumbel_rao(logits, k, temp)


def median_ms(fn, repeats: int, device: torch.device) -> float:
  fn()  # warm-up
  times = []
  for _ in range(repeats):
    if device.type == "cuda":
      torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
      torch.cuda.synchronize()
    times.append(1e3 * (time.perf_counter() - start))
  return statistics.median(times)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch_sizes", default="20,200")
  parser.add_argument("--k", type=int, default=1000)
  parser.add_argument("--tau", type=float, default=0.5)
  parser.add_argument("--repeats", type=int, default=100)
  args = parser.parse_args()
  device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
  print(
    f"device: {torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}, torch"
    f" {torch.__version__}"
  )
  for batch in map(int, args.batch_sizes.split(",")):
    logits = torch.randn(batch, 60, 16, device=device, requires_grad=True)
    weights = torch.randn(batch, 60, 16, device=device)

    def step():
      loss = (weights * gumbel_rao(logits, args.k, temp=args.tau)).sum()
      loss.backward()
      logits.grad = None

    print(
      f"B={batch}: gr_mc{args.k} forward+backward {median_ms(step, args.repeats, device):.3f} ms"
    )


if __name__ == "__main__":
  main()
