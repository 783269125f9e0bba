#!/usr/bin/env python3
"""KL divergence of quantized models' next-token distributions from a base model's.

For formats llama.cpp cannot load (W8A8, Pagoda's own), so llama-perplexity's
--kl-divergence is not available. The text is tokenized once by the base model; then at
every --stride-th position each model predicts the next token from the same prefix
(`pagoda run -n 1 --logits-out`, one run per position and model: slow, but it needs
nothing beyond the pagoda binary), and per model it prints the mean and largest
KL(base || model), how often its top token is the base's, and the perplexity of the
text's own next tokens over the same positions.

    bench/kld.py --base gemma-f32.gguf --model gemma-q8_0.gguf --model gemma-w8a8.gguf
    bench/kld.py --base F32.gguf --model W8A8.gguf -f text.txt --stride 4 --build-dir build-dev
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

DEFAULT_TEXT = (
    "The ocean covers more than seventy percent of the surface of the Earth and holds nearly all of its water. "
    "It regulates the climate by storing heat and carbon, it feeds billions of people, and it is home to an "
    "enormous variety of life, from microscopic plankton to the blue whale, the largest animal that has ever "
    "lived. Scientists divide the ocean into zones by depth: the sunlit surface layer, where photosynthesis is "
    "possible, the twilight zone below it, and the dark midnight zone, where the pressure is crushing and the "
    "water is close to freezing. Currents driven by wind, temperature and salinity carry water around the planet "
    "in a great conveyor belt that takes about a thousand years to complete one circuit.")


def run(pagoda: Path, args: list[str]) -> None:
    r = subprocess.run([str(pagoda), "run", *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"kld: pagoda run {' '.join(args)} failed: {r.stderr.strip()}")


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max()
    return z - np.log(np.exp(z).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="reference model (e.g. the F32 the others were quantized from)")
    ap.add_argument("--model", action="append", required=True, help="model to compare (repeatable)")
    ap.add_argument("-f", "--file", help="text file (default: a built-in paragraph of ~140 tokens)")
    ap.add_argument("--stride", type=int, default=6, help="evaluate every N-th position (default 6)")
    ap.add_argument("--first", type=int, default=8, help="first position evaluated (default 8)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--build-dir", default="build", help="where bin/pagoda is (default build/)")
    a = ap.parse_args()
    pagoda = Path(a.build_dir) / "bin" / "pagoda"
    if not pagoda.exists():
        sys.exit(f"kld: {pagoda} not found; build it or pass --build-dir")
    text = Path(a.file).read_text() if a.file else DEFAULT_TEXT
    with tempfile.TemporaryDirectory() as tmp:
        ids_file, logits_file = Path(tmp) / "ids.json", Path(tmp) / "logits.f32"
        common = ["-n", "1", "--temp", "0", "--ignore-eos", "-t", str(a.threads), "--no-stats"]
        run(pagoda, ["-m", a.base, "-p", text, *common, "--ids-out", str(ids_file)])
        ids = json.loads(ids_file.read_text())["prompt_ids"]
        positions = list(range(a.first, len(ids), a.stride))
        if not positions:
            sys.exit(f"kld: the text has {len(ids)} tokens, fewer than --first {a.first}")
        models = [a.base] + a.model
        stats = {m: {"kld": [], "top1": [], "nll": []} for m in a.model}
        base_nll = []
        for k in positions:
            lp = {}
            for m in models:
                run(pagoda, ["-m", m, "--prompt-ids", ",".join(map(str, ids[:k])), *common,
                             "--logits-out", str(logits_file)])
                lp[m] = log_softmax(np.fromfile(logits_file, dtype=np.float32).astype(np.float64))
            p = np.exp(lp[a.base])
            base_nll.append(float(-lp[a.base][ids[k]]))
            for m in a.model:
                stats[m]["kld"].append(float((p * (lp[a.base] - lp[m])).sum()))
                stats[m]["top1"].append(float(lp[m].argmax() == lp[a.base].argmax()))
                stats[m]["nll"].append(float(-lp[m][ids[k]]))
    print(f"{len(ids)} tokens, {len(positions)} positions (every {a.stride} from {a.first}), "
          f"base {a.base}: PPL {np.exp(np.mean(base_nll)):.3f}")
    for m in a.model:
        s = stats[m]
        print(f"  {m}: mean KLD {np.mean(s['kld']):.5f}  max {np.max(s['kld']):.5f}  "
              f"top-1 same as base {100 * np.mean(s['top1']):.1f}%  PPL {np.exp(np.mean(s['nll'])):.3f}")


if __name__ == "__main__":
    main()
