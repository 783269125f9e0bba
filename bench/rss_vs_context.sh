#!/usr/bin/env bash
# Peak resident memory of one prefill at growing prompt lengths in a 32k context (a small
# generated llama model, FP16 KV): the KV cache grows with the tokens and nothing else
# should, since attention keeps no score matrix. Prints: prompt tokens, max RSS (KiB),
# seconds. Usage: bench/rss_vs_context.sh [build-dir]
set -euo pipefail
BUILD=${1:-build}
CACHE=${PAGODA_CACHE:-$HOME/.cache/pagoda}/bench-models
mkdir -p "$CACHE"
M=$CACHE/llama-d256-l4-h8-kv2-ctx32k-q8_0.gguf
[ -f "$M" ] || "$BUILD/bin/pagoda-gen-model" --arch llama --type Q8_0 --dim 256 --layers 4 --heads 8 --kv-heads 2 \
  --ff 512 --vocab 512 --ctx 32768 -o "$M" > /dev/null
for n in 2048 4096 8192 16384 32000; do
  ids=$(python3 -c "import random; random.seed(1); print(','.join(str(random.randrange(3, 512)) for _ in range($n)))")
  tmp=$(mktemp)
  /usr/bin/time -f "%M %e" -o "$tmp" "$BUILD/bin/pagoda" run -m "$M" --prompt-ids "$ids" -n 1 -c 32768 -t 2 --temp 0 \
    --no-stats > /dev/null 2>&1
  echo "$n $(cat "$tmp")"
  rm -f "$tmp"
done
