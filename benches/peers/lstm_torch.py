"""The PyTorch peer of `tradebot bench lstm`: the same architecture (fast LSTM, slow LSTM, dense context
branch, dense head, 3 logits), class-weighted cross-entropy and AdamW, trained the usual way: a Dataset of
materialised windows and a DataLoader with workers and pin_memory, on the data `tradebot bench lstm --dump
DIR` wrote. Prints one JSON line (epoch time and samples/s, mean over the timed epochs after a warm-up).

    python benches/peers/lstm_torch.py DIR [--epochs 1] [--batch 3072] [--workers 2] [--against JSON]
"""

import argparse
import json
import os
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def load(d):
    meta = json.load(open(os.path.join(d, "meta.json")))
    f32 = lambda n, w: np.fromfile(os.path.join(d, n), dtype="<f4").reshape(-1, w)
    i64 = lambda n: np.fromfile(os.path.join(d, n), dtype="<i8")
    fast, slow = f32("fast.f32", meta["fast_dim"]), f32("slow.f32", meta["slow_dim"])
    ctx = f32("context.f32", meta["context_dim"])
    fe, se, cr, y = i64("fast_end.i64"), i64("slow_end.i64"), i64("context_row.i64"), i64("labels.i64")
    # Materialise every window, as a usual Dataset does.
    fi = fe[:, None] + np.arange(1 - meta["fast_len"], 1)[None, :]
    si = se[:, None] + np.arange(1 - meta["slow_len"], 1)[None, :]
    x = (torch.from_numpy(fast[fi]), torch.from_numpy(slow[si]), torch.from_numpy(ctx[cr]), torch.from_numpy(y))
    return meta, x


class Net(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.fast = nn.LSTM(m["fast_dim"], m["fast_hidden"], batch_first=True)
        self.slow = nn.LSTM(m["slow_dim"], m["slow_hidden"], batch_first=True)
        layers, d = [], m["context_dim"]
        for h in m["context_hidden"]:
            layers += [nn.Linear(d, h), nn.ReLU()]
            d = h
        self.ctx = nn.Sequential(*layers)
        head, hd = [], m["fast_hidden"] + m["slow_hidden"] + d
        for h in m["head_hidden"]:
            head += [nn.Linear(hd, h), nn.ReLU()]
            hd = h
        self.head = nn.Sequential(*head, nn.Linear(hd, 3))

    def forward(self, xf, xs, xc):
        hf = self.fast(xf)[1][0][-1]
        hs = self.slow(xs)[1][0][-1]
        return self.head(torch.cat([hf, hs, self.ctx(xc)], 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=3072)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--against", help="tradebot's JSON line; prints the ratio")
    a = ap.parse_args()
    torch.manual_seed(0)
    meta, (xf, xs, xc, y) = load(a.dir)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    net = Net(meta).to(device)
    params = sum(p.numel() for p in net.parameters())
    counts = torch.bincount(y, minlength=3).float().clamp_min(1)
    loss_fn = nn.CrossEntropyLoss(weight=(len(y) / 3 / counts).to(device))
    opt = torch.optim.AdamW(net.parameters(), lr=meta["learning_rate"], weight_decay=meta["weight_decay"])
    loader = DataLoader(
        TensorDataset(xf, xs, xc, y),
        batch_size=a.batch,
        shuffle=True,
        num_workers=a.workers,
        pin_memory=True,
        persistent_workers=a.workers > 0,
    )
    times = []
    for epoch in range(a.epochs + 1):
        t0 = time.perf_counter()
        for bf, bs, bc, by in loader:
            bf, bs, bc, by = (t.to(device, non_blocking=True) for t in (bf, bs, bc, by))
            loss = loss_fn(net(bf, bs, bc), by)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
        if epoch > 0:
            times.append(time.perf_counter() - t0)
    secs = sum(times) / len(times)
    out = {
        "impl": "pytorch", "device": device, "samples": len(y), "batch": a.batch, "params": params,
        "workers": a.workers, "epochs_timed": len(times), "epoch_secs": secs, "samples_per_sec": len(y) / secs,
    }
    print(json.dumps(out))
    if a.against:
        tb = json.loads(a.against)
        print(f"ratio: tradebot {tb['samples_per_sec']:.0f} / pytorch {out['samples_per_sec']:.0f} samples/s"
              f" = {tb['samples_per_sec'] / out['samples_per_sec']:.2f}x"
              f" (parameters: tradebot {tb['params']}, pytorch {params})")


if __name__ == "__main__":
    main()
