"""`pagoda chat`: turns read from stdin go through the chat template and the replies
stream to stdout; end of input (Ctrl-D) leaves cleanly; bad input is one error line."""
from __future__ import annotations

import subprocess

from test_cli_run import gen_model  # noqa: F401  (fixture)


def chat(pagoda_bin, model, stdin: str, *extra, timeout=120):
    r = subprocess.run([str(pagoda_bin("pagoda")), "chat", "-m", str(model), "-n", "6", "--temp", "0", "-t", "2",
                        *extra], input=stdin.encode(), capture_output=True, timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def test_each_line_gets_a_reply_and_eof_leaves(pagoda_bin, gen_model):
    model = gen_model()
    rc, out, err = chat(pagoda_bin, model, "hello there\nand again\n")
    assert rc == 0, err
    assert "bye" in err
    replies = [line for line in out.split("\n") if line.strip()]
    assert len(replies) >= 2, out


def test_greedy_chat_is_reproducible_and_clear_resets(pagoda_bin, gen_model):
    model = gen_model()
    _, a, _ = chat(pagoda_bin, model, "same words\n")
    _, b, err = chat(pagoda_bin, model, "other\n/clear\nsame words\n")
    assert "cleared" in err
    assert b.strip().endswith(a.strip()), (a, b)


def test_missing_model_is_one_error_line(pagoda_bin, tmp_path):
    rc, _, err = chat(pagoda_bin, tmp_path / "nope.gguf", "hi\n")
    assert rc != 0 and "error" in err.lower()
